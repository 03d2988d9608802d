"""Partitioned stages on a real cluster: a stage run as N operator
partitions on N nodes, producers routing rows by key (or round-robin),
consumers merging the partitions' outputs. `semiactive verify` proves both
claims at once: the sink equals, row by row, the reference that routes and
merges the same way, and, instant by instant, the SQLite oracle's
unpartitioned result. A partition's primary killed from outside mid-run is
taken over by its own secondary: nothing lost, nothing twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.processes import ROOT, read_jsonl, run_verified, semiactive, write_config

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "paper-chain-partitioned.yaml"


def _edge_records(run_dir: Path, node: str) -> dict[str, dict[str, Any]]:
    records = read_jsonl(run_dir / "telemetry" / f"edges-{node}.jsonl")
    return {r["edge"]: r for r in records}


def test_a_stage_partitioned_by_key_equals_the_unpartitioned_one_across_a_kill(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # Long enough for the restarted node-5 (seconds to start on a loaded
    # machine) to re-protect p1 well before the end: assigned as node-6
    # finished, it found its primary gone and took over after the run.
    events = run_verified(EXAMPLE, run_dir, duration=10, kill="node-5")
    takeovers = [(e["stage"], e["node"]) for e in events if e["event"] == "takeover"]
    assert takeovers == [("sensor-sums.p1", "node-6")]
    verified = semiactive("verify", str(run_dir), timeout=120)
    assert "oracle: SQLite" in verified.stdout and "differs" not in verified.stdout, verified.stdout
    # The producer routes: each partition gets its own rows whole, the
    # others as timestamps, so each edge carries well under a whole copy
    # (seen on the backups, batches of 100 rows: at 1000 rows/s the data
    # stream's frames hold a row or two, and frame overhead hides it).
    edges = _edge_records(run_dir, "node-1")
    whole_row = 44  # tuple_bytes: ts, id, sensor, val and the pad column
    edge = edges["select-1->sensor-sums.p0"]
    assert edge["seq"] > 1000 and edge["backup_rows"] > 1000
    assert edge["backup_bytes"] < 0.7 * whole_row * edge["backup_rows"], edge
    # Both partitions computed a share of the output.
    outputs = [_edge_records(run_dir, n)[f"{p}->select-3"]["seq"] for p, n in
               (("sensor-sums.p0", "node-2"), ("sensor-sums.p1", "node-6"))]  # fmt: skip
    assert all(n > 300 for n in outputs), outputs


def test_round_robin_partitions_feed_a_sink_directly(tmp_path: Path) -> None:
    """Three partitions without keys (a stateless query: rows dealt by
    seq), merged by the sink itself; the middle partition is killed."""
    config: dict[str, Any] = {
        "name": "round-robin",
        "heartbeat_ms": 250,
        "ack_interval_ms": 100,
        "sources": [{"name": "node-0", "stream": "s0", "schema": {"id": "integer", "val": "integer"},
                     "rate": [{"at_s": 0, "tuples_per_s": 900}], "seed": 3}],
        "stages": [{"name": "scaled", "partitions": 3, "nodes": ["node-1", "node-2", "node-3"],
                    "ha": {"mode": "sas", "batch_size": 50, "secondaries": ["node-4", "node-5", "node-6"]},
                    "query": "REGISTER QUERY s1 AS SELECT id, val * 2 AS doubled FROM s0 WHERE val < 900"}],
        "sinks": [{"name": "sink", "input": "s1"}],
    }  # fmt: skip
    path = write_config(tmp_path / "round-robin.yaml", config)
    run_dir = tmp_path / "run"
    events = run_verified(path, run_dir, duration=4, kill="node-2")
    takeovers = [(e["stage"], e["node"]) for e in events if e["event"] == "takeover"]
    assert takeovers == [("scaled.p1", "node-5")]
    rows = read_jsonl(run_dir / "sink" / "sink.jsonl")
    assert len(rows) > 2000
    assert [r["seq"] for r in rows] == list(range(1, len(rows) + 1))


def test_a_partitioning_that_would_change_the_result_is_refused(tmp_path: Path) -> None:
    config: dict[str, Any] = {
        "sources": [{"name": "node-0", "stream": "s0"}],
        "stages": [{"name": "total", "partitions": 2, "nodes": ["node-1", "node-2"],
                    "query": "REGISTER QUERY s1 AS ISTREAM(SELECT SUM(val) FROM s0 [Range 1000])"}],
        "sinks": [{"name": "sink", "input": "s1"}],
    }  # fmt: skip
    path = write_config(tmp_path / "bad.yaml", config)
    result = semiactive("cluster", "check", str(path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "stages[0].partitions" in result.stderr and "aggregate" in result.stderr, result.stderr
