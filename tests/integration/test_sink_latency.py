"""Sink latency is measured from when a row entered the system, whatever
its event time says: a file replayed slower or faster than its timestamps,
timestamps that are epoch milliseconds, rows pushed into an ingest source.
(It used to be the arrival minus t0 + ts, right only for a replay at speed 1
of data starting at ts 0.)"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.processes import assert_no_processes, semiactive, write_config

pytestmark = pytest.mark.slow

SELECT = "REGISTER QUERY {out} AS SELECT * FROM {stream} WHERE val >= 0"


def _file(path: Path, start: int, rows: int, step_ms: int) -> Path:
    path.write_text("ts,val\n" + "".join(f"{start + i * step_ms},{i}\n" for i in range(rows)))
    return path


def test_latency_is_from_entry_whatever_the_speed_or_the_clock_of_event_time(tmp_path: Path) -> None:
    epoch_ms = int(time.time() * 1000) - 86_400_000  # a day ago, in epoch milliseconds
    files = {
        "slow": (_file(tmp_path / "slow.csv", 0, 150, 10), 0.7),
        "fast": (_file(tmp_path / "fast.csv", 0, 300, 10), 2.0),
        "epoch": (_file(tmp_path / "epoch.csv", epoch_ms, 150, 10), 1.0),
    }
    cfg: dict[str, Any] = {"name": "latency", "sources": [], "stages": [], "sinks": []}
    for name, (path, speed) in files.items():
        cfg["sources"].append(
            {
                "name": f"src-{name}",
                "stream": name,
                "kind": "file",
                "path": str(path),
                "speed": speed,
                "schema": {"val": "integer"},
            }
        )
        query = SELECT.format(out=f"{name}_out", stream=name)
        cfg["stages"].append({"name": f"sel-{name}", "node": f"n-{name}", "query": query})
        cfg["sinks"].append({"name": f"out-{name}", "input": f"{name}_out"})
    config = write_config(tmp_path / "c.yaml", cfg)
    run_dir = tmp_path / "run"
    result = semiactive("cluster", "up", str(config), "--run-dir", str(run_dir), "--quiet", timeout=120)
    assert_no_processes(str(run_dir))
    assert result.returncode == 0, result.stderr
    for name in files:
        latency = json.loads((run_dir / "telemetry" / f"out-{name}.latency.json").read_text())
        assert latency["delivered"] == (300 if name == "fast" else 150)
        # Loopback, two hops, a few rows a millisecond apart: well under a
        # second, and never nothing (a batch has to travel).
        assert 0 < latency["p50_ms"] < 500, (name, latency)
        assert latency["max_ms"] < 2000, (name, latency)
