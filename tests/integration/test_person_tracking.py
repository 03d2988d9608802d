"""Seed 004's person tracking on a real cluster, shortened: alice eight
seconds at the New York camera, then eight at Atlanta. The user's ASSIGN
query, started in Denver, must be moved next to each camera in turn by the
coordinator (re-placement on measured rates, connection management letting
only her camera's rows through whole), and the sink must equal the
reference across every migration (bench/person_tracking.py is the long
run with the figures)."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.processes import (
    ROOT,
    assert_no_processes,
    cluster_events,
    read_jsonl,
    run_t0,
    semiactive,
    write_config,
)

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "person-tracking.yaml"
SEGMENT_MS = 8000


def test_the_query_follows_alice_and_loses_nothing(tmp_path: Path) -> None:
    generate = runpy.run_path(str(EXAMPLE.parent / "data" / "person-tracking" / "generate.py"))["generate"]
    generate(tmp_path, segment_ms=SEGMENT_MS, cameras=2)
    config: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    for source in config["sources"]:
        source["path"] = str(tmp_path / Path(source["path"]).name)
    path = write_config(tmp_path / "person-tracking.yaml", config)
    run_dir = tmp_path / "run"
    up = semiactive("cluster", "up", str(path), "--duration", "21", "--run-dir", str(run_dir), "--quiet")
    assert_no_processes(str(run_dir))
    assert up.returncode == 0, up.stderr
    verified = semiactive("verify", str(run_dir), timeout=120)
    assert verified.returncode == 0 and "identical to the reference" in verified.stdout, verified.stdout

    sites = config["network"]["sites"]
    t0 = run_t0(run_dir)
    samples = read_jsonl(run_dir / "telemetry" / "network-coordinator.jsonl")
    where = [(r["t"] - t0, sites.get(r["primaries"].get("follow-alice"))) for r in samples]
    assert [site for t, site in where if t < SEGMENT_MS / 1000][-1] == "New York", where
    assert [site for t, site in where if t < 2 * SEGMENT_MS / 1000][-1] == "Atlanta", where
    # The move to Atlanta made u several times smaller than just before it,
    # once u's window no longer holds the move itself (the new primary's
    # catch-up: 53 KB against 34 after, 1.0-1.5 s after the move, was seen).
    moved = next(t for t, site in where if site == "Atlanta")
    settled = moved + config["network"]["rate_window_s"] + 2 * config["heartbeat_ms"] / 1000
    before = [r["usage_bytes"] for r in samples if moved - 2 < r["t"] - t0 < moved - 0.5]
    after = [r["usage_bytes"] for r in samples if settled < r["t"] - t0 < 2 * SEGMENT_MS / 1000]
    assert before and after and max(after) < min(before), (before, after)
    events = cluster_events(run_dir)
    assert not [e for e in events if e["event"] == "rows_lost"]
    migrations = [(round(e["t"] - t0, 1), e["target"]) for e in events if e["event"] == "migrated"]
    assert len(migrations) == 2, migrations
