"""GROUP BY with COUNT, SUM and AVG of integers over a relation's changes
(a join's), on columns, as the row engine emits it.

The row engine's aggregate (:mod:`semiactive.node.engine.operators.aggregate`)
applies each instant's changes to their groups and then, for each group
whose row changed, in the order of the groups' first change at that
instant, emits ``-old`` and ``+new`` (a group appears with its first row
and leaves when its count is 0). Here each group keeps its count and sums;
a call's changes are sorted by group (:mod:`.change_runs`), their running
count and sums found by cumulative sums, and each group's state before its first and after its
last change of an instant compared. MIN and MAX are not here: a deletion
needs the multiset of the group's values.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from semiactive.node.cql import plan
from semiactive.node.engine.columnar import join_windows
from semiactive.node.engine.columnar.batch import Array, Int64s
from semiactive.node.engine.columnar.change_runs import KeyRuns
from semiactive.node.engine.columnar.group_numbers import GroupNumbers
from semiactive.node.engine.columnar.join_windows import EMPTY
from semiactive.node.engine.columnar.vector_exprs import INT64, evaluate
from semiactive.node.engine.columnar.window_aggregate import average


class ChangeAggregate:
    """The aggregate of a relation call after call: a call's changes (by
    instant, in the row engine's order) -> the aggregate relation's changes
    (instant, sign, row: the group's keys, then each call's result)."""

    def __init__(self, group_by: Sequence[plan.Expr], calls: Sequence[plan.AggCall]) -> None:
        self.group_by = tuple(group_by)
        self.calls = tuple(calls)
        self.groups = GroupNumbers(len(self.group_by))
        # per group number: the tuples it holds (0: no such group), and the
        # sum of each SUM / AVG argument
        self.count = EMPTY
        self.sums: list[Array] = [EMPTY for call in self.calls if call.func is not plan.AggFunc.COUNT]

    def advance(
        self, ts: Int64s, sign: Int64s, columns: Sequence[Array]
    ) -> tuple[Int64s, Int64s, tuple[Array, ...]]:
        n = len(ts)
        if not n:
            return EMPTY, EMPTY, tuple(EMPTY for _ in range(len(self.group_by) + len(self.calls)))
        if self.group_by:
            group = self.groups.of([evaluate(x, columns, n) for x in self.group_by])
        else:
            group = np.zeros(n, dtype=np.int64)
        self._grow(len(self.groups) if self.group_by else 1)
        runs = KeyRuns.of(group, ts, sign)
        # per change, each total's step (the count's, then each sum's) and its value after it
        steps: list[Array] = [runs.sign]
        args = [c.arg for c in self.calls if c.func is not plan.AggFunc.COUNT]
        for k, arg in enumerate(args):
            assert arg is not None
            values = np.asarray(evaluate(arg, columns, n))[runs.order]
            if _may_overflow(values, self.sums[k], n):  # Python ints, as the row engine's
                values, self.sums[k] = values.astype(object), self.sums[k].astype(object)
            steps.append(runs.sign * values)
        totals = [self.count, *self.sums]
        after = [total[runs.key] + runs.running(step) for step, total in zip(steps, totals, strict=True)]
        # each group's state before its first and after its last change of an instant
        opens, closes = runs.opens, runs.closes
        before_state = [x[opens] - step[opens] for x, step in zip(after, steps, strict=True)]
        after_state = [x[closes] for x in after]
        old, new = self._results(before_state), self._results(after_state)
        had, has = before_state[0] > 0, after_state[0] > 0
        differs = np.zeros(len(had), dtype=bool)
        for a, b in zip(old, new, strict=True):
            differs |= np.asarray(a != b, dtype=bool)
        # by instant, groups in the order of their first change there: -old, then +new
        dropped = np.flatnonzero(had & (~has | differs))
        put = np.flatnonzero(has & (~had | differs))
        first_change = runs.order[opens]
        order = np.argsort(np.concatenate((2 * first_change[dropped], 2 * first_change[put] + 1)))
        state = np.concatenate((dropped, put))[order]
        is_new = np.concatenate((np.zeros(len(dropped), dtype=bool), np.ones(len(put), dtype=bool)))[order]
        state_group = runs.key[closes]
        keys = tuple(values[state_group[state]] for values in self.groups.key_values) if self.group_by else ()
        results = tuple(np.where(is_new, b[state], a[state]) for a, b in zip(old, new, strict=True))
        out = runs.at[closes][state], np.where(is_new, 1, -1).astype(np.int64), (*keys, *results)
        # each group's last state carries over
        last = runs.last_state()
        for total, x in zip([self.count, *self.sums], after_state, strict=True):
            total[state_group[last]] = x[last]
        self._forget()
        return out

    def _results(self, state: list[Array]) -> list[Array]:
        """Each call's result from a count and the sums (``state``)."""
        out, k = [], 1
        for call in self.calls:
            if call.func is plan.AggFunc.COUNT:
                out.append(state[0])
                continue
            out.append(state[k] if call.func is plan.AggFunc.SUM else average(state[k], state[0]))
            k += 1
        return out

    def _grow(self, size: int) -> None:
        more = size - len(self.count)
        if more > 0:
            self.count = np.concatenate((self.count, np.zeros(more, dtype=np.int64)))
            self.sums = [np.concatenate((x, np.zeros(more, dtype=x.dtype))) for x in self.sums]

    def _forget(self) -> None:
        """Forget groups left empty once they are many."""
        live = np.flatnonzero(self.count > 0)
        if self.group_by and len(self.groups) > 2 * len(live) + join_windows.FORGET_AFTER:
            self.groups.keep(live)
            self.count = self.count[live]
            self.sums = [x[live] for x in self.sums]


def _may_overflow(values: Array, sums: Array, n: int) -> bool:
    """Whether a running sum of ``n`` of ``values`` from ``sums`` may pass
    int64 (then it is taken in Python ints)."""
    if values.dtype != np.int64 or sums.dtype != np.int64:
        return True
    largest = max(-int(values.min()), int(values.max()))
    held = max(-int(sums.min()), int(sums.max())) if len(sums) else 0
    return held + largest * n >= INT64[1]
