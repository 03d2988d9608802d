"""Failures nobody announced: the launcher is told of no fault. A separate
nemesis process (or this test itself) sends real signals to pids it reads
from ``cluster.json``, at random moments; the launcher learns of each fault
only by observing it, and the run must survive it as an injected one."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from semiactive import config, topology
from semiactive.oracle.verify import check_run
from tests.faults.harness import AGGREGATE, events, finish, protected_chain, run_with_nemesis, start_launcher
from tests.processes import processes_mentioning, read_jsonl, run_t0, semiactive
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

RANDOM = random.Random(20261123)


def _assert_exact(config_path: Path, run_dir: Path, stderr: str) -> None:
    for check in check_run(topology.resolve(config.load(config_path)), run_dir):
        assert check.ok, check.describe() + "\n" + stderr
        assert check.delivered > 0


def test_sigkill_the_protected_primary_then_its_new_primary(tmp_path: Path) -> None:
    """Both kills from outside, at random moments; the second one hits the
    secondary that took over (or the spare, if it was faster): every row
    delivered once, in order, and the run exits 0."""
    config_path = protected_chain(tmp_path, AGGREGATE)
    first = RANDOM.uniform(1.0, 2.0)
    second = first + RANDOM.uniform(2.5, 3.0)
    run_dir = tmp_path / "run"
    result, report = run_with_nemesis(
        config_path, run_dir, "--kill", f"node-2@{first:.2f}", "--kill", f"sec-2@{second:.2f}", duration=7
    )
    assert result.returncode == 0, result.stderr
    _assert_exact(config_path, run_dir, result.stderr)
    faults = report["faults"]
    assert [(f["node"], f["origin"]) for f in faults] == [("node-2", "nemesis"), ("sec-2", "nemesis")]
    for fault in faults:
        assert fault["detection_ms"] is not None and fault["recovery_ms"] is not None, result.stderr
    takeovers = [
        e["node"] for e in events(run_dir) if e["event"] == "takeover" and e.get("stage") == "stage-2"
    ]
    assert takeovers[0] == "sec-2" and len(takeovers) == 2, takeovers
    seen = [e for e in events(run_dir) if e["event"] == "process_exited"]
    assert [e["target"] for e in seen] == ["node-2", "sec-2"]


def test_sigstop_the_primary_then_sigcont_after_the_takeover(tmp_path: Path) -> None:
    config_path = protected_chain(tmp_path, AGGREGATE)
    at = RANDOM.uniform(1.0, 2.0)
    run_dir = tmp_path / "run"
    result, report = run_with_nemesis(config_path, run_dir, "--stop", f"node-2@{at:.2f}:1.5", duration=5)
    assert result.returncode == 0, result.stderr
    _assert_exact(config_path, run_dir, result.stderr)
    ran = events(run_dir)
    assert any(e["event"] == "takeover" and e["node"] == "sec-2" for e in ran), result.stderr
    assert any(e["event"] == "fenced" and e["node"] == "node-2" for e in ran), result.stderr
    observed = [e["event"] for e in ran if e["node"] == "launcher"]
    assert observed[:2] == ["process_frozen", "process_resumed"], observed
    (fault,) = report["faults"]
    assert (fault["kind"], fault["origin"]) == ("stop", "nemesis")
    assert fault["detection_ms"] is not None


def test_an_unprotected_stage_killed_from_outside_stops_the_run_with_a_report(tmp_path: Path) -> None:
    """stage-2 has no secondary. Killed by a plain ``kill -9`` from this
    test (no nemesis, no record of it anywhere): the rest runs on to the
    end, the drain delivers every row stage-3 held, and the run exits 1
    naming the stage and the loss."""
    config_path = protected_chain(tmp_path, AGGREGATE)
    doc = yaml.safe_load(config_path.read_text())
    del doc["stages"][1]["ha"]
    config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    run_dir = tmp_path / "run"
    launcher = start_launcher(config_path, run_dir, duration=5)
    try:
        os.kill(_pid_when_started(run_dir, "node-2", after=RANDOM.uniform(1.0, 2.5)), signal.SIGKILL)
    finally:
        result = finish(launcher, run_dir)
    err = result.stderr
    assert result.returncode == 1, err
    assert "stage stage-2 stopped: unprotected" in err and "LOST at sink" in result.stdout  # the report
    report = json.loads((run_dir / "telemetry" / "report.json").read_text())
    (stopped,) = report["stopped"]
    assert stopped["stage"] == "stage-2"
    assert stopped["consumers_received"]["stage-2->stage-3"] > 0
    loss = report["lost"]["sink"]
    assert loss["prefix"] and loss["missing"] > 0 and loss["duplicated"] == 0, loss
    # Every row stage-3 produced (it survived) reached the sink.
    delivered = len(read_jsonl(run_dir / "sink" / "sink.jsonl"))
    summary = json.loads((run_dir / "telemetry" / "node-3.summary.json").read_text())
    assert delivered == summary["tuples_out"] == loss["delivered"] > 0
    (fault,) = report["faults"]
    assert (fault["node"], fault["kind"], fault["origin"]) == ("node-2", "exit", "observed")


def _pid_when_started(run_dir: Path, node: str, after: float) -> int:
    """The pid of ``node`` once the run has been going for ``after`` seconds."""
    started = wait_until(lambda: _started(run_dir), what="the run's start (t0 in cluster.json)", timeout=60)
    time.sleep(max(0.0, started["t0_unix"] + after - time.time()))  # the moment chosen in the run
    doc = _started(run_dir)  # as it is now (written whole, by a rename)
    assert doc is not None
    return int(next(p["pid"] for p in doc["processes"] if p["name"] == node))


def _started(run_dir: Path) -> dict[str, Any] | None:
    """cluster.json once the run has started (it has a t0)."""
    try:
        doc: dict[str, Any] = json.loads((run_dir / "cluster.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return doc if doc.get("t0_unix") else None


def test_sigkill_of_the_launcher_itself_ends_the_run_cleanly(tmp_path: Path) -> None:
    """The launcher (and the coordinator in it) killed by the nemesis: the
    nodes notice, drain (sources stop, every primary delivers what it holds
    and its end of stream) and exit on their own; the sink has exactly the
    reference of what the source emitted."""
    config_path = protected_chain(tmp_path, AGGREGATE)
    run_dir = tmp_path / "run"
    launcher = start_launcher(config_path, run_dir, duration=60)
    try:
        nemesis = semiactive("nemesis", str(run_dir), "--kill", f"launcher@{RANDOM.uniform(1.5, 2.5):.2f}")
        assert nemesis.returncode == 0, nemesis.stderr
        assert launcher.wait(timeout=30) == -signal.SIGKILL
        wait_until(
            lambda: processes_mentioning(str(run_dir)),
            until=lambda left: not left,
            what="the nodes to end the run by themselves (pids left)",
            timeout=15,
        )
    finally:
        finish(launcher, run_dir)
    _assert_exact(config_path, run_dir, "")
    logs = (run_dir / "logs" / "sink.log").read_text()
    assert "the launcher" in logs and "is gone: draining" in logs


def test_a_node_is_not_restarted_with_a_program_changed_since_the_run_started(tmp_path: Path) -> None:
    """stage-2 reads its query from a file that is edited during the run;
    its primary is then killed. A node restarted now would compile the new
    text and diverge from the stage's other replica, so the launcher does
    not restart it (event not_restarted), and the run stays exact."""
    config_path = protected_chain(tmp_path, AGGREGATE)
    doc = yaml.safe_load(config_path.read_text())
    stage = next(s for s in doc["stages"] if s["name"] == "stage-2")
    query_file = tmp_path / "s2.cql"
    query_file.write_text(stage.pop("query"))
    stage["query_file"] = query_file.name
    config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    run_dir = tmp_path / "run"
    launcher = start_launcher(config_path, run_dir, duration=8)
    try:
        wait_until(lambda: _started(run_dir), what="the run's start (t0 in cluster.json)", timeout=60)
        original = query_file.read_text()  # every node has compiled it by now
        query_file.write_text(original.replace("[Rows 100 Slide 10]", "[Rows 50 Slide 10]"))
        nemesis = semiactive("nemesis", str(run_dir), "--kill", "node-2@3", timeout=60)
        assert nemesis.returncode == 0, nemesis.stderr
    finally:
        result = finish(launcher, run_dir)
    assert result.returncode == 0, result.stderr
    query_file.write_text(original)  # the reference is computed from the files as they are
    _assert_exact(config_path, run_dir, result.stderr)
    refused = [e for e in events(run_dir) if e["event"] == "not_restarted"]
    assert [(e["target"], e["reason"]) for e in refused] == [
        ("node-2", "the config or a query file changed since the run started")
    ]
    assert "node-2 not restarted" in result.stderr
    assert not [e for e in events(run_dir) if e["event"] == "restarted" and e["target"] == "node-2"]


def _fork_servers(run_dir: Path) -> list[int]:
    """The run's fork server (a list: none while it is being replaced).
    What it forked has its command line too; it alone reads orders from
    the launcher on a pipe."""
    servers = []
    for pid in processes_mentioning(str(run_dir)):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stdin = os.readlink(f"/proc/{pid}/fd/0")
        except OSError:
            continue
        if b"fork-server" in command and stdin.startswith("pipe:"):
            servers.append(pid)
    return servers


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_the_fork_server_killed_from_outside_is_replaced_and_restarts_go_on(tmp_path: Path) -> None:
    """The run's fork server is no process of ``cluster.json``, but anyone
    may kill it: with node-2 at once, that restart starts cold (the
    replacement server is still importing); a kill once the replacement
    has imported (its CPU time stands still) forks from it. Both exact."""
    # The replacement imports on two cores the run keeps busy: at 1,000
    # rows/s that took 5-7 s, at 200 about 2.
    config_path = protected_chain(tmp_path, AGGREGATE, rate=200)
    run_dir = tmp_path / "run"
    launcher = start_launcher(config_path, run_dir, duration=10)
    try:
        node = _pid_when_started(run_dir, "node-2", after=1.0)
        (server,) = _fork_servers(run_dir)
        os.kill(server, signal.SIGKILL)
        os.kill(node, signal.SIGKILL)
        (replacement,) = wait_until(
            lambda: [pid for pid in _fork_servers(run_dir) if pid != server],
            what="a new fork server",
            timeout=30,
        )
        ticks: list[int] = []

        def still() -> bool:
            ticks.append(_cpu_ticks(replacement))
            return len(ticks) >= 3 and len(set(ticks[-3:])) == 1

        wait_until(still, what="the new fork server done importing", interval=0.2, timeout=30)
        sec = next(
            p["pid"]
            for p in json.loads((run_dir / "cluster.json").read_text())["processes"]
            if p["name"] == "sec-3"
        )
        os.kill(sec, signal.SIGKILL)
        assert time.time() < run_t0(run_dir) + 9, "the replacement took the whole run to import"
    finally:
        result = finish(launcher, run_dir)
    assert result.returncode == 0, result.stderr
    _assert_exact(config_path, run_dir, result.stderr)
    restarted = [(e["target"], e["forked"]) for e in events(run_dir) if e["event"] == "restarted"]
    assert restarted == [("node-2", False), ("sec-3", True)], result.stderr
