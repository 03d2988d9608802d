"""Partitioned stages: the highest source rate the paper chain sustains when
its heavy middle stage runs as 1, 2 or 4 operator partitions.

    python bench/partition_throughput.py [--partitions 1,2,4] [--cost-ms 0.5] [--seconds 6]
        [--ha] [--p99-ms 1000] [--linger-ms 5]

The chain is examples/paper-chain-partitioned.yaml with the middle stage
burning ``--cost-ms`` of CPU per input row (so one partition tops out near
1000 / cost-ms rows/s) and, unless ``--ha``, unprotected (a SAS secondary
burns the same CPU again). For each partition count the rate grows by 25%
from ``--start`` until a run fails; a rate counts as sustained when the
source kept its schedule (less than 250 ms behind when it stopped), the run
drained, the sink's p99 latency stayed under ``--p99-ms`` (a stage that
falls behind queues rows for seconds before the source feels it) and the
sink is identical to the reference row by row. Prints the
best sustained rate per count, the speed-up over one partition, and the
efficiency against the cores the machine has (a partition needs a core of
its own to scale: on 2 cores, 4 partitions cannot beat 2).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from semiactive import config, topology
from semiactive.launcher.cluster import run_cluster
from semiactive.oracle.verify import check_run

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "paper-chain-partitioned.yaml"
SPARE_NODES = ["node-2", "node-5", "node-6", "node-7", "node-8", "node-9", "node-10", "node-11"]


def chain(partitions: int, rate: int, args: argparse.Namespace, directory: Path) -> Path:
    cost_ms, ha = args.cost_ms, args.ha
    cfg: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    cfg["linger_ms"] = args.linger_ms
    cfg["sources"][0]["rate"] = [{"at_s": 0, "tuples_per_s": rate}]
    heavy = cfg["stages"][1]
    heavy["cost_ms"] = cost_ms
    del heavy["ha"], heavy["nodes"], heavy["partitions"], heavy["partition_by"]
    if partitions == 1:
        heavy["node"] = "node-2"
    else:
        heavy["partitions"] = partitions
        heavy["nodes"] = SPARE_NODES[:partitions]
        heavy["partition_by"] = ["sensor"]
    if ha:
        secondaries = [f"node-s{i}" for i in range(partitions)]
        heavy["ha"] = {"mode": "sas", "batch_size": 100}
        if partitions == 1:
            heavy["ha"]["secondary"] = secondaries[0]
        else:
            heavy["ha"]["secondaries"] = secondaries
    path = directory / f"chain-{partitions}-{rate}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def trial(partitions: int, rate: int, args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    path = chain(partitions, rate, args, directory)
    run_dir = directory / f"run-{partitions}-{rate}"
    code = asyncio.run(run_cluster(str(path), duration=args.seconds, run_dir=run_dir, progress=False))
    end = json.loads((run_dir / "sources" / "node-0.end.json").read_text())
    checks = check_run(topology.resolve(config.load(path)), run_dir)
    latency = json.loads((run_dir / "telemetry" / "sink.latency.json").read_text())
    p99 = latency.get("p99_ms") or float("inf")
    identical = all(c.ok for c in checks)
    ok = code == 0 and end["lag_ms"] < 250 and p99 < args.p99_ms and identical
    return {
        "rate": rate,
        "exit": code,
        "lag_ms": round(end["lag_ms"]),
        "p99_ms": round(p99),
        "identical": identical,
        "ok": ok,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="1,2,4")
    parser.add_argument("--cost-ms", type=float, default=0.5)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--start", type=int, default=1000, help="first rate tried (tuples/s)")
    parser.add_argument("--linger-ms", type=float, default=5.0, help="senders wait this long to fill a frame")
    parser.add_argument("--ha", action="store_true", help="protect each partition by SAS (B = 100)")
    parser.add_argument(
        "--p99-ms",
        type=float,
        default=1000,
        help="a kept-up rate: sink p99 latency below this (default 1000)",
    )
    args = parser.parse_args()
    counts = [int(x) for x in args.partitions.split(",")]
    cores = len(os.sched_getaffinity(0))
    best: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="partition-bench-") as tmp:
        for n in counts:
            rate, best[n] = args.start, 0
            while True:
                result = trial(n, rate, args, Path(tmp))
                print(f"partitions {n}: {json.dumps(result)}", flush=True)
                if not result["ok"]:
                    break
                best[n] = rate
                rate = int(rate * 1.25)
    ha = "SAS" if args.ha else "no HA"
    print(f"\ncost {args.cost_ms} ms/row in the heavy stage, {ha}, linger {args.linger_ms} ms, {cores} cores")
    print(f"{'partitions':>10} {'rows/s':>8} {'speed-up':>9} {'per core used':>14}")
    base = best.get(1) or best[counts[0]]
    for n in counts:
        used = min(n, cores)
        print(f"{n:>10} {best[n]:>8} {best[n] / base:>9.2f} {best[n] / base / used:>14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
