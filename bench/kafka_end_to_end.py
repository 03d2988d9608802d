"""From a Kafka topic through the paper chain, protected (SAS, B = 100: 8
processes), into PostgreSQL or another Kafka topic: the highest production
rate carried with zero loss, exactly once, and production-to-commit
latency at 1,000 rows/s.

    python bench/kafka_end_to_end.py [--sink postgres|kafka] [--rates 10000,25000,50000] [--seconds 6]

It starts a Kafka-protocol broker (Tansu, `make kafka`) and, for
``--sink postgres`` without ``--dsn``, a PostgreSQL of its own, on free
loopback ports. For each rate a producer process (examples/produce_readings.py)
fills a two-partition topic from the run's t0 on. A rate is carried when
every message produced became a row of the source, the run drained, the
sink's rows are identical, row by row and each seq once, to the reference
recomputed from the source's log, and the latency p99 stayed under 2 s (a
source that falls behind builds latency without bound).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from postgres_end_to_end import database  # noqa: E402

from semiactive import config, topology  # noqa: E402
from semiactive.launcher.cluster import run_cluster  # noqa: E402
from semiactive.oracle.verify import check_run  # noqa: E402
from tests.kafka_broker import KafkaBroker, kafka_broker  # noqa: E402

EXAMPLE = ROOT / "examples" / "paper-chain.yaml"
PRODUCER = ROOT / "examples" / "produce_readings.py"
CARRIED_P99_MS = 2000.0


def chain(rate: int, broker: KafkaBroker, sink: str, dsn: str | None, directory: Path) -> Path:
    cfg = yaml.safe_load(EXAMPLE.read_text())
    source = cfg["sources"][0]
    for key in ("rate", "seed", "tuple_bytes"):
        source.pop(key, None)
    source.update(
        kind="kafka", kafka={"bootstrap": broker.bootstrap, "topic": f"in_{rate}", "group": f"g_{rate}"}
    )
    for i, stage in enumerate(cfg["stages"], start=1):
        stage["ha"] = {"mode": "sas", "batch_size": 100, "secondary": f"sec-{i}"}
    if sink == "postgres":
        cfg["sinks"][0].update(kind="postgres", postgres={"dsn": dsn, "table": f"bench_kafka_{rate}"})
    else:
        cfg["sinks"][0].update(kind="kafka", kafka={"bootstrap": broker.bootstrap, "topic": f"out_{rate}"})
    path = directory / f"chain-{rate}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def produce_from_t0(run_dir: Path, broker: KafkaBroker, rate: int, seconds: float, out: list[str]) -> None:
    """Start the producer once the run has its t0, for ``seconds``."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            if json.loads((run_dir / "cluster.json").read_text()).get("t0_unix"):
                break
        time.sleep(0.02)
    command = [sys.executable, str(PRODUCER), "--bootstrap", broker.bootstrap, "--topic", f"in_{rate}"]
    command += ["--rate", str(rate), "--seconds", str(seconds)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    out.append(done.stdout.strip() or done.stderr.strip())


def trial(
    rate: int, seconds: float, broker: KafkaBroker, sink: str, dsn: str | None, directory: Path
) -> dict[str, object]:
    broker.create_topic(f"in_{rate}", 2)
    path = chain(rate, broker, sink, dsn, directory)
    run_dir = directory / f"run-{rate}"
    said: list[str] = []
    producer = threading.Thread(target=produce_from_t0, args=(run_dir, broker, rate, seconds - 0.5, said))
    producer.start()
    code = asyncio.run(run_cluster(str(path), duration=seconds, run_dir=run_dir, progress=False))
    producer.join()
    produced = int(said[0].split()[1]) if said and said[0].startswith("produced") else -1
    end = json.loads((run_dir / "sources" / "node-0.end.json").read_text())
    checks = check_run(topology.resolve(config.load(path)), run_dir)
    latency = json.loads((run_dir / "telemetry" / "sink.latency.json").read_text())
    return {
        "exit": code,
        "produced": produced,
        "emitted": end["count"],
        "identical": bool(checks) and all(c.ok for c in checks),
        "delivered": sum(c.delivered for c in checks),
        "p50_ms": latency.get("p50_ms") or 0.0,
        "p99_ms": latency.get("p99_ms") or 0.0,
    }


@contextlib.contextmanager
def maybe_database(sink: str, dsn: str | None, directory: Path) -> Iterator[str | None]:
    if sink != "postgres":
        yield None
        return
    with database(dsn, directory) as running:
        yield running


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sink", choices=["postgres", "kafka"], default="postgres")
    parser.add_argument("--dsn", help="a PostgreSQL to write into (default: start one)")
    parser.add_argument("--rates", default="10000,25000,50000")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--latency-seconds", type=float, default=8.0)
    args = parser.parse_args()
    print(
        f"machine: {os.cpu_count()} cores; Kafka (Tansu) -> the paper chain (SAS B = 100, 8 processes) "
        f"-> {args.sink}, all on loopback"
    )
    with (
        tempfile.TemporaryDirectory() as tmp,
        kafka_broker(Path(tmp)) as broker,
        maybe_database(args.sink, args.dsn, Path(tmp)) as dsn,
    ):
        directory = Path(tmp)
        lat = trial(1000, args.latency_seconds, broker, args.sink, dsn, directory)
        print(
            f"latency at 1,000 rows/s, production to commit: p50 {lat['p50_ms']:.1f} ms, "
            f"p99 {lat['p99_ms']:.1f} ms (produced {lat['produced']:,}, source rows {lat['emitted']:,}, "
            f"identical to reference: {lat['identical']})",
            flush=True,
        )
        best = 0
        for rate in (int(r) for r in args.rates.split(",")):
            r = trial(rate, args.seconds, broker, args.sink, dsn, directory)
            ok = (
                r["exit"] == 0
                and r["produced"] == r["emitted"]
                and r["identical"]
                and float(str(r["p99_ms"])) < CARRIED_P99_MS
            )
            print(
                f"rate {rate:>7,}/s: produced {r['produced']:,}, source rows {r['emitted']:,}, "
                f"written {r['delivered']:,}, identical {r['identical']}, "
                f"p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms -> {'carried' if ok else 'NOT carried'}",
                flush=True,
            )
            if ok:
                best = max(best, rate)
        print(f"highest rate carried with zero loss into {args.sink}: {best:,} rows/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
