"""``[Partition By keys Rows N]`` and a GROUP BY on the same keys, fused.

``SELECT id, AVG(val) FROM s [Partition By id Rows N] GROUP BY id`` (the
last N values of every key, aggregated per key: Fig. 7's inner query, a
sensor's recent average) as two operators makes the window emit ``+new``
and ``-oldest`` for every arrival, which the aggregate then looks up again.
Fused, an arrival updates its partition and its group in one step. The
output is the aggregate's over the window, element for element (tests
compare the two), so the rewrite is invisible.

With ``Rows 1`` (the latest value per key, Fig. 7's shape) a group holds
exactly its newest element, so its row is computed from that element and
no accumulator is kept (adding the new value and subtracting the previous
one, exactly for floats, was most of the work).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.node.engine.operators.aggregate import GroupCode, group_loop, indent
from semiactive.node.engine.operators.base import LowBound, OldestHead, Operator

# Element ``e`` enters its key's partition and group; the oldest element
# leaves both once the partition holds more than ``rows``.
_ARRIVAL = """
part = part_of(k)
if part is None:
    part = parts[k] = deque()
part.append(e)
{arrival}
if len(part) > {rows}:
    o = part.popleft()
    s = -1
    g[0] -= 1
{remove}
"""

# Rows 1: a partition is its newest element alone, so a group's row is
# computed from that element (GroupCode.single) and a group is only
# ``[row last emitted, its lineage]``.
_ARRIVAL_LATEST = """
parts[k] = (e,)
if k not in changed:
    g = get(k)
    changed[k] = None if g is None else g[0]
"""

_FLUSH_LATEST = """
lin = ctx.floor
for k, old in changed.items():
    x = parts[k][0]
    new = {row}
    if new != old:
        if old is not None:
            append((cur, groups[k][1], -1) + old)
        append((cur, lin, 1) + new)
        groups[k] = [new, lin]
"""


def fusable(node: plan.Aggregate) -> bool:
    """An aggregate grouping by exactly the partition keys (same columns,
    same order) of the partition window (without a Range) it reads."""
    window = plan.resolve(node.child)
    if not isinstance(window, plan.Window) or not isinstance(window.spec, plan.PartitionWindow):
        return False
    if window.spec.range_ms is not None:
        return False  # partitions that expire: the window runs on its own
    keys = [x.index if isinstance(x, plan.ColRef) else None for x in node.group_by]
    return keys == list(window.spec.keys)


class PartitionAggregateOp(Operator):
    """The fused operator. State: the window's partitions (last ``rows``
    elements per key) and the aggregate's groups, both keyed by the group
    key."""

    STATE = ("parts", "groups", "_oldest", "_low")

    def __init__(
        self,
        rows: int,
        group_by: Sequence[plan.Expr],
        aggregates: Sequence[plan.AggCall],
        monotone: bool,
        label: str = "",
    ) -> None:
        super().__init__(label or "partition aggregate")
        self.monotone = monotone
        # A partition: its last ``rows`` elements, oldest first (a deque, or
        # a 1-tuple for Rows 1).
        self.parts: dict[Any, Sequence[Element]] = {}
        self.groups: dict[Any, list[Any]] = {}
        self._oldest = OldestHead()
        self._low = LowBound()
        gen = GroupCode(group_by, aggregates)
        if rows == 1:
            flush = _FLUSH_LATEST.format(row=gen.single("x"))
            code = group_loop(gen.key, _ARRIVAL_LATEST, flush, setup="parts = self.parts")
        else:
            arrival = _ARRIVAL.format(arrival=gen.arrival(), rows=rows, remove=indent(gen.update("o"), 4))
            code = group_loop(gen.key, arrival, gen.flush, setup="parts = self.parts\npart_of = parts.get")
        namespace = dict(gen.namespace, deque=deque)
        exec(compile(code, "<semiactive-partition-aggregate>", "exec"), namespace)  # noqa: S102
        self._process = namespace["process"]
        self.source = code

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        if not self.monotone:
            self._low.arrived(inputs[0])
        return self._process(self, inputs[0], t_hi)  # type: ignore[no-any-return]

    def state_low(self) -> int | None:
        if self.monotone:
            return self._oldest.low(self.parts)
        return self._low.value(lambda: (e for part in self.parts.values() for e in part))
