"""The DTS order of nested loops (the recursive CQL paper, Fig. 6) and the Fig. 7 query:
recursive and opened forms agree, and so do DTS and the heartbeat executor
on the opened (non-recursive) form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest

from semiactive.node.cql import compile_program
from semiactive.node.cql.examples import fig7, fig7_open
from semiactive.node.engine import planner
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine
from semiactive.node.engine.heartbeat import HeartbeatEngine, RecursiveProgramError
from semiactive.node.engine.operators.base import Operator
from semiactive.node.engine.ordering import StepKind, dts_order

# -- Fig. 6: nested loops ----------------------------------------------------------------

FIG6 = """
REGISTER STREAM src (k integer, v integer)
REGISTER QUERY a AS ISTREAM(SELECT k, v FROM l1 UNION ALL SELECT k, v FROM l3)<Now>
REGISTER QUERY start AS SELECT k, v FROM src [Now] UNION ALL SELECT k, v + 1 AS v FROM a [Now] WHERE v < 4
REGISTER QUERY l1 AS
  SELECT k, v FROM start WHERE k = 0 UNION ALL SELECT k, v + 1 AS v FROM e [Now] WHERE v < 3
REGISTER QUERY e AS ISTREAM(SELECT k, v FROM l1)<Now>
REGISTER QUERY g AS ISTREAM(SELECT k, v FROM l3)<Now>
REGISTER QUERY l2 AS
  SELECT k, v FROM start WHERE k = 1 UNION ALL SELECT k, v + 1 AS v FROM g [Now] WHERE v < 3
REGISTER QUERY l3 AS SELECT k, v FROM l2 UNION ALL SELECT k, v FROM i [Now] WHERE v < 2
REGISTER QUERY i AS ISTREAM(SELECT k, v FROM l3 WHERE k = 1)<2 ms>
"""
"""The shape of Fig. 6: an outer loop through the delay ``a`` holding two
loops, one through ``e`` ({c, d, e, m} in the figure) and one through ``g``
({f, ..., k}) that itself holds a loop through ``i``. ``a`` is registered
first and ``g`` before ``i``, so those are the delays cut (any delay of a
loop may be: section 3.2)."""


def _reaches(start: Operator, consumers: Mapping[int, list[Operator]], cut: set[int]) -> set[int]:
    """Operators reachable from ``start`` along the data flow, not leaving
    a delay in ``cut``."""
    seen: set[int] = set()
    todo = [start]
    while todo:
        op = todo.pop()
        if id(op) in cut:
            continue
        for nxt in consumers[id(op)]:
            if id(nxt) not in seen:
                seen.add(id(nxt))
                todo.append(nxt)
    return seen


def _loop(delay: Operator, ops: Sequence[Operator], cut: set[int]) -> set[int]:
    """The operators on a loop with ``delay`` once the enclosing loops'
    delays ``cut`` no longer pass data: those ``delay`` reaches and that
    reach it."""
    consumers: dict[int, list[Operator]] = {id(o): [] for o in ops}
    for op in ops:
        for child in op.children:
            consumers[id(child)].append(op)
    ahead = _reaches(delay, consumers, cut)
    return {id(o) for o in ops if id(o) in ahead and id(delay) in _reaches(o, consumers, cut)}


def test_nested_loops_are_cut_and_ordered_as_in_fig6() -> None:
    physical = planner.build(compile_program(FIG6))
    ops, query = physical.operators, physical.queries
    steps, cut = dts_order(ops)
    assert cut == [query[n] for n in ("a", "g", "i", "e")]
    position: dict[tuple[StepKind, int], int] = {(s.kind, id(s.op)): n for n, s in enumerate(steps)}
    assert len(position) == len(steps) == len(ops) + len(cut)

    def produced(op: Operator) -> int:
        """Where the op's output of a slice is available: its EMIT if it is a
        cut delay, else its RUN."""
        return position.get((StepKind.EMIT, id(op)), position.get((StepKind.RUN, id(op)), -1))

    # Inputs before outputs: every step runs after what it reads.
    for n, step in enumerate(steps):
        if step.kind is not StepKind.EMIT:
            assert all(0 <= produced(child) < n for child in step.op.children), step
    # Each loop is a contiguous block of the order that begins with its cut
    # delay's EMIT and holds its ABSORB: nested loops nest as blocks.
    enclosing = {"a": set(), "g": {"a"}, "e": {"a"}, "i": {"a", "g"}}
    blocks: dict[str, set[int]] = {}
    for name, outer in enclosing.items():
        delay = query[name]
        members = _loop(delay, ops, {id(query[o]) for o in outer})
        spots = sorted(n for (_, op_id), n in position.items() if op_id in members)
        assert spots == list(range(spots[0], spots[-1] + 1)), name
        assert spots[0] == position[(StepKind.EMIT, id(delay))]
        assert position[(StepKind.ABSORB, id(delay))] in spots
        blocks[name] = members
    assert blocks["g"] | blocks["e"] < blocks["a"] and not blocks["g"] & blocks["e"]
    assert blocks["i"] < blocks["g"]
    # The loops hold the queries of the figure's sets.
    assert {id(query[n]) for n in ("l1", "e")} <= blocks["e"]
    assert {id(query[n]) for n in ("g", "l2", "l3", "i")} <= blocks["g"]
    assert {id(query[n]) for n in ("l3", "i")} <= blocks["i"] and id(query["l2"]) not in blocks["i"]


# -- Fig. 7: recursive and opened --------------------------------------------------------


def fig7_input(n: int, per_ts: int) -> list[Element]:
    """The paper's data: id = 0..3 repeating, val counting up from 1;
    ``per_ts`` tuples per timestamp."""
    return [(i // per_ts, i + 1, 1, i % 4, i // 4 + 1) for i in range(n)]


def execute(
    text: str,
    inputs: Mapping[str, list[Element]],
    outputs: Iterable[str],
    end: int,
    run_limit: int | None = None,
    **options: Any,
) -> dict[str, list[tuple[Any, ...]]]:
    """Outputs as ``(ts, values...)``, inputs fed in 5 pieces with a
    watermark after each; ``run_limit``: on the heartbeat executor."""
    program = compile_program(text)
    names = list(outputs)
    engine: Engine | HeartbeatEngine
    if run_limit is not None:
        engine = HeartbeatEngine(program, names, run_limit=run_limit)
    else:
        engine = Engine(program, names, **options)
    got: dict[str, list[tuple[Any, ...]]] = {n: [] for n in names}
    previous = -1
    for k in range(1, 6):
        watermark = end * k // 5
        for name, rows in inputs.items():
            engine.push(name, [e for e in rows if previous < e[0] <= watermark])
        for name, out in engine.advance(watermark).items():
            got[name] += [(e[0], *e[3:]) for e in out]
        previous = watermark
    return got


def as_elements(rows: list[tuple[Any, ...]]) -> list[Element]:
    return [(row[0], i, 1, *row[1:]) for i, row in enumerate(rows, start=1)]


@pytest.mark.parametrize("subqueries", [1, 2, 4])
@pytest.mark.parametrize("per_ts", [1, 4])
def test_fig7_opened_with_the_fed_back_series_gives_the_recursive_output(
    subqueries: int, per_ts: int
) -> None:
    streams = ["all_avg_delay", *(f"avg_delay_{i}" for i in range(subqueries))]
    inputs = {"input": fig7_input(60, per_ts)}
    end = 60 // per_ts + 5
    recursive = execute(fig7(subqueries), inputs, streams, end)
    fed = dict(inputs, dummy_all=as_elements(recursive["all_avg_delay"]))
    for i in range(subqueries):
        fed[f"dummy_{i}"] = as_elements(recursive[f"avg_delay_{i}"])
    opened = execute(fig7_open(subqueries), fed, streams, end)
    assert opened == recursive
    assert len(recursive["all_avg_delay"]) > 60  # the loop did run
    # DTS in wide slices, DTS one instant at a time and HB (any run limit)
    # agree on the non-recursive form.
    assert execute(fig7_open(subqueries), fed, streams, end, max_slice_ms=1) == opened
    for limit in (1, 10, 20, 100, 1000):
        assert execute(fig7_open(subqueries), fed, streams, end, run_limit=limit) == opened


def test_fig7_output_does_not_depend_on_the_number_of_subqueries() -> None:
    # Section 4.1: every sub-query handles other ids, so all_avg_delay holds
    # the same rows at each instant (their order within it may differ).
    outputs = []
    for subqueries in (1, 2, 4):
        out = execute(fig7(subqueries), {"input": fig7_input(40, 4)}, ["all_avg_delay"], 20)["all_avg_delay"]
        outputs.append(sorted(out))
    assert outputs[0] == outputs[1] == outputs[2]
    # By hand: the input of t=0 (id 0..3, val 1) is new in avg_0 at t=0, so
    # ISTREAM emits it then and <Now> delivers it at t=1, val widened to float.
    assert [row for row in outputs[0] if row[0] == 1] == [(1, 0, 1.0), (1, 1, 1.0), (1, 2, 1.0), (1, 3, 1.0)]


def test_the_heartbeat_executor_refuses_recursion() -> None:
    with pytest.raises(RecursiveProgramError):
        HeartbeatEngine(compile_program(fig7(1)))
