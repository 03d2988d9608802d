"""RSTREAM of a relation given by its changes, on columns, in the row
engine's order.

The row engine (:class:`semiactive.node.engine.operators.streaming.ToStreamOp`)
keeps the relation as a multiset in a dict and, at each instant in which
some row's count changed, emits the whole relation: each row as often as
it counts, rows in the dict's order. A row's place there is where it was
last inserted, the change that took its count from 0 up; it keeps that
place while its count stays above 0.

:class:`RelationStream` computes the same from a call's changes (in the
row engine's order) without a Python step per change: per row, a running
count; each insertion a stamp (its place in the order of all changes
ever); per row and instant, the state after the instant's last change,
which holds until the row's next changed instant. Every state with a
count then meets the emitting instants it spans (two binary searches),
and the pairs sorted by (instant, stamp) and repeated by count are the
output. The states left at the end carry over to the next call.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from semiactive.node.engine.columnar import join_windows
from semiactive.node.engine.columnar.batch import Array, Int64s
from semiactive.node.engine.columnar.group_numbers import GroupNumbers
from semiactive.node.engine.columnar.join_windows import EMPTY

FOREVER = np.iinfo(np.int64).max


class RelationStream:
    """RSTREAM of one relation of ``width`` columns, call after call."""

    def __init__(self, width: int) -> None:
        self.rows = GroupNumbers(width)
        # the rows in the relation now: number, count, stamp
        self.live_row = EMPTY
        self.live_count = EMPTY
        self.live_stamp = EMPTY
        self.changed = 0  # changes ever taken: the next stamp

    def advance(self, ts: Int64s, sign: Int64s, columns: Sequence[Array]) -> tuple[Int64s, tuple[Array, ...]]:
        """The relation's changes of a call (by instant, in the row engine's
        order) -> what RSTREAM emits: instants and rows."""
        n = len(ts)
        if not n:
            return EMPTY, tuple(EMPTY for _ in columns)
        row = self.rows.of(list(columns))
        count0 = np.zeros(len(self.rows), dtype=np.int64)
        count0[self.live_row] = self.live_count
        stamp0 = np.full(len(self.rows), -1, dtype=np.int64)
        stamp0[self.live_row] = self.live_stamp

        # the changes by row, in order within each row
        by_row = np.argsort(row, kind="stable")
        r, s, at = row[by_row], sign[by_row], ts[by_row]
        first = np.ones(n, dtype=bool)
        first[1:] = r[1:] != r[:-1]
        starts = np.flatnonzero(first)
        sums = np.cumsum(s)
        before_group = np.repeat(sums[starts] - s[starts], np.diff(np.append(starts, n)))
        after = count0[r] + sums - before_group
        before = after - s
        # an insertion takes the next place; a row's changes keep the last one's
        marker = np.where((before == 0) & (after > 0), self.changed + by_row, -1)
        marker[first & (marker < 0)] = stamp0[r[first & (marker < 0)]]
        valid = np.flatnonzero(marker >= 0)
        last = np.zeros(n, dtype=np.int64)
        last[valid] = valid
        np.maximum.accumulate(last, out=last)
        stamp = np.where(marker[last] >= 0, marker[last], -1)
        self.changed += n

        # per row and instant, the state after its last change there
        closes = np.ones(n, dtype=bool)
        closes[:-1] = (r[1:] != r[:-1]) | (at[1:] != at[:-1])
        opens = np.ones(n, dtype=bool)
        opens[1:] = closes[:-1]
        moved = after[closes] != before[opens]  # the instant's net change of the row
        state_row, state_at = r[closes], at[closes]
        state_count, state_stamp = after[closes], stamp[closes]
        emitting = np.unique(state_at[moved])
        # a state holds until the row's next state (the last ones: on)
        until = np.full(len(state_row), FOREVER, dtype=np.int64)
        same = state_row[1:] == state_row[:-1]
        until[:-1][same] = state_at[1:][same]
        # the rows unchanged by the call, and the changed ones before their first change
        touched = np.zeros(len(self.rows), dtype=bool)
        touched[r] = True
        first_at = np.full(len(self.rows), FOREVER, dtype=np.int64)
        first_at[r[first]] = at[first]
        carried_row = self.live_row
        all_row = np.concatenate((carried_row, state_row))
        all_count = np.concatenate((self.live_count, state_count))
        all_stamp = np.concatenate((self.live_stamp, state_stamp))
        all_from = np.concatenate((np.full(len(carried_row), -FOREVER, dtype=np.int64), state_at))
        all_until = np.concatenate((first_at[carried_row], until))

        shown = np.flatnonzero(all_count > 0)
        lo = np.searchsorted(emitting, all_from[shown], side="left")
        hi = np.searchsorted(emitting, all_until[shown], side="left")
        which, instant = join_windows.expand(lo, hi - lo)
        state = shown[which]
        order = np.lexsort((all_stamp[state], instant))
        state, instant = state[order], instant[order]
        times = all_count[state]
        state, instant = np.repeat(state, times), np.repeat(instant, times)
        out_rows = all_row[state]
        out = emitting[instant], tuple(values[out_rows] for values in self.rows.key_values)

        # what is in the relation after the call
        final = np.flatnonzero(until == FOREVER)
        keep_carried = ~touched[carried_row]
        live = np.concatenate((carried_row[keep_carried], state_row[final]))
        counts = np.concatenate((self.live_count[keep_carried], state_count[final]))
        stamps = np.concatenate((self.live_stamp[keep_carried], state_stamp[final]))
        held = counts > 0
        self.live_row, self.live_count, self.live_stamp = live[held], counts[held], stamps[held]
        if len(self.rows) > 2 * len(self.live_row) + join_windows.FORGET_AFTER:  # forget rows it lost
            kept = np.unique(self.live_row)
            number = self.rows.keep(kept)
            self.live_row = number[self.live_row]
        return out
