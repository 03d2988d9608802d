"""The two windows of a columnar join (:mod:`.window_join`): what each
holds, what changes in a call, and which of its tuples a change of the
other side meets.

A window keeps its tuples in arrival order, each with its row's run start:
the arrival of the tuple whose entry took that row's count in the row
engine's multiset from 0 to 1 (copies of a row share its place there). A
tuple's run start is found once, when it arrives: the latest earlier copy
of its row, if it is still in the window then, lends it its run (windows
are FIFO: the latest copy is the last to leave).

- :class:`TimeWindow`: ``[Range T]``, ``[Now]`` (T = 0), ``[Range
  Unbounded]``, ``[Range T Slide L]``. A tuple leaves at ts + T + 1
  (with a slide: both ends at multiples of L), before the instant's new
  tuples enter. The conditions on this side alone filter tuples before
  the window (the same thing, for a window by time).
- :class:`CountWindow`: ``[Rows N]`` and ``[Partition By keys Rows N]``.
  Each new tuple enters, then pushes out the one N before it in its
  partition (the whole stream for ``[Rows N]``). The conditions on this
  side alone filter after the window, as in the row engine: a tuple they
  drop still takes a place in it (it has a ``passes`` flag of False).
- :class:`SlidingCountWindow`: ``[Rows N Slide M]``, changing at every
  M-th arrival: the tuples that leave, then those that enter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from semiactive.node.engine.columnar.batch import Array, Int64s
from semiactive.node.engine.columnar.group_numbers import GroupNumbers
from semiactive.node.engine.columnar.window_aggregate import join as join_arrays

EMPTY: Int64s = np.empty(0, dtype=np.int64)

#: Numbers of rows (and of keys) no tuple holds any more are forgotten once
#: there are twice as many numbers as tuples and this many more.
FORGET_AFTER = 1024
Bools = Array


def expand(lo: Int64s, counts: Int64s) -> tuple[Int64s, Int64s]:
    """The ranges ``lo[i] : lo[i] + counts[i]`` laid end to end: for each
    position, the range it belongs to and the position itself."""
    total = int(counts.sum())
    owner = np.repeat(np.arange(len(lo), dtype=np.int64), counts)
    starts = np.cumsum(counts) - counts  # where each range begins, laid end to end
    at = np.repeat(lo - starts, counts) + np.arange(total, dtype=np.int64)
    return owner, at


@dataclass(frozen=True)
class Arrivals:
    """A window's new tuples in one call: timestamps, the window's row
    columns, the join key's values (one array per key expression), and
    which pass the conditions on this side alone."""

    ts: Int64s
    columns: tuple[Array, ...]
    keys: tuple[Array, ...]
    passes: Bools


@dataclass(frozen=True)
class Changes:
    """A window's changes in a call, unordered: the tuple, the instant, two
    order keys within the instant (as the row engine's window emits them),
    and +1 (enters) or -1 (leaves)."""

    index: Int64s
    at: Int64s
    first: Int64s
    second: Int64s
    sign: Int64s


class JoinWindow:
    """What both kinds of window keep, the tuples that are in the window or
    may still leave it, in arrival order: each with its join key's number
    (the join numbers both windows' keys together), its row's number, its
    run start; and the same tuples in (key, arrival) order, kept as tuples
    come and go, so that a call costs what it adds and what leaves, not a
    sort of the window. A row's number is this window's: it remembers where
    the row's latest copy stood and its run, so that a new copy finds its
    run without the window being searched."""

    def __init__(self, width: int) -> None:
        self.ts = EMPTY
        self.arrival = EMPTY
        self.run = EMPTY
        self.key = EMPTY
        self.row = EMPTY
        self.passes: Bools = np.empty(0, dtype=bool)
        self.columns: tuple[Array, ...] = tuple(EMPTY for _ in range(width))
        self.order = EMPTY  # the tuples by (key, arrival)
        self.row_numbers = GroupNumbers(width)
        # per row number: where its latest copy stood and its run (-1: none)
        self.latest = EMPTY
        self.latest_run = EMPTY
        self.arrived = 0  # tuples ever taken
        self.fresh = 0  # where this call's tuples begin

    def take(self, new: Arrivals, key: Int64s) -> None:
        """Add a call's tuples, ``key`` their key numbers."""
        n = len(new.ts)
        fresh = self.fresh = len(self.ts)
        if not n:
            return
        by_key = np.argsort(key, kind="stable")
        places = np.searchsorted(self.key[self.order], key[by_key], side="right")
        self.order = np.insert(self.order, places, fresh + by_key)
        self.ts = np.concatenate((self.ts, new.ts))
        self.arrival = np.concatenate(
            (self.arrival, np.arange(self.arrived, self.arrived + n, dtype=np.int64))
        )
        self.arrived += n
        self.key = np.concatenate((self.key, key))
        self.row = np.concatenate((self.row, self.row_numbers.of(list(new.columns))))
        more = len(self.row_numbers) - len(self.latest)
        if more:
            self.latest = np.concatenate((self.latest, np.full(more, -1, dtype=np.int64)))
            self.latest_run = np.concatenate((self.latest_run, np.full(more, -1, dtype=np.int64)))
        self.run = np.concatenate((self.run, np.full(n, -1, dtype=np.int64)))
        self.passes = np.concatenate((self.passes, new.passes))
        self.columns = tuple(join_arrays(a, b) for a, b in zip(self.columns, new.columns, strict=True))
        self._runs()

    def _cut(self, keep: Bools | slice) -> None:
        """Keep the tuples ``keep`` selects (a slice from some index on, or a mask)."""
        if isinstance(keep, slice):
            order = self.order[self.order >= keep.start] - keep.start
        else:
            index = np.cumsum(keep) - 1
            order = index[self.order[keep[self.order]]]
        self.order = order
        self.ts, self.arrival, self.run, self.key, self.row, self.passes = (
            x[keep] for x in (self.ts, self.arrival, self.run, self.key, self.row, self.passes)
        )
        self.columns = tuple(c[keep] for c in self.columns)
        if len(self.row_numbers) > 2 * len(self.ts) + FORGET_AFTER:  # forget rows no tuple here has
            live = np.unique(self.row)
            number = self.row_numbers.keep(live)
            self.row = number[self.row]
            self.latest, self.latest_run = self.latest[live], self.latest_run[live]

    def renumber_keys(self, number: Int64s) -> None:
        """The join renumbered its keys (in the same order)."""
        self.key = number[self.key]

    def position(self) -> Int64s:
        """Where each tuple stands for leaving: its ts, or its place in its partition."""
        raise NotImplementedError

    def still_in(self, earlier: Int64s, later: Int64s) -> Bools:
        """Whether a tuple at position ``earlier`` is still in the window
        when a copy of its row (so of its partition) at ``later`` enters."""
        raise NotImplementedError

    def _runs(self) -> None:
        """The run start of each new tuple that passes: its own arrival,
        unless the latest earlier copy of its row is in the window when it
        enters (the latest is the last to leave), whose run it joins."""
        new = np.arange(self.fresh, len(self.ts), dtype=np.int64)
        new = new[self.passes[new]]
        if not len(new):
            return
        rows = self.row[new]
        by_row = np.argsort(rows, kind="stable")  # by row, then arrival
        new, rows = new[by_row], rows[by_row]
        position = self.position()[new]
        first = np.ones(len(new), dtype=bool)
        first[1:] = rows[1:] != rows[:-1]
        before = np.empty(len(new), dtype=np.int64)
        before[1:] = position[:-1]
        before[first] = self.latest[rows[first]]
        has = ~first | (self.latest_run[rows] >= 0)
        joins = has & self.still_in(before, position)
        marker = np.full(len(new), -1, dtype=np.int64)
        marker[first & joins] = self.latest_run[rows[first & joins]]
        marker[~joins] = self.arrival[new[~joins]]
        # each tuple takes the marker of the latest valid one up to it: the
        # first of a row's group always has one (joined, or a new run)
        valid = np.flatnonzero(marker >= 0)
        last = np.zeros(len(new), dtype=np.int64)
        last[valid] = valid
        np.maximum.accumulate(last, out=last)
        run = marker[last]
        self.run[new] = run
        latest = np.ones(len(new), dtype=bool)
        latest[:-1] = rows[:-1] != rows[1:]
        self.latest[rows[latest]] = position[latest]
        self.latest_run[rows[latest]] = run[latest]

    def changes(self, done: int, watermark: int) -> Changes:
        raise NotImplementedError

    def meets(self, change_keys: Int64s, at: Int64s, before: bool) -> tuple[Int64s, Int64s]:
        """For changes of the other side (their key numbers, instants), the
        tuples of this window each meets: positions ``lo:hi`` of
        :attr:`order` (those that fail this side's own conditions among
        them: filter on ``passes``). ``before``: the window as it was before
        the instant (else after its changes)."""
        raise NotImplementedError

    def keep(self, watermark: int) -> None:
        """Drop the tuples that have left by ``watermark``."""
        raise NotImplementedError


class TimeWindow(JoinWindow):
    """``life``: T + 1, the ms from entering to leaving (None: never
    leaves). With a slide L, the window at instant t holds the tuples with
    ts in [b - T, b], b = t floored to a multiple of L: a tuple enters at
    the first multiple of L >= ts and leaves at the first one > ts + T (a
    tuple whose two are the same is never in it). L = 1 is ``[Range T]``."""

    def __init__(self, life: int | None, width: int, slide: int = 1) -> None:
        super().__init__(width)
        self.life = life
        self.slide = slide

    def take(self, new: Arrivals, key: Int64s) -> None:
        passes = new.passes
        if self.slide > 1:
            passes = passes & (self._leave(new.ts) > self._enter(new.ts))
        kept = np.flatnonzero(passes)
        if len(kept) < len(new.ts):
            new = Arrivals(
                new.ts[kept],
                tuple(c[kept] for c in new.columns),
                tuple(k[kept] for k in new.keys),
                new.passes[kept],
            )
            key = key[kept]
        super().take(new, key)

    def _enter(self, ts: Int64s) -> Int64s:
        return ts if self.slide == 1 else -(-ts // self.slide) * self.slide

    def _leave(self, ts: Int64s) -> Int64s:
        assert self.life is not None
        if self.slide == 1:
            return ts + self.life
        return ((ts + (self.life - 1)) // self.slide + 1) * self.slide

    def _bound(self, at: Int64s) -> Int64s:
        """The newest ts in the window at instants ``at``."""
        return at if self.slide == 1 else at // self.slide * self.slide

    def position(self) -> Int64s:
        return self.ts

    def still_in(self, earlier: Int64s, later: Int64s) -> Bools:
        if self.life is None:
            return np.ones(len(later), dtype=bool)
        return self._leave(earlier) > self._enter(later)

    def changes(self, done: int, watermark: int) -> Changes:
        if self.slide == 1:
            enter = np.arange(self.fresh, len(self.ts), dtype=np.int64)
            enters = self.ts[enter]
        else:  # those that wait for a multiple of L: from where the last call stopped
            enters = self._enter(self.ts)
            enter = np.arange(*np.searchsorted(enters, (done, watermark), side="right"), dtype=np.int64)
            enters = enters[enter]
        leave, at = EMPTY, EMPTY
        if self.life is not None:
            ends = self._leave(self.ts)
            leave = np.flatnonzero((ends > done) & (ends <= watermark))
            at = ends[leave]
        # tuples that leave, then tuples that enter, each by arrival
        return Changes(
            np.concatenate((leave, enter)),
            np.concatenate((at, enters)),
            np.concatenate((np.zeros(len(leave), dtype=np.int64), np.ones(len(enter), dtype=np.int64))),
            np.concatenate((self.arrival[leave], self.arrival[enter])),
            np.concatenate((np.full(len(leave), -1, dtype=np.int64), np.ones(len(enter), dtype=np.int64))),
        )

    def meets(self, change_keys: Int64s, at: Int64s, before: bool) -> tuple[Int64s, Int64s]:
        # in the window at an instant: ts from b - T to b (``last``)
        last = self._bound(at - 1 if before else at)
        first = None if self.life is None else last - self.life + 1
        index = KeyTimeOrder(self.key, self.ts, self.order, change_keys)
        return index.first_at(change_keys, first), index.first_at(change_keys, last + 1)

    def keep(self, watermark: int) -> None:
        if self.life is None:
            return
        # gone by the watermark: ts + T < b (b: the watermark's bound)
        bound = watermark // self.slide * self.slide
        cut = int(np.searchsorted(self.ts, bound - self.life, side="right"))
        if cut:
            self._cut(slice(cut, None))


class CountWindow(JoinWindow):
    """``[Rows N]`` (``partition`` empty) or ``[Partition By partition Rows
    N]``, whose partition must be the join key (then the tuples a change
    meets are the last N of its key's partition)."""

    def __init__(self, rows: int, partition: tuple[int, ...], width: int) -> None:
        super().__init__(width)
        self.size = rows  # N: the tuples a partition keeps
        self.partition = partition
        self.numbers = GroupNumbers(len(partition))
        self.counts = EMPTY  # tuples ever taken, per partition number
        self.part = EMPTY  # each tuple's partition number
        self.rank = EMPTY  # each tuple's place in its partition

    def take(self, new: Arrivals, key: Int64s) -> None:
        n = len(new.ts)
        if not n:
            super().take(new, key)
            return
        if self.partition:
            part = self.numbers.of([new.columns[c] for c in self.partition])
        else:
            part = np.zeros(n, dtype=np.int64)
        grown = np.zeros(max(len(self.counts), int(part.max()) + 1), dtype=np.int64)
        grown[: len(self.counts)] = self.counts
        by_part = np.argsort(part, kind="stable")
        sorted_part = part[by_part]
        starts = np.searchsorted(sorted_part, sorted_part)  # first of each partition's run
        rank = np.empty(n, dtype=np.int64)
        rank[by_part] = grown[sorted_part] + np.arange(n, dtype=np.int64) - starts
        grown += np.bincount(part, minlength=len(grown))
        self.counts = grown
        self.part = np.concatenate((self.part, part))
        self.rank = np.concatenate((self.rank, rank))
        super().take(new, key)

    def _cut(self, keep: Bools | slice) -> None:
        self.part, self.rank = self.part[keep], self.rank[keep]
        super()._cut(keep)

    def position(self) -> Int64s:
        return self.rank

    def still_in(self, earlier: Int64s, later: Int64s) -> Bools:
        # a new tuple enters before it pushes out the one N before it
        return earlier + self.size >= later

    def changes(self, done: int, watermark: int) -> Changes:
        fresh = np.arange(self.fresh, len(self.ts), dtype=np.int64)
        enter = fresh[self.passes[fresh]]
        # each new tuple pushes out the one N before it in its partition
        # (the key's partition: the window's (key, arrival) order is the
        # partition's; without a partition, arrival order)
        order = self.order if self.partition else np.arange(len(self.ts), dtype=np.int64)
        where = np.empty(len(order), dtype=np.int64)
        where[order] = np.arange(len(order), dtype=np.int64)
        pushing = fresh[self.rank[fresh] >= self.size]
        out = order[where[pushing] - self.size]
        shown = self.passes[out]
        pushing, out = pushing[shown], out[shown]
        # per arriving tuple, its entry, then what it pushed out
        return Changes(
            np.concatenate((enter, out)),
            np.concatenate((self.ts[enter], self.ts[pushing])),
            np.concatenate((self.arrival[enter], self.arrival[pushing])),
            np.concatenate((np.zeros(len(enter), dtype=np.int64), np.ones(len(out), dtype=np.int64))),
            np.concatenate((np.ones(len(enter), dtype=np.int64), np.full(len(out), -1, dtype=np.int64))),
        )

    def meets(self, change_keys: Int64s, at: Int64s, before: bool) -> tuple[Int64s, Int64s]:
        last = at - 1 if before else at
        if not self.partition:
            # the last N arrivals up to the bound (those of the change's key)
            first = int(self.arrival[0]) if len(self.arrival) else 0
            span = len(self.ts) + 1
            sorted_at = self.key[self.order] * span + (self.arrival[self.order] - first)
            upto = np.searchsorted(self.ts, last, side="right")  # arrivals up to the bound, from first
            key = change_keys * span
            lo = np.searchsorted(sorted_at, key + np.maximum(upto - self.size, 0))
            return lo, np.searchsorted(sorted_at, key + upto)
        # the key is the partition: its last N tuples up to the bound
        index = KeyTimeOrder(self.key, self.ts, self.order, change_keys)
        hi = index.first_at(change_keys, last + 1)
        return np.maximum(index.first_at(change_keys, None), hi - self.size), hi

    def keep(self, watermark: int) -> None:
        if len(self.ts):
            self._cut(self.rank >= self.counts[self.part] - self.size)


class SlidingCountWindow(JoinWindow):
    """``[Rows N Slide M]``: the window changes when the arrivals reach a
    multiple of M, at the ts of the tuple that makes it; after the k-th
    time it holds arrivals kM - N .. kM - 1. Arrival i so enters at the
    (i // M + 1)-th and leaves at the ((i + N) // M + 1)-th (never in it
    where the two are the same: N < M). At each, the tuples that leave
    come before those that enter, each by arrival. The conditions on this
    side alone filter after the window, as for :class:`CountWindow`."""

    def __init__(self, rows: int, slide: int, width: int) -> None:
        super().__init__(width)
        self.size = rows
        self.slide = slide

    def _enter(self, arrival: Int64s) -> Int64s:
        return arrival // self.slide + 1

    def _leave(self, arrival: Int64s) -> Int64s:
        return (arrival + self.size) // self.slide + 1

    def take(self, new: Arrivals, key: Int64s) -> None:
        arrival = np.arange(self.arrived, self.arrived + len(new.ts), dtype=np.int64)
        seen = self._leave(arrival) > self._enter(arrival)
        if not seen.all():  # a tuple never in the window: counted, never shown
            new = Arrivals(new.ts, new.columns, new.keys, new.passes & seen)
        super().take(new, key)

    def position(self) -> Int64s:
        return self.arrival

    def still_in(self, earlier: Int64s, later: Int64s) -> Bools:
        return self._leave(earlier) > self._enter(later)

    def changes(self, done: int, watermark: int) -> Changes:
        before = (self.arrived - (len(self.ts) - self.fresh)) // self.slide  # slides before this call
        now = self.arrived // self.slide
        if now == before:
            return Changes(EMPTY, EMPTY, EMPTY, EMPTY, EMPTY)
        first = int(self.arrival[0])
        enters, leaves = self._enter(self.arrival), self._leave(self.arrival)
        enter = np.flatnonzero(self.passes & (enters > before) & (enters <= now))
        leave = np.flatnonzero(self.passes & (leaves > before) & (leaves <= now))
        slides = np.concatenate((leaves[leave], enters[enter]))
        entering = np.concatenate((np.zeros(len(leave), dtype=np.int64), np.ones(len(enter), dtype=np.int64)))
        return Changes(
            np.concatenate((leave, enter)),
            self.ts[slides * self.slide - 1 - first],  # the ts of the tuple that makes each slide
            2 * slides + entering,  # by slide; in each, those that leave first
            np.concatenate((self.arrival[leave], self.arrival[enter])),
            2 * entering - 1,
        )

    def meets(self, change_keys: Int64s, at: Int64s, before: bool) -> tuple[Int64s, Int64s]:
        last = at - 1 if before else at
        first = int(self.arrival[0]) if len(self.arrival) else self.arrived
        span = len(self.ts) + 1
        sorted_at = self.key[self.order] * span + (self.arrival[self.order] - first)
        # arrivals up to the bound, the last slide among them, the N before it
        upto = first + np.searchsorted(self.ts, last, side="right")
        hi = upto // self.slide * self.slide
        lo = np.maximum(hi - self.size, first)
        key = change_keys * span
        return np.searchsorted(sorted_at, key + (lo - first)), np.searchsorted(sorted_at, key + (hi - first))

    def keep(self, watermark: int) -> None:
        # those that left: a prefix, as the slide they leave at grows with arrival
        cut = int(np.count_nonzero(self._leave(self.arrival) <= self.arrived // self.slide))
        if cut:
            self._cut(slice(cut, None))


class KeyTimeOrder:
    """A window's tuples by (key, arrival), as one int64 each: the key times
    a width, plus the tuple's ts counted from the oldest one's (or its rank
    among the window's timestamps, where keys x span could leave int64).
    The tuples of a key from a timestamp on are then one binary search away."""

    def __init__(self, keys: Int64s, ts: Int64s, order: Int64s, change_keys: Int64s) -> None:
        self.order = order  # by key, then arrival (so ts)
        self.base = int(ts[0]) - 1 if len(ts) else 0
        span = int(ts[-1]) - self.base + 2 if len(ts) else 2
        self.stamps: Int64s | None = None
        if span * (int(keys.max(initial=0)) + int(change_keys.max(initial=0)) + 2) < 2**62:
            self.width = span
            offsets = ts[self.order] - self.base
        else:
            self.stamps = np.unique(ts)
            self.width = len(self.stamps) + 1
            offsets = np.searchsorted(self.stamps, ts[self.order])
        self.sorted_at = keys[self.order] * self.width + offsets

    def first_at(self, keys: Int64s, stamps: Int64s | None) -> Int64s:
        """Where in :attr:`order` each key's tuples with ts >= its stamp
        begin (None: each key's first tuple)."""
        if stamps is None:
            offset: Int64s | int = 0
        elif self.stamps is None:
            offset = np.clip(stamps - self.base, 0, self.width - 1)
        else:
            offset = np.searchsorted(self.stamps, stamps)
        return np.searchsorted(self.sorted_at, keys * self.width + offset)
