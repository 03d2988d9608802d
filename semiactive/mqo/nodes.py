"""The runtime of a shared plan: join nodes and per-query filters.

A :class:`JoinNode` runs when one of its masters arrives: with ``lo = now -
window`` it joins what arrived on each input since its last run with the
other input's window relation (the MQO paper, 2.2: dQuote x window(News) +
window(Quote) x dNews + dQuote x dNews), so every combination is produced
once, at the first run after its newest row arrived. A
:class:`QueryFilter` keeps the batches its top node produced since the
query last ran; at the query's own master arrival it takes, by bisection
on each batch's sorted oldest-row times, the combinations inside its own
window, applies its constant filters and delivers them. What the node
produced for other queries' windows and masters never reaches it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter

from semiactive.mqo.plan import ContentKey, NodePlan
from semiactive.mqo.query import ContinuousQuery
from semiactive.mqo.relations import Combo, Item, Layout, Relation

NEVER = -(2**62)
_PRUNE_AT = 32
_MIN_TS = itemgetter(0)


@dataclass
class JoinStats:
    probes: int = 0
    intermediate: int = 0
    executions: int = 0
    results: int = 0
    delivered: int = 0  # combinations offered to per-query filters (the MQO paper's per-root results)


@dataclass
class Batch:
    """What a node produced in one run, sorted by the oldest row's time."""

    keys: list[int]
    items: list[Item]


class QueryFilter:
    """One query above its top node: its window, master, filters and projection."""

    def __init__(self, query: ContinuousQuery, layout: Layout, registered_after: int | None) -> None:
        self.query = query
        self.layout = layout
        self.registered_after = registered_after
        self.test = layout.test(query.filters)
        self.buffer: list[Batch] = []
        self.fired_at = NEVER
        # After a replica rebuilt its state from a later cut: what the query
        # output before (at fired_at) must not be output again.
        self.exclude_through: int | None = None

    def fire(self, now: int) -> list[Combo]:
        lo = NEVER if self.query.window is None else now - self.query.window
        if self.registered_after is not None:
            lo = max(lo, self.registered_after + 1)
        out: list[Combo] = []
        for batch in self.buffer:
            first = bisect.bisect_left(batch.keys, lo)
            out.extend(combo for _, combo in batch.items[first:])
        self.buffer.clear()
        if self.test is not None:
            test = self.test
            out = [c for c in out if test(c)]
        if self.exclude_through is not None:
            bound = self.exclude_through
            out = [c for c in out if max(r[0] for r in c) > bound]
            self.exclude_through = None
        self.fired_at = now
        return out

    def receive(self, batch: Batch, now: int) -> None:
        """A batch of the top node; batches that can no longer reach the
        query's window (its next firing is after ``now``) are dropped now and
        then, so that a query whose master is silent holds little."""
        buffer = self.buffer
        buffer.append(batch)
        if len(buffer) >= _PRUNE_AT and self.query.window is not None:
            lo = now + 1 - self.query.window
            self.buffer = [b for b in buffer if b.keys[-1] >= lo]


class JoinNode:
    """A node of a cluster's plan at run time (a scan when ``plan.right`` is None)."""

    def __init__(
        self,
        plan: NodePlan,
        layouts: Callable[[tuple[str, ...]], Layout],
        left: Relation | None,
        right: Relation | None,
    ) -> None:
        self.plan = plan
        self.window = plan.window
        self.left_delta: list[Item] = []
        self.right_delta: list[Item] = []
        self.parents: list[JoinNode] = []
        self.filters: list[QueryFilter] = []
        self.left = left
        self.right = right
        self.last_sweep = NEVER
        if plan.right is not None:
            assert left is not None and right is not None
            left_layout = layouts(plan.left[0])
            self.insert_at = left_layout.insert_at(plan.right)
            self.residual = layouts(plan.sources).test(plan.residual)
            self.right_key = right.key_of

    def relations(self) -> Iterator[tuple[ContentKey, Relation]]:
        if self.left is not None and self.right is not None and self.plan.right is not None:
            yield self.plan.left, self.left
            yield ((self.plan.right,), ()), self.right

    def run(self, now: int, stats: JoinStats) -> None:
        stats.executions += 1
        lo = NEVER if self.window is None else now - self.window
        dl = [item for item in self.left_delta if item[0] >= lo] if self.left_delta else []
        dr = [item for item in self.right_delta if item[0] >= lo] if self.right_delta else []
        self.left_delta = []
        self.right_delta = []
        if self.plan.right is None:
            out = dl
        else:
            out = self._join(dl, dr, lo, stats)
            if self.window is not None and now - self.last_sweep >= self.window:
                assert self.left is not None and self.right is not None
                self.left.sweep(lo)
                self.right.sweep(lo)
                self.last_sweep = now
        if not out:
            return
        for parent in self.parents:
            parent.left_delta.extend(out)
        if self.filters:
            out.sort(key=_MIN_TS)
            batch = Batch([item[0] for item in out], out)
            for f in self.filters:
                f.receive(batch, now)
            stats.delivered += len(out) * len(self.filters)

    def _join(self, dl: list[Item], dr: list[Item], lo: int, stats: JoinStats) -> list[Item]:
        assert self.left is not None and self.right is not None
        out: list[Item] = []
        pos = self.insert_at
        test = self.residual
        probes = 0
        if dl:
            probe = self.right.probe
            key_of = self.left.key_of
            for m, lc in dl:
                probes += 1
                for m2, rc in probe(key_of(lc)):
                    if m2 >= lo:
                        c = lc[:pos] + rc + lc[pos:]
                        if test is None or test(c):
                            out.append((m if m < m2 else m2, c))
            self.left.insert(dl)
        if dr:
            probe = self.left.probe
            key_of = self.right_key
            for m2, rc in dr:
                probes += 1
                for m, lc in probe(key_of(rc)):
                    if m >= lo:
                        c = lc[:pos] + rc + lc[pos:]
                        if test is None or test(c):
                            out.append((m if m < m2 else m2, c))
            self.right.insert(dr)
        stats.probes += probes
        stats.intermediate += len(out)
        return out


@dataclass
class ClusterRuntime:
    """A cluster's base groups and its running plan."""

    groups: list[int]
    nodes: dict[ContentKey, JoinNode] = field(default_factory=dict)
    top: dict[str, JoinNode] = field(default_factory=dict)
