"""State snapshots under real failures (docs/ha.md, "Retention"): a stage
whose state keeps its first row for the whole run ([Range Unbounded]) would
pin its producers' logs at that row and stall once ``queue_rows`` fill up.
With ``snapshot_rows`` its Level-1 points carry its operator state, the cut
moves on, and a SIGKILL of its primary from outside still loses and repeats
nothing: the new secondary is rebuilt from a state, not from the first row."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.faults.harness import protected_chain, run

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
