"""An equi-join of two windows, on columns, in the row engine's order.

The row engine's join (:mod:`semiactive.node.engine.operators.join`) keeps
each window as a multiset per join key and, at each instant, joins the left
window's changes with the right window as it was, then the right window's
changes with the left window as it now is. Its output at an instant is so a
sequence of pairs: for each change in turn (the left's, then the right's;
in each, in the order its window emits them),
the matching tuples of the other window in its multiset's order. That order
is a dict's: a row value's place is where its current run of copies began
(the arrival of the tuple that took its count from 0 to 1), and its copies
follow one another.

This module makes the same sequence with sorts and binary searches: each
window (:mod:`.join_windows`) lists its changes of the call and, for a
change of the other side, the run of its tuples sorted by (key, arrival)
that the change meets; the pairs are sorted by (change, run start,
arrival). :func:`net_changes` then does what ISTREAM and DSTREAM do with
them. Columns are integers or text, which compare equal exactly when they
are the same value (a float's NaN and -0.0 would make a row's identity a
matter of Python objects).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from semiactive.node.engine.columnar import join_windows
from semiactive.node.engine.columnar.batch import Array, Int64s
from semiactive.node.engine.columnar.group_numbers import GroupNumbers, row_numbers
from semiactive.node.engine.columnar.join_windows import EMPTY, Arrivals, JoinWindow

#: A condition on joined rows: their columns -> a mask of those it keeps.
Keep = Callable[[tuple[Array, ...]], Array]


@dataclass(frozen=True)
class JoinedChanges:
    """The joined relation's changes, in the row engine's order: the
    instant, +1 or -1, and the joined row (left columns, then right)."""

    ts: Int64s
    sign: Int64s
    columns: tuple[Array, ...]


class WindowJoin:
    """The join's two windows, and each call's changes of the joined relation."""

    def __init__(self, left: JoinWindow, right: JoinWindow, keys: int) -> None:
        self.windows = (left, right)
        self.keys = GroupNumbers(keys)  # the join keys of both sides, numbered together

    def advance(
        self, left: Arrivals, right: Arrivals, done: int, watermark: int, keep: Keep | None = None
    ) -> JoinedChanges:
        """Take each window's tuples up to ``watermark`` (all after ``done``);
        the joined relation's changes at the instants in (done, watermark],
        only the joined rows ``keep`` keeps (a condition on the joined row:
        checked before the pairs are put in order)."""
        windows = self.windows
        for window, new in zip(windows, (left, right), strict=True):
            n = len(new.ts)
            window.take(new, self.keys.of(list(new.keys)) if new.keys else np.zeros(n, dtype=np.int64))
        at_of, index_of, side_of, sign_of = self._changes(done, watermark)
        which, li, ri = self._pairs(at_of, index_of, side_of)
        of_left = side_of[which] == 0
        columns = (*(c[li] for c in windows[0].columns), *(c[ri] for c in windows[1].columns))
        if keep is not None and len(which):
            kept = np.flatnonzero(keep(columns))
            which, of_left, li, ri = which[kept], of_left[kept], li[kept], ri[kept]
            columns = tuple(c[kept] for c in columns)
        # Within a change the partners are in arrival order; a partner whose
        # row began its run earlier comes first.
        run = np.where(of_left, windows[1].run[ri], windows[0].run[li])
        arrival = np.where(of_left, windows[1].arrival[ri], windows[0].arrival[li])
        if bool(np.any(run != arrival)):
            order = np.lexsort((arrival, run, which))
            which, columns = which[order], tuple(c[order] for c in columns)
        for window in windows:
            window.keep(watermark)
        keyed = bool(left.keys)  # else a cross product: every key number 0
        if keyed and len(self.keys) > 2 * sum(len(w.ts) for w in windows) + join_windows.FORGET_AFTER:
            number = self.keys.keep(np.unique(np.concatenate([w.key for w in windows])))
            for window in windows:
                window.renumber_keys(number)
        return JoinedChanges(at_of[which], sign_of[which], columns)

    def _changes(self, done: int, watermark: int) -> tuple[Int64s, Int64s, Int64s, Int64s]:
        """Every change of either window in (done, watermark], in the row
        engine's order (by instant, the left's before the right's, then as
        the window emits them): instant, index, side (0 left), sign."""
        each = [window.changes(done, watermark) for window in self.windows]
        side_of = np.concatenate([np.full(len(c.index), side, dtype=np.int64) for side, c in enumerate(each)])
        index_of, at_of, first, second, sign_of = (
            np.concatenate(parts)
            for parts in zip(*((c.index, c.at, c.first, c.second, c.sign) for c in each), strict=True)
        )
        order = np.lexsort((second, first, side_of, at_of))
        return at_of[order], index_of[order], side_of[order], sign_of[order]

    def _pairs(self, at_of: Int64s, index_of: Int64s, side_of: Int64s) -> tuple[Int64s, Int64s, Int64s]:
        """Each change with each tuple of the other window it meets (one of
        its own side's conditions may drop): the change's place, the left
        tuple, the right tuple; by change, then the partner's arrival. The
        left side meets the right window as it was before the instant, the
        right side the left window as it is after the left's changes."""
        windows = self.windows
        lo, hi = np.zeros(len(at_of), dtype=np.int64), np.zeros(len(at_of), dtype=np.int64)
        for side in (0, 1):
            mine = side_of == side
            lo[mine], hi[mine] = windows[1 - side].meets(
                windows[side].key[index_of[mine]], at_of[mine], before=side == 0
            )
        which, at = join_windows.expand(lo, np.maximum(hi - lo, 0))
        of_left = side_of[which] == 0
        partner = np.empty(len(which), dtype=np.int64)
        partner[of_left] = windows[1].order[at[of_left]]
        partner[~of_left] = windows[0].order[at[~of_left]]
        own = index_of[which]
        li, ri = np.where(of_left, own, partner), np.where(of_left, partner, own)
        # a partner its own side's conditions drop is not in the relation
        shown = np.where(of_left, windows[1].passes[ri], windows[0].passes[li])
        if not shown.all():
            which, li, ri = which[shown], li[shown], ri[shown]
        return which, li, ri


def net_changes(ts: Int64s, sign: Int64s, columns: Sequence[Array], want: int) -> Int64s:
    """What ISTREAM (``want`` 1) or DSTREAM (-1) emits from a relation's
    changes: at each instant, each row whose count moved the wanted way, as
    often as it moved, in order of first appearance; as indices into the
    changes (a row's first one, repeated)."""
    n = len(ts)
    if not n:
        return EMPTY
    rows = row_numbers((ts, *columns), n)
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    net = np.zeros(len(first), dtype=np.int64)
    np.add.at(net, inverse.reshape(-1), sign)
    net *= want
    emit = np.flatnonzero(net > 0)
    order = np.argsort(first[emit], kind="stable")
    emit = emit[order]
    return np.repeat(first[emit], net[emit])
