"""COUNT / SUM / AVG / MIN / MAX per group over a ``[Range T Slide L]``
window, in time linear in the tuples carried, with no sort of them.

:class:`~.grouped_window_aggregate.GroupedWindowAggregate` sorts every
carried tuple by (group, position) at each call, several times: in an HA
stage at 250,000 tuples/s a 100-ms window carries about 27,000 tuples
against the few thousand a call brings, and the stage took twice the CPU
of the row engine. Here each group has a stable number, and the carried
tuples are also kept in (group, arrival) order: a call merges its new
tuples into that order and drops those that left (linear moves), takes
prefix sums (or a table of range minima) over it, and answers each
(instant, group) the window's changes touch with two binary searches, a
group's tuples in a range of arrivals being a run of that order.

It gives up (:meth:`GroupedRangeSums.advance` returns None, changing
nothing) for an argument that is neither an int64 nor a float64, a key
that is neither an int64, bytes nor text, or sums that could leave
int64;
the caller then carries on with the general algorithm from
:meth:`GroupedRangeSums.carried`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from semiactive.node.cql import plan
from semiactive.node.engine.columnar import float_window_sums
from semiactive.node.engine.columnar.batch import Array, Int64s
from semiactive.node.engine.columnar.group_numbers import GroupNumbers, numbered
from semiactive.node.engine.columnar.range_sums import SUM_LIMIT, Tail
from semiactive.node.engine.columnar.window_aggregate import range_extreme

LEAVE, ENTER = 0, 1  # the phases of a window's changes at one instant, in order


class GroupedRangeSums:
    """``calls`` per group of ``keys`` key columns over ``[Range range_ms
    Slide slide]``."""

    def __init__(
        self, calls: Sequence[plan.AggCall], keys: int, range_ms: int, slide: int, lineage: bool
    ) -> None:
        self.calls = list(calls)
        self.range_ms = range_ms
        self.slide = slide
        # The calls that read their argument's values (all but COUNT), and
        # those of them that add the values up.
        self.valued = [k for k, call in enumerate(self.calls) if call.func is not plan.AggFunc.COUNT]
        self.adds = [call.func in (plan.AggFunc.SUM, plan.AggFunc.AVG) for call in self.calls]
        # Arrival order: timestamps, group numbers, lineages.
        self.ts = Tail(np.int64)
        self.gid = Tail(np.int64)
        self.lin: Tail | None = Tail(np.int64) if lineage else None
        self.first = 0  # the arrival number of the first carried tuple
        # (group, arrival) order: group numbers, arrival numbers, arguments.
        self.by_group: Int64s = np.empty(0, dtype=np.int64)
        self.arrival: Int64s = np.empty(0, dtype=np.int64)
        self.values: list[Int64s] = [np.empty(0, dtype=np.int64) for _ in self.valued]
        self.groups = GroupNumbers(keys)

    def state_low(self) -> int | None:
        lin = self.lin
        return int(lin.data[lin.start]) if lin is not None and len(lin) else None

    def carried(self) -> tuple[Int64s, list[Array], list[Array], Int64s | None]:
        """The carried tuples in arrival order: timestamps, key columns,
        each call's argument values (0 for a COUNT), lineages."""
        order = np.argsort(self.arrival, kind="stable")
        keys, args = carried_keys_and_args(
            order, self.by_group, self.groups, self.valued, self.values, self.calls
        )
        lin = self.lin.view.copy() if self.lin is not None else None
        return self.ts.view.copy(), keys, args, lin

    def advance(
        self,
        ts: Int64s,
        keys: Sequence[Array],
        args: Sequence[Array],
        done: int,
        watermark: int,
        lin: Int64s | None,
    ) -> tuple[Int64s, Int64s, Int64s, list[Array], Int64s] | None:
        """Add tuples ``ts`` (all in ``(done, watermark]``). Return, for
        every (instant, group) the window's changes touch in ``(done,
        watermark]``, in the order the row engine meets them: the instant,
        the group's number (its key values are ``groups.key_values`` there),
        the window's count in the group, each call's column (COUNT, MIN,
        MAX, or the sum for SUM and AVG: the caller divides) and the index
        of the same group's previous query here (-1: none). None, changing
        nothing, where it gives up."""
        valued = [args[k] for k in self.valued]
        if not taken_arguments(valued) or not all(numbered(k) for k in keys):
            return None
        n = len(self.arrival) + len(ts)
        largest = largest_summed(self.valued, self.adds, self.values, valued)
        if largest * n >= SUM_LIMIT:
            return None
        if len(self.groups) > 1024 and len(self.groups) > 2 * len(self.by_group):
            self._renumber()  # most groups have no tuple left (a change nobody sees)
        if (len(self.groups) + len(ts) + 1) * (n + 1) >= SUM_LIMIT:
            return None  # group * span + arrival could leave int64
        gid = self.groups.of(keys)
        self._merge(ts, gid, valued, lin)
        all_ts = self.ts.view
        slide, life = self.slide, self.range_ms
        # As RangeSums: only tuples before watermark - T can leave by the
        # watermark, only those after done - slide can still enter.
        leaving = int(np.searchsorted(all_ts, watermark - life, side="left"))
        leave = (all_ts[:leaving] + life) // slide * slide + slide
        entering = int(np.searchsorted(all_ts, done - slide, side="right"))
        enter = -(-all_ts[entering:] // slide) * slide
        inst, index = _events(all_ts, leave, enter, entering, slide, life, done, watermark)
        q_inst, q_gid = _first_touches(inst, self.gid.view[index])
        # The window at t holds ts in [t - T, t]: arrivals [lo, hi), and
        # the group's among them a run of the (group, arrival) order.
        lo = np.searchsorted(all_ts, q_inst - life, side="left").astype(np.int64)
        hi = np.searchsorted(all_ts, q_inst, side="right").astype(np.int64)
        span = len(all_ts) + 1
        composite = self.by_group * span + (self.arrival - self.first)
        start = np.searchsorted(composite, q_gid * span + lo, side="left")
        stop = np.searchsorted(composite, q_gid * span + hi, side="left")
        count = (stop - start).astype(np.int64)
        found = {}
        for k, values in zip(self.valued, self.values, strict=True):
            if self.adds[k]:
                found[k] = run_sums(values, start, stop)
            else:  # each group's run of the window: a range of this order
                found[k] = range_extreme(values, start, stop, largest=self.calls[k].func is plan.AggFunc.MAX)
        columns: list[Array] = [found.get(k, count) for k in range(len(self.calls))]
        self._cut(int(np.searchsorted(leave, watermark, side="right")))
        return q_inst, q_gid, count, columns, previous_queries(q_gid)

    def _merge(self, ts: Int64s, gid: Int64s, valued: Sequence[Int64s], lin: Int64s | None) -> None:
        """Append the new tuples in arrival order, and insert them into the
        (group, arrival) order at the end of their groups' runs."""
        arrival = self.first + len(self.ts) + np.arange(len(ts), dtype=np.int64)
        self.ts.append(ts)
        self.gid.append(gid)
        if self.lin is not None and lin is not None:
            self.lin.append(lin)
        merged = GroupOrderMerge(self.by_group, gid)
        self.by_group = merged(self.by_group, gid)
        self.arrival = merged(self.arrival, arrival)
        self.values = [merged(v, s) for v, s in zip(self.values, valued, strict=True)]

    def _cut(self, n: int) -> None:
        """Drop the ``n`` oldest tuples: they left the window for good."""
        if not n:
            return
        self.ts.cut(n)
        self.gid.cut(n)
        if self.lin is not None:
            self.lin.cut(n)
        self.first += n
        keep = self.arrival >= self.first
        self.by_group = self.by_group[keep]
        self.arrival = self.arrival[keep]
        self.values = [v[keep] for v in self.values]

    def _renumber(self) -> None:
        """Number the groups that still have tuples 0, 1, ... and forget
        the others' keys: a key seen again is then a new group."""
        number = self.groups.keep(np.unique(self.by_group))
        self.by_group = number[self.by_group]
        view = self.gid.view
        view[:] = number[view]


def largest_summed(
    valued: Sequence[int], adds: Sequence[bool], carried: Sequence[Int64s], new: Sequence[Int64s]
) -> int:
    """The largest magnitude of the values a SUM or AVG adds up (``valued``
    calls' carried and new arguments): times the tuples, a bound on its
    prefix sums."""
    pairs = zip(valued, carried, new, strict=True)
    added = [v for k, old, fresh in pairs if adds[k] for v in (old, fresh) if v.dtype == np.int64]
    return max((max(-int(v.min()), int(v.max())) for v in added if len(v)), default=0)


def taken_arguments(args: Sequence[Array]) -> bool:
    """Whether the incremental paths take these argument columns: int64,
    or float64 (summed exactly, float_window_sums; ordered as float_order)."""
    return all(a.dtype in (np.int64, np.float64) for a in args)


def run_sums(values: Array, start: Int64s, stop: Int64s) -> Array:
    """The sums of ``values[start:stop]`` for each run: int64 prefix sums
    (the callers bound them), or exact float sums."""
    if values.dtype == np.float64:
        return float_window_sums.window_sums(values, start, stop)
    prefix = np.concatenate((np.zeros(1, dtype=np.int64), np.cumsum(values)))
    return prefix[stop] - prefix[start]  # type: ignore[no-any-return]


def carried_keys_and_args(
    order: Int64s,
    by_group: Int64s,
    groups: GroupNumbers,
    valued: Sequence[int],
    values: Sequence[Array],
    calls: Sequence[plan.AggCall],
) -> tuple[list[Array], list[Array]]:
    """The key columns and each call's argument (0 for a COUNT) of tuples
    kept in (group, arrival) order, taken in ``order``: what both
    incremental paths hand the general algorithm when they give up."""
    gid = by_group[order]
    taken = dict(zip(valued, (v[order] for v in values), strict=True))
    n = len(order)
    args = [taken.get(k, np.zeros(n, dtype=np.int64)) for k in range(len(calls))]
    return [k[gid] for k in groups.key_values], args


class GroupOrderMerge:
    """Where new tuples land in a (group, arrival) order: each at the end
    of its group's run, moved on by the new tuples before it (np.insert
    does this, at twice the cost). Called on a carried column and the new
    tuples' values of it, it gives the merged column."""

    def __init__(self, by_group: Int64s, gid: Int64s) -> None:
        self.order = np.argsort(gid, kind="stable")
        self.at = np.searchsorted(by_group, gid[self.order], side="right") + np.arange(len(gid))
        self.old = np.ones(len(by_group) + len(gid), dtype=bool)
        self.old[self.at] = False

    def __call__(self, carried: Array, new: Array) -> Array:
        out = np.empty(len(self.old), dtype=np.result_type(carried, new))  # int64, or float64 for float sums
        out[self.old] = carried
        out[self.at] = new[self.order]
        return out

    def landed(self) -> Int64s:
        """Each new tuple's index in the merged order, in their order."""
        at = np.empty(len(self.order), dtype=np.int64)
        at[self.order] = self.at
        return at


def _events(
    all_ts: Int64s,
    leave: Int64s,
    enter: Int64s,
    entering: int,
    slide: int,
    life: int,
    done: int,
    watermark: int,
) -> tuple[Int64s, Int64s]:
    """The window's changes in ``(done, watermark]``, as the row engine
    meets them (by instant, leaving before entering, then arrival): their
    instants and the carried tuples' indexes. A tuple a slide
    longer than the range skips is never in a window and touches nothing."""
    leave_index = np.arange(len(leave), dtype=np.int64)
    enter_index = np.arange(entering, len(all_ts), dtype=np.int64)
    seen_leave = leave > -(-all_ts[: len(leave)] // slide) * slide
    seen_enter = (all_ts[entering:] + life) // slide * slide + slide > enter
    inst = np.concatenate((leave[seen_leave], enter[seen_enter]))
    index = np.concatenate((leave_index[seen_leave], enter_index[seen_enter]))
    phase = np.concatenate(
        (np.full(int(seen_leave.sum()), LEAVE, dtype=np.int64), np.full(int(seen_enter.sum()), ENTER))
    )
    ok = (inst > done) & (inst <= watermark)
    inst, index, phase = inst[ok], index[ok], phase[ok]
    order = np.lexsort((index, phase, inst))
    return inst[order], index[order]


def _first_touches(inst: Int64s, gid: Int64s) -> tuple[Int64s, Int64s]:
    """The distinct (instant, group) pairs of events in order, each at its
    first event."""
    if not len(inst):
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    instant_rank = np.cumsum(np.r_[0, inst[1:] != inst[:-1]])  # the events come by instant
    pair = instant_rank * (int(gid.max()) + 1) + gid
    _, first = np.unique(pair, return_index=True)
    first = np.sort(first)
    return inst[first], gid[first]


def previous_queries(q_gid: Int64s) -> Int64s:
    """For each query, the index of the same group's previous query (-1)."""
    by_group = np.lexsort((np.arange(len(q_gid)), q_gid))
    previous = np.full(len(q_gid), -1, dtype=np.int64)
    same = q_gid[by_group[1:]] == q_gid[by_group[:-1]]
    previous[by_group[1:][same]] = by_group[:-1][same]
    return previous
