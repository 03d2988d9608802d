"""COUNT / SUM / AVG / MIN / MAX per group over ``[Partition By keys Rows
N]`` grouped by the same keys, in time linear in the tuples carried, with
no sort of them.

:class:`~.grouped_window_aggregate.GroupedWindowAggregate` ranks and sorts
every carried tuple (each group's last N) at each call: with 1,000 keys a
stage's call took 1.6x the row engine's time. Here each group has a stable
number and the carried tuples are kept in (group, arrival) order: a call
merges its new tuples into it (each at the end of its group's run) and
keeps each group's last N after it, both linear moves. A new tuple enters
its group at once and the group's oldest leaves, so every new tuple is an
event at its own instant; the window of a group at an instant is the run
of its last N tuples up to the instant's last one of the group, whose
place in the merged order the merge gives.

It gives up (:meth:`GroupedPartitionRows.advance` returns None, changing
nothing) for an argument that is not an int64, a key that is neither an
int64 nor bytes, or sums that could leave int64; the caller then carries
on with the general algorithm from :meth:`GroupedPartitionRows.carried`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from semiactive.node.cql import plan
from semiactive.node.engine.columnar.batch import Array, Int64s
from semiactive.node.engine.columnar.group_numbers import GroupNumbers, numbered
from semiactive.node.engine.columnar.grouped_range_sums import (
    GroupOrderMerge,
    carried_keys_and_args,
    largest_summed,
    previous_queries,
    run_sums,
    taken_arguments,
)
from semiactive.node.engine.columnar.range_sums import SUM_LIMIT
from semiactive.node.engine.columnar.window_aggregate import range_extreme

_EMPTY = np.empty(0, dtype=np.int64)


class GroupedPartitionRows:
    """``calls`` per group of ``keys`` key columns over each group's last
    ``rows`` tuples."""

    def __init__(self, calls: Sequence[plan.AggCall], keys: int, rows: int, lineage: bool) -> None:
        self.calls = list(calls)
        self.size = rows
        self.valued = [k for k, call in enumerate(self.calls) if call.func is not plan.AggFunc.COUNT]
        self.adds = [call.func in (plan.AggFunc.SUM, plan.AggFunc.AVG) for call in self.calls]
        self.groups = GroupNumbers(keys)
        self.arrived = 0  # tuples seen: the next arrival number
        # The carried tuples (each group's last N), in (group, arrival) order.
        self.by_group: Int64s = _EMPTY
        self.arrival: Int64s = _EMPTY
        self.ts: Int64s = _EMPTY
        self.values: list[Int64s] = [_EMPTY for _ in self.valued]
        self.lin: Int64s | None = _EMPTY if lineage else None

    def state_low(self) -> int | None:
        """The oldest lineage carried (each group's last N are not the last
        tuples overall: the smallest, not the first)."""
        return int(self.lin.min()) if self.lin is not None and len(self.lin) else None

    def carried(self) -> tuple[Int64s, list[Array], list[Array], Int64s | None]:
        """The carried tuples in arrival order: timestamps, key columns,
        each call's argument values (0 for a COUNT), lineages."""
        order = np.argsort(self.arrival, kind="stable")
        keys, args = carried_keys_and_args(
            order, self.by_group, self.groups, self.valued, self.values, self.calls
        )
        lin = self.lin[order] if self.lin is not None else None
        return self.ts[order], keys, args, lin

    def positions(self) -> Int64s:
        """Each carried tuple's index within its group (in the order of
        :meth:`carried`), what the general algorithm keeps for a partition."""
        index = np.arange(len(self.by_group), dtype=np.int64)
        within = index - np.searchsorted(self.by_group, self.by_group, side="left")
        return within[np.argsort(self.arrival, kind="stable")]

    def advance(
        self,
        ts: Int64s,
        keys: Sequence[Array],
        args: Sequence[Array],
        done: int,
        watermark: int,
        lin: Int64s | None,
    ) -> tuple[Int64s, Int64s, Int64s, list[Array], Int64s] | None:
        """Add tuples ``ts`` (in ``(done, watermark]``, each an event of its
        group at its instant). Return, for every (instant, group) touched,
        in the order the row engine meets them: the instant, the group's
        number (its key values are ``groups.key_values`` there), the
        window's count, each call's column (COUNT, MIN, MAX, or the sum for
        SUM and AVG: the caller divides) and the index of the same group's
        previous query here (-1: none). None, changing nothing, where it
        gives up."""
        valued = [args[k] for k in self.valued]
        if not taken_arguments(valued) or not all(numbered(k) for k in keys):
            return None
        n = len(self.by_group) + len(ts)
        if largest_summed(self.valued, self.adds, self.values, valued) * n >= SUM_LIMIT:
            return None
        if not len(ts):
            return _EMPTY, _EMPTY, _EMPTY, [_EMPTY for _ in self.calls], _EMPTY
        gid = self.groups.of(keys)
        at = self._merge(ts, gid, valued, lin)
        # The first tuple of each (instant, group) orders the queries; the
        # last one ends the group's window at that instant.
        instant = np.cumsum(np.r_[0, ts[1:] != ts[:-1]])
        pair = instant * (int(gid.max()) + 1) + gid
        _, first = np.unique(pair, return_index=True)
        _, from_end = np.unique(pair[::-1], return_index=True)
        by_first = np.argsort(first)
        first, last = first[by_first], (len(pair) - 1 - from_end)[by_first]
        q_gid = gid[first]
        hi = at[last] + 1
        lo = np.maximum(np.searchsorted(self.by_group, q_gid, side="left"), hi - self.size)
        count = (hi - lo).astype(np.int64)
        found = {}
        for k, values in zip(self.valued, self.values, strict=True):
            if self.adds[k]:
                found[k] = run_sums(values, lo, hi)
            else:
                found[k] = range_extreme(values, lo, hi, largest=self.calls[k].func is plan.AggFunc.MAX)
        columns: list[Array] = [found.get(k, count) for k in range(len(self.calls))]
        self._keep_last()
        return ts[first], q_gid, count, columns, previous_queries(q_gid)

    def _merge(self, ts: Int64s, gid: Int64s, valued: Sequence[Int64s], lin: Int64s | None) -> Int64s:
        """Insert the new tuples into the (group, arrival) order at the end
        of their groups' runs; return each one's index there."""
        merged = GroupOrderMerge(self.by_group, gid)
        arrival = self.arrived + np.arange(len(ts), dtype=np.int64)
        self.arrived += len(ts)
        self.by_group = merged(self.by_group, gid)
        self.arrival = merged(self.arrival, arrival)
        self.ts = merged(self.ts, ts)
        self.values = [merged(v, s) for v, s in zip(self.values, valued, strict=True)]
        if self.lin is not None and lin is not None:
            self.lin = merged(self.lin, lin)
        return merged.landed()

    def _keep_last(self) -> None:
        """Keep each group's last N tuples: the others left for good."""
        end = np.searchsorted(self.by_group, self.by_group, side="right")
        keep = end - np.arange(len(self.by_group)) <= self.size
        if bool(keep.all()):
            return
        self.by_group = self.by_group[keep]
        self.arrival = self.arrival[keep]
        self.ts = self.ts[keep]
        self.values = [v[keep] for v in self.values]
        if self.lin is not None:
            self.lin = self.lin[keep]
