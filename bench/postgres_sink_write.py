"""The PostgreSQL sink's table alone: how many rows per second its
transactions commit (one ``COPY`` and commit per batch, as the sink writes
them), against a server you give.

    python bench/postgres_sink_write.py --dsn postgresql://semiactive@127.0.0.1:55432/results \
        [--rows 200000] [--batch 1024]

Writes into a fresh table ``bench_sink_write`` (dropped first), reads the
table back and checks every seq is there once. The rows are the chain's
(ts, seq, id, val): the upper bound of a sink's rate into this database,
before any network or engine cost.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TABLE = "bench_sink_write"


async def write(dsn: str, rows: int, batch: int) -> float:
    from semiactive.config import PostgresSinkConfig
    from semiactive.node.connectors.postgres import PostgresTable
    from semiactive.node.cql import plan

    schema = plan.Schema((plan.Column("id", plan.INTEGER), plan.Column("val", plan.INTEGER)))
    table = PostgresTable(PostgresSinkConfig(dsn=dsn, table=TABLE), "bench", schema, plan.Kind.STREAM)
    await table.open()
    elements = [(seq, seq, 1, seq % 977, seq * 7 % 1000) for seq in range(1, rows + 1)]
    started = time.perf_counter()
    for first in range(0, rows, batch):
        await table.write(elements[first : first + batch])
    elapsed = time.perf_counter() - started
    await table.close()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="postgresql://user@host:port/database")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1024, help="rows per transaction (the sink's batch)")
    args = parser.parse_args()
    if args.rows < 1 or args.batch < 1:
        parser.error("--rows and --batch must be at least 1")
    import psycopg

    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    elapsed = asyncio.run(write(args.dsn, args.rows, args.batch))
    with psycopg.connect(args.dsn) as conn:
        found = conn.execute(f"SELECT count(*), count(DISTINCT seq), max(seq) FROM {TABLE}").fetchone()
    assert found == (args.rows, args.rows, args.rows), f"table holds {found}, expected each seq once"
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    rate = args.rows / elapsed
    print(f"{args.rows:,} rows in batches of {args.batch}: {elapsed:.2f} s, {rate:,.0f} rows/s committed")
    print(f"table checked: {found[0]:,} rows, every seq once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
