"""Stream-to-relation operators: the CQL windows.

A window turns stream tuples into relation changes: ``+e`` when a tuple
enters the window's relation and ``-e`` (stamped with the instant it leaves)
when it leaves. The buffered tuples are the window's state, so the oldest
buffered lineage is the window's contribution to the Level-1 cut.

``monotone`` is decided by the planner: True when the input stream's lineage
never decreases (a base input, possibly filtered or projected), so the head
of a FIFO buffer holds the minimum; otherwise ``state_low`` is a
:class:`LowBound`.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Sequence
from typing import Any, ClassVar

from semiactive.node.engine import expressions
from semiactive.node.engine.elements import VALUES, Element
from semiactive.node.engine.operators.base import LowBound, OldestHead, Operator
from semiactive.node.engine.state_codec import StateFormatError


def _head_low(buf: deque[Element]) -> int | None:
    """The oldest lineage of a FIFO buffer over a monotone input: its head's."""
    return int(buf[0][1]) if buf else None


_RANGE = """
def process(self, batch, t_hi):
    buf = self.buf
    out = []
    append = out.append
    if batch:
        ts = batch[0][0]
        if ts == batch[-1][0]:
            if buf and buf[-1][0] + {life} <= ts:
                out = [{delete} for o in buf]
                append = out.append
                buf.clear()
            else:
                while buf and buf[0][0] + {life} <= ts:
                    o = buf.popleft()
                    append({delete})
            out += batch
            buf.extend(batch)
        else:
            for e in batch:
                ts = e[0]
                while buf and buf[0][0] + {life} <= ts:
                    o = buf.popleft()
                    append({delete})
                buf.append(e)
                append(e)
    while buf and buf[0][0] + {life} <= t_hi:
        o = buf.popleft()
        append({delete})
    return out
"""


class RangeWindowOp(Operator):
    """``[Range T]`` (T >= 0; ``[Now]`` is T = 0) and ``[Range Unbounded]``
    (``range_ms`` None). A tuple with timestamp ts is in the relation at
    instants ts .. ts+T and leaves at ts+T+1. The bounded window is a
    generated loop for the stream's width (a batch of one instant, the usual
    case in a recursive program, expires and enters without a per-tuple
    loop)."""

    STATE = ("buf", "_first_lin", "_low")

    timed = True

    def __init__(self, range_ms: int | None, width: int, monotone: bool, label: str = "") -> None:
        super().__init__(label)
        self.range_ms = range_ms
        self.monotone = monotone
        self.buf: deque[Element] = deque()
        self._first_lin: int | None = None  # unbounded: lineage never leaves
        self._low = LowBound()
        #: The deletion of buffered element ``o`` as Python source.
        self.deletion = expressions.element_source("o", width, ts=f"o[0] + {(range_ms or 0) + 1}", sign="-1")
        if range_ms is not None:
            namespace: dict[str, Any] = {}
            exec(_RANGE.format(life=range_ms + 1, delete=self.deletion), namespace)  # noqa: S102
            self._bounded = namespace["process"]

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        batch = inputs[0]
        if self.range_ms is not None:
            if not self.monotone:
                self._low.arrived(batch)
            return self._bounded(self, batch, t_hi)  # type: ignore[no-any-return]
        if batch and self._first_lin is None:
            self._first_lin = min(e[1] for e in batch) if not self.monotone else batch[0][1]
        elif batch and not self.monotone:
            self._first_lin = min(self._first_lin or batch[0][1], *(e[1] for e in batch))
        return batch

    def next_fire(self) -> int | None:
        if self.range_ms is None or not self.buf:
            return None
        return int(self.buf[0][0]) + self.range_ms + 1

    def state_low(self) -> int | None:
        if self.range_ms is None:
            return self._first_lin
        return _head_low(self.buf) if self.monotone else self._low.value(lambda: iter(self.buf))


class SlidingRangeWindowOp(Operator):
    """``[Range T Slide L]``: at instant t the relation holds the tuples with
    ``b - T <= ts <= b``, ``b = floor(t / L) * L``. A tuple enters at the
    first multiple of L >= ts and leaves at the first multiple of L > ts + T."""

    STATE = ("waiting", "active", "_low")

    timed = True

    def __init__(self, range_ms: int, slide_ms: int, monotone: bool, label: str = "") -> None:
        super().__init__(label)
        self.range_ms = range_ms
        self.slide_ms = slide_ms
        self.monotone = monotone
        self.waiting: deque[tuple[int, Element]] = deque()  # (enter time, e)
        self.active: deque[tuple[int, Element]] = deque()  # (leave time, e)
        self._low = LowBound()

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        slide, rng = self.slide_ms, self.range_ms
        if not self.monotone:
            self._low.arrived(inputs[0])
        for e in inputs[0]:
            self.waiting.append((-(-e[0] // slide) * slide, e))
        out: list[Element] = []
        waiting, active = self.waiting, self.active
        while True:
            te = waiting[0][0] if waiting else None
            tl = active[0][0] if active else None
            if tl is not None and tl <= t_hi and (te is None or tl <= te):
                _, old = active.popleft()
                out.append((tl, old[1], -1, *old[3:]))
            elif te is not None and te <= t_hi:
                _, e = waiting.popleft()
                leave = ((e[0] + rng) // slide + 1) * slide
                if leave > te:
                    out.append((te, e[1], 1, *e[3:]))
                    active.append((leave, e))
            else:
                return out

    def next_fire(self) -> int | None:
        times = [q[0][0] for q in (self.waiting, self.active) if q]
        return min(times) if times else None

    def state_low(self) -> int | None:
        if self.monotone:
            heads = [q[0][1][1] for q in (self.active, self.waiting) if q]
            return int(min(heads)) if heads else None
        return self._low.value(lambda: (e for q in (self.waiting, self.active) for _, e in q))


class RowsWindowOp(Operator):
    """``[Rows N]`` and ``[Rows N Slide M]``.

    With a slide the relation changes only when the count of arrived tuples
    reaches a multiple of M; ``pending`` (arrived, not yet visible) is then the
    history-dependent counter reported to the HA layer. ``gone`` keeps the
    last M - 1 tuples that left the buffer, and the state's low covers them:
    a replica rebuilt from this state's cut counts its own phase, and
    adopting another one (up to M - 1 pending) needs the window as it was
    that many tuples back.
    """

    STATE = ("buf", "pending", "gone", "_low")

    def __init__(self, rows: int, slide: int, monotone: bool, label: str = "") -> None:
        super().__init__(label)
        self.rows = rows
        self.slide = slide
        self.monotone = monotone
        self.buf: deque[Element] = deque()
        self.gone: deque[Element] = deque(maxlen=max(0, slide - 1))
        self.pending = 0
        self._low = LowBound()

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        batch = inputs[0]
        if not batch:
            return batch
        if not self.monotone:
            self._low.arrived(batch)
        buf, rows = self.buf, self.rows
        out: list[Element] = []
        append = out.append
        if self.slide == 1:
            for e in batch:
                buf.append(e)
                append(e)
                if len(buf) > rows:
                    old = buf.popleft()
                    append((e[0], old[1], -1, *old[3:]))
            return out
        slide = self.slide
        pending = self.pending
        for e in batch:
            buf.append(e)
            pending += 1
            if pending == slide:
                ts = e[0]
                visible_before = len(buf) - slide
                excess = len(buf) - rows
                for i in range(excess):
                    old = buf.popleft()
                    self.gone.append(old)
                    if i < visible_before:
                        append((ts, old[1], -1, *old[3:]))
                n = len(buf)
                for i in range(n - min(slide, n), n):
                    new = buf[i]
                    append((ts, new[1], 1, *new[3:]))
                pending = 0
        self.pending = pending
        return out

    def state_low(self) -> int | None:
        if self.monotone:
            return _head_low(self.gone or self.buf)
        return self._low.value(lambda: itertools.chain(self.gone, self.buf))

    def counters(self) -> tuple[int, ...]:
        return (self.pending,) if self.slide > 1 else ()

    def restore_counters(self, values: tuple[int, ...], ts: int) -> list[Element]:
        """Adopt the primary's slide phase after a warm-up: keep the newest
        ``rows + pending`` tuples and emit the change of the visible part."""
        if self.slide == 1 or not values:
            return []
        buf = self.buf
        old_visible = list(buf)[: len(buf) - self.pending]
        pending = values[0]
        history = [*self.gone, *buf]
        cut = max(0, len(history) - (self.rows + pending))
        keep = history[cut:]
        new_visible = keep[: max(0, len(keep) - pending)]
        self.buf = deque(keep)
        self.gone = deque(history[:cut], maxlen=self.gone.maxlen)
        self.pending = min(pending, len(keep))
        out: list[Element] = []
        new_ids = {id(e) for e in new_visible}
        old_ids = {id(e) for e in old_visible}
        out.extend((ts, e[1], -1, *e[3:]) for e in old_visible if id(e) not in new_ids)
        out.extend((ts, e[1], 1, *e[3:]) for e in new_visible if id(e) not in old_ids)
        return out


_PARTITION = """
def process(self, batch, t_hi):
    if not batch:
        return batch
    parts = self.parts
    get = parts.get
    out = []
    append = out.append
    for e in batch:
        k = {key}
        part = get(k)
        if part is None:
            part = parts[k] = deque()
        part.append(e)
        append(e)
        if len(part) > {rows}:
            o = part.popleft()
            append({delete})
    return out
"""


class PartitionWindowOp(Operator):
    """``[Partition By keys Rows N]``: the last N tuples of each partition
    (``keys`` are column positions); a generated loop."""

    STATE: ClassVar[tuple[str, ...]] = ("parts", "_oldest", "_low")

    def __init__(self, keys: Sequence[int], rows: int, width: int, monotone: bool, label: str = "") -> None:
        super().__init__(label)
        self.rows = rows
        self.monotone = monotone
        self.parts: dict[Any, deque[Element]] = {}
        self._oldest = OldestHead()
        self._low = LowBound()
        key = "(" + "".join(f"e[{VALUES + k}], " for k in keys) + ")"
        delete = expressions.element_source("o", width, ts="e[0]", sign="-1")
        namespace: dict[str, Any] = {"deque": deque}
        exec(_PARTITION.format(key=key, rows=rows, delete=delete), namespace)  # noqa: S102
        self._process = namespace["process"]

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        if not self.monotone:
            self._low.arrived(inputs[0])
        return self._process(self, inputs[0], t_hi)  # type: ignore[no-any-return]

    def state_low(self) -> int | None:
        if self.monotone:
            return self._oldest.low(self.parts)
        return self._low.value(lambda: (e for part in self.parts.values() for e in part))


_PARTITION_RANGE = """
def process(self, batch, t_hi):
    parts = self.parts
    get = parts.get
    heads = self.heads
    serial = self.serial
    out = []
    append = out.append
    for e in (*batch, None):
        now = t_hi if e is None else e[0]
        while heads and heads[0][0] + {life} <= now:
            s, _, _, k = heads[0]
            part = get(k)
            while part and part[0][0] <= s:
                o = part.popleft()
                append({expire})
            if part:
                h = part[0]
                serial += 1
                heapreplace(heads, (h[0], h[1], serial, k))
            else:
                heappop(heads)
                if part is not None:
                    del parts[k]
        if e is None:
            self.serial = serial
            return out
        k = {key}
        part = get(k)
        if part is None:
            part = parts[k] = deque()
            serial += 1
            heappush(heads, (e[0], e[1], serial, k))
        part.append(e)
        append(e)
        if len(part) > {rows}:
            o = part.popleft()
            append({delete})
"""


class PartitionRangeWindowOp(Operator):
    """``[Partition By keys Rows N Range T]``: the last N tuples of each
    partition, each for at most T + 1 instants (it leaves at ts + T + 1 as
    in ``[Range T]``, or earlier when N newer ones of its partition came).
    A partition left empty is dropped: the state holds only keys seen within
    the last T, not every key ever seen.

    ``heads`` is a heap with one entry per partition, ``(ts, lineage,
    serial, key)`` of its oldest tuple when the entry was made, so expiry
    scans no partition. An entry goes stale when its tuple is pushed out by
    newer ones (the next head is newer): it then comes up early, expires
    nothing and is replaced by the partition's head. One entry per row
    arrived within T (a queue in arrival order) held 30 times the rows for
    Linear Road's charges (a window of an hour over a car's last 2
    crossings). ``serial`` orders entries of one instant and lineage
    without comparing keys. Over a monotone input the heap's first valid
    entry is the oldest lineage held."""

    STATE = ("parts", "heads", "serial", "_low")

    timed = True

    def __init__(
        self, keys: Sequence[int], rows: int, range_ms: int, width: int, monotone: bool, label: str = ""
    ) -> None:
        super().__init__(label)
        self.rows = rows
        self.range_ms = range_ms
        self.width = width
        self.monotone = monotone
        self.parts: dict[Any, deque[Element]] = {}
        self.heads: list[tuple[int, int, int, Any]] = []
        self.serial = 0
        self._low = LowBound()
        key = "(" + "".join(f"e[{VALUES + k}], " for k in keys) + ")"
        source = _PARTITION_RANGE.format(
            key=key,
            rows=rows,
            life=range_ms + 1,
            delete=expressions.element_source("o", width, ts="e[0]", sign="-1"),
            expire=expressions.element_source("o", width, ts=f"o[0] + {range_ms + 1}", sign="-1"),
        )
        namespace: dict[str, Any] = {
            "deque": deque,
            "heappush": heapq.heappush,
            "heappop": heapq.heappop,
            "heapreplace": heapq.heapreplace,
        }
        exec(source, namespace)  # noqa: S102
        self._process = namespace["process"]

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        if not self.monotone:
            self._low.arrived(inputs[0])
        return self._process(self, inputs[0], t_hi)  # type: ignore[no-any-return]

    def next_fire(self) -> int | None:
        return int(self.heads[0][0]) + self.range_ms + 1 if self.heads else None

    def check_state(self) -> None:
        """Each partition non-empty, of elements this operator's width, and
        with exactly one expiry entry: ``state_low`` and ``process`` index
        a partition by its entry's key and an element by its width."""
        keys = []
        for entry in self.heads:
            if not (
                type(entry) is tuple
                and len(entry) == 4
                and all(type(x) is int for x in entry[:3])
                and type(entry[3]) is tuple
            ):
                raise StateFormatError(f"{self.label}: an expiry entry is not (ts, lineage, serial, key)")
            keys.append(entry[3])
        try:
            named = set(keys)
        except TypeError:  # a key holding a list
            raise StateFormatError(f"{self.label}: an expiry entry's key is not a row of values") from None
        if len(keys) != len(self.parts) or named != set(self.parts):
            raise StateFormatError(f"{self.label}: the expiry entries do not name the partitions held")
        size = VALUES + self.width
        for part in self.parts.values():
            rows_fit = type(part) is deque and all(type(e) is tuple and len(e) == size for e in part)
            if not (part and rows_fit):
                raise StateFormatError(f"{self.label}: a partition is empty or holds malformed rows")

    def state_low(self) -> int | None:
        if not self.monotone:
            return self._low.value(lambda: (e for part in self.parts.values() for e in part))
        heads, parts = self.heads, self.parts
        while heads:
            ts, lineage, _, key = heads[0]
            head = parts[key][0]
            if head[0] == ts and head[1] == lineage:
                return int(lineage)
            # Stale: the partition's head is newer; its entry takes its place.
            self.serial += 1
            heapq.heapreplace(heads, (head[0], head[1], self.serial, key))
        return None
