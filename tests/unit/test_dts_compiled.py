"""The compiled slice (node/engine/compiled.py) and the operators' fast paths
change nothing: on random streams, recursive programs included, every
execution mode gives the elements (lineage included), state low, counters
and next event of the interpreted loop run one instant at a time without
fusion."""

from __future__ import annotations

import functools
import random
from typing import Any

import pytest

from semiactive.node.cql import compile_program, plan
from semiactive.node.cql.examples import FIG1_DELAYED, fig7
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine
from semiactive.node.engine.operators.fused import WindowAggregateOp
from semiactive.node.engine.operators.partition_aggregate import PartitionAggregateOp
from tests.unit.test_recursion_order import FIG6

LOOP_AGGREGATES = """
REGISTER STREAM s (k integer, v integer, f float)
REGISTER QUERY both AS SELECT k, v, f FROM s UNION ALL SELECT k, v, f FROM back
REGISTER QUERY stats AS
  SELECT k, SUM(v) AS v, AVG(f) AS f, MIN(v) AS lo, MAX(f) AS hi, COUNT(*) AS n
  FROM both [Range 3] GROUP BY k
REGISTER QUERY back AS ISTREAM(SELECT k, v % 5 AS v, f / 2 AS f FROM stats WHERE n < 4)<2 ms>
REGISTER QUERY gone AS DSTREAM(SELECT k, lo FROM stats)
REGISTER QUERY all_rows AS RSTREAM(SELECT k, SUM(v) AS v FROM back [Rows 3 Slide 2] GROUP BY k)
"""
"""A loop through a 2 ms delay (slices of two instants), with float and
integer aggregates, DSTREAM and RSTREAM hanging off it."""

ACYCLIC = """
REGISTER STREAM s (k integer, v integer, f float)
REGISTER QUERY d AS ISTREAM(SELECT k, v FROM s [Range 2] WHERE v % 3 != 1)<4 ms>
REGISTER QUERY j AS ISTREAM(SELECT s.k, d.v, f FROM s [Now], d [Rows 4] WHERE s.k = d.k)
REGISTER QUERY t AS ISTREAM(SELECT SUM(v) AS v, COUNT(*) AS n FROM s [Rows 5 Slide 2])
REGISTER QUERY u AS SELECT k, v FROM d UNION ALL SELECT k, v / -2 AS v FROM s
REGISTER QUERY p AS ISTREAM(
  SELECT k, COUNT(*) AS n, SUM(f) AS sf, AVG(v) AS av, MAX(v) AS hi FROM s [Partition By k Rows 3] GROUP BY k)
REGISTER QUERY p1 AS ISTREAM(
  SELECT k, COUNT(*) AS n, SUM(f) AS sf, AVG(v) AS av, MIN(f) AS lo FROM s [Partition By k Rows 1] GROUP BY k)
"""


def _market(rnd: random.Random) -> dict[str, list[Element]]:
    """Ticks, fresh money every 20 ms and holdings that change, so that
    orders keep coming."""
    market, t = [], 0
    for i in range(150):
        t += rnd.choice([0, 1, 1, 2, 4])
        market.append((t, i + 100, 1, rnd.randrange(4), rnd.randrange(50, 700)))
    money = [(ts, ts + 1, 1, rnd.randrange(100_000, 900_000)) for ts in range(0, t, 20)]
    stocks = [(ts, 50 + ts, 1, ts % 4, rnd.choice([0, 0, 10]), 0) for ts in range(0, t, 7)]
    return {"market": market, "initial_resource": money, "stock_stream": stocks}


def _fig7(rnd: random.Random) -> dict[str, list[Element]]:
    rows, t = [], 0
    for i in range(150):
        t += rnd.choice([0, 0, 0, 1, 2])
        rows.append((t, i + 1, 1, i % 4, i // 4 + 1))
    return {"input": rows}


def _kvf(rnd: random.Random) -> dict[str, list[Element]]:
    rows, t = [], 0
    for i in range(200):
        t += rnd.choice([0, 0, 1, 1, 2, 5])
        rows.append((t, i + 1, 1, rnd.randrange(3), rnd.randrange(-4, 9), rnd.randrange(-8, 8) / 4))
    return {"s": rows}


def _kv(rnd: random.Random) -> dict[str, list[Element]]:
    return {"src": [(e[0], e[1], 1, e[3] % 2, e[4] % 3) for e in _kvf(rnd)["s"][:12]]}


PROGRAMS: dict[str, tuple[str, Any]] = {
    "fig1": (FIG1_DELAYED, _market),
    "fig7-2": (fig7(2), _fig7),
    "fig6": (FIG6, _kv),
    "loop-aggregates": (LOOP_AGGREGATES, _kvf),
    "acyclic": (ACYCLIC, _kvf),
}

MODES: list[dict[str, Any]] = [
    {},
    {"batches": 7},
    {"fuse": False, "batches": 3},
    {"max_slice_ms": 1},
    {"max_slice_ms": 3, "batches": 5},
]


@functools.cache
def _compile(text: str) -> plan.Program:
    return compile_program(text)


def _run(text: str, inputs: dict[str, list[Element]], batches: int = 1, **options: Any) -> tuple[Any, ...]:
    program = _compile(text)
    engine = Engine(program, list(program.queries), **options)
    last = max(rows[-1][0] for rows in inputs.values())
    cuts = [last * k // batches for k in range(1, batches)] + [last + 12]
    out: dict[str, list[Element]] = {name: [] for name in program.queries}
    low = -1
    trace = []
    for cut in cuts:
        for name, rows in inputs.items():
            engine.push(name, [e for e in rows if low < e[0] <= cut])
        for name, elements in engine.advance(cut).items():
            out[name] += elements
        trace.append((engine.next_event(), engine.state_low(), engine.counters()))
        low = cut
    return out, trace[-1]


@pytest.mark.parametrize("program", sorted(PROGRAMS))
@pytest.mark.parametrize("lineage", [False, True])
def test_compiled_and_fast_paths_match_the_interpreted_instant_by_instant_loop(
    program: str, lineage: bool
) -> None:
    text, make = PROGRAMS[program]
    for seed in range(2):
        inputs = make(random.Random(seed))
        # Fusion changes the operator list, so counters compare per setting.
        reference = {
            fuse: _run(text, inputs, compiled=False, max_slice_ms=1, fuse=fuse, lineage=lineage)
            for fuse in (False, True)
        }
        assert reference[False][0] == reference[True][0]
        assert sum(map(len, reference[False][0].values())) > 100
        for mode in MODES:
            assert _run(text, inputs, lineage=lineage, **mode) == reference[mode.get("fuse", True)], mode


def test_the_rewrites_are_in_the_programs_compared() -> None:
    kinds = {type(op) for op in Engine(compile_program(ACYCLIC)).operators}
    assert {PartitionAggregateOp, WindowAggregateOp} <= kinds
    # Fig. 7 with one sub-query computes ISTREAM(avg_0)<Now> once for its two readers.
    ops = Engine(compile_program(fig7(1)), ["all_avg_delay", "avg_delay_0"]).output_ops
    assert ops["all_avg_delay"] is ops["avg_delay_0"]


ROWS_1 = """
REGISTER STREAM s (k integer, v integer, f float)
REGISTER QUERY q AS ISTREAM(
  SELECT k, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS sv, SUM(f) AS sf, AVG(v) AS av, AVG(f) AS af,
         MIN(f) AS lo, MAX(v) AS hi
  FROM s [Partition By k Rows 1] GROUP BY k)
REGISTER QUERY r AS DSTREAM(SELECT k, AVG(f) AS af, SUM(v) AS sv FROM s [Partition By k Rows 1] GROUP BY k)
"""


@pytest.mark.parametrize("seed", range(5))
def test_a_rows_1_partition_aggregate_gives_the_unfused_bits_with_nulls(seed: int) -> None:
    """The fused Rows 1 path computes a group's row from its one element;
    it must give the accumulators' results to the bit (-0.0, NULLs)."""
    rnd = random.Random(seed)
    rows: list[Element] = []
    t = 0
    for i in range(300):
        t += rnd.choice([0, 0, 1, 2])
        v = rnd.choice([None, rnd.randrange(-5, 5)])
        f = rnd.choice([None, -0.0, 0.1, rnd.uniform(-1, 1)])
        rows.append((t, i + 1, 1, rnd.randrange(4), v, f))
    program = _compile(ROWS_1)
    results = []
    for fuse in (True, False):
        engine = Engine(program, ["q", "r"], fuse=fuse)
        assert any(isinstance(op, PartitionAggregateOp) for op in engine.operators) == fuse
        engine.push("s", rows)
        results.append(engine.advance(t + 5))
    fused, plain = results
    assert len(fused["q"]) > 50 and len(fused["r"]) > 50
    assert repr(fused) == repr(plain)
