"""A GROUP BY over a window, evaluated for every (instant, group) the
window's changes touch.

The row engine applies each change of the window (a tuple leaving, a tuple
entering) to its group, and at the end of an instant emits the changed
groups, in the order the instant first touched them: the leaving tuples'
groups (oldest first), then the entering ones'. Here every tuple's leave
and enter are events at an instant; sorted as the row engine meets them and
reduced to the first (instant, group) pairs, they are the queries, in the
row engine's output order. A group's content at instant t is a contiguous
run once the tuples are sorted by (group, position), position being the ts
for a ``[Range T Slide L]`` (the run ``[t - T, t]``), the arrival index
for a ``[Rows N Slide M]`` (the last N up to t's last slide boundary) and
the index within the group for a ``[Partition By keys Rows N]`` grouped by
the same keys (the group's last N up to t): two
binary searches per query, and prefix sums and range minima over the sorted
arguments (:mod:`.window_aggregate`) give the aggregates.

Each query also gets the index of the same group's previous query in this
call (-1: the group's row before this call, which the caller keeps).

Given the tuples' lineages (an HA stage's input positions), it carries those
too: the oldest carried one is the oldest input the state depends on
(:meth:`GroupedWindowAggregate.state_low`). A group's row at the last instant
evaluated is made of carried tuples only: a tuple that left its group's
window touched the group as it left, so the row after that is without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from semiactive.node.cql import plan
from semiactive.node.engine.columnar.batch import Array, Int64s
from semiactive.node.engine.columnar.grouped_partition_rows import GroupedPartitionRows
from semiactive.node.engine.columnar.grouped_range_sums import (
    ENTER,
    LEAVE,
    GroupedRangeSums,
    previous_queries,
)
from semiactive.node.engine.columnar.window_aggregate import aggregate, average, join

# (instant, tuple index, phase, boundary) of one kind of event, per tuple
EventPart = tuple[Int64s, Int64s, int, Int64s]
# A window's first (or last) position for each query, given the queries'
# instants and the index of the last tuple of the (instant, group) touched.
Bound = Callable[[Int64s, Int64s], Int64s]
# Events (instants, tuple indexes) in order; each tuple's position; the
# window's first and last position; the tuples to carry to the next call.
Windows = tuple[tuple[Int64s, Int64s], Int64s, Bound, Bound, "slice | np.ndarray"]


@dataclass(frozen=True)
class GroupedEvaluated:
    ts: Int64s  # each query's instant, in output order
    keys: tuple[Array, ...]  # the group's key values
    present: np.ndarray  # the group is not empty
    columns: tuple[Array, ...]  # one per aggregate
    previous: Int64s  # index of the group's previous query here, or -1


class GroupedWindowAggregate:
    def __init__(
        self,
        calls: Sequence[plan.AggCall],
        keys: int,
        *,
        rows: int | None,
        range_ms: int,
        slide: int,
        partition: bool = False,
        lineage: bool = False,
    ) -> None:
        self.calls = list(calls)
        self.rows = rows
        self.partition = partition  # [Partition By the group's keys Rows N]
        self.index_in_group: Int64s = np.empty(0, dtype=np.int64)  # partition: the carried tuples'
        self.range_ms = range_ms
        self.slide = max(1, slide)
        self.ts: Int64s = np.empty(0, dtype=np.int64)
        self.keys: list[Array] = [np.empty(0, dtype=np.int64) for _ in range(keys)]
        self.args: list[Array] = [np.empty(0, dtype=np.int64) for _ in self.calls]
        self.first = 0  # Rows: the arrival index of the first carried tuple
        self.lin: Int64s | None = np.empty(0, dtype=np.int64) if lineage else None
        # A range or partition window: the incremental path, until it gives
        # up (a value not an int64, sums that could overflow).
        self.fast: GroupedRangeSums | GroupedPartitionRows | None = None
        if rows is None and not partition:
            self.fast = GroupedRangeSums(calls, keys, range_ms, self.slide, lineage)
        elif partition and rows is not None:
            self.fast = GroupedPartitionRows(calls, keys, rows, lineage)

    def advance(
        self,
        ts: Int64s,
        keys: Sequence[Array],
        args: Sequence[Array],
        done: int,
        watermark: int,
        lin: Int64s | None = None,
    ) -> GroupedEvaluated:
        """Add tuples ``ts`` (all in ``(done, watermark]``) with their key and
        argument values (and lineages, if kept), and evaluate every
        (instant, group) the window's changes touch in ``(done, watermark]``."""
        if self.fast is not None:
            result = self.fast.advance(ts, keys, args, done, watermark, lin)
            if result is not None:
                at, gid, count, sums, previous = result
                columns = tuple(
                    average(s, count) if call.func is plan.AggFunc.AVG else s
                    for call, s in zip(self.calls, sums, strict=True)
                )
                group_keys = tuple(k[gid] for k in self.fast.groups.key_values)
                return GroupedEvaluated(at, group_keys, count > 0, columns, previous)
            if isinstance(self.fast, GroupedPartitionRows):
                self.index_in_group = self.fast.positions()
            self.ts, self.keys, self.args, self.lin = self.fast.carried()
            self.fast = None
        carried = len(self.ts)
        all_ts = np.concatenate((self.ts, ts)) if carried else ts
        all_keys = [join(a, b) for a, b in zip(self.keys, keys, strict=True)]
        all_args = [join(a, b) for a, b in zip(self.args, args, strict=True)]
        n = len(all_ts)
        rank = _ranks(all_keys, n)
        if self.partition:
            events, position, lo_pos, hi_pos, keep = self._partition(all_ts, rank, carried)
        elif self.rows is not None:
            events, position, lo_pos, hi_pos, keep = self._rows(all_ts, carried, n)
        else:
            events, position, lo_pos, hi_pos, keep = self._range(all_ts, done, watermark)
        inst, index = events
        q_rank = rank[index]
        # The first touch of each (instant, group), in event order, and the
        # last tuple of the pair touched.
        if len(inst):
            _, instant_rank = np.unique(inst, return_inverse=True)  # small numbers: the pair fits int64
            pair = instant_rank.reshape(-1).astype(np.int64) * (int(rank.max()) + 1) + q_rank
            _, first = np.unique(pair, return_index=True)
            _, from_end = np.unique(pair[::-1], return_index=True)
            by_first = np.argsort(first)
            chosen, last = first[by_first], (len(pair) - 1 - from_end)[by_first]
        else:
            chosen = last = np.empty(0, dtype=np.int64)
        q_inst, q_index, q_rank = inst[chosen], index[chosen], q_rank[chosen]
        q_last = index[last]
        lo, hi = _runs(rank, position, q_rank, lo_pos(q_inst, q_last), hi_pos(q_inst, q_last))
        order = np.lexsort((position, rank))
        columns = tuple(
            aggregate(call, values[order], lo, hi) for call, values in zip(self.calls, all_args, strict=True)
        )
        previous = previous_queries(q_rank)
        self.ts = all_ts[keep]
        self.keys = [k[keep] for k in all_keys]
        self.args = [a[keep] for a in all_args]
        if self.lin is not None:
            assert lin is not None
            self.lin = np.concatenate((self.lin, lin))[keep] if carried else lin[keep]
        if self.partition:
            self.index_in_group = position[keep]
        return GroupedEvaluated(q_inst, tuple(k[q_index] for k in all_keys), hi > lo, columns, previous)

    def state_low(self) -> int | None:
        """The oldest lineage of the tuples carried: they are kept in arrival
        order (a partition window's are each group's last ones, a subset)."""
        if self.fast is not None:
            return self.fast.state_low()
        return int(self.lin[0]) if self.lin is not None and len(self.lin) else None

    def counters(self) -> tuple[int, ...]:
        """The HA counter: a ``[Rows N Slide M]`` window's slide phase (the
        tuples since its last boundary)."""
        if self.rows is None or self.partition or self.slide == 1:
            return ()
        return ((self.first + len(self.ts)) % self.slide,)

    def restore_phase(self, pending: int) -> tuple[tuple[Array, ...], tuple[Array, ...]]:
        """Adopt another replica's slide phase (after a rebuild from rows,
        whose own phase counts from the rows it was given): number the
        arrivals so that ``pending`` tuples follow the last boundary, keep
        the newest ``rows + pending``, and return each group of the window
        visible then: its key values and one aggregate per call."""
        assert self.rows is not None and not self.partition
        carried = len(self.ts)
        self.first += (pending - self.first - carried) % self.slide
        keep_from = max(0, carried - self.rows - pending)
        self.first += keep_from
        self.ts = self.ts[keep_from:]
        self.keys = [k[keep_from:] for k in self.keys]
        self.args = [a[keep_from:] for a in self.args]
        if self.lin is not None:
            self.lin = self.lin[keep_from:]
        end = max(0, len(self.ts) - pending)
        start = max(0, end - self.rows)
        rank = _ranks([k[start:end] for k in self.keys], end - start)
        order = np.argsort(rank, kind="stable")
        sorted_rank = rank[order]
        lo = np.flatnonzero(np.r_[True, sorted_rank[1:] != sorted_rank[:-1]]) if len(order) else order
        hi = np.r_[lo[1:], len(order)].astype(np.int64)
        keys = tuple(k[start:end][order][lo] for k in self.keys)
        args = (a[start:end][order] for a in self.args)
        columns = tuple(aggregate(call, a, lo, hi) for call, a in zip(self.calls, args, strict=True))
        return keys, columns

    def _range(self, ts: Int64s, done: int, watermark: int) -> Windows:
        slide, life = self.slide, self.range_ms
        enter = -(-ts // slide) * slide
        leave = (ts + life) // slide * slide + slide
        # A slide longer than the range skips some tuples: never in a window,
        # never touching their group (the row engine drops them on arrival).
        idx = np.flatnonzero(leave > enter).astype(np.int64)
        parts: list[EventPart] = [
            (leave[idx], idx, LEAVE, leave[idx]),
            (enter[idx], idx, ENTER, enter[idx]),
        ]
        events = _ordered(parts, done, watermark)
        keep_from = int(np.searchsorted(leave, watermark, side="right"))
        return events, ts, (lambda t, _: t - life), (lambda t, _: t), slice(keep_from, None)

    def _partition(self, ts: Int64s, rank: Int64s, carried: int) -> Windows:
        """``[Partition By keys Rows N]`` grouped by the same keys: a tuple
        enters its group as it arrives and the group's N-th older one leaves
        at once, so the groups are touched in arrival order. A tuple's
        position is its index within its group; the window after instant t
        is the group's last N up to t's last tuple of it."""
        assert self.rows is not None
        size, n = self.rows, len(ts)
        groups = int(rank.max()) + 1 if n else 0
        seen = np.zeros(groups, dtype=np.int64)  # tuples of each group before this call
        np.maximum.at(seen, rank[:carried], self.index_in_group + 1)
        new_rank = rank[carried:]
        order = np.argsort(new_rank, kind="stable")
        sorted_rank = new_rank[order]
        starts = np.flatnonzero(np.r_[True, sorted_rank[1:] != sorted_rank[:-1]]) if len(order) else order
        run_start = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
        within = np.empty(len(order), dtype=np.int64)
        within[order] = np.arange(len(order)) - run_start
        position = np.concatenate((self.index_in_group, seen[new_rank] + within))
        index = np.arange(carried, n, dtype=np.int64)
        events = (ts[carried:].astype(np.int64), index)
        total = seen.copy()
        np.maximum.at(total, rank, position + 1)
        keep = position >= total[rank] - size
        return (
            events,
            position,
            lambda _, last: position[last] - size + 1,
            lambda _, last: position[last],
            keep,
        )

    def _rows(self, ts: Int64s, carried: int, n: int) -> Windows:
        assert self.rows is not None
        size, slide, first = self.rows, self.slide, self.first
        g = first + np.arange(n, dtype=np.int64)
        before, total = first + carried, first + n
        enter = -(-(g + 1) // slide) * slide  # the boundary (a count of tuples) it becomes visible at
        leave = -(-(g + size + 1) // slide) * slide
        seen = enter <= g + size  # a tuple between two boundaries may never be visible
        idx = np.arange(n, dtype=np.int64)
        parts: list[EventPart] = []
        # With a slide the evicted tuples leave before the new ones enter;
        # without, the row engine appends the new tuple first.
        leave_phase, enter_phase = (LEAVE, ENTER) if slide > 1 else (ENTER, LEAVE)
        for boundary, phase in ((leave, leave_phase), (enter, enter_phase)):
            ok = seen & (boundary > before) & (boundary <= total)
            at = ts[boundary[ok] - 1 - first]
            parts.append((at, idx[ok], phase, boundary[ok]))
        events = _ordered(parts, None, None)
        counts = np.arange((before // slide + 1) * slide, total + 1, slide, dtype=np.int64)
        instants = ts[counts - 1 - first] if len(counts) else counts

        def last_count(t: Int64s) -> Int64s:
            return counts[np.searchsorted(instants, t, side="right") - 1]

        keep_from = max(0, n - size - slide)  # what the next boundaries' windows and events need
        self.first = first + keep_from
        return (
            events,
            g,
            lambda t, _: last_count(t) - size,
            lambda t, _: last_count(t) - 1,
            slice(keep_from, None),
        )


def _ordered(parts: Sequence[EventPart], done: int | None, watermark: int | None) -> tuple[Int64s, Int64s]:
    """Events (instant, tuple index) sorted as the row engine meets them:
    by instant, boundary, leaving before entering, then arrival."""
    inst = np.concatenate([p[0] for p in parts])
    index = np.concatenate([p[1] for p in parts])
    phase = np.concatenate([np.full(len(p[0]), p[2], dtype=np.int64) for p in parts])
    boundary = np.concatenate([p[3] for p in parts])
    if done is not None and watermark is not None:
        ok = (inst > done) & (inst <= watermark)
        inst, index, phase, boundary = inst[ok], index[ok], phase[ok], boundary[ok]
    order = np.lexsort((index, phase, boundary, inst))
    return inst[order].astype(np.int64), index[order].astype(np.int64)


def _ranks(keys: Sequence[Array], n: int) -> Int64s:
    """A dense number per distinct key (any order)."""
    if n == 0:
        return np.empty(0, dtype=np.int64)
    rank = np.zeros(n, dtype=np.int64)
    for column in keys:
        _, inverse = np.unique(column, return_inverse=True)
        rank = rank * (int(inverse.max()) + 1) + inverse.reshape(-1)
        _, rank = np.unique(rank, return_inverse=True)
        rank = rank.reshape(-1).astype(np.int64)
    return rank


def _runs(rank: Int64s, position: Int64s, q_rank: Int64s, lo: Int64s, hi: Int64s) -> tuple[Int64s, Int64s]:
    """For each query, the run of the (group, position)-sorted tuples of
    group ``q_rank`` with ``lo <= position <= hi``."""
    if not len(q_rank):
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    order = np.lexsort((position, rank))
    low, high = int(position.min()), int(position.max())
    span = high - low + 3
    if (int(rank.max()) + 1) * span < 2**62:
        composite = rank[order] * span + (position[order] - low + 1)
        base = q_rank * span
        start = np.searchsorted(composite, base + np.clip(lo - low + 1, 0, span - 1), side="left")
        end = np.searchsorted(composite, base + np.clip(hi - low + 1, 0, span - 1), side="right")
    else:  # positions too far apart to combine with the group: one group at a time
        sorted_rank, sorted_pos = rank[order], position[order]
        starts = np.searchsorted(sorted_rank, q_rank, side="left")
        stops = np.searchsorted(sorted_rank, q_rank, side="right")
        start = np.array(
            [
                a + np.searchsorted(sorted_pos[a:b], x, side="left")
                for a, b, x in zip(starts, stops, lo, strict=True)
            ]
        )
        end = np.array(
            [
                a + np.searchsorted(sorted_pos[a:b], x, side="right")
                for a, b, x in zip(starts, stops, hi, strict=True)
            ]
        )
    start = start.astype(np.int64)
    return start, np.maximum(end.astype(np.int64), start)
