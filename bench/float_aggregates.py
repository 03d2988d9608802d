"""Float SUM / AVG / MIN / MAX over windows, row engine against columnar
engine, in process: N tuples (one per ms, 100 keys) through each query below, in
batches; both must give the same rows, bit for bit.

    python bench/float_aggregates.py [--tuples 200000] [--batch 10000] [--repeat 2]
        [--values prices|uniform|spread]

``prices`` are cents (``12.34``), ``uniform`` doubles in [-1000, 1000),
``spread`` doubles from 1e-30 to 1e30 (beyond the limbs: Python
integers). Prints tuples/s of both and the ratio per query. The columnar
engine is fed column batches and returns them; the row engine is fed and
returns tuples, its native form.
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from columnar_grouped import compare, timed_columns, timed_rows

from semiactive.node.cql import compile_program
from semiactive.node.engine.columnar.vector_engine import VectorEngine
from semiactive.node.engine.engine import Engine

SCHEMA = "REGISTER STREAM S (sym integer, price float);\nREGISTER QUERY g AS "
QUERIES = {
    "sum/avg, [Rows 100 Slide 10]": (
        "ISTREAM(SELECT SUM(price) AS total, AVG(price) AS mean FROM S [Rows 100 Slide 10])"
    ),
    "sum, [Range 1000 Slide 100]": "ISTREAM(SELECT SUM(price) AS total FROM S [Range 1000 Slide 100])",
    "sum/avg by key, [Range 100 Slide 10]": (
        "ISTREAM(SELECT sym, SUM(price) AS total, AVG(price) AS mean "
        "FROM S [Range 100 Slide 10] GROUP BY sym)"
    ),
    "sum by key, [Partition By key Rows 10]": (
        "ISTREAM(SELECT sym, SUM(price) AS total FROM S [Partition By sym Rows 10] GROUP BY sym)"
    ),
    "min/max, [Rows 100 Slide 10]": (
        "ISTREAM(SELECT MIN(price) AS lo, MAX(price) AS hi FROM S [Rows 100 Slide 10])"
    ),
    "min/max by key, [Range 1000]": (
        "ISTREAM(SELECT sym, MIN(price) AS lo, MAX(price) AS hi FROM S [Range 1000] GROUP BY sym)"
    ),
}
DRAWS: dict[str, Callable[[random.Random], float]] = {
    "prices": lambda rnd: rnd.randrange(1, 100_000) / 100,
    "uniform": lambda rnd: rnd.uniform(-1000, 1000),
    "spread": lambda rnd: rnd.uniform(-1, 1) * 10.0 ** rnd.randrange(-30, 30),
}


def make_input(n: int, values: str, seed: int = 1) -> list[tuple[Any, ...]]:
    rnd = random.Random(seed)
    draw = DRAWS[values]
    return [(i, i + 1, 1, rnd.randrange(100), draw(rnd)) for i in range(n)]


def run_rows(query: str, rows: list[tuple[Any, ...]], batch: int) -> tuple[float, list[Any]]:
    return timed_rows(Engine(compile_program(SCHEMA + query + ";"), ["g"]), rows, batch)


def run_columnar(query: str, rows: list[tuple[Any, ...]], batch: int) -> tuple[float, list[Any]]:
    engine = VectorEngine(compile_program(SCHEMA + query + ";"), ["g"])
    ts = np.array([r[0] for r in rows], dtype=np.int64)
    sym = np.array([r[3] for r in rows], dtype=np.int64)
    price = np.array([r[4] for r in rows], dtype=np.float64)
    return timed_columns(engine, ts, (sym, price), batch)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--values", choices=sorted(DRAWS), default="prices")
    args = parser.parse_args()
    rows = make_input(args.tuples, args.values)
    print(f"machine: {platform.machine()}; python {platform.python_version()}; numpy {np.__version__}")
    print(f"{args.tuples:,} tuples, 100 keys, {args.values} values, batches of {args.batch:,}")
    ok = True
    for name, query in QUERIES.items():
        ok &= compare(
            name,
            partial(run_rows, query, rows, args.batch),
            partial(run_columnar, query, rows, args.batch),
            args.tuples,
            args.repeat,
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
