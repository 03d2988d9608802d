"""State snapshots under real failures (docs/ha.md, "Retention"): a stage
whose state keeps its first row for the whole run ([Range Unbounded]) would
pin its producers' logs at that row and stall once ``queue_rows`` fill up.
With ``snapshot_rows`` its Level-1 points carry its operator state, the cut
moves on, and a SIGKILL of its primary from outside still loses and repeats
nothing: the new secondary is rebuilt from a state, not from the first row."""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import time
from pathlib import Path

import pytest

from semiactive import config
from semiactive.campaigns.nemesis import pid_of, read_cluster
from semiactive.oracle.verify import check_run
from semiactive.topology import resolve
from tests.faults.harness import events, finish, protected_chain, run, start_launcher
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

UNBOUNDED = [
    "REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 0",
    "REGISTER QUERY s2 AS ISTREAM(SELECT id % 7 AS k, SUM(val) AS total, COUNT(*) AS n "
    "FROM s1 [Range Unbounded] GROUP BY id % 7)",
    "REGISTER QUERY s3 AS SELECT * FROM s2",
]


def test_an_unbounded_window_runs_past_queue_rows_and_survives_a_kill(tmp_path: Path) -> None:
    config_path = protected_chain(tmp_path, UNBOUNDED, queue_rows=1500, snapshot_rows=400)
    at = random.Random(20261125).uniform(2.5, 3.5)
    out = run(config_path, tmp_path / "run", "--kill", f"node-2@{at:.2f}", duration=6)
    ran = out["events"]
    assert not [e for e in ran if e["event"] == "log_full"], out["stderr"]
    assert any(e["event"] == "takeover" and e.get("stage") == "stage-2" for e in ran), out["stderr"]
    rebuilt = [e for e in ran if e["event"] == "resync" and e.get("stage") == "stage-2" and e.get("state")]
    assert rebuilt, [e for e in ran if e["event"] == "resync"]


def test_a_chain_of_cuts_that_would_fill_the_source_log_is_relieved_and_survives_a_kill(
    tmp_path: Path,
) -> None:
    """Stage 1 keeps a third of the rows, so stage 2 captures every 1,000
    of its rows, about 3,000 of the source's, and the source's log holds
    1,500: stage 1's cut follows stage 2's, and the source would stop for
    good (the source stopped, no row reaches stage 2's next capture). The
    source presses stage 1, stage 1 presses stage 2, which captures out of
    turn in a forked child; a SIGKILL of stage 2's primary loses nothing."""
    queries = [
        "REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val % 3 = 0",
        "REGISTER QUERY s2 AS ISTREAM(SELECT id % 7 AS k, SUM(val) AS total, COUNT(*) AS n "
        "FROM s1 [Range Unbounded] GROUP BY id % 7)",
        "REGISTER QUERY s3 AS SELECT * FROM s2",
    ]
    config_path = protected_chain(tmp_path, queries, queue_rows=1500, snapshot_rows=1000)
    at = random.Random(20261126).uniform(3.0, 4.0)
    out = run(config_path, tmp_path / "run", "--kill", f"node-2@{at:.2f}", duration=7)
    ran = out["events"]
    assert not [e for e in ran if e["event"] == "log_full"], out["stderr"]
    pressed = {(e["node"], e["edge"]) for e in ran if e["event"] == "pressed"}
    assert ("node-1", "node-0->stage-1") in pressed, pressed
    assert any(edge == "stage-1->stage-2" for _, edge in pressed), pressed
    assert any(e["event"] == "takeover" and e.get("stage") == "stage-2" for e in ran), out["stderr"]


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _taken_again(run_dir: Path) -> list[int]:
    """The pids of the capture children node-2 reports killed, in order."""
    try:
        text = (run_dir / "logs" / "node-2.log").read_text()
    except FileNotFoundError:
        return []
    reported = re.findall(r"child \(pid (\d+)\) was killed by signal 9; taken again later", text)
    return [int(pid) for pid in reported]


def _node_2(run_dir: Path) -> int | None:
    doc = read_cluster(run_dir)
    return None if doc is None else pid_of(doc, "node-2")


def test_capture_children_killed_from_outside_are_taken_again(tmp_path: Path) -> None:
    """The kernel's OOM killer (a child copies the pages the node writes)
    or an operator may kill a capture child: the node goes on, takes the
    capture again, and stays its stage's primary; nothing is lost."""
    config_path = protected_chain(tmp_path, UNBOUNDED, queue_rows=1500, snapshot_rows=400)
    run_dir = tmp_path / "run"
    launcher = start_launcher(config_path, run_dir, duration=6)
    killed: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        node = wait_until(lambda: _node_2(run_dir), what="node-2's pid in cluster.json", timeout=60)
        # A child that wrote its whole capture before the signal landed
        # counts as a capture taken, so kill until the node reports three.
        while len(_taken_again(run_dir)) < 3 and time.monotonic() < deadline and launcher.poll() is None:
            looked_at = time.monotonic()
            while time.monotonic() < looked_at + 0.05:
                for child in set(_children(node)) - killed:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(child, signal.SIGKILL)
                        killed.add(child)
                time.sleep(0.001)  # the nemesis's beat: a child lives as long as its capture
    finally:
        result = finish(launcher, run_dir)
    assert result.returncode == 0, result.stderr
    taken_again = _taken_again(run_dir)
    assert len(taken_again) >= 3 and set(taken_again) <= killed, (taken_again, killed)
    for check in check_run(resolve(config.load(config_path)), run_dir):
        assert check.ok, check.describe()
    ran = events(run_dir)
    assert not [e for e in ran if e["event"] in ("takeover", "process_exited", "log_full")], result.stderr
