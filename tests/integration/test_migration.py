"""Live migration (the placement paper's re-placement): stateful stages (a window join,
a windowed aggregate, both SAS) moved to other nodes while rows flow, by
`semiactive migrate` against the running coordinator; and a migration cut
short by SIGKILL of the stage's primary from outside. The sink must equal
the reference row for row: nothing lost or repeated."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.processes import (
    ROOT,
    cluster_events,
    finish_verified,
    kill_node,
    semiactive,
    wait_for_sink,
    write_config,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


def _start(tmp_path: Path, duration: float) -> tuple[subprocess.Popen[str], Path]:
    config = yaml.safe_load((ROOT / "examples" / "migration-chain.yaml").read_text())
    path = write_config(tmp_path / "mig.yaml", config)
    run_dir = tmp_path / "run"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "semiactive", "cluster", "up", str(path), "--duration", str(duration),
         "--run-dir", str(run_dir), "--quiet"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for_sink(run_dir)
        wait_until(
            lambda: _nodes(run_dir),
            until=lambda nodes: (
                nodes is not None and len(nodes) == 9 and all(n["liveness"] == "up" for n in nodes)
            ),
            what="the nine nodes up",
            timeout=60,
            interval=0.3,
            ignoring=(subprocess.TimeoutExpired,),  # a status command on a loaded machine
        )
    except BaseException:
        launcher.kill()
        raise
    return launcher, run_dir


def _nodes(run_dir: Path) -> list[dict[str, Any]] | None:
    """The nodes as `semiactive status` shows them (None if it cannot)."""
    state = semiactive("status", "--run-dir", str(run_dir), "--json", timeout=10)
    return list(json.loads(state.stdout)["nodes"]) if state.returncode == 0 else None


def _a_spare(run_dir: Path) -> str:
    spares = wait_until(
        lambda: [n["name"] for n in _nodes(run_dir) or [] if n["role"] == "spare"],
        what="a spare",
        timeout=20,
        interval=0.2,
        ignoring=(subprocess.TimeoutExpired,),
    )
    return str(spares[0])


def _migration_ends(run_dir: Path) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster_events(run_dir)
        if e["event"] in ("migrated", "migration_aborted") and e["stage"] == "join-1"
    ]


def test_stateful_stages_move_and_lose_nothing(tmp_path: Path) -> None:
    # Ended by SIGINT once both moves are done: each command is a Python
    # process of its own, seconds on a loaded machine.
    launcher, run_dir = _start(tmp_path, 120)
    try:
        moved = semiactive("migrate", "join-1", "--to", "spare-1", "--run-dir", str(run_dir), timeout=40)
        assert moved.returncode == 0, moved.stdout + moved.stderr
        assert "join-1 runs on spare-1" in moved.stdout
        refused = semiactive("migrate", "sum-2", "--to", "node-3", "--run-dir", str(run_dir), timeout=20)
        assert refused.returncode == 1 and "already runs on node-3" in refused.stderr
        refused = semiactive("migrate", "sink", "--to", "spare-2", "--run-dir", str(run_dir), timeout=20)
        assert refused.returncode == 1 and "sources and sinks stay" in refused.stderr
        # Re-protection gave join-1 a new secondary; sum-2 goes to a node still spare.
        target = _a_spare(run_dir)
        moved = semiactive("migrate", "sum-2", "--to", target, "--run-dir", str(run_dir), timeout=40)
        assert moved.returncode == 0, moved.stdout + moved.stderr
        time.sleep(1.0)  # rows through the moved stages
        launcher.send_signal(signal.SIGINT)  # drains: the run must still be exact
    except BaseException:
        launcher.kill()
        raise
    events = finish_verified(launcher, run_dir)
    migrated = {e["stage"]: e for e in events if e["event"] == "migrated"}
    assert migrated.keys() == {"join-1", "sum-2"}
    assert migrated["join-1"]["target"] == "spare-1" and migrated["sum-2"]["target"] == target
    takeovers = [e for e in events if e["event"] == "takeover"]
    assert {(e["node"], e["reason"]) for e in takeovers} == {
        ("spare-1", "migration"),
        (target, "migration"),
    }
    fenced = {e["node"] for e in events if e["event"] == "fenced"}
    assert {"node-1", "node-3"} <= fenced  # the old primaries stepped down


def test_a_kill_during_a_migration_is_survived(tmp_path: Path) -> None:
    # Ended by SIGINT once join-1 was taken over: a run of fixed length
    # ended, on a loaded machine, before the cluster had started whole.
    launcher, run_dir = _start(tmp_path, 120)
    try:
        started = semiactive(
            "migrate", "join-1", "--to", "spare-1", "--run-dir", str(run_dir), "--wait", "0", timeout=20
        )
        assert started.returncode == 0, started.stderr
        kill_node(run_dir, "node-1")
        wait_until(
            lambda: [
                e for e in cluster_events(run_dir) if e["event"] == "takeover" and e["stage"] == "join-1"
            ],
            what="join-1 taken over",
            timeout=60,
            interval=0.2,
            ignoring=(ValueError,),  # a line being written
        )
        # The coordinator learns of the takeover from a report, a moment
        # after the node's event: the migration must end on its own.
        wait_until(
            lambda: _migration_ends(run_dir),
            what="the migration of join-1 ended",
            timeout=70,  # past the migration's own timeout
            interval=0.2,
            ignoring=(ValueError,),
        )
        launcher.send_signal(signal.SIGINT)  # drains: the run must still be exact
    except BaseException:
        launcher.kill()
        raise
    events = finish_verified(launcher, run_dir)
    ends = _migration_ends(run_dir)
    assert len(ends) == 1, ends
    assert ends[0].get("reason") != "the coordinator stopped", ends
    primaries = [e["node"] for e in events if e["event"] == "takeover" and e["stage"] == "join-1"]
    assert primaries, "nobody took join-1 over"
