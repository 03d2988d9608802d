"""``[Range T Slide L]`` and a GROUP BY over it, fused pane by pane.

Unfused, a slide boundary is where all the work happens: at a multiple of
L every tuple of the last slide enters the window and every tuple of the
oldest slide leaves it, each as a change the GROUP BY applies one by one.
Linear Road's ``[Range 5 minutes Slide 1 minute]`` over a minute of
position reports makes that hundreds of thousands of changes at one
instant, and the answers due at that instant wait seconds for them.

Fused, tuples with the same enter and leave instant form a *pane*, and a
tuple arriving is added at once to its pane's partial aggregate for its
group (one dictionary update, spread over the slide as tuples come). At
a boundary the panes that enter are added to the groups and the panes
that leave are subtracted: one step per group of a pane, not per tuple.
The output is the unfused pair's, element for element and in the same
order (tests compare the two), so the rewrite is invisible.

Fused only where merging partials is exact: COUNT, and SUM / AVG of
integer expressions (NULLs are counted per pane as the unfused aggregate
counts them). MIN / MAX and float sums keep the two operators.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import chain
from typing import Any

from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.node.engine.operators.aggregate import GroupCode, indent
from semiactive.node.engine.operators.base import Operator


def fusable(node: plan.Aggregate) -> bool:
    """A GROUP BY of COUNT / integer SUM / AVG directly over a sliding
    range window."""
    window = plan.resolve(node.child)
    if not isinstance(window, plan.Window) or not isinstance(window.spec, plan.RangeWindow):
        return False
    if window.spec.slide_ms <= 1 or not node.aggregates:
        return False
    for call in node.aggregates:
        if call.arg is None:
            continue
        if call.func not in (plan.AggFunc.COUNT, plan.AggFunc.SUM, plan.AggFunc.AVG):
            return False
        if call.func is not plan.AggFunc.COUNT and call.arg.type.name is not plan.TypeName.INTEGER:
            return False
    return True


# A pane is ``[enter, leave, lowest lineage, {key: partial}]``; a partial
# has a group's layout (``[n, None, 0, slots...]``) so that GroupCode's
# update applies to it. Inputs arrive in timestamp order, so panes are
# created in (enter, leave) order and enter and leave in that order.
_PROCESS = """
def process(self, batch, t_hi):
    waiting = self.waiting
    active = self.active
    if batch:
        pane = waiting[-1] if waiting else None
        for e in batch:
            ts = e[0]
            te = -(-ts // {slide}) * {slide}
            tl = ((ts + {range}) // {slide} + 1) * {slide}
            if tl <= te:
                continue
            if pane is None or pane[0] != te or pane[1] != tl:
                pane = [te, tl, e[1], {{}}]
                waiting.append(pane)
            elif e[1] < pane[2]:
                pane[2] = e[1]
            parts = pane[3]
            k = {key}
            g = parts.get(k)
            if g is None:
                g = parts[k] = [0, None, 0{init}]
            s = 1
            g[0] += 1
{update}
    out = []
    groups = self.groups
    get = groups.get
    ctx = self.ctx
    append = out.append
    while True:
        te = waiting[0][0] if waiting else None
        cur = active[0][1] if active else None
        if cur is None or (te is not None and te < cur):
            cur = te
        if cur is None or cur > t_hi:
            return out
        changed = {{}}
        while active and active[0][1] == cur:
            s = -1
            for k, q in active.popleft()[3].items():
{merge}
        while waiting and waiting[0][0] == cur:
            pane = waiting.popleft()
            active.append(pane)
            s = 1
            for k, q in pane[3].items():
{merge}
{flush}
"""

# Partial ``q`` of key ``k``, signed ``s``, applied to its group.
_MERGE = """
{group}
if s > 0:
{add}
else:
{subtract}
"""


class PaneAggregateOp(Operator):
    """The fused operator. State: the panes not yet entered (``waiting``),
    the panes in the window (``active``) and the aggregate's groups (the
    layout of :class:`~semiactive.node.engine.operators.aggregate.AggregateOp`)."""

    STATE = ("waiting", "active", "groups")

    timed = True

    def __init__(
        self,
        range_ms: int,
        slide_ms: int,
        group_by: Sequence[plan.Expr],
        aggregates: Sequence[plan.AggCall],
        label: str = "",
    ) -> None:
        super().__init__(label or f"[Range {range_ms} Slide {slide_ms}] aggregate")
        self.waiting: deque[list[Any]] = deque()
        self.active: deque[list[Any]] = deque()
        self.groups: dict[Any, list[Any]] = {}
        gen = GroupCode(group_by, aggregates)
        # Every slot is an integer count or sum (fusable), so a partial
        # merges slot by slot.
        width = sum(1 if c.func is plan.AggFunc.COUNT else 2 for c in aggregates if c.arg is not None)
        slots = range(3, 3 + width)
        add = "\n".join(["g[0] += q[0]", *(f"g[{i}] += q[{i}]" for i in slots)])
        subtract = "\n".join(["g[0] -= q[0]", *(f"g[{i}] -= q[{i}]" for i in slots)])
        merge = _MERGE.format(
            group=gen.group_of_key().strip("\n"), add=indent(add, 4), subtract=indent(subtract, 4)
        )
        code = _PROCESS.format(
            slide=slide_ms,
            range=range_ms,
            key=gen.key,
            init=gen.init,
            update=indent(gen.update("e"), 12),
            merge=indent(merge, 16),
            flush=indent(gen.flush, 8),
        )
        namespace = dict(gen.namespace)
        exec(compile(code, "<semiactive-pane-aggregate>", "exec"), namespace)  # noqa: S102
        self._process = namespace["process"]
        self.source = code

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        return self._process(self, inputs[0], t_hi)  # type: ignore[no-any-return]

    def next_fire(self) -> int | None:
        times = [panes[0][at] for panes, at in ((self.waiting, 0), (self.active, 1)) if panes]
        return int(min(times)) if times else None

    def state_low(self) -> int | None:
        """The lowest lineage of any pane still to leave: replaying from
        there rebuilds every pane."""
        lows = [pane[2] for pane in chain(self.active, self.waiting)]
        return int(min(lows)) if lows else None
