"""From a Kafka topic through the paper chain, protected (SAS, B = 100: 8
processes), into PostgreSQL or another Kafka topic: the highest production
rate carried with zero loss, exactly once, and production-to-commit
latency at 1,000 rows/s.

    python bench/kafka_end_to_end.py [--sink postgres|kafka] [--rates 10000,25000,50000] [--seconds 6]
    python bench/kafka_end_to_end.py --kills 3 [--sink postgres|kafka] [--standby]

It starts a Kafka-protocol broker (Tansu, `make kafka`) and, for
``--sink postgres`` without ``--dsn``, a PostgreSQL of its own, on free
loopback ports. For each rate a producer process (examples/produce_readings.py)
fills a two-partition topic from the run's t0 on. A rate is carried when
every message produced became a row of the source, the run drained, the
sink's rows are identical, row by row and each seq once, to the reference
recomputed from the source's log, and the latency p99 stayed under 2 s (a
source that falls behind builds latency without bound).

``--kills N``: instead, N runs at 1,000 rows/s where the source, then N
where the sink, is SIGKILLed at 4 s: the output gap at the sink (from the
kill to the next row written) and whether the output stayed exact.
``--standby``: the source and the sink each have a standby process
(``ha: {secondary: ...}``) that takes over instead of a restart; the
detection and recovery times are printed too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
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
from semiactive.launcher.faults import Fault, FaultKind  # noqa: E402
from semiactive.oracle.verify import check_run  # noqa: E402
from tests.kafka_broker import KafkaBroker, kafka_broker  # noqa: E402

EXAMPLE = ROOT / "examples" / "paper-chain.yaml"
PRODUCER = ROOT / "examples" / "produce_readings.py"
CARRIED_P99_MS = 2000.0
GAP_WINDOW_S = 3.0  # after a kill at 4 s; the producer stops at 7.5 s


def chain(
    name: str, broker: KafkaBroker, sink: str, dsn: str | None, directory: Path, standby: bool = False
) -> Path:
    cfg = yaml.safe_load(EXAMPLE.read_text())
    source = cfg["sources"][0]
    for key in ("rate", "seed", "tuple_bytes"):
        source.pop(key, None)
    source.update(
        kind="kafka", kafka={"bootstrap": broker.bootstrap, "topic": f"in_{name}", "group": f"g_{name}"}
    )
    for i, stage in enumerate(cfg["stages"], start=1):
        stage["ha"] = {"mode": "sas", "batch_size": 100, "secondary": f"sec-{i}"}
    if sink == "postgres":
        cfg["sinks"][0].update(kind="postgres", postgres={"dsn": dsn, "table": f"bench_kafka_{name}"})
    else:
        cfg["sinks"][0].update(kind="kafka", kafka={"bootstrap": broker.bootstrap, "topic": f"out_{name}"})
    if standby:
        source["ha"] = {"secondary": "node-0b"}
        cfg["sinks"][0]["ha"] = {"secondary": "sink-b"}
    path = directory / f"chain-{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def produce_from_t0(
    run_dir: Path, broker: KafkaBroker, name: str, rate: int, seconds: float, out: list[str]
) -> None:
    """Start the producer once the run has its t0, for ``seconds``."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            if json.loads((run_dir / "cluster.json").read_text()).get("t0_unix"):
                break
        time.sleep(0.02)
    command = [sys.executable, str(PRODUCER), "--bootstrap", broker.bootstrap, "--topic", f"in_{name}"]
    command += ["--rate", str(rate), "--seconds", str(seconds)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    out.append(done.stdout.strip() or done.stderr.strip())


def trial(
    rate: int,
    seconds: float,
    broker: KafkaBroker,
    sink: str,
    dsn: str | None,
    directory: Path,
    kill: str | None = None,
    name: str | None = None,
    standby: bool = False,
) -> dict[str, object]:
    """``kill``: a process to SIGKILL at 4 s; ``name``: the run's, if not the rate."""
    name = name or str(rate)
    broker.create_topic(f"in_{name}", 2)
    path = chain(name, broker, sink, dsn, directory, standby)
    run_dir = directory / f"run-{name}"
    said: list[str] = []
    args = (run_dir, broker, name, rate, seconds - 0.5, said)
    producer = threading.Thread(target=produce_from_t0, args=args)
    producer.start()
    faults = [Fault(kill, 4.0, FaultKind.KILL)] if kill else None
    code = asyncio.run(
        run_cluster(str(path), duration=seconds, run_dir=run_dir, progress=False, faults=faults)
    )
    producer.join()
    produced = int(said[0].split()[1]) if said and said[0].startswith("produced") else -1
    end = json.loads((run_dir / "sources" / "node-0.end.json").read_text())
    checks = check_run(topology.resolve(config.load(path)), run_dir)
    latency = json.loads((run_dir / "telemetry" / "sink.latency.json").read_text())
    report = json.loads((run_dir / "telemetry" / "report.json").read_text())
    fault = report["faults"][0] if report["faults"] else {}
    return {
        "gap_ms": output_gap_ms(run_dir, fault),
        "detection_ms": fault.get("detection_ms"),
        "recovery_ms": fault.get("recovery_ms"),
        "exit": code,
        "produced": produced,
        "emitted": end["count"],
        "identical": bool(checks) and all(c.ok for c in checks),
        "delivered": sum(c.delivered for c in checks),
        "p50_ms": latency.get("p50_ms") or 0.0,
        "p99_ms": latency.get("p99_ms") or 0.0,
    }


def output_gap_ms(run_dir: Path, fault: dict[str, object]) -> float | None:
    """The longest time the sink wrote nothing in the 3 s after the kill,
    from its last row before it (rows the stages still held arrive first:
    the silence comes after them). The report's own gap also counts the
    silence at the end of a run, once the producer has stopped."""
    if not fault:
        return None
    t0 = float(json.loads((run_dir / "cluster.json").read_text())["t0_unix"])
    killed = t0 + float(str(fault["at"]))
    arrivals = [float(line.split()[0]) for line in (run_dir / "telemetry" / "sink.arrivals").open()]
    before = [t for t in arrivals if t < killed]
    points = before[-1:] + [t for t in arrivals if killed <= t <= killed + GAP_WINDOW_S]
    if len(points) < 2:
        return None
    return max(b - a for a, b in itertools.pairwise(points)) * 1000


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
    parser.add_argument("--kills", type=int, default=0, help="measure N kills of the source, then the sink")
    parser.add_argument("--standby", action="store_true", help="the source and the sink have a standby")
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
        if args.kills:
            for target in ("node-0", "sink"):
                who = "source" if target == "node-0" else "sink"
                for i in range(args.kills):
                    r = trial(
                        1000, 8.0, broker, args.sink, dsn, directory, target, f"{who}_{i}", args.standby
                    )
                    gap = "none" if r["gap_ms"] is None else f"{r['gap_ms']:,.0f} ms"
                    taken = ""
                    if r["detection_ms"] is not None:
                        taken = f"detected {r['detection_ms']:.0f} ms, recovered {r['recovery_ms']} ms, "
                    print(
                        f"{who} killed at 4 s: {taken}output gap at the sink {gap}, exit {r['exit']}, "
                        f"source rows "
                        f"{r['emitted']:,} of {r['produced']:,} produced, identical {r['identical']}",
                        flush=True,
                    )
            return 0
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
