"""The paper chain, protected (SAS, B = 100: 8 processes), writing into a
PostgreSQL table: the highest source rate sustained with zero loss, exactly
once, and source-to-commit latency at 1,000 rows/s.

    python bench/postgres_end_to_end.py [--dsn DSN] [--rates 25000,50000,75000] [--seconds 6]

Without ``--dsn`` it starts a PostgreSQL of its own (Debian's, on a free
loopback port, as the tests do) and stops it at the end. A rate counts as
sustained when the source kept its schedule (less than 250 ms behind when
it stopped), the run drained, and the table's rows of the run are
identical, row by row and each seq once, to the reference recomputed from
the source's log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from semiactive import config, topology  # noqa: E402
from semiactive.launcher.cluster import run_cluster  # noqa: E402
from semiactive.oracle.verify import check_run  # noqa: E402

EXAMPLE = ROOT / "examples" / "paper-chain.yaml"


def chain(rate: int, dsn: str, directory: Path, protected: bool) -> Path:
    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg["sources"][0]["rate"] = [{"at_s": 0, "tuples_per_s": rate}]
    if protected:
        for i, stage in enumerate(cfg["stages"], start=1):
            stage["ha"] = {"mode": "sas", "batch_size": 100, "secondary": f"sec-{i}"}
    table = f"bench_e2e_{rate}"
    cfg["sinks"][0].update(kind="postgres", postgres={"dsn": dsn, "table": table})
    path = directory / f"chain-{rate}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def trial(rate: int, seconds: float, dsn: str, directory: Path, protected: bool) -> dict[str, object]:
    path = chain(rate, dsn, directory, protected)
    run_dir = directory / f"run-{rate}"
    code = asyncio.run(run_cluster(str(path), duration=seconds, run_dir=run_dir, progress=False))
    end = json.loads((run_dir / "sources" / "node-0.end.json").read_text())
    checks = check_run(topology.resolve(config.load(path)), run_dir)
    latency = json.loads((run_dir / "telemetry" / "sink.latency.json").read_text())
    return {
        "exit": code,
        "emitted": end["count"],
        "lag_ms": end["lag_ms"],
        "identical": bool(checks) and all(c.ok for c in checks),
        "delivered": sum(c.delivered for c in checks),
        "p50_ms": latency.get("p50_ms") or 0.0,
        "p99_ms": latency.get("p99_ms") or 0.0,
    }


@contextlib.contextmanager
def database(dsn: str | None, directory: Path) -> Iterator[str]:
    if dsn is not None:
        yield dsn
        return
    from tests.postgres_server import postgres_server

    with postgres_server(directory / "pg") as server:
        yield server.dsn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="a PostgreSQL to write into (default: start one)")
    parser.add_argument("--rates", default="25000,50000,75000")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--unprotected", action="store_true", help="no secondaries (5 processes)")
    args = parser.parse_args()
    protected = not args.unprotected
    shape = "SAS B = 100, 8 processes" if protected else "unprotected, 5 processes"
    print(f"machine: {os.cpu_count()} cores; the paper chain ({shape}) into PostgreSQL on loopback")
    with tempfile.TemporaryDirectory() as tmp, database(args.dsn, Path(tmp)) as dsn:
        directory = Path(tmp)
        lat = trial(1000, args.latency_seconds, dsn, directory, protected)
        print(
            f"latency at 1,000 rows/s, entry to commit: p50 {lat['p50_ms']:.1f} ms, "
            f"p99 {lat['p99_ms']:.1f} ms (identical to reference: {lat['identical']})",
            flush=True,
        )
        best = 0
        for rate in (int(r) for r in args.rates.split(",")):
            r = trial(rate, args.seconds, dsn, directory, protected)
            ok = r["exit"] == 0 and float(str(r["lag_ms"])) < 250 and r["identical"]
            print(
                f"rate {rate:>7,}/s: emitted {r['emitted']:,}, committed {r['delivered']:,}, "
                f"behind schedule {r['lag_ms']:.0f} ms, identical {r['identical']}, "
                f"p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms -> "
                f"{'sustained' if ok else 'NOT sustained'}",
                flush=True,
            )
            if ok:
                best = max(best, rate)
        print(f"highest sustained zero-loss rate into the table: {best:,} rows/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
