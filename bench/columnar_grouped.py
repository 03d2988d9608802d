"""GROUP BY over windows, row engine against columnar engine, in process:
N tuples (one per ms, 100 keys, val in [-50, 1000)) through each query
below, in batches; both must give the same rows in the same order.

    python bench/columnar_grouped.py [--tuples 200000] [--batch 10000] [--repeat 2] [--text | --strings]

Prints tuples/s of both and the ratio per query. The columnar engine is
fed column batches and returns them (its outputs are not turned into
tuples inside the clock); the row engine is fed and returns tuples, its
native form. ``--text`` makes the keys text (``char(8)``): strings on
rows, UTF-8 bytes on columns, as a stage's record blocks hold them;
``--strings`` makes them text held as Python strings on columns too, as
``semiactive query run`` holds them.
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from semiactive.node.cql import compile_program
from semiactive.node.engine.columnar.batch import ColumnBatch
from semiactive.node.engine.columnar.vector_engine import VectorEngine
from semiactive.node.engine.engine import Engine

QUERIES = {
    "sum/count by key, [Range 100 Slide 10]": (
        "ISTREAM(SELECT sym, SUM(val) AS total, COUNT(*) AS n FROM S [Range 100 Slide 10] GROUP BY sym)"
    ),
    "sum/max by key, [Range 1000]": (
        "ISTREAM(SELECT sym, SUM(val) AS total, MAX(val) AS top FROM S [Range 1000] GROUP BY sym)"
    ),
    "sum/count, [Partition By key Rows 10]": (
        "ISTREAM(SELECT sym, SUM(val) AS total, COUNT(*) AS n FROM S [Partition By sym Rows 10] GROUP BY sym)"
    ),
    "avg by key, [Rows 500 Slide 50]": (
        "ISTREAM(SELECT sym, AVG(val) AS mean FROM S [Rows 500 Slide 50] GROUP BY sym)"
    ),
}


def make_input(n: int, text: bool, seed: int = 1) -> list[tuple[Any, ...]]:
    rnd = random.Random(seed)
    rows = [(i, i + 1, 1, rnd.randrange(100), rnd.randrange(-50, 1000)) for i in range(n)]
    return [(*r[:3], f"sym-{r[3]:02d}", r[4]) for r in rows] if text else list(rows)


def _program(text: bool) -> str:
    return f"REGISTER STREAM S (sym {'char(8)' if text else 'integer'}, val integer);\nREGISTER QUERY g AS "


def run_rows(query: str, rows: Sequence[tuple[Any, ...]], batch: int, text: bool) -> tuple[float, list[Any]]:
    return timed_rows(Engine(compile_program(_program(text) + query + ";"), ["g"]), rows, batch)


def timed_rows(engine: Engine, rows: Sequence[tuple[Any, ...]], batch: int) -> tuple[float, list[Any]]:
    """Seconds to push ``rows`` (elements of stream S) in batches and
    advance past each; the outputs of query ``g`` as ``(ts, values...)``."""
    out: list[Any] = []
    started = time.perf_counter()
    for i in range(0, len(rows), batch):
        chunk = rows[i : i + batch]
        engine.push("S", chunk)
        out += engine.advance(chunk[-1][0])["g"]
    return time.perf_counter() - started, [(e[0], *e[3:]) for e in out]


def run_columnar(
    query: str, rows: Sequence[tuple[Any, ...]], batch: int, text: bool, strings: bool = False
) -> tuple[float, list[Any]]:
    engine = VectorEngine(compile_program(_program(text) + query + ";"), ["g"])
    ts = np.array([r[0] for r in rows], dtype=np.int64)
    if strings:
        sym = np.empty(len(rows), dtype=object)
        sym[:] = [r[3] for r in rows]
    elif text:
        sym = np.array([r[3].encode() for r in rows], dtype="S8")
    else:
        sym = np.array([r[3] for r in rows])
    val = np.array([r[4] for r in rows], dtype=np.int64)
    return timed_columns(engine, ts, (sym, val), batch)


def timed_columns(
    engine: VectorEngine, ts: np.ndarray, columns: tuple[np.ndarray, ...], batch: int
) -> tuple[float, list[Any]]:
    """As :func:`timed_rows`, fed column batches (outputs turned into
    tuples outside the clock)."""
    lin = ts + 1
    batches = [
        ColumnBatch(ts[i : i + batch], lin[i : i + batch], tuple(c[i : i + batch] for c in columns))
        for i in range(0, len(ts), batch)
    ]
    out: list[ColumnBatch] = []
    started = time.perf_counter()
    for b in batches:
        engine.push("S", b)
        out.append(engine.advance(int(b.ts[-1]))["g"])
    elapsed = time.perf_counter() - started
    return elapsed, [(e[0], *e[3:]) for b in out for e in b.to_elements()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=2)
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--text", action="store_true", help="text keys (char(8)), bytes on columns")
    form.add_argument("--strings", action="store_true", help="text keys, Python strings on columns")
    args = parser.parse_args()
    args.text = args.text or args.strings
    rows = make_input(args.tuples, args.text)
    print(f"machine: {platform.machine()}; python {platform.python_version()}; numpy {np.__version__}")
    kind = ("text (strings)" if args.strings else "text (bytes)") if args.text else "integer"
    print(f"{args.tuples:,} tuples, 100 {kind} keys, batches of {args.batch:,}")
    ok = True
    for name, query in QUERIES.items():
        ok &= compare(
            name,
            partial(run_rows, query, rows, args.batch, args.text),
            partial(run_columnar, query, rows, args.batch, args.text, args.strings),
            args.tuples,
            args.repeat,
        )
    return 0 if ok else 1


Timed = Callable[[], tuple[float, list[Any]]]


def compare(name: str, rows: Timed, columnar: Timed, tuples: int, repeat: int) -> bool:
    """Best of ``repeat`` runs of each; prints both rates and the ratio,
    returns whether both gave the same rows (compared by repr: types,
    signed zeros and NaN count)."""
    row_s, row_out = min((rows() for _ in range(repeat)), key=lambda r: r[0])
    col_s, col_out = min((columnar() for _ in range(repeat)), key=lambda r: r[0])
    same = repr(row_out) == repr(col_out)
    print(
        f"{name:42} rows {tuples / row_s:>11,.0f}/s  columnar {tuples / col_s:>12,.0f}/s  "
        f"{row_s / col_s:5.1f}x  {len(row_out):,} results, same: {same}"
    )
    return same


if __name__ == "__main__":
    sys.exit(main())
