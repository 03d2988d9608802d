"""Run CQL text over in-memory inputs: the shared harness of engine tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from semiactive.node.cql import compile_program, plan
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine
from semiactive.node.engine.heartbeat import HeartbeatEngine


def elements(rows: Sequence[tuple[Any, ...]], relation: bool = False) -> list[Element]:
    """``(ts, v...)`` rows (or ``(ts, '+'|'-', v...)`` for a relation) as
    elements with lineage = position."""
    out = []
    for i, row in enumerate(rows, start=1):
        if relation:
            ts, op, *values = row
            out.append((ts, i, 1 if op == "+" else -1, *values))
        else:
            ts, *values = row
            out.append((ts, i, 1, *values))
    return out


def run(
    text: str,
    inputs: Mapping[str, Sequence[tuple[Any, ...]]],
    output: str | None = None,
    end: int | None = None,
    executor: str = "dts",
    batches: int = 1,
    **options: Any,
) -> list[tuple[Any, ...]]:
    """Output rows as ``(ts, values...)``; relation outputs as
    ``(ts, '+'|'-', values...)``. ``batches`` > 1 feeds the inputs in that
    many time-ordered pieces with a watermark after each."""
    program = compile_program(text)
    name = output or program.last_query
    feeds = {n: elements(rows, program.inputs[n].kind is plan.Kind.RELATION) for n, rows in inputs.items()}
    last = max((rows[-1][0] for rows in feeds.values() if rows), default=0)
    end = last if end is None else end
    engine: Engine | HeartbeatEngine
    if executor == "hb":
        engine = HeartbeatEngine(program, [name], **options)
    else:
        engine = Engine(program, [name], **options)
    times = sorted({e[0] for rows in feeds.values() for e in rows})
    cuts = [times[(i * len(times)) // batches] for i in range(1, batches)] if times and batches > 1 else []
    out: list[Element] = []
    lower = None
    for cut in [*cuts, None]:
        for n, rows in feeds.items():
            part = [e for e in rows if (lower is None or e[0] >= lower) and (cut is None or e[0] < cut)]
            engine.push(n, part)
        watermark = end if cut is None else cut - 1
        out += engine.advance(watermark)[name]
        lower = cut
    kind = program.query(name).kind
    if kind is plan.Kind.RELATION:
        return [(e[0], "+" if e[2] > 0 else "-", *e[3:]) for e in out]
    return [(e[0], *e[3:]) for e in out]
