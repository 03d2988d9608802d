"""The operator contract shared by every physical operator.

``process(inputs, t_hi)`` is called with one list of elements per child,
each sorted by ``ts``, holding every element of that child with
``t_prev < ts <= t_hi`` (``t_prev`` is the ``t_hi`` of the previous call).
The operator must return its own output elements with ``ts <= t_hi``, sorted
by ``ts``; anything due later (an expiring window tuple, a delayed tuple) it
keeps and reports through :meth:`next_fire`. Every instant is complete when
it is handed over, so an operator can finish instant t before looking at
t+1: this is the time-splitting execution of the recursive CQL paper, done a slice of
instants at a time.

Besides results, operators answer two questions the HA protocol asks
(ha-protocol.md "Level-1"): :meth:`state_low`, the oldest input position
their state still depends on, and :meth:`counters`, the few history-dependent
integers (a row window's slide phase) that element state does not capture.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import ClassVar

from semiactive.node.engine.elements import Element
from semiactive.node.engine.state_codec import Form, state_class

EMPTY: list[Element] = []


class SliceContext:
    """Shared by the operators of one program. ``floor`` is a lineage no
    larger than that of anything a relation holds during the current slice:
    the program's state low at the slice start, or the first new input if
    smaller. Rows derived from a whole relation (an aggregate's result, an
    ISTREAM decision) carry it, because the operator cannot cheaply know the
    exact minimum at an instant in the middle of a slice. The engine keeps it
    only when lineage is tracked (HA stages); otherwise it stays 0."""

    __slots__ = ("floor",)

    def __init__(self) -> None:
        self.floor = 0


class Operator:
    """Base class. ``children`` are the operators feeding this one, in the
    order of the plan node's children."""

    #: True for operators that emit without new input (fire points).
    timed = False

    #: The attributes that change as the operator runs: a state snapshot
    #: (Engine.capture_state) captures exactly these; everything else is
    #: rebuilt from the plan.
    STATE: ClassVar[tuple[str, ...]] = ()
    #: Those of them written in a flat form (large and regular).
    STATE_FORMS: ClassVar[Mapping[str, Form]] = {}

    def __init__(self, label: str = "") -> None:
        # Linked by the planner after every operator exists (cycles).
        self.children: list[Operator] = []
        self.label = label or type(self).__name__
        self.ctx = SliceContext()  # replaced by the program's shared one

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        raise NotImplementedError

    def next_fire(self) -> int | None:
        """Earliest instant at which this operator emits with no new input."""
        return None

    def state_low(self) -> int | None:
        """Oldest input position (lineage) held in this operator's state."""
        return None

    def check_state(self) -> None:
        """Raise :class:`~semiactive.node.engine.state_codec.StateFormatError` if the
        state a snapshot just set breaks an invariant this operator's code
        relies on (a rogue member's forged snapshot must be refused, not
        crash the node later). Types are already checked; only operators
        whose structures refer to each other need one."""

    def counters(self) -> tuple[int, ...]:
        return ()

    def restore_counters(self, values: tuple[int, ...], ts: int) -> list[Element]:
        """Set the history-dependent counters; return corrective deltas."""
        return []

    def __repr__(self) -> str:
        return f"<{self.label}>"


@state_class("head", "key")
class OldestHead:
    """The oldest lineage held by keyed FIFO partitions (``[Partition By ..
    Rows N]``) over a monotone input, asked for at every slice: a scan of
    every partition costs as many steps as keys ever seen (Linear Road's
    cars: tens of thousands). The partition holding the oldest head is
    remembered and the scan repeated only once that head left: any other
    head only gets newer (FIFO eviction), and a new partition starts with a
    row newer than every one held (the input is monotone)."""

    __slots__ = ("head", "key")

    def __init__(self) -> None:
        self.key: object = None
        self.head: Element | None = None

    def low(self, parts: Mapping[object, Sequence[Element]]) -> int | None:
        if self.head is not None:
            part = parts.get(self.key)
            if part and part[0] is self.head:
                return int(self.head[1])
        self.head = None
        for key, part in parts.items():
            if part and (self.head is None or part[0][1] < self.head[1]):
                self.key, self.head = key, part[0]
        return None if self.head is None else int(self.head[1])


@state_class("credit", "low")
class LowBound:
    """The oldest lineage held by a window over a *non-monotone* input, as a
    bound: never newer than the truth, sometimes older. Scanning the whole
    state at every slice cost Linear Road's partitions most of their time;
    here a scan is repeated only after as many rows arrived as it visited
    (amortised O(1) per row), and in between the bound is the last scan's
    answer lowered by every row that arrived since. An older low is safe for
    both of its uses: a Level-1 cut further back only retains more, and a
    slice floor only has to be no newer than what is held."""

    __slots__ = ("credit", "low")

    def __init__(self) -> None:
        self.low: int | None = None
        self.credit = 0

    def arrived(self, batch: Sequence[Element]) -> None:
        if batch:
            oldest = min(map(_lineage, batch))
            if self.low is None or oldest < self.low:
                self.low = int(oldest)
            self.credit -= len(batch)

    def value(self, held: Callable[[], Iterator[Element]]) -> int | None:
        if self.credit <= 0:
            lineages = [e[1] for e in held()]
            self.low = int(min(lineages)) if lineages else None
            self.credit = len(lineages)
        return self.low


_lineage = operator.itemgetter(1)


def instants(elements: list[Element]) -> Iterator[tuple[int, list[Element]]]:
    """Group a ts-sorted list into ``(ts, elements of that instant)``."""
    n = len(elements)
    i = 0
    while i < n:
        ts = elements[i][0]
        j = i + 1
        while j < n and elements[j][0] == ts:
            j += 1
        yield ts, elements[i:j]
        i = j


def instants2(
    left: list[Element], right: list[Element]
) -> Iterator[tuple[int, list[Element], list[Element]]]:
    """Like :func:`instants` over two inputs: ``(ts, left part, right part)``
    for every instant present in either input, in time order."""
    i = j = 0
    nl, nr = len(left), len(right)
    while i < nl or j < nr:
        tl = left[i][0] if i < nl else None
        tr = right[j][0] if j < nr else None
        ts = tl if tr is None or (tl is not None and tl <= tr) else tr
        i2 = i
        while i2 < nl and left[i2][0] == ts:
            i2 += 1
        j2 = j
        while j2 < nr and right[j2][0] == ts:
            j2 += 1
        assert ts is not None
        yield ts, left[i:i2], right[j:j2]
        i, j = i2, j2


def merge_by_ts(left: list[Element], right: list[Element]) -> list[Element]:
    """Merge two ts-sorted lists, left first within an instant."""
    if not right:
        return left
    if not left:
        return right
    if left[-1][0] <= right[0][0]:
        return left + right
    out: list[Element] = []
    for _, lpart, rpart in instants2(left, right):
        out.extend(lpart)
        out.extend(rpart)
    return out
