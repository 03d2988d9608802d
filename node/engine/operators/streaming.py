"""The program's inputs and the operators that produce streams:
scans, ISTREAM / DSTREAM / RSTREAM, and the delay operator of the recursive CQL paper.
"""

from __future__ import annotations

import bisect
import heapq
import operator
from collections import deque
from collections.abc import Sequence

from semiactive.node.cql import plan
from semiactive.node.engine import expressions
from semiactive.node.engine.elements import Element, Row
from semiactive.node.engine.operators.base import EMPTY, Operator, instants
from semiactive.node.engine.operators.relational import Multiset


class ScanOp(Operator):
    """An input of the program. Elements pushed from outside wait in
    ``pending`` until the scheduler's slice reaches their instant. A
    relation input keeps its current content (it is state: a secondary
    rebuilding it needs those inputs)."""

    STATE = ("pending", "content", "_heap")

    timed = True

    def __init__(self, name: str, kind: plan.Kind) -> None:
        super().__init__(f"scan {name}")
        self.name = name
        self.kind = kind
        self.pending: deque[Element] = deque()
        self.content: Multiset | None = Multiset() if kind is plan.Kind.RELATION else None
        self._heap: list[tuple[int, Row]] = []  # (lin, row): lazily cleaned

    def push(self, elements: Sequence[Element]) -> None:
        self.pending.extend(elements)

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        pending = self.pending
        if not pending:
            return EMPTY
        if pending[-1][0] <= t_hi:
            out = list(pending)
            pending.clear()
        else:
            out = []
            while pending and pending[0][0] <= t_hi:
                out.append(pending.popleft())
        if self.content is not None:
            for e in out:
                row = e[3:]
                if self.content.add(row, e[2], e[1]) > 0 and e[2] > 0:
                    heapq.heappush(self._heap, (e[1], row))
        return out

    def next_fire(self) -> int | None:
        return int(self.pending[0][0]) if self.pending else None

    def state_low(self) -> int | None:
        if self.content is None:
            return None
        heap, counts = self._heap, self.content.counts
        while heap and heap[0][1] not in counts:
            heapq.heappop(heap)
        return heap[0][0] if heap else None


class ToStreamOp(Operator):
    """ISTREAM emits, at each instant, the rows the relation gained; DSTREAM
    the rows it lost; RSTREAM the whole relation at each instant in which it
    changed (Stanford STREAM emits at each instant it processes; here an
    instant is one in which the input relation had a change).

    Whether a row counts as new depends on the relation at the previous
    instant too, so outputs carry at most the slice's lineage floor."""

    STATE = ("relation",)

    def __init__(self, op: plan.StreamOp, label: str = "") -> None:
        super().__init__(label)
        self.op = op
        self.relation = Multiset() if op is plan.StreamOp.RSTREAM else None
        self.want = 1 if op is plan.StreamOp.ISTREAM else -1

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        batch = inputs[0]
        if not batch:
            return EMPTY
        if self.relation is not None:
            return self._rstream(batch)
        if batch[0][0] == batch[-1][0]:
            return self._changes(batch[0][0], batch)
        out: list[Element] = []
        for ts, part in instants(batch):
            out += self._changes(ts, part)
        return out

    def _rstream(self, batch: list[Element]) -> list[Element]:
        out: list[Element] = []
        relation = self.relation
        assert relation is not None
        for ts, part in instants(batch):
            net: dict[Row, int] = {}
            for e in part:
                relation.add(e[3:], e[2], e[1])
                net[e[3:]] = net.get(e[3:], 0) + e[2]
            if not any(net.values()):
                continue  # changes that cancel out: the relation did not change
            for row, (count, lin) in relation.counts.items():
                out.extend([(ts, lin, 1, *row)] * count)
        return out

    def _changes(self, ts: int, part: list[Element]) -> list[Element]:
        """ISTREAM / DSTREAM of one instant: the rows whose net count moved
        the wanted way, in order of first appearance. When the slice floor is
        below every lineage in the instant (always, without lineage tracking)
        all outputs carry the floor and the counting skips lineage."""
        want = self.want
        floor = self.ctx.floor
        out: list[Element] = []
        if floor <= min(map(_lineage, part)):
            net: dict[Row, int] = {}
            get = net.get
            for e in part:
                row = e[3:]
                net[row] = get(row, 0) + e[2]
            head = (ts, floor, 1)
            for row, count in net.items():
                count *= want
                if count > 0:
                    item = head + row
                    if count == 1:
                        out.append(item)
                    else:
                        out.extend([item] * count)
            return out
        entries: dict[Row, list[int]] = {}
        for e in part:
            row = e[3:]
            entry = entries.get(row)
            if entry is None:
                entries[row] = [e[2], e[1]]
            else:
                entry[0] += e[2]
                if e[1] < entry[1]:
                    entry[1] = e[1]
        for row, (count, lin) in entries.items():
            count *= want
            if count > 0:
                out.extend([(ts, min(floor, lin), 1, *row)] * count)
        return out


class DelayOp(Operator):
    """``<d>``: every tuple reappears d ms later, lineage unchanged.

    On a cycle the scheduler splits the operator: :meth:`emit` runs first in
    each slice (the delay is a fire point) and :meth:`absorb` last, which is
    how the cycle is cut (the recursive CQL paper, 3.2). Off a cycle it is an ordinary
    operator (:meth:`process`). Tuples wait as the shifted batches they
    arrived in (batches of successive slices never overlap in time), so a
    slice of one instant costs one list copy in and one pop out."""

    STATE = ("pending",)

    timed = True

    def __init__(self, delay_ms: int, width: int, label: str = "") -> None:
        super().__init__(label)
        self.delay_ms = delay_ms
        self.pending: deque[list[Element]] = deque()
        self.shift = expressions.build(
            f"lambda b: [{expressions.element_source('e', width, ts=f'e[0] + {delay_ms}')} for e in b]"
        )

    def absorb(self, batch: list[Element]) -> None:
        if batch:
            self.pending.append(self.shift(batch))

    def emit(self, t_hi: int) -> list[Element]:
        pending = self.pending
        if not pending or pending[0][0][0] > t_hi:
            return EMPTY
        out = pending.popleft()
        if pending and pending[0][0][0] <= t_hi:
            out = list(out)
            while pending and pending[0][0][0] <= t_hi:
                out += pending.popleft()
        if out[-1][0] > t_hi:
            cut = bisect.bisect_right(out, t_hi, key=_ts)
            pending.appendleft(out[cut:])
            out = out[:cut]
        return out

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        self.absorb(inputs[0])
        return self.emit(t_hi)

    def next_fire(self) -> int | None:
        return int(self.pending[0][0][0]) if self.pending else None

    def state_low(self) -> int | None:
        return min((e[1] for batch in self.pending for e in batch), default=None)


_ts = operator.itemgetter(0)
_lineage = operator.itemgetter(1)
