"""One hop of the paper chain, in process, three ways: what a stage does
with a received batch of the wire's fixed-size records (decode, ``WHERE
val >= 0``, encode what it sends), as rows today and as columns (issue 38:
choose the column representation by measurement).

    python bench/columnar_wire.py [--rows 1000000] [--batch 10000] [--repeat 3]

- rows: today's :class:`RowCodec` (``struct.iter_unpack`` into tuples, a
  comprehension filter, ``Struct.pack`` per row);
- numpy: the bytes read in place as a structured array (no copy), a
  boolean mask, the kept records written with one ``tobytes``;
- columnar engine: the project's :class:`ColumnCodec` and the columnar
  engine's selection (what a stage would run);
- arrow: the numpy columns wrapped as Arrow arrays, filtered with
  ``pyarrow.compute``, written back through numpy (Arrow has no reader of
  fixed-size row records).

All three must send the same bytes (checked). Prints rows/s and the ratio
to rows.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from semiactive.node.cql import plan
from semiactive.node.sections.codec import RowCodec

SCHEMA = plan.Schema(
    (plan.Column("id", plan.INTEGER), plan.Column("val", plan.INTEGER), plan.Column("pad", plan.char(20)))
)
RECORD = np.dtype([("ts", "<i8"), ("id", "<i8"), ("val", "<i8"), ("pad", "S20")])


def batches(rows: int, batch: int, seed: int = 1) -> list[bytes]:
    """Wire batches of the paper chain's 44-byte tuples (+ id), val in
    [-50, 1000): the filter drops about 5%."""
    rnd = random.Random(seed)
    codec = RowCodec(SCHEMA, plan.Kind.STREAM)
    out = []
    for first in range(0, rows, batch):
        n = min(batch, rows - first)
        elements = [
            (first + i, first + i + 1, 1, first + i, rnd.randrange(-50, 1000), "x" * 20) for i in range(n)
        ]
        out.append(codec.encode(elements))
    return out


def hop_rows(blobs: list[bytes]) -> list[bytes]:
    codec = RowCodec(SCHEMA, plan.Kind.STREAM)
    sent = []
    seq = 1
    for blob in blobs:
        count = len(blob) // RECORD.itemsize
        rows = codec.decode(blob, seq, count)
        seq += count
        sent.append(codec.encode([r for r in rows if r[4] >= 0]))
    return sent


def hop_numpy(blobs: list[bytes]) -> list[bytes]:
    sent = []
    for blob in blobs:
        records = np.frombuffer(blob, dtype=RECORD)
        sent.append(records[records["val"] >= 0].tobytes())
    return sent


def hop_columnar(blobs: list[bytes]) -> list[bytes]:
    """The project's code: ColumnCodec in and out, the columnar engine's
    selection between."""
    from semiactive.node.cql import compile_program
    from semiactive.node.engine.columnar.vector_engine import VectorEngine
    from semiactive.node.sections.column_codec import ColumnCodec

    program = compile_program(
        "REGISTER STREAM S (id integer, val integer, pad char(20));\n"
        "REGISTER QUERY kept AS SELECT * FROM S WHERE val >= 0;\n"
    )
    engine = VectorEngine(program, ["kept"])
    codec = ColumnCodec(SCHEMA)
    sent = []
    seq = 1
    for blob in blobs:
        count = len(blob) // codec.row_size
        batch = codec.decode(blob, seq, count)
        assert batch is not None
        seq += count
        engine.push("S", batch)
        sent.append(codec.encode(engine.advance(int(batch.ts[-1]))["kept"]))
    return sent


def hop_arrow(blobs: list[bytes]) -> list[bytes]:
    import pyarrow as pa
    import pyarrow.compute as pc

    sent = []
    for blob in blobs:
        records = np.frombuffer(blob, dtype=RECORD)
        table = pa.table(
            {name: records[name] for name in ("ts", "id", "val")} | {"pad": records["pad"].astype(object)}
        )
        kept = table.filter(pc.greater_equal(table["val"], 0))
        out = np.empty(kept.num_rows, dtype=RECORD)
        for name in RECORD.names or ():
            column = kept[name].to_numpy()
            out[name] = column if name != "pad" else column.astype("S20")
        sent.append(out.tobytes())
    return sent


def best(
    hop: Callable[[list[bytes]], list[bytes]], blobs: list[bytes], repeat: int
) -> tuple[float, list[bytes]]:
    seconds, sent = float("inf"), []
    for _ in range(repeat):
        started = time.perf_counter()
        sent = hop(blobs)
        seconds = min(seconds, time.perf_counter() - started)
    return seconds, sent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    blobs = batches(args.rows, args.batch)
    print(
        f"machine: {os.cpu_count()} cores; {args.rows:,} rows of {RECORD.itemsize} bytes, "
        f"batches of {args.batch:,}"
    )
    base_s, expected = best(hop_rows, blobs, args.repeat)
    print(f"rows  (today):   {args.rows / base_s:>14,.0f} rows/s")
    for name, hop in (("numpy", hop_numpy), ("columnar engine", hop_columnar), ("arrow", hop_arrow)):
        seconds, sent = best(hop, blobs, args.repeat)
        same = sent == expected
        print(
            f"{name:<16} {args.rows / seconds:>14,.0f} rows/s  {base_s / seconds:6.1f}x rows  "
            f"same bytes: {same}"
        )
        if not same:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
