"""Engine throughput, in process: N tuples through ``WHERE val >= 0`` and
then SUM over ``[Rows 100 Slide 10]`` (ISTREAM of the sum), on semiactive's
row engine, its columnar engine (column batches of numpy arrays), DuckDB
(the same job in SQL over the same arrays) and Bytewax, in one process.

    python bench/engine_throughput.py [--tuples 1000000] [--repeat 3] [--batch 10000]

Prints tuples/s of each and the ratios; all must produce the same sums
(checked). DuckDB and Bytewax are bench-only extras (``pip install -e
.[bench]``); a peer not installed is skipped.
"""

from __future__ import annotations

import argparse
import platform
import random
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROGRAM = """
REGISTER STREAM S (id integer, val integer);
REGISTER QUERY f AS SELECT * FROM S WHERE val >= 0;
REGISTER QUERY agg AS ISTREAM(SELECT SUM(val) AS total FROM f [Rows 100 Slide 10]);
"""


def make_input(n: int, seed: int = 1) -> list[tuple[int, int, int]]:
    """(ts, id, val): one tuple per ms, val in [-50, 1000) so the filter
    drops about 5%."""
    rnd = random.Random(seed)
    return [(i, i, rnd.randrange(-50, 1000)) for i in range(n)]


def run_semiactive(rows: list[tuple[int, int, int]], batch: int = 10_000) -> tuple[float, list[int]]:
    from semiactive.node.cql import compile_program
    from semiactive.node.engine.engine import Engine

    engine = Engine(compile_program(PROGRAM), ["agg"])
    elements = [(ts, i + 1, 1, ident, val) for i, (ts, ident, val) in enumerate(rows)]
    out: list[int] = []
    started = time.perf_counter()
    for i in range(0, len(elements), batch):
        chunk = elements[i : i + batch]
        engine.push("S", chunk)
        out.extend(e[3] for e in engine.advance(chunk[-1][0])["agg"])
    return time.perf_counter() - started, out


def run_columnar(rows: list[tuple[int, int, int]], batch: int = 10_000) -> tuple[float, list[int]]:
    """The columnar engine, fed column batches (what a source that reads
    columns hands it): the arrays are made before the clock starts, as the
    row engine's tuples are."""
    import numpy as np

    from semiactive.node.cql import compile_program
    from semiactive.node.engine.columnar.batch import ColumnBatch
    from semiactive.node.engine.columnar.vector_engine import VectorEngine

    engine = VectorEngine(compile_program(PROGRAM), ["agg"])
    ts = np.array([r[0] for r in rows], dtype=np.int64)
    ident = np.array([r[1] for r in rows], dtype=np.int64)
    val = np.array([r[2] for r in rows], dtype=np.int64)
    lin = np.arange(1, len(rows) + 1, dtype=np.int64)
    batches = [
        ColumnBatch(ts[i : i + batch], lin[i : i + batch], (ident[i : i + batch], val[i : i + batch]))
        for i in range(0, len(rows), batch)
    ]
    out: list[np.ndarray] = []
    started = time.perf_counter()
    for b in batches:
        engine.push("S", b)
        out.append(engine.advance(int(b.ts[-1]))["agg"].columns[0])
    elapsed = time.perf_counter() - started
    return elapsed, np.concatenate(out).tolist()


DUCKDB_JOB = """
WITH kept AS (SELECT row_number() OVER (ORDER BY ts) AS n, ts, val FROM readings WHERE val >= 0),
     slid AS (SELECT n, ts, SUM(val) OVER (ORDER BY n ROWS BETWEEN 99 PRECEDING AND CURRENT ROW) AS total
              FROM kept QUALIFY n % 10 = 0),
     changed AS (SELECT n, total, LAG(total) OVER (ORDER BY n) AS before FROM slid)
SELECT total FROM changed WHERE before IS NULL OR total <> before ORDER BY n
"""


def run_duckdb(rows: list[tuple[int, int, int]]) -> tuple[float, list[int]]:
    """The same job as one SQL query over the whole input (a numbered
    selection, a 100-row window sum at every 10th row, the sums that
    changed). One tuple per ms, so no instant holds two slide boundaries."""
    import duckdb
    import numpy as np

    con = duckdb.connect()
    readings = {
        "ts": np.array([r[0] for r in rows], dtype=np.int64),
        "val": np.array([r[2] for r in rows], dtype=np.int64),
    }
    import pyarrow as pa

    table = pa.table(readings)
    con.register("readings", table)
    started = time.perf_counter()
    totals = con.execute(DUCKDB_JOB).fetchnumpy()["total"]
    elapsed = time.perf_counter() - started
    return elapsed, [int(v) for v in totals]


def run_bytewax(rows: list[tuple[int, int, int]]) -> tuple[float, list[int]]:
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSink, TestingSource, run_main

    # Rows 100 Slide 10, then ISTREAM (emit the sum when it changed), written
    # the way a Bytewax user would: a per-key state with the last 100 values.
    def window_exact(state: tuple[deque[int], int, int | None] | None, val: int) -> tuple[object, int | None]:
        buf, count, last = state if state is not None else (deque(maxlen=100), 0, None)
        buf.append(val)
        count += 1
        emit = None
        if count % 10 == 0:
            visible = sum(buf)
            if visible != last:
                emit = last = visible
        return (buf, count, last), emit

    out: list[int | None] = []
    flow = Dataflow("bench")
    stream = op.input("in", flow, TestingSource([val for _, _, val in rows], batch_size=10_000))
    kept = op.filter("where", stream, lambda v: v >= 0)
    keyed = op.key_on("key", kept, lambda _: "all")
    sums = op.stateful_map("window", keyed, window_exact)  # type: ignore[misc]
    values = op.filter_map("istream", sums, lambda kv: kv[1])
    op.output("out", values, TestingSink(out))
    started = time.perf_counter()
    run_main(flow)  # type: ignore[no-untyped-call]
    return time.perf_counter() - started, [v for v in out if v is not None]


def _version(package: str) -> str:
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:
        return "not installed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=10_000, help="tuples per push (both engines)")
    args = parser.parse_args()
    rows = make_input(args.tuples)
    cpu = subprocess.run(
        ["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True
    ).stdout.strip()
    versions = "; ".join(f"{p} {_version(p)}" for p in ("numpy", "duckdb", "bytewax"))
    print(f"machine: {platform.machine()} {cpu or ''}; python {platform.python_version()}; {versions}")
    print(f"pipeline: {args.tuples:,} tuples, WHERE val >= 0, SUM over [Rows 100 Slide 10], ISTREAM")
    runs: dict[str, Callable[[], tuple[float, list[int]]]] = {
        "semiactive rows": lambda: run_semiactive(rows, args.batch),
        "semiactive columnar": lambda: run_columnar(rows, args.batch),
        "duckdb": lambda: run_duckdb(rows),
        "bytewax": lambda: run_bytewax(rows),
    }
    best: dict[str, float] = {}
    reference: list[int] | None = None
    same = True
    for name, run in runs.items():
        try:
            elapsed, out = min((run() for _ in range(args.repeat)), key=lambda r: r[0])
        except ImportError as exc:
            print(f"{name + ':':21} not installed ({exc.name}; pip install -e .[bench])")
            continue
        best[name] = elapsed
        reference = out if reference is None else reference
        agrees = out == reference
        same = same and agrees
        print(
            f"{name + ':':21} {args.tuples / elapsed:14,.0f} tuples/s  ({elapsed:.3f} s, {len(out):,} results"
            f"{'' if agrees else ', DIFFERENT from the row engine'})"
        )
    print(f"same results: {same}")
    for a, b in (
        ("semiactive columnar", "semiactive rows"),
        ("semiactive columnar", "duckdb"),
        ("semiactive rows", "bytewax"),
    ):
        if a in best and b in best:
            print(f"ratio {a} / {b}: {best[b] / best[a]:.2f}x")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
