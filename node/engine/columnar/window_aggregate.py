"""An aggregate without GROUP BY over a window, evaluated at every instant
where the window changes, from prefix sums and range minima.

The row engine moves each tuple into and out of the window as a change and
updates the aggregate per change. Here the window at instant t is an index
range ``[lo, hi)`` of the tuples seen (they arrive in ts order), so that

- COUNT is ``hi - lo``, SUM a difference of prefix sums, AVG their ratio;
- MIN / MAX a lookup in a sparse table of range minima (log2 levels);

and only the instants at which the window's content changes are evaluated:
a ``[Rows N Slide M]`` at every M-th tuple, a ``[Range T Slide L]`` at the
multiples of L where a tuple enters (first multiple >= ts) or leaves (first
multiple > ts + T). ``[Now]`` is ``[Range 0]``. An empty window has no row.

Tuples that may still be in a later window are carried to the next call;
results are the row engine's (the differential tests compare them). Given
the tuples' lineages (an HA stage's input positions), it carries those too:
the oldest carried one is the oldest input the state depends on
(:meth:`WindowAggregate.state_low`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from semiactive.node.cql import plan
from semiactive.node.engine.columnar import float_window_sums
from semiactive.node.engine.columnar.batch import Array, Int64s
from semiactive.node.engine.columnar.range_sums import FUNCS, RangeSums
from semiactive.node.engine.columnar.vector_exprs import EXACT_FLOAT, INT64
from semiactive.node.engine.operators.float_order import FLIP, NAN_KEY


@dataclass(frozen=True)
class Evaluated:
    """The aggregate's row at each instant the window changed: ``ts``
    (increasing), ``present`` (the window was not empty) and one array per
    aggregate."""

    ts: Int64s
    present: np.ndarray
    columns: tuple[Array, ...]


class WindowAggregate:
    """``calls`` over ``[Rows rows Slide slide]`` (``rows`` set) or
    ``[Range range_ms Slide slide]``; fed the aggregates' argument columns."""

    def __init__(
        self,
        calls: Sequence[plan.AggCall],
        *,
        rows: int | None,
        range_ms: int,
        slide: int,
        lineage: bool = False,
    ) -> None:
        self.calls = list(calls)
        self.rows = rows
        self.range_ms = range_ms
        self.slide = max(1, slide)
        self.ts: Int64s = np.empty(0, dtype=np.int64)
        self.args: list[Array] = [np.empty(0, dtype=np.int64) for _ in self.calls]
        self.lin: Int64s = np.empty(0, dtype=np.int64)  # the carried tuples' lineages, if given
        self.pending = 0  # Rows with a slide: tuples since the last boundary
        # COUNT / SUM / AVG over a range window: the incremental path, until
        # it gives up (a value beyond int64, sums that could overflow).
        self.fast: RangeSums | None = None
        if rows is None and all(call.func in FUNCS for call in calls):
            self.fast = RangeSums(calls, range_ms, self.slide, lineage)

    def advance(
        self, ts: Int64s, args: Sequence[Array], done: int, watermark: int, lin: Int64s | None = None
    ) -> Evaluated:
        """Add tuples ``ts`` (all in ``(done, watermark]``) with their
        argument values (and lineages), and evaluate every instant in
        ``(done, watermark]``."""
        if self.fast is not None:
            result = self.fast.advance(ts, args, done, watermark, lin)
            if result is not None:
                at, lo, hi, sums = result
                count = hi - lo
                columns = tuple(
                    average(s, count) if call.func is plan.AggFunc.AVG else s
                    for call, s in zip(self.calls, sums, strict=True)
                )
                return Evaluated(at, count > 0, columns)
            self.ts, self.args, carried_lin = self.fast.carried()
            if carried_lin is not None:
                self.lin = carried_lin
            self.fast = None
        carried = len(self.ts)
        all_ts = np.concatenate((self.ts, ts)) if carried else ts
        all_args = [join(a, b) for a, b in zip(self.args, args, strict=True)]
        all_lin = None if lin is None else np.concatenate((self.lin, lin)) if carried else lin
        if self.rows is not None:
            at, lo, hi = self._rows_windows(all_ts, carried)
            # The last window's rows and a slide's worth before them: a
            # replica rebuilt from this state's cut counts its own phase,
            # and adopting another phase (up to slide - 1 pending) then
            # needs the window as it was that many rows back.
            keep_from = max(0, len(all_ts) - self.rows - self.slide + 1)
        else:
            at, lo, hi = self._range_windows(all_ts, done, watermark)
            leave = (all_ts + self.range_ms) // self.slide * self.slide + self.slide
            keep_from = int(np.searchsorted(leave, watermark, side="right"))
        columns = tuple(
            aggregate(call, values, lo, hi) for call, values in zip(self.calls, all_args, strict=True)
        )
        self.ts = all_ts[keep_from:]
        self.args = [a[keep_from:] for a in all_args]
        if all_lin is not None:
            self.lin = all_lin[keep_from:]
        return Evaluated(at, hi > lo, columns)

    def state_low(self) -> int | None:
        """The oldest lineage of the tuples carried: every later window, and
        the relation at the last instant evaluated, are made of carried
        tuples only (a tuple of that relation leaves at a later change, so
        after the watermark). The tuples came in ts order on one input, so
        the first carried one has the oldest lineage."""
        if self.fast is not None:
            lin = self.fast.lin
            return int(lin.data[lin.start]) if lin is not None and len(lin) else None
        return int(self.lin[0]) if len(self.lin) else None

    def counters(self) -> tuple[int, ...]:
        """The HA counter: a ``[Rows N Slide M]`` window's slide phase."""
        return (self.pending,) if self.rows is not None and self.slide > 1 else ()

    def restore_phase(self, pending: int) -> tuple[tuple[Array, ...], bool]:
        """Adopt another replica's slide phase (after a rebuild from rows,
        whose own phase counts from the rows it was given), as the row
        engine does: keep the newest ``rows + pending`` tuples; return the
        aggregate over the window that is visible then (one value per
        call) and whether it holds a tuple."""
        assert self.rows is not None
        keep_from = max(0, len(self.ts) - self.rows - pending)
        self.ts = self.ts[keep_from:]
        self.args = [a[keep_from:] for a in self.args]
        if len(self.lin):
            self.lin = self.lin[keep_from:]
        self.pending = min(pending, len(self.ts))
        end = len(self.ts) - self.pending
        lo, hi = np.array([max(0, end - self.rows)]), np.array([end])
        columns = tuple(
            aggregate(call, values, lo, hi) for call, values in zip(self.calls, self.args, strict=True)
        )
        return columns, end > int(lo[0])

    def _rows_windows(self, ts: Int64s, carried: int) -> tuple[Int64s, Int64s, Int64s]:
        new = len(ts) - carried
        assert self.rows is not None
        first = (self.slide - self.pending - 1) % self.slide  # the first new boundary
        ends = np.arange(carried + first, len(ts), self.slide, dtype=np.int64) + 1
        self.pending = (self.pending + new) % self.slide
        # Several boundaries at one instant: the relation is the last one's.
        at = ts[ends - 1]
        last = np.ones(len(at), dtype=bool)
        last[:-1] = at[1:] != at[:-1]
        ends = ends[last]
        return at[last], np.maximum(ends - self.rows, 0), ends

    def _range_windows(self, ts: Int64s, done: int, watermark: int) -> tuple[Int64s, Int64s, Int64s]:
        slide, life = self.slide, self.range_ms
        enter = -(-ts // slide) * slide  # carried tuples may enter later too
        leave = (ts + life) // slide * slide + slide
        times = np.concatenate((enter, leave))
        at = np.unique(times[(times > done) & (times <= watermark)])
        lo = np.searchsorted(ts, at - life, side="left").astype(np.int64)
        hi = np.searchsorted(ts, at, side="right").astype(np.int64)
        return at.astype(np.int64), lo, hi


def join(a: Array, b: Array) -> Array:
    if not len(a):
        return b
    if not len(b):  # an empty batch's columns are int64 whatever the schema
        return a
    if a.dtype != b.dtype and not a.dtype.kind == b.dtype.kind == "S":  # bytes of two lengths join
        return np.concatenate((a.astype(object), b.astype(object)))
    return np.concatenate((a, b))


def aggregate(call: plan.AggCall, values: Array, lo: Int64s, hi: Int64s) -> Array:
    """``call`` over ``values[lo:hi]`` for each window (0 where empty)."""
    count = hi - lo
    if call.func is plan.AggFunc.COUNT:
        return count
    if call.func in (plan.AggFunc.MIN, plan.AggFunc.MAX):
        return range_extreme(values, lo, hi, largest=call.func is plan.AggFunc.MAX)
    if call.arg is not None and call.arg.type.name is plan.TypeName.FLOAT:
        sums = float_window_sums.window_sums(np.asarray(values, dtype=np.float64), lo, hi)
    else:
        sums = _window_sums(values, lo, hi)
    if call.func is plan.AggFunc.SUM:
        return sums
    return average(sums, count)


def average(sums: Array, count: Int64s) -> Array:
    """AVG from a window's sum and count (0.0 for an empty window)."""
    out = np.zeros(len(count), dtype=np.float64)
    if sums.dtype == np.float64:  # a float sum / its count, as Python divides them
        np.divide(sums, count, out=out, where=count > 0)
        return out
    if sums.dtype == np.int64 and (not len(sums) or max(-int(sums.min()), int(sums.max())) <= EXACT_FLOAT):
        np.divide(sums, count, out=out, where=count > 0)
        return out
    # Past 2**53 a sum is no longer exact as a float: divide as Python does.
    return np.array([s / c if c else 0.0 for s, c in zip(sums.tolist(), count.tolist(), strict=True)])


def _window_sums(values: Array, lo: Int64s, hi: Int64s) -> Array:
    """``sum(values[lo:hi])`` for each window: int64 prefix sums while no
    partial sum can pass int64, else Python ints."""
    if values.dtype == np.int64 and len(values):
        largest = max(-int(values.min()), int(values.max()))  # np.abs(-2**63) overflows
        if largest * len(values) >= INT64[1]:
            values = values.astype(object)
    prefix = np.concatenate((np.zeros(1, dtype=values.dtype), np.cumsum(values)))
    return prefix[hi] - prefix[lo]  # type: ignore[no-any-return]


def range_extreme(values: Array, lo: Int64s, hi: Int64s, *, largest: bool) -> Array:
    """``min`` (or ``max``) of ``values[lo:hi]`` for each non-empty window
    (0 for an empty one), from a sparse table: level k holds the extreme of
    every run of 2**k values, and a window is the overlap of two runs.
    Floats are ordered as the row engine orders them (float_order)."""
    if values.dtype == np.float64:
        return _key_floats(range_extreme(_float_keys(values), lo, hi, largest=largest))
    pick = np.maximum if largest else np.minimum
    out = np.zeros(len(lo), dtype=values.dtype)
    length = hi - lo
    if not len(values) or not len(lo):
        return out
    widest = int(length.max())
    levels = [values]
    while (1 << len(levels)) <= widest:
        span = 1 << (len(levels) - 1)
        prev = levels[-1]
        levels.append(pick(prev[:-span], prev[span:]))
    present = length > 0
    k = np.zeros(len(lo), dtype=np.int64)
    k[present] = np.floor(np.log2(length[present])).astype(np.int64)
    for level in np.unique(k[present]):
        rows = np.flatnonzero(present & (k == level))
        table = levels[int(level)]
        start = lo[rows]
        end = hi[rows] - (1 << int(level))
        out[rows] = pick(table[start], table[end])
    return out


def _float_keys(values: np.ndarray) -> Int64s:
    """float_order's keys of float64 ``values``: their bits as int64,
    all but the sign flipped where negative; every NaN the greatest."""
    bits = np.ascontiguousarray(values).view(np.int64)
    keys = np.where(bits >= 0, bits, bits ^ FLIP)
    keys[np.isnan(values)] = NAN_KEY
    return keys  # type: ignore[no-any-return]


def _key_floats(keys: Int64s) -> np.ndarray:
    return np.where(keys >= 0, keys, keys ^ FLIP).view(np.float64)  # type: ignore[no-any-return]
