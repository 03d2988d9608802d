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
  Unbounded]``. A tuple leaves at ts + T + 1, before the instant's new
  tuples enter. The conditions on this side alone filter tuples before
  the window (the same thing, for a window by time).
- :class:`CountWindow`: ``[Rows N]`` and ``[Partition By keys Rows N]``.
  Each new tuple enters, then pushes out the one N before it in its
  partition (the whole stream for ``[Rows N]``). The conditions on this
  side alone filter after the window, as in the row engine: a tuple they
  drop still takes a place in it (it has a ``passes`` flag of False).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from semiactive.node.engine.columnar.batch import Array, Int64s
from semiactive.node.engine.columnar.group_numbers import GroupNumbers, distinct_values
from semiactive.node.engine.columnar.window_aggregate import join as join_arrays

EMPTY: Int64s = np.empty(0, dtype=np.int64)
Bools = Array


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
    """What both kinds of window keep (the tuples that are in the window or
    may still leave it) and how run starts are found."""

    def __init__(self, width: int, keys: int) -> None:
        self.ts = EMPTY
        self.arrival = EMPTY
        self.run = EMPTY
        self.passes: Bools = np.empty(0, dtype=bool)
        self.columns: tuple[Array, ...] = tuple(EMPTY for _ in range(width))
        self.keys: tuple[Array, ...] = tuple(EMPTY for _ in range(keys))
        self.arrived = 0  # tuples ever taken
        self.fresh = 0  # where this call's tuples begin

    def take(self, new: Arrivals) -> None:
        n = len(new.ts)
        self.fresh = len(self.ts)
        arrival = np.arange(self.arrived, self.arrived + n, dtype=np.int64)
        self.arrived += n
        self._extend(new.ts, arrival, new.columns, new.keys, new.passes)
        if n:
            self._runs()

    def _extend(
        self, ts: Int64s, arrival: Int64s, columns: tuple[Array, ...], keys: tuple[Array, ...], passes: Bools
    ) -> None:
        self.ts = np.concatenate((self.ts, ts))
        self.arrival = np.concatenate((self.arrival, arrival))
        self.run = np.concatenate((self.run, np.full(len(ts), -1, dtype=np.int64)))
        self.passes = np.concatenate((self.passes, passes))
        self.columns = tuple(join_arrays(a, b) for a, b in zip(self.columns, columns, strict=True))
        self.keys = tuple(join_arrays(a, b) for a, b in zip(self.keys, keys, strict=True))

    def _cut(self, keep: Bools | slice) -> None:
        self.ts, self.arrival, self.run, self.passes = (
            self.ts[keep],
            self.arrival[keep],
            self.run[keep],
            self.passes[keep],
        )
        self.columns = tuple(c[keep] for c in self.columns)
        self.keys = tuple(k[keep] for k in self.keys)

    def position(self) -> Int64s:
        """Where each tuple stands for leaving: its ts, or its place in its partition."""
        raise NotImplementedError

    def still_in(self, earlier: Int64s, later: Int64s) -> Bools:
        """Whether a tuple at position ``earlier`` is still in the window
        when a copy of its row (so of its partition) at ``later`` enters."""
        raise NotImplementedError

    def _runs(self) -> None:
        live = np.flatnonzero(self.passes)
        rows = row_numbers(tuple(c[live] for c in self.columns), len(live))
        order = live[np.argsort(rows, kind="stable")]  # by row, then arrival
        rows = np.sort(rows, kind="stable")
        position, marker = self.position()[order], self.run[order]
        joins = np.zeros(len(order), dtype=bool)
        joins[1:] = (rows[1:] == rows[:-1]) & self.still_in(position[:-1], position[1:])
        starts = (order >= self.fresh) & ~joins
        marker[starts] = self.arrival[order[starts]]
        valid = np.flatnonzero(marker >= 0)
        # each tuple takes the marker of the latest valid one up to it: the
        # first of a row's group always has one (kept, or a new run)
        last = np.zeros(len(order), dtype=np.int64)
        last[valid] = valid
        np.maximum.accumulate(last, out=last)
        self.run[order] = marker[last]

    def changes(self, done: int, watermark: int) -> Changes:
        raise NotImplementedError

    def meets(
        self, keys: Int64s, change_keys: Int64s, at: Int64s, before: bool
    ) -> tuple[Int64s, Int64s, Int64s]:
        """For changes of the other side (their key numbers, instants), the
        tuples of this window each meets: ``(lo, hi, order)``, positions
        ``lo:hi`` of ``order``, this window's tuples by (key, arrival)
        (those that fail its own conditions among them: filter on
        ``passes``). ``keys`` are this window's key numbers. ``before``:
        the window as it was before the instant (else after its changes)."""
        raise NotImplementedError

    def keep(self, watermark: int) -> None:
        """Drop the tuples that have left by ``watermark``."""
        raise NotImplementedError


class TimeWindow(JoinWindow):
    def __init__(self, life: int | None, width: int, keys: int) -> None:
        super().__init__(width, keys)
        self.life = life  # ms from entering to leaving; None: never leaves

    def take(self, new: Arrivals) -> None:
        kept = np.flatnonzero(new.passes)
        if len(kept) < len(new.ts):
            new = Arrivals(
                new.ts[kept],
                tuple(c[kept] for c in new.columns),
                tuple(k[kept] for k in new.keys),
                new.passes[kept],
            )
        super().take(new)

    def position(self) -> Int64s:
        return self.ts

    def still_in(self, earlier: Int64s, later: Int64s) -> Bools:
        if self.life is None:
            return np.ones(len(later), dtype=bool)
        return earlier + self.life > later

    def changes(self, done: int, watermark: int) -> Changes:
        enter = np.arange(self.fresh, len(self.ts), dtype=np.int64)
        leave, at = EMPTY, EMPTY
        if self.life is not None:
            ends = self.ts + self.life
            leave = np.flatnonzero((ends > done) & (ends <= watermark))
            at = ends[leave]
        # tuples that leave, then tuples that enter, each by arrival
        return Changes(
            np.concatenate((leave, enter)),
            np.concatenate((at, self.ts[enter])),
            np.concatenate((np.zeros(len(leave), dtype=np.int64), np.ones(len(enter), dtype=np.int64))),
            np.concatenate((self.arrival[leave], self.arrival[enter])),
            np.concatenate((np.full(len(leave), -1, dtype=np.int64), np.ones(len(enter), dtype=np.int64))),
        )

    def meets(
        self, keys: Int64s, change_keys: Int64s, at: Int64s, before: bool
    ) -> tuple[Int64s, Int64s, Int64s]:
        # in the window at an instant: from ts - T to ts (``last``)
        last = at - 1 if before else at
        first = None if self.life is None else last - self.life + 1
        index = KeyTimeOrder(keys, self.ts, change_keys)
        return index.first_at(change_keys, first), index.first_at(change_keys, last + 1), index.order

    def keep(self, watermark: int) -> None:
        if self.life is None:
            return
        cut = int(np.searchsorted(self.ts, watermark - self.life, side="right"))
        if cut:
            self._cut(slice(cut, None))


class CountWindow(JoinWindow):
    """``[Rows N]`` (``partition`` empty) or ``[Partition By partition Rows
    N]``, whose partition must be the join key (then the tuples a change
    meets are the last N of its key's partition)."""

    def __init__(self, rows: int, partition: tuple[int, ...], width: int, keys: int) -> None:
        super().__init__(width, keys)
        self.rows = rows
        self.partition = partition
        self.numbers = GroupNumbers(len(partition))
        self.counts = EMPTY  # tuples ever taken, per partition number
        self.part = EMPTY  # each tuple's partition number
        self.rank = EMPTY  # each tuple's place in its partition

    def take(self, new: Arrivals) -> None:
        n = len(new.ts)
        if self.partition:
            part = self.numbers.of([new.columns[c] for c in self.partition])
        else:
            part = np.zeros(n, dtype=np.int64)
        if n:
            grown = np.zeros(max(len(self.counts), int(part.max()) + 1), dtype=np.int64)
            grown[: len(self.counts)] = self.counts
            order = np.argsort(part, kind="stable")
            sorted_part = part[order]
            starts = np.searchsorted(sorted_part, sorted_part)  # first of each partition's run
            rank = np.empty(n, dtype=np.int64)
            rank[order] = grown[sorted_part] + np.arange(n, dtype=np.int64) - starts
            grown += np.bincount(part, minlength=len(grown))
            self.counts = grown
        else:
            rank = EMPTY
        self.part = np.concatenate((self.part, part))
        self.rank = np.concatenate((self.rank, rank))
        super().take(new)

    def _cut(self, keep: Bools | slice) -> None:
        super()._cut(keep)
        self.part, self.rank = self.part[keep], self.rank[keep]

    def position(self) -> Int64s:
        return self.rank

    def still_in(self, earlier: Int64s, later: Int64s) -> Bools:
        # a new tuple enters before it pushes out the one N before it
        return earlier + self.rows >= later

    def changes(self, done: int, watermark: int) -> Changes:
        fresh = np.arange(self.fresh, len(self.ts), dtype=np.int64)
        enter = fresh[self.passes[fresh]]
        # each new tuple pushes out the one N before it in its partition
        order = np.argsort(self.part, kind="stable")
        where = np.empty(len(order), dtype=np.int64)
        where[order] = np.arange(len(order), dtype=np.int64)
        pushing = fresh[self.rank[fresh] >= self.rows]
        out = order[where[pushing] - self.rows]
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

    def meets(
        self, keys: Int64s, change_keys: Int64s, at: Int64s, before: bool
    ) -> tuple[Int64s, Int64s, Int64s]:
        last = at - 1 if before else at
        if not self.partition:
            # the last N arrivals up to the bound, of the change's key
            live = np.flatnonzero(self.passes)
            order = live[np.argsort(keys[live], kind="stable")]
            first = int(self.arrival[0]) if len(self.arrival) else 0
            span = len(self.ts) + 1
            sorted_at = keys[order] * span + (self.arrival[order] - first)
            upto = np.searchsorted(self.ts, last, side="right")  # arrivals up to the bound, from first
            key = change_keys * span
            lo = np.searchsorted(sorted_at, key + np.maximum(upto - self.rows, 0))
            return lo, np.searchsorted(sorted_at, key + upto), order
        # the key is the partition: its last N tuples up to the bound
        index = KeyTimeOrder(keys, self.ts, change_keys)
        hi = index.first_at(change_keys, last + 1)
        return np.maximum(index.first_at(change_keys, None), hi - self.rows), hi, index.order

    def keep(self, watermark: int) -> None:
        keep = self.rank >= self.counts[self.part] - self.rows if len(self.ts) else slice(None)
        self._cut(keep)


class KeyTimeOrder:
    """A window's tuples by (key, arrival), as one int64 each: the key times
    a width, plus the tuple's ts counted from the oldest one's (or its rank
    among the window's timestamps, where keys x span could leave int64).
    The tuples of a key from a timestamp on are then one binary search away."""

    def __init__(self, keys: Int64s, ts: Int64s, change_keys: Int64s) -> None:
        self.order = np.argsort(keys, kind="stable")  # by key, then arrival (so ts)
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


def row_numbers(columns: Sequence[Array], n: int) -> Int64s:
    """A number per row of ``columns``, equal exactly where the rows are."""
    rank = np.zeros(n, dtype=np.int64)
    if not n:
        return rank
    for column in columns:
        values, inverse = distinct_values(column)
        _, rank = np.unique(rank * len(values) + inverse.reshape(-1), return_inverse=True)
    return rank.reshape(-1).astype(np.int64)
