"""The compiled slice: a program's DTS order as one generated function.

The interpreted engine loop looks every step up in a table, builds an input
list per operator and asks each fire point for its next time through a
method call. At one instant per slice (a recursive program with ``<Now>``)
that bookkeeping costs more than the operators' work. Here the order is
turned into straight-line Python over local variables, once per engine:

- the next execution time is the minimum of the fire points (scans, time
  windows, delays: the recursive CQL paper, 3.2), read inline from their queues;
- selections, projections and UNION ALL are inlined as expressions;
- a cut delay's EMIT and ABSORB touch its queue directly;
- every other operator is one call to its ``process``, skipped exactly
  when the interpreted loop skips it (no input and nothing due).

At one instant per slice every batch holds a single instant, so a union is a
concatenation and a cut delay's due tuples are its oldest queued batch.
Results are identical to the interpreted loop (tests compare them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from semiactive.node.engine import expressions
from semiactive.node.engine.generated_code import compile_generated
from semiactive.node.engine.operators.base import EMPTY, Operator, SliceContext, merge_by_ts
from semiactive.node.engine.operators.relational import ProjectOp, SelectOp, UnionOp
from semiactive.node.engine.operators.streaming import DelayOp, ScanOp
from semiactive.node.engine.operators.windows import RangeWindowOp
from semiactive.node.engine.ordering import Step, StepKind

Advance = Callable[..., None]


@dataclass(frozen=True)
class Compiled:
    """``advance(watermark, *result_lists)`` runs every slice up to the
    watermark, appending each output's elements to its list;
    ``next_event()`` is :meth:`Engine.next_event`."""

    advance: Advance
    next_event: Callable[[], int | None]
    source: str


def compile_plan(
    operators: Sequence[Operator],
    steps: Sequence[Step],
    outputs: Sequence[Operator],
    slice_ms: int | None,
    ctx: SliceContext,
    floor: Callable[[], int] | None,
) -> Compiled:
    """Generate the code of a program. ``slice_ms`` None: one slice up to the
    watermark per advance; else slices of at most that many instants, each
    starting at the next fire time. ``floor``: sets ``ctx.floor`` before
    each slice (lineage tracking)."""
    gen = _Generator(operators, instant=slice_ms == 1)
    body = gen.slice(steps, outputs, floor is not None)
    fire = gen.fire_points()
    lines = ["def next_event():", *gen.aliases(), "    t = _INF", *_indent(fire, 1)]
    lines.append("    return None if t is _INF else t")
    results = ", ".join(f"r{i}" for i in range(len(outputs)))
    lines += ["", f"def advance(watermark, {results}):", *gen.aliases()]
    if slice_ms is None:
        lines += ["    t_hi = watermark", *_indent(body, 1)]
    else:
        lines += ["    while True:", "        t = _INF", *_indent(fire, 2), "        if t > watermark:"]
        lines += ["            return"]
        if slice_ms == 1:
            lines.append("        t_hi = t")
        else:
            lines.append(f"        t_hi = t + {slice_ms - 1}")
            lines.append("        if t_hi > watermark: t_hi = watermark")
        lines += _indent(body, 2)
    source = "\n".join(lines) + "\n"
    namespace: dict[str, Any] = dict(expressions.RUNTIME)
    namespace.update(gen.names, _INF=float("inf"), E=EMPTY, _merge=merge_by_ts, _floor=floor, ctx=ctx)
    exec(compile_generated(source, "slice", "exec"), namespace)  # noqa: S102
    return Compiled(namespace["advance"], namespace["next_event"], source)


def _indent(lines: list[str], levels: int) -> list[str]:
    pad = "    " * levels
    return [pad + line for line in lines]


class _Generator:
    def __init__(self, operators: Sequence[Operator], instant: bool) -> None:
        self.instant = instant
        self.index = {id(op): i for i, op in enumerate(operators)}
        self.operators = operators
        self.names: dict[str, Any] = {f"op{i}": op for i, op in enumerate(operators)}

    def aliases(self) -> list[str]:
        """Queues read inline, fetched afresh on each call (an operator may
        replace its containers between calls, e.g. on restore_counters)."""
        lines = []
        for i, op in enumerate(self.operators):
            if isinstance(op, ScanOp | DelayOp):
                lines.append(f"    Q{i} = op{i}.pending")
            elif isinstance(op, RangeWindowOp) and op.range_ms is not None:
                lines.append(f"    Q{i} = op{i}.buf")
        return lines

    def _fire(self, i: int, op: Operator) -> str | None:
        """An expression for the operator's next fire time, valid when
        ``Q{i}`` is non-empty; None if it is read by a call instead."""
        if isinstance(op, ScanOp):
            return f"Q{i}[0][0]"
        if isinstance(op, DelayOp):
            return f"Q{i}[0][0][0]"
        if isinstance(op, RangeWindowOp) and op.range_ms is not None:
            return f"Q{i}[0][0] + {op.range_ms + 1}"
        return None

    def fire_points(self) -> list[str]:
        """Lines lowering ``t`` to the earliest fire time of any operator."""
        lines: list[str] = []
        for i, op in enumerate(self.operators):
            if not op.timed or (isinstance(op, RangeWindowOp) and op.range_ms is None):
                continue
            when = self._fire(i, op)
            if when is not None:
                lines += [f"if Q{i}:", f"    x = {when}", "    if x < t: t = x"]
            else:
                self.names[f"nf{i}"] = op.next_fire
                lines += [f"x = nf{i}()", "if x is not None and x < t: t = x"]
        return lines

    def _due(self, i: int, op: Operator) -> str:
        """A condition: the timed operator has something due by ``t_hi``."""
        when = self._fire(i, op)
        if when is not None:
            return f"Q{i} and {when} <= t_hi"
        self.names[f"nf{i}"] = op.next_fire
        return f"(x := nf{i}()) is not None and x <= t_hi"

    def slice(self, steps: Sequence[Step], outputs: Sequence[Operator], floor: bool) -> list[str]:
        lines = ["ctx.floor = _floor()"] if floor else []
        for step in steps:
            i = self.index[id(step.op)]
            if step.kind is StepKind.EMIT:
                lines += self._emit(i, step.op)
            elif step.kind is StepKind.ABSORB:
                self.names[f"shift{i}"] = step.op.shift  # type: ignore[attr-defined]
                kid = f"o{self.index[id(step.op.children[0])]}"
                lines.append(f"if {kid}: Q{i}.append(shift{i}({kid}))")
            else:
                lines += self._run(i, step.op)
        for n, op in enumerate(outputs):
            lines.append(f"if o{self.index[id(op)]}: r{n}.extend(o{self.index[id(op)]})")
        return lines

    def _emit(self, i: int, op: Operator) -> list[str]:
        if self.instant:
            return [f"o{i} = Q{i}.popleft() if Q{i} and Q{i}[0][0][0] <= t_hi else E"]
        self.names[f"emit{i}"] = op.emit  # type: ignore[attr-defined]
        return [f"o{i} = emit{i}(t_hi) if Q{i} and Q{i}[0][0][0] <= t_hi else E"]

    def _run(self, i: int, op: Operator) -> list[str]:
        kids = [f"o{self.index[id(c)]}" for c in op.children]
        out = f"o{i}"
        if isinstance(op, SelectOp):
            return [f"{out} = [e for e in {kids[0]} if {op.condition}] if {kids[0]} else E"]
        if isinstance(op, ProjectOp) and op.identity:
            return [f"{out} = {kids[0]}"]
        if isinstance(op, ProjectOp):
            return [f"{out} = [{op.element} for e in {kids[0]}] if {kids[0]} else E"]
        if isinstance(op, UnionOp) and op.keep_all:
            lines = []
            for side, element in enumerate(op.elements):
                if element is not None:
                    lines.append(f"w{side} = [{element} for e in {kids[side]}] if {kids[side]} else E")
                    kids[side] = f"w{side}"
            left, right = kids
            if self.instant:
                return [*lines, f"{out} = ({left} + {right} if {right} else {left}) if {left} else {right}"]
            return [*lines, f"{out} = _merge({left}, {right}) if {left} or {right} else E"]
        if self.instant and isinstance(op, ScanOp) and op.content is None:
            return [
                f"if Q{i} and Q{i}[0][0] <= t_hi:",
                f"    {out} = [Q{i}.popleft()]",
                f"    while Q{i} and Q{i}[0][0] <= t_hi: {out}.append(Q{i}.popleft())",
                f"else: {out} = E",
            ]
        if self.instant and isinstance(op, RangeWindowOp) and op.range_ms == 0:
            # [Now], one instant per slice: what it holds is from earlier
            # instants, so all of it leaves now, before the new tuples enter.
            kid = kids[0]
            return [
                f"if Q{i}:",
                f"    {out} = [{op.deletion} for o in Q{i}]",
                f"    Q{i}.clear()",
                f"    if {kid}:",
                f"        {out} += {kid}",
                f"        Q{i}.extend({kid})",
                f"elif {kid}:",
                f"    {out} = {kid}",
                f"    Q{i}.extend({kid})",
                f"else: {out} = E",
            ]
        self.names[f"p{i}"] = op.process
        call = f"p{i}(({', '.join(kids)}{',' if len(kids) == 1 else ''}), t_hi)"
        has_input = " or ".join(kids)
        if not op.timed:
            return [f"{out} = {call} if {has_input} else E"]
        if isinstance(op, RangeWindowOp) and op.range_ms is None:
            return [f"{out} = {call} if {has_input} else E"]
        due = self._due(i, op)
        condition = f"{has_input} or {due}" if kids else due
        return [f"{out} = {call} if {condition} else E"]
