"""The paper chain on loopback (5 processes: source, 3 selection stages,
sink): the highest source rate sustained with zero loss, and source-to-sink
latency at 1000 tuples/s.

    python bench/cluster_throughput.py [--rates 50000,100000,150000] [--seconds 6] [--rows] [--sas B]

The stages run on record blocks (``columnar_stages``, the default);
``--rows`` runs them on Python tuples, as before, for comparison.
``--sas B`` protects every stage with Semi-Active Standby at batch size B,
each with its secondary on a node of its own (3 more processes).

A rate counts as sustained when the source kept its schedule (it was less
than 250 ms behind when it stopped: backpressure from a slower chain would
hold it back), the run drained, and the sink's output is identical, row by
row, to the reference recomputed from the source's stream. The source
writes no row log (``log: false``: its JSON Lines were half its CPU); the
check makes its stream again from its seed and rate. ``--source-log``
writes the log, as before.

``--grouped`` runs a GROUP BY job instead: a stage that computes a key
(``val % 8``), then ``ISTREAM(SELECT k, SUM(val), COUNT(*) ... [Range 100
Slide 10] GROUP BY k)``, then the sink (4 processes), with logs of
200,000 rows (``queue_rows``: the window stage's cut trails its input by
the window and its sink's acknowledgements). ``--keys K`` makes the key
``id % K`` (each key every K-th tuple, its values random); ``--partition
N`` makes the window ``[Partition By k Rows N]`` (a row out per row in).
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

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "paper-chain.yaml"
KEY = "REGISTER QUERY s1 AS SELECT val, val % 8 AS k FROM readings"
GROUPED = [
    {"name": "key-1", "node": "node-1", "query": KEY},
    {
        "name": "sum-2",
        "node": "node-2",
        "query": "REGISTER QUERY s2 AS "
        "ISTREAM(SELECT k, SUM(val) AS s, COUNT(*) AS n FROM s1 [Range 100 Slide 10] GROUP BY k)",
    },
]


def grouped_stages(keys: int | None, partition: int | None) -> list[dict[str, str]]:
    """The GROUP BY job's stages: the key, then the window."""
    key, window = GROUPED
    window = dict(window)
    if partition is not None:
        partitioned = f"[Partition By k Rows {partition}]"
        window["query"] = window["query"].replace("[Range 100 Slide 10]", partitioned)
    if keys is not None:
        key = dict(key, query=KEY.replace("val % 8", f"id % {keys}"))
    return [key, window]


def with_rate(rate: int, directory: Path, args: argparse.Namespace) -> Path:
    """The example chain at ``rate`` with the command line's changes."""
    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg["sources"][0]["rate"] = [{"at_s": 0, "tuples_per_s": rate}]
    cfg["sources"][0]["log"] = args.source_log
    if args.grouped:
        cfg["stages"] = grouped_stages(args.keys, args.partition)
        cfg["sinks"][0]["input"] = "s2"
        cfg["queue_rows"] = 200_000
    if args.sas is not None:
        spare = len(cfg["stages"]) + 1  # node-4, node-5, ...
        for i, stage in enumerate(cfg["stages"]):
            stage["ha"] = {"mode": "sas", "batch_size": args.sas, "secondary": f"node-{spare + i}"}
    if args.linger_ms is not None:
        cfg["linger_ms"] = args.linger_ms
    if args.rows:
        cfg["columnar_stages"] = False
    if args.batch_rows is not None:
        cfg["batch_rows"] = args.batch_rows
    path = directory / f"chain-{rate}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def trial(rate: int, seconds: float, directory: Path, args: argparse.Namespace) -> dict[str, object]:
    path = with_rate(rate, directory, args)
    run_dir = directory / f"run-{rate}"
    code = asyncio.run(run_cluster(str(path), duration=seconds, run_dir=run_dir, progress=False))
    return {"rate": rate, **outcome(path, run_dir, code)}


def outcome(path: Path, run_dir: Path, code: int) -> dict[str, Any]:
    """A run of source node-0 and sink ``sink``: what the source emitted,
    whether it kept its schedule (less than 250 ms behind when it
    stopped), whether the sink is the reference, the sink's latency."""
    end = json.loads((run_dir / "sources" / "node-0.end.json").read_text())
    checks = check_run(topology.resolve(config.load(path)), run_dir)
    latency = json.loads((run_dir / "telemetry" / "sink.latency.json").read_text())
    return {
        "exit": code,
        "emitted": end["count"],
        "lag_ms": end["lag_ms"],
        "kept_schedule": end["lag_ms"] < 250,
        "identical": all(c.ok for c in checks),
        "p50_ms": latency.get("p50_ms"),
        "p99_ms": latency.get("p99_ms"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="25000,50000,75000,100000,125000,150000")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--linger-ms", type=float, help="the cluster's linger_ms (default: the default)")
    parser.add_argument("--rows", action="store_true", help="stages on rows (columnar_stages: false)")
    parser.add_argument("--batch-rows", type=int, help="the cluster's batch_rows (default: the default)")
    parser.add_argument("--sas", type=int, metavar="B", help="SAS on every stage at batch size B")
    parser.add_argument("--source-log", action="store_true", help="the source writes its row log (log: true)")
    parser.add_argument("--grouped", action="store_true", help="a key stage and a GROUP BY window stage")
    parser.add_argument("--keys", type=int, help="--grouped: the key is id %% KEYS (default: val %% 8)")
    parser.add_argument(
        "--partition", type=int, metavar="N", help="--grouped: a [Partition By k Rows N] window"
    )
    args = parser.parse_args()
    stages = "rows" if args.rows else "record blocks (columnar_stages)"
    count = 2 if args.grouped else 3
    if args.sas is None:
        processes = f"{count + 2} processes (source, {count} stages on {stages}, sink)"
    else:
        secondaries = f"each with a SAS secondary at B={args.sas}"
        processes = f"{2 * count + 2} processes (source, {count} stages on {stages} {secondaries}, sink)"
    print(f"machine: {os.cpu_count()} cores; {processes} on loopback")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        lat = trial(1000, args.latency_seconds, directory, args)
        print(
            f"latency at 1000 tuples/s: p50 {lat['p50_ms']:.1f} ms, p99 {lat['p99_ms']:.1f} ms "
            f"(identical to reference: {lat['identical']})"
        )
        best = 0
        for rate in (int(r) for r in args.rates.split(",")):
            r = trial(rate, args.seconds, directory, args)
            ok = r["exit"] == 0 and r["kept_schedule"] and r["identical"]
            verdict = "sustained" if ok else "NOT sustained"
            print(
                f"rate {rate:>7,}/s: emitted {r['emitted']:,}, behind schedule {r['lag_ms']:.0f} ms, "
                f"identical {r['identical']}, p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms -> {verdict}"
            )
            if ok:
                best = max(best, rate)
        print(f"highest sustained zero-loss rate: {best:,} tuples/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
