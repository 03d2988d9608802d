"""The NATS sink's subject alone: how many rows per second the stream
stores and acknowledges, published as the sink publishes them (one message
per row, in seq order, a batch's acknowledgements awaited together).

    python bench/nats_sink_write.py [--url nats://127.0.0.1:4222] [--rows 100000] [--batch 1024]

Without ``--url`` it starts a server of its own (Debian's nats-server, on a
free loopback port, JetStream on file storage in a temporary directory)
and stops it at the end. Writes into a fresh stream ``BENCH_SINK_WRITE``,
reads the subject back and checks every seq is there once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STREAM, SUBJECT = "BENCH_SINK_WRITE", "bench.sink.write"


async def write(url: str, rows: int, batch: int) -> float:
    import nats
    import nats.js.errors

    from semiactive.config import NatsSinkConfig
    from semiactive.node.connectors.nats import NatsSubject
    from semiactive.node.cql import plan

    nc = await nats.connect(url)
    with contextlib.suppress(nats.js.errors.NotFoundError):
        await nc.jetstream().delete_stream(STREAM)
    await nc.close()
    schema = plan.Schema((plan.Column("id", plan.INTEGER), plan.Column("val", plan.INTEGER)))
    subject = NatsSubject(
        NatsSinkConfig(url=url, stream=STREAM, subject=SUBJECT), "bench", schema, plan.Kind.STREAM
    )
    await subject.open()
    elements = [(seq, seq, 1, seq % 977, seq * 7 % 1000) for seq in range(1, rows + 1)]
    started = time.perf_counter()
    for first in range(0, rows, batch):
        await subject.write(elements[first : first + batch])
    elapsed = time.perf_counter() - started
    await subject.close()
    return elapsed


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    from tests.nats_server import nats_server

    with tempfile.TemporaryDirectory() as tmp, nats_server(Path(tmp)) as running:
        yield running.url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a NATS server with JetStream (default: start one)")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1024, help="rows per write (the sink's batch)")
    args = parser.parse_args()
    if args.rows < 1 or args.batch < 1:
        parser.error("--rows and --batch must be at least 1")
    from semiactive.config import NatsSinkConfig
    from semiactive.node.connectors.nats import read_subject

    with server(args.url) as url:
        elapsed = asyncio.run(write(url, args.rows, args.batch))
        seqs = [
            r["seq"] for r in read_subject(NatsSinkConfig(url=url, stream=STREAM, subject=SUBJECT), "bench")
        ]
    assert seqs == list(range(1, args.rows + 1)), f"subject holds {len(seqs)} rows, expected each seq once"
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    rate = args.rows / elapsed
    print(f"{args.rows:,} rows in batches of {args.batch}: {elapsed:.2f} s, {rate:,.0f} rows/s stored")
    print(f"subject checked: {len(seqs):,} messages, every seq once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
