"""COUNT / SUM / AVG over a ``[Range T Slide L]`` window, in time
proportional to what a call adds and drops.

:class:`~.window_aggregate.WindowAggregate` evaluates a call over every
tuple it carries: at 250,000 tuples/s a 100-ms window carries about 27,000
tuples, and an HA stage's runs bring a few thousand, so most of its time
went to concatenating, re-deriving and re-summing the carried tuples.
Here the carried tuples stay in buffers that grow at the end and are cut
at the head (:class:`Tail`), each SUM / AVG argument as prefix sums, so
that a window's sum is a difference of two of them; a call looks only at
the tuples it adds, the tuples that leave, and the instants it evaluates.

It gives up (:meth:`RangeSums.advance` returns None) where its int64
prefix sums could overflow even from the first carried tuple on, or a
value is not an int64; the caller then carries on with the general
algorithm from :meth:`RangeSums.carried`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from semiactive.node.cql import plan
from semiactive.node.engine.columnar.batch import Array, Int64s

# Prefix sums stay below this in magnitude (int64 holds 2**63 - 1).
SUM_LIMIT = 2**62

FUNCS = (plan.AggFunc.COUNT, plan.AggFunc.SUM, plan.AggFunc.AVG)


class Tail:
    """An array appended at the end and cut at the head, each in time
    proportional to the rows added (the storage doubles when full; rows
    cut are reclaimed when the live part is moved to the front)."""

    def __init__(self, dtype: Any) -> None:
        self.data: Array = np.empty(1024, dtype=dtype)
        self.start = 0
        self.end = 0

    @property
    def view(self) -> Array:
        return self.data[self.start : self.end]

    def __len__(self) -> int:
        return self.end - self.start

    def append(self, values: Array) -> None:
        n = len(values)
        if self.end + n > len(self.data):
            live = self.end - self.start
            size = len(self.data)
            while live + n > size // 2:
                size *= 2
            data = np.empty(size, dtype=self.data.dtype)
            data[:live] = self.data[self.start : self.end]
            self.data, self.start, self.end = data, 0, live
        self.data[self.end : self.end + n] = values
        self.end += n

    def cut(self, n: int) -> None:
        self.start += n


class RangeSums:
    """``calls`` (COUNT, SUM, AVG; :data:`FUNCS`) over ``[Range range_ms
    Slide slide]``, fed int64 arguments."""

    def __init__(self, calls: Sequence[plan.AggCall], range_ms: int, slide: int, lineage: bool) -> None:
        self.calls = list(calls)
        self.range_ms = range_ms
        self.slide = slide
        self.ts = Tail(np.int64)
        self.lin: Tail | None = Tail(np.int64) if lineage else None
        # Per SUM / AVG call (COUNT reads no argument): prefix sums of its
        # arguments, one more than the carried tuples (the first is the sum
        # before them), so that a window's sum is ``p[hi] - p[lo]``; what no
        # prefix sum exceeds in magnitude.
        self.summed = [k for k, call in enumerate(self.calls) if call.func is not plan.AggFunc.COUNT]
        self.prefix = {k: Tail(np.int64) for k in self.summed}
        for prefix in self.prefix.values():
            prefix.append(np.zeros(1, dtype=np.int64))
        self.bound = 0

    def carried(self) -> tuple[Int64s, list[Array], Int64s | None]:
        """The carried tuples: timestamps, each call's argument values (0
        for a COUNT; the differences of the prefix sums, exact since they
        never left int64), lineages."""
        n = len(self.ts)
        args = [
            np.diff(self.prefix[k].view) if k in self.prefix else np.zeros(n, dtype=np.int64)
            for k in range(len(self.calls))
        ]
        lin = self.lin.view.copy() if self.lin is not None else None
        return self.ts.view.copy(), args, lin

    def advance(
        self, ts: Int64s, args: Sequence[Array], done: int, watermark: int, lin: Int64s | None
    ) -> tuple[Int64s, Int64s, Int64s, list[Array]] | None:
        """Add tuples ``ts`` (all in ``(done, watermark]``); return the
        instants in ``(done, watermark]`` where the window changed, its
        bounds ``lo``, ``hi`` in the carried tuples and each call's column
        there (COUNT, and sums for SUM and AVG: the caller divides); None,
        changing nothing, for a value that is not an int64 or prefix sums
        that could overflow int64."""
        summed = [args[k] for k in self.summed]
        if any(a.dtype != np.int64 for a in summed):
            return None
        largest = max((max(-int(a.min()), int(a.max())) for a in summed if len(a)), default=0)
        if self.bound + largest * len(ts) >= SUM_LIMIT:
            self._rebase()
            if self.bound + largest * len(ts) >= SUM_LIMIT:
                return None
        self.bound += largest * len(ts)
        self.ts.append(ts)
        if self.lin is not None and lin is not None:
            self.lin.append(lin)
        for k in self.summed:
            if len(args[k]):
                prefix = self.prefix[k]
                running = np.cumsum(args[k])
                running += prefix.data[prefix.end - 1]
                prefix.append(running)
        all_ts = self.ts.view
        slide, life = self.slide, self.range_ms
        # A tuple leaves at the first multiple of the slide > ts + T: only
        # those before watermark - T can leave by the watermark; only those
        # after done - slide can still enter (at the first multiple >= ts).
        leaving = all_ts[: int(np.searchsorted(all_ts, watermark - life, side="left"))]
        leave = (leaving + life) // slide * slide + slide
        entering = all_ts[int(np.searchsorted(all_ts, done - slide, side="right")) :]
        times = np.concatenate((-(-entering // slide) * slide, leave))
        at = np.unique(times[(times > done) & (times <= watermark)]).astype(np.int64)
        lo = np.searchsorted(all_ts, at - life, side="left").astype(np.int64)
        hi = np.searchsorted(all_ts, at, side="right").astype(np.int64)
        columns: list[Array] = []
        for k in range(len(self.calls)):
            if k in self.prefix:
                sums = self.prefix[k].view
                columns.append(sums[hi] - sums[lo])
            else:
                columns.append(hi - lo)
        self._cut(int(np.searchsorted(leave, watermark, side="right")))
        return at, lo, hi, columns

    def _cut(self, n: int) -> None:
        """Drop the ``n`` oldest tuples: they left the window for good."""
        if not n:
            return
        for prefix in self.prefix.values():
            prefix.cut(n)
        self.ts.cut(n)
        if self.lin is not None:
            self.lin.cut(n)

    def _rebase(self) -> None:
        """Prefix sums from the first carried tuple on, so that only the
        carried values bound them."""
        self.bound = 0
        for prefix in self.prefix.values():
            view = prefix.view
            view -= int(view[0])
            self.bound = max(self.bound, int(np.abs(view).max()))
