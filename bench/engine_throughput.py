"""Engine throughput, in process: N tuples through ``WHERE val >= 0`` and
then SUM over ``[Rows 100 Slide 10]`` (ISTREAM of the sum), on semiactive's
engine and on Bytewax running the same pipeline in the same process tree.

    python bench/engine_throughput.py [--tuples 1000000] [--repeat 3]

Prints tuples/s for both and the ratio; both must produce the same sums
(checked). Bytewax is a bench-only extra (``pip install -e .[bench]``).
"""

from __future__ import annotations

import argparse
import platform
import random
import subprocess
import sys
import time
from collections import deque
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


def _bytewax_version() -> str:
    try:
        from importlib.metadata import version

        return version("bytewax")
    except Exception:
        return "not installed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = make_input(args.tuples)
    cpu = subprocess.run(
        ["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True
    ).stdout.strip()
    versions = f"python {platform.python_version()}; bytewax {_bytewax_version()}"
    print(f"machine: {platform.machine()} {cpu or ''}; {versions}")
    print(f"pipeline: {args.tuples:,} tuples, WHERE val >= 0, SUM over [Rows 100 Slide 10], ISTREAM")
    best_sa, sa_out = min((run_semiactive(rows) for _ in range(args.repeat)), key=lambda r: r[0])
    print(f"semiactive: {args.tuples / best_sa:12,.0f} tuples/s  ({best_sa:.3f} s, {len(sa_out):,} results)")
    try:
        best_bw, bw_out = min((run_bytewax(rows) for _ in range(args.repeat)), key=lambda r: r[0])
    except ImportError:
        print("bytewax: not installed (pip install -e .[bench]); no ratio")
        return 0
    print(f"bytewax:    {args.tuples / best_bw:12,.0f} tuples/s  ({best_bw:.3f} s, {len(bw_out):,} results)")
    same = sa_out == bw_out
    print(f"same results: {same}")
    print(f"ratio semiactive / bytewax: {best_bw / best_sa:.2f}x")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
