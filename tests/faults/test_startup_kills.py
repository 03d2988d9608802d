"""Kills during start-up: between ``cluster up`` spawning its processes and
the sources' common t0, from outside (this test sends SIGKILL to pids it
reads from ``cluster.json``; the launcher is told nothing). No row has
flowed yet, so the run must go on, exact, and exit 0: a protected replica
comes back as a spare and its stage fails over, a source or a sink comes
back in its own role."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from semiactive import config, topology
from semiactive.launcher.cluster import run_cluster
from semiactive.oracle.verify import check_run
from tests.faults.harness import AGGREGATE, events, finish, protected_chain, start_launcher
from tests.processes import assert_no_processes
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

RANDOM = random.Random(20261128)


def _cluster(run_dir: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((run_dir / "cluster.json").read_text())
    return doc


def _pid(run_dir: Path, name: str) -> int:
    """``name``'s pid, once ``cluster.json`` names it."""
    pid: int = wait_until(
        lambda: (
            next((p["pid"] for p in _cluster(run_dir)["processes"] if p["name"] == name and p["pid"]), None)
            if (run_dir / "cluster.json").exists()
            else None
        ),
        timeout=60,
        interval=0.005,
        what=f"{name}'s pid in cluster.json",
    )
    return pid


def _kill_before_t0(run_dir: Path, name: str, delay: float) -> bool:
    """SIGKILL ``name`` ``delay`` seconds after its pid appears; False if
    t0 was set first (then the kill would not be one of start-up)."""
    pid = _pid(run_dir, name)
    time.sleep(delay)  # the random moment of start-up, not a wait for a condition
    if _cluster(run_dir)["t0_unix"] is not None:
        return False
    os.kill(pid, signal.SIGKILL)
    return True


def _assert_exact(config_path: Path, run_dir: Path, stderr: str) -> None:
    for check in check_run(topology.resolve(config.load(config_path)), run_dir):
        assert check.ok, check.describe() + "\n" + stderr
        assert check.delivered > 0


def test_processes_killed_during_start_up_are_started_again_and_the_run_is_exact(tmp_path: Path) -> None:
    """Four processes killed at random moments of start-up, one after the
    other: a protected primary and another stage's secondary come back as
    spares (the first's stage fails over), the source and the sink as
    themselves.

    Start-up lasts about 0.4 s from the moment ``cluster.json`` names the
    processes (they are forked, imports done): too short for four kills in
    a row. A spare stopped (SIGSTOP) as soon as it is named, long before it
    can answer, holds t0 back, as a slow machine would, until the kills are
    done."""
    config_path = protected_chain(tmp_path, AGGREGATE)
    run_dir = tmp_path / "run"
    launcher = start_launcher(config_path, run_dir, duration=3)
    victims = ("node-2", "node-0", "sec-3", "sink")
    holder = _pid(run_dir, "spare-2")
    os.kill(holder, signal.SIGSTOP)
    try:
        for i, name in enumerate(victims):
            moment = RANDOM.uniform(0.0, 1.0 if i == 0 else 0.3)
            assert _kill_before_t0(run_dir, name, moment), f"t0 came before {name}'s kill"
    finally:
        os.kill(holder, signal.SIGCONT)
        result = finish(launcher, run_dir)
    assert result.returncode == 0, result.stderr
    for name in victims:
        assert f"{name} (pid" in result.stderr and "killed by SIGKILL during start-up" in result.stderr
    _assert_exact(config_path, run_dir, result.stderr)
    ran = events(run_dir)
    t0 = _cluster(run_dir)["t0_unix"]
    exits = [e for e in ran if e["event"] == "process_exited"]
    assert [e["target"] for e in exits] == list(victims)
    assert all(e["t"] < t0 for e in exits)
    restarted = {e["target"]: e["role"] for e in ran if e["event"] == "restarted"}
    assert restarted == {"node-2": "spare", "node-0": "source", "sec-3": "spare", "sink": "sink"}
    assert any(e["event"] == "takeover" and e["node"] == "sec-2" for e in ran), result.stderr
    # cluster.json says what each process does now, not what it started as.
    now = {p["name"]: (p["role"], p["started_as"]) for p in _cluster(run_dir)["processes"]}
    assert now["sec-2"] == ("primary", "secondary")
    assert now["node-2"][0] in ("spare", "secondary") and now["node-2"][1] == "primary"


def test_a_process_that_exits_by_itself_during_start_up_ends_the_run_saying_why(tmp_path: Path) -> None:
    """Not a kill: a node that cannot start (here its query file vanished
    between the launcher's check and the node's own load) is no fault to
    cover; the run ends with exit 1 and the node's last log lines."""
    config_path = protected_chain(tmp_path, AGGREGATE)
    cfg = yaml.safe_load(config_path.read_text())
    query = tmp_path / "s3.cql"
    query.write_text(cfg["stages"][2].pop("query") + ";\n")
    cfg["stages"][2]["query_file"] = str(query)
    config_path.write_text(yaml.safe_dump(cfg))
    run_dir = tmp_path / "run"
    launcher = start_launcher(config_path, run_dir, duration=3)
    try:
        wait_until(lambda: (run_dir / "cluster.json").exists(), timeout=60, what="cluster.json")
        query.unlink()
    finally:
        result = finish(launcher, run_dir)
    assert result.returncode == 1
    assert "during start-up" in result.stderr and "exit status" in result.stderr, result.stderr


def test_a_primary_killed_while_starting_and_not_restarted_is_taken_over(tmp_path: Path) -> None:
    """Re-protection off (as in the papers' experiments): the killed primary
    stays dead. Its secondary, which never reached it, gives it the peers'
    connect timeout to come up, then takes over (it used to wait for ever,
    taking an unanswered primary for one still starting)."""
    config_path = protected_chain(tmp_path, AGGREGATE, connect_timeout_ms=1500)
    run_dir = tmp_path / "run"
    config = str(config_path)
    killer = threading.Thread(target=_kill_before_t0, args=(run_dir, "node-2", 0.0), daemon=True)
    killer.start()
    code = asyncio.run(run_cluster(config, duration=3, run_dir=run_dir, progress=False, reprotect=False))
    killer.join(timeout=10)
    assert_no_processes(str(run_dir))
    assert code == 0
    _assert_exact(config_path, run_dir, "")
    ran = events(run_dir)
    assert [e["target"] for e in ran if e["event"] == "restarted"] == []
    assert any(e["event"] == "takeover" and e["node"] == "sec-2" for e in ran)
