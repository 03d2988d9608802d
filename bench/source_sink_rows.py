"""The per-row costs at the ends of a chain, in process: a synthetic
source's tuples, a CSV file read by a file source (and one of numbers
only, which numpy parses), and the JSON Lines text a source log or a file
sink writes.

    python bench/source_sink_rows.py [--rows 300000]

The paper chain's schema (id, val, pad char(20)); each figure is the best
of five. The peers run in the same process: the row-by-row CSV reader
(``csv.DictReader`` records checked one at a time, what a bad block falls
back to) beside the block reader, ``json.dumps`` of a dict per row beside
the generated formatter.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from semiactive.node.connectors import sources
from semiactive.node.connectors.csv_numeric import NumericBlock
from semiactive.node.connectors.jsonl import formatter
from semiactive.node.connectors.sources import (
    Phase,
    RateSchedule,
    SyntheticSource,
    csv_reader,
    read_blocks,
    read_rows,
)
from semiactive.node.cql import plan

SCHEMA = plan.Schema(
    (plan.Column("id", plan.INTEGER), plan.Column("val", plan.INTEGER), plan.Column("pad", plan.char(20)))
)


def best_rate(rows: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return rows / best


def csv_of_numbers(rows: list[tuple[Any, ...]]) -> tuple[float, float, float]:
    """A file of integers only (id, val): numpy parses it a block at a
    time; as rows (``read_rows``) and as the column blocks ``query run``
    hands the columnar engine (``read_blocks``), against row by row."""
    schema = plan.Schema(SCHEMA.columns[:2])
    n = len(rows)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "numbers.csv"
        path.write_text("ts,id,val\n" + "".join(f"{r[0]},{r[3]},{r[4]}\n" for r in rows))

        def by_rows() -> list[tuple[Any, ...]]:
            with path.open(newline="") as handle:
                reader = csv_reader(handle)
                records = ((reader.line_num, row) for row in reader)
                return list(sources._checked(path, records, schema, False, 3))

        def as_rows() -> list[tuple[Any, ...]]:
            return list(read_rows(path, schema, plan.Kind.STREAM))

        def as_columns() -> int:
            return sum(len(b) for b in read_blocks(path, schema, plan.Kind.STREAM))

        assert as_rows() == by_rows() == [(r[0], r[1], 1, *r[3:5]) for r in rows]
        assert all(isinstance(b, NumericBlock) for b in read_blocks(path, schema, plan.Kind.STREAM))
        return best_rate(n, by_rows), best_rate(n, as_rows), best_rate(n, as_columns)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    args = parser.parse_args()
    n = args.rows

    def generate() -> list[tuple[Any, ...]]:
        return SyntheticSource(SCHEMA, RateSchedule([Phase(0, 100_000)]), 7).take(n)

    rows = generate()
    fmt = formatter(SCHEMA, plan.Kind.STREAM)
    names = ["id", "val", "pad"]

    def dumps_per_row() -> str:
        objects = [{"seq": r[1], "ts": r[0], **dict(zip(names, r[3:], strict=True))} for r in rows]
        return "".join([json.dumps(o) + "\n" for o in objects])

    assert "".join([fmt(r[1], r) for r in rows]) == dumps_per_row().replace(": ", ":").replace(", ", ",")

    print(f"{n:,} tuples (id, val, pad char(20))")
    print(f"synthetic source:         {best_rate(n, generate):12,.0f} tuples/s")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.csv"
        path.write_text("ts,id,val,pad\n" + "".join(f"{r[0]},{r[3]},{r[4]},{r[5]}\n" for r in rows))

        def by_blocks() -> list[tuple[Any, ...]]:
            return list(read_rows(path, SCHEMA, plan.Kind.STREAM))

        def by_rows() -> list[tuple[Any, ...]]:
            with path.open(newline="") as handle:
                reader = csv_reader(handle)
                records = ((reader.line_num, row) for row in reader)
                return list(sources._checked(path, records, SCHEMA, False, 4))

        assert by_blocks() == by_rows() == [(r[0], r[1], 1, *r[3:]) for r in rows]
        row_rate, block_rate = best_rate(n, by_rows), best_rate(n, by_blocks)
    print(f"CSV file, row by row:     {row_rate:12,.0f} rows/s")
    print(f"CSV file, read_rows:      {block_rate:12,.0f} rows/s  ({block_rate / row_rate:.2f}x)")
    numbers_rates = csv_of_numbers(rows)
    print(f"CSV of numbers (id, val), row by row:  {numbers_rates[0]:12,.0f} rows/s")
    for label, rate in zip(("read_rows (numpy)", "read_blocks (columns)"), numbers_rates[1:], strict=True):
        print(f"CSV of numbers, {label + ':':22} {rate:12,.0f} rows/s  ({rate / numbers_rates[0]:.2f}x)")
    generated = best_rate(n, lambda: "".join([fmt(r[1], r) for r in rows]))
    dumps = best_rate(n, dumps_per_row)
    print(f"JSON Lines, json.dumps:   {dumps:12,.0f} rows/s")
    print(f"JSON Lines, formatter:    {generated:12,.0f} rows/s  ({generated / dumps:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
