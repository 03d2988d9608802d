"""Joins of two windows, row engine against columnar engine, in process:
two streams of N tuples each (one per ms each, ``keys`` keys, val in
[0, 1000)) through each query below, in batches of both streams; both
engines must give the same rows in the same order.

    python bench/columnar_join.py [--tuples 200000] [--batch 10000] [--keys 100] [--repeat 2]

Prints tuples/s (of both streams together) of both engines and the ratio
per query. As in bench/columnar_grouped.py, the columnar engine is fed and
returns column batches, the row engine tuples.
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from columnar_grouped import compare

from semiactive.node.cql import compile_program
from semiactive.node.engine.columnar.batch import ColumnBatch
from semiactive.node.engine.columnar.vector_engine import VectorEngine
from semiactive.node.engine.engine import Engine

PROGRAM = "REGISTER STREAM A (k integer, v integer);\nREGISTER STREAM B (k integer, w integer);\n"
QUERIES = {
    "A [Range 100] x B [Now] on k": "ISTREAM(SELECT A.k, v, w FROM A [Range 100], B [Now] WHERE A.k = B.k)",
    "A [Range 20] x B [Range 20] on k, v < w": (
        "ISTREAM(SELECT A.k, v, w FROM A [Range 20], B [Range 20] WHERE A.k = B.k AND v < w)"
    ),
    "DSTREAM A [Range 50] x B [Range 10] on k": (
        "DSTREAM(SELECT v + w AS s FROM A [Range 50], B [Range 10] WHERE A.k = B.k)"
    ),
    "A [Now] x B [Range 1000] on k, v = w % 10": (
        "ISTREAM(SELECT A.k, w FROM A [Now], B [Range 1000] WHERE A.k = B.k AND v = w % 10)"
    ),
    "A [Now] x B [Partition By k Rows 1] on k": (
        "ISTREAM(SELECT A.k, v, w FROM A [Now], B [Partition By k Rows 1] WHERE A.k = B.k)"
    ),
    "RSTREAM A [Now] x B [Partition By k Rows 1]": (
        "RSTREAM(SELECT A.k, v, w FROM A [Now], B [Partition By k Rows 1] WHERE A.k = B.k)"
    ),
    "A [Range 100] x B [Now] on k, GROUP BY k": (
        "ISTREAM(SELECT A.k, COUNT(*) AS n, SUM(w) AS s FROM A [Range 100], B [Now] "
        "WHERE A.k = B.k GROUP BY A.k)"
    ),
    "A [Range 100 Slide 10] x B [Now] on k": (
        "ISTREAM(SELECT A.k, v, w FROM A [Range 100 Slide 10], B [Now] WHERE A.k = B.k)"
    ),
    "A [Rows 200] x B [Now] on k, w > 500": (
        "ISTREAM(SELECT A.k, v, w FROM A [Rows 200], B [Now] WHERE A.k = B.k AND w > 500)"
    ),
}

Rows = list[tuple[Any, ...]]


def make_input(n: int, keys: int, seed: int) -> Rows:
    rnd = random.Random(seed)
    return [(i, 0, 1, rnd.randrange(keys), rnd.randrange(1000)) for i in range(1, n + 1)]


def run_rows(query: str, a: Rows, b: Rows, batch: int) -> tuple[float, list[Any]]:
    engine = Engine(compile_program(PROGRAM + f"REGISTER QUERY j AS {query};"), ["j"])
    out: list[Any] = []
    started = time.perf_counter()
    for i in range(0, len(a), batch):
        engine.push("A", a[i : i + batch])
        engine.push("B", b[i : i + batch])
        out += engine.advance(a[min(i + batch, len(a)) - 1][0])["j"]
    return time.perf_counter() - started, [(e[0], *e[3:]) for e in out]


def run_columnar(query: str, a: Rows, b: Rows, batch: int) -> tuple[float, list[Any]]:
    engine = VectorEngine(compile_program(PROGRAM + f"REGISTER QUERY j AS {query};"), ["j"])
    batches = []
    for i in range(0, len(a), batch):
        pair = []
        for rows in (a[i : i + batch], b[i : i + batch]):
            ts = np.array([r[0] for r in rows], dtype=np.int64)
            columns = tuple(np.array([r[c] for r in rows], dtype=np.int64) for c in (3, 4))
            pair.append(ColumnBatch(ts, np.zeros(len(ts), dtype=np.int64), columns))
        batches.append((pair[0], pair[1], a[min(i + batch, len(a)) - 1][0]))
    out: list[ColumnBatch] = []
    started = time.perf_counter()
    for first, second, watermark in batches:
        engine.push("A", first)
        engine.push("B", second)
        out.append(engine.advance(watermark)["j"])
    elapsed = time.perf_counter() - started
    return elapsed, [(e[0], *e[3:]) for block in out for e in block.to_elements()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=200_000, help="per stream")
    parser.add_argument("--batch", type=int, default=10_000, help="tuples of each stream per call")
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    a, b = make_input(args.tuples, args.keys, 1), make_input(args.tuples, args.keys, 2)
    print(f"machine: {platform.machine()}; python {platform.python_version()}; numpy {np.__version__}")
    print(f"2 x {args.tuples:,} tuples, {args.keys} integer keys, batches of 2 x {args.batch:,}")
    ok = True
    for name, query in QUERIES.items():
        ok &= compare(
            name,
            partial(run_rows, query, a, b, args.batch),
            partial(run_columnar, query, a, b, args.batch),
            2 * args.tuples,
            args.repeat,
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
