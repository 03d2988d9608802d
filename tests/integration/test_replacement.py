"""Seed 004's re-placement on a live cluster (examples/replacement-chain.yaml):
frames between nodes wait the latency between their sites (the join starts
40 ms from its sources and sink: rows reach the sink ~80 ms late); the
coordinator measures the edges' rates, finds a placement with a lower
network usage and moves the join to the spare next to the sources, with no
row lost or repeated and no pause at the sink beyond the latency it had."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.processes import ROOT, assert_no_processes, read_jsonl, run_t0, semiactive

pytestmark = pytest.mark.slow


def sink_latencies(run_dir: Path) -> list[tuple[float, float]]:
    """(arrival wall time, latency in ms) of every sink row: its arrival
    against its event time (ms since the cluster's t0)."""
    t0 = run_t0(run_dir)
    ts = {r["seq"]: r["ts"] for r in read_jsonl(run_dir / "sink" / "sink.jsonl")}
    out = []
    for line in (run_dir / "telemetry" / "sink.arrivals").read_text().splitlines():
        wall, seq, count = line.split()
        for s in range(int(seq), int(seq) + int(count)):
            out.append((float(wall), (float(wall) - t0) * 1000 - ts[s]))
    return out


def test_the_coordinator_moves_the_join_next_to_its_sources(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    config = ROOT / "examples" / "replacement-chain.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "semiactive", "cluster", "up", str(config),
         "--duration", "7", "--run-dir", str(run_dir), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert_no_processes(str(run_dir))
    assert done.returncode == 0, done.stderr
    verified = semiactive("verify", str(run_dir), timeout=120)
    assert verified.returncode == 0 and "identical to the reference" in verified.stdout, verified.stdout

    events: list[dict[str, Any]] = read_jsonl(run_dir / "telemetry" / "events-coordinator.jsonl")
    decisions = [e for e in events if e["event"] == "replacement"]
    assert len(decisions) == 1, decisions  # once there, nothing is worth moving
    (decision,) = decisions
    assert (decision["stage"], decision["target"], decision["refused"]) == ("join-1", "spare-east", None)
    assert decision["usage_best_bytes"] < 0.8 * decision["usage_now_bytes"]
    # 2 streams of ~16 kB/s each to the west coast (40 ms), the join's output back
    assert 1000 < decision["usage_now_bytes"] < 3000
    migrated = [e for e in events if e["event"] == "migrated"]
    assert [(e["stage"], e["target"]) for e in migrated] == [("join-1", "spare-east")]

    handover = next(e["t"] for e in events if e["event"] == "migration_handover")
    latencies = sink_latencies(run_dir)
    before = [lat for wall, lat in latencies if wall < handover - 0.3]
    after = [lat for wall, lat in latencies if wall > handover + 1.0]
    assert before and after
    # East -> west -> east: every row pays 2 x 40 ms, so none arrives sooner.
    west_floor = 80
    assert min(before) >= west_floor
    # Next to its sources the join adds no link latency, so rows arrive in a
    # few ms; but the cluster's 12 processes keep about 1.7 of a 2-core
    # machine busy, and a loaded CI machine adds stalls of hundreds of ms
    # (a median after the move of 41 ms once; 89-113 ms with one core taken
    # by a busy loop). Rows faster than the west path's floor cannot have
    # taken it: a quarter of them shows the new path (0 if the join stayed;
    # 0.84-1.0 measured here, 0.41-0.46 with the busy loop).
    fast = sum(lat < west_floor for lat in after) / len(after)
    assert fast >= 0.25, (fast, statistics.median(after))
    # The pause itself is measured by bench/migration_pause.py; this bound
    # catches a stall at the handover (a stop-and-copy, a lost view) and
    # leaves room for a loaded 2-core CI machine, where it once added 125 ms.
    around = [lat for wall, lat in latencies if handover - 0.3 <= wall <= handover + 1.0]
    assert max(around, default=0) < max(before) + 300
