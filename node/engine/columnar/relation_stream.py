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
from dataclasses import dataclass

import numpy as np

from semiactive.node.engine.columnar import join_windows
from semiactive.node.engine.columnar.batch import Array, Int64s
from semiactive.node.engine.columnar.change_runs import KeyRuns
from semiactive.node.engine.columnar.group_numbers import GroupNumbers
from semiactive.node.engine.columnar.join_windows import EMPTY, Bools

FOREVER = np.iinfo(np.int64).max


@dataclass(frozen=True)
class States:
    """Per row and instant of a call, the row's state after its last change
    there: the row, the instant, its count and stamp, the instant of the
    row's next state (:data:`FOREVER`: none in the call), whether the
    instant changed the row's count; and each changed row's first instant."""

    row: Int64s
    at: Int64s
    count: Int64s
    stamp: Int64s
    until: Int64s
    moved: Bools
    first_at: Int64s  # per row number (FOREVER: unchanged)


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
        if not len(ts):
            return EMPTY, tuple(EMPTY for _ in columns)
        states = self._states(self.rows.of(list(columns)), ts, sign)
        emitting = np.unique(states.at[states.moved])
        # the rows the relation held, until their first change of the call; then the call's states
        held = self.live_row
        row = np.concatenate((held, states.row))
        count = np.concatenate((self.live_count, states.count))
        stamp = np.concatenate((self.live_stamp, states.stamp))
        since = np.concatenate((np.full(len(held), -FOREVER, dtype=np.int64), states.at))
        until = np.concatenate((states.first_at[held], states.until))
        # each state with a count at each emitting instant it spans, by (instant, stamp)
        shown = np.flatnonzero(count > 0)
        lo = np.searchsorted(emitting, since[shown], side="left")
        hi = np.searchsorted(emitting, until[shown], side="left")
        which, instant = join_windows.expand(lo, hi - lo)
        state = shown[which]
        order = np.lexsort((stamp[state], instant))
        state, instant = state[order], instant[order]
        times = count[state]
        state, instant = np.repeat(state, times), np.repeat(instant, times)
        out = emitting[instant], tuple(values[row[state]] for values in self.rows.key_values)
        self._carry(states)
        return out

    def _states(self, row: Int64s, ts: Int64s, sign: Int64s) -> States:
        n = len(row)
        count0 = np.zeros(len(self.rows), dtype=np.int64)
        count0[self.live_row] = self.live_count
        stamp0 = np.full(len(self.rows), -1, dtype=np.int64)
        stamp0[self.live_row] = self.live_stamp
        runs = KeyRuns.of(row, ts, sign)
        r, s, at = runs.key, runs.sign, runs.at
        after = count0[r] + runs.running(s)
        before = after - s
        # an insertion takes the next place; a row's other changes keep the last one's
        marker = np.where((before == 0) & (after > 0), self.changed + runs.order, -1)
        first = runs.first
        marker[first & (marker < 0)] = stamp0[r[first & (marker < 0)]]
        last = np.zeros(n, dtype=np.int64)
        valid = np.flatnonzero(marker >= 0)
        last[valid] = valid
        np.maximum.accumulate(last, out=last)
        self.changed += n
        opens, closes = runs.opens, runs.closes
        state_row, state_at = r[closes], at[closes]
        until = np.full(len(state_row), FOREVER, dtype=np.int64)
        same = ~runs.last_state()[:-1]
        until[:-1][same] = state_at[1:][same]
        first_at = np.full(len(self.rows), FOREVER, dtype=np.int64)
        first_at[r[first]] = at[first]
        count, stamp, moved = after[closes], marker[last][closes], after[closes] != before[opens]
        return States(state_row, state_at, count, stamp, until, moved, first_at)

    def _carry(self, states: States) -> None:
        """What the relation holds after the call: the rows the call did not
        change, and the last state of each it changed, with a count."""
        unchanged = states.first_at[self.live_row] == FOREVER
        final = states.until == FOREVER
        live = np.concatenate((self.live_row[unchanged], states.row[final]))
        counts = np.concatenate((self.live_count[unchanged], states.count[final]))
        stamps = np.concatenate((self.live_stamp[unchanged], states.stamp[final]))
        held = counts > 0
        self.live_row, self.live_count, self.live_stamp = live[held], counts[held], stamps[held]
        if len(self.rows) > 2 * len(self.live_row) + join_windows.FORGET_AFTER:  # forget rows it lost
            number = self.rows.keep(np.unique(self.live_row))
            self.live_row = number[self.live_row]
