"""The program's inputs and the operators that produce streams:
scans, ISTREAM / DSTREAM / RSTREAM, and the delay operator of seed 001.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence

from node.cql import plan
from node.engine.elements import Element, Row
from node.engine.operators.base import EMPTY, Operator, instants
from node.engine.operators.relational import Multiset


class ScanOp(Operator):
    """An input of the program. Elements pushed from outside wait in
    ``pending`` until the scheduler's slice reaches their instant. A
    relation input keeps its current content (it is state: a secondary
    rebuilding it needs those inputs)."""

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

    def __init__(self, op: plan.StreamOp, label: str = "") -> None:
        super().__init__(label)
        self.op = op
        self.relation = Multiset() if op is plan.StreamOp.RSTREAM else None

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        batch = inputs[0]
        if not batch:
            return EMPTY
        out: list[Element] = []
        want = 1 if self.op is plan.StreamOp.ISTREAM else -1
        floor = self.ctx.floor
        for ts, part in instants(batch):
            if self.relation is not None:
                for e in part:
                    self.relation.add(e[3:], e[2], e[1])
                for row, (count, lin) in self.relation.counts.items():
                    out.extend([(ts, lin, 1, *row)] * count)
            else:
                net: dict[Row, list[int]] = {}
                for e in part:
                    row = e[3:]
                    entry = net.get(row)
                    if entry is None:
                        net[row] = [e[2], e[1]]
                    else:
                        entry[0] += e[2]
                        if e[1] < entry[1]:
                            entry[1] = e[1]
                for row, (count, lin) in net.items():
                    if count * want > 0:
                        if floor < lin:
                            lin = floor
                        item = (ts, lin, 1, *row)
                        if count * want == 1:
                            out.append(item)
                        else:
                            out.extend([item] * (count * want))
        return out


class DelayOp(Operator):
    """``<d>``: every tuple reappears d ms later, lineage unchanged.

    On a cycle the scheduler splits the operator: :meth:`emit` runs first in
    each slice (the delay is a fire point) and :meth:`absorb` last, which is
    how the cycle is cut (seed 001, 3.2). Off a cycle it is an ordinary
    operator (:meth:`process`)."""

    timed = True

    def __init__(self, delay_ms: int, label: str = "") -> None:
        super().__init__(label)
        self.delay_ms = delay_ms
        self.pending: deque[Element] = deque()

    def absorb(self, batch: list[Element]) -> None:
        d = self.delay_ms
        self.pending.extend([(e[0] + d, *e[1:]) for e in batch])

    def emit(self, t_hi: int) -> list[Element]:
        pending = self.pending
        if not pending or pending[0][0] > t_hi:
            return EMPTY
        out: list[Element] = []
        while pending and pending[0][0] <= t_hi:
            out.append(pending.popleft())
        return out

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        self.absorb(inputs[0])
        return self.emit(t_hi)

    def next_fire(self) -> int | None:
        return int(self.pending[0][0]) if self.pending else None

    def state_low(self) -> int | None:
        return min((e[1] for e in self.pending), default=None)
