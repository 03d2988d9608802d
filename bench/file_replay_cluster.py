"""A CSV file replayed by a cluster's file source through a selection stage
to a sink (3 processes and the coordinator, loopback): for each replay
speed, the rate, how far behind schedule the source fell, the sink's
latency and whether its output is identical to the reference.

    python bench/file_replay_cluster.py [--speeds 1,2,3,4,5] [--seconds 6]

The file holds 100 rows per millisecond of data (``ts,id,val``, all
integers), so speed S replays S x 100,000 rows/s. A CSV of numbers is read
by numpy a block at a time and replayed as record blocks (no tuple per
row: docs/columnar.md, "The ends of the chain"). A speed counts as
sustained when the source kept its schedule (less than 250 ms behind when
it stopped), the run drained and the sink is identical to the reference.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster_throughput import outcome

from semiactive.launcher.cluster import run_cluster

ROWS_PER_MS = 100


def write_data(path: Path, rows: int) -> None:
    i = np.arange(rows, dtype=np.int64)
    with path.open("w") as out:
        out.write("ts,id,val\n")
        np.savetxt(out, np.stack([i // ROWS_PER_MS, i, (i * 37) % 1000], axis=1), fmt="%d", delimiter=",")


def trial(speed: float, seconds: float, directory: Path) -> dict[str, Any]:
    cfg = {
        "name": "file-replay",
        "queue_rows": 200_000,
        "sources": [
            {
                "name": "node-0",
                "stream": "s0",
                "kind": "file",
                "path": "data.csv",
                "speed": speed,
                "schema": {"id": "integer", "val": "integer"},
            }
        ],
        "stages": [
            {
                "name": "select-1",
                "node": "node-1",
                "query": "REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 0",
            }
        ],
        "sinks": [{"name": "sink", "input": "s1"}],
    }
    path = directory / f"speed-{speed:g}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    run_dir = directory / f"run-{speed:g}"
    code = asyncio.run(run_cluster(str(path), duration=seconds, run_dir=run_dir, progress=False))
    return outcome(path, run_dir, code)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speeds", default="1,2,3,4,5")
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    speeds = [float(s) for s in args.speeds.split(",")]
    rows = int(max(speeds) * ROWS_PER_MS * 1000 * (args.seconds + 1))
    print(f"machine: {os.cpu_count()} cores; file source -> selection stage -> sink on loopback")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        print(f"writing {rows:,} rows ...", flush=True)
        write_data(directory / "data.csv", rows)
        best = 0.0
        for speed in speeds:
            r = trial(speed, args.seconds, directory)
            ok = r["exit"] == 0 and r["kept_schedule"] and r["identical"]
            rate = int(speed * ROWS_PER_MS * 1000)
            print(
                f"speed {speed:g} ({rate:,} rows/s): emitted {r['emitted']:,}, behind schedule "
                f"{r['lag_ms']:.0f} ms, identical {r['identical']}, p50 {r['p50_ms']:.0f} ms, "
                f"p99 {r['p99_ms']:.0f} ms -> {'sustained' if ok else 'NOT sustained'}",
                flush=True,
            )
            if ok:
                best = max(best, rate)
        print(f"highest sustained rate: {best:,.0f} rows/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
