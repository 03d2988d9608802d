"""The shared executor: many continuous queries over the same streams, in
clusters of base groups, each cluster one shared plan (the MQO paper, 4.3).

Pure and deterministic: :meth:`SharedExecutor.process` takes one instant's
arrivals and returns what each query whose master arrived outputs, in event
time; re-clustering, the periodic similarity check and registrations happen
at instants, never by the wall clock, so two replicas fed the same input
give the same output (the SAS-protected stage relies on it).

Re-planning a set of clusters (a re-clustering, a query added or removed)
first synchronises them: every node runs at the current instant, so every
combination whose rows have arrived sits in its queries' buffers and every
delta is empty. Then each window relation is saved under its content key,
and each node of the new plans takes a saved relation of the same content
holding at least its window (copied when another node took it already), or,
when none does, one rebuilt by joining the rows each source retains for the
largest window that reads it. Nothing is lost or repeated (docs/mqo.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from semiactive.errors import UserError
from semiactive.mqo.clocks import Clock
from semiactive.mqo.grouping import base_groups, cluster, may_share_base_group, min_similarity
from semiactive.mqo.nodes import NEVER, Batch, ClusterRuntime, JoinNode, JoinStats, QueryFilter
from semiactive.mqo.plan import ContentKey, NodePlan, plan_cluster
from semiactive.mqo.query import Column, ContinuousQuery
from semiactive.mqo.relations import Combo, Item, Layout, Relation, Row
from semiactive.mqo.similarity import ArrivalLog, Bitmap, similarity_matrix, union_usage, usage, use_bitmap


class MqoError(UserError):
    pass


class Method(StrEnum):
    DYNAMIC = "dynamic"  # base groups, clusters from the log, re-clustered as arrivals change
    STATIC = "static"  # base groups, clusters from the first log, kept
    SINGLE = "single"  # every query in one cluster
    NONE = "none"  # every query alone


@dataclass
class HandOver:
    reused: int = 0
    copied: int = 0
    rebuilt: int = 0


@dataclass
class Reclustering:
    at: int
    reason: str
    clusters: list[list[str]]
    similarity: list[float] = field(default_factory=list)


class SharedExecutor:
    def __init__(
        self,
        queries: Sequence[ContinuousQuery],
        schemas: Mapping[str, Sequence[str]],
        clocks: Mapping[str, Clock] | None = None,
        *,
        method: Method = Method.DYNAMIC,
        theta: float = 0.5,
        log_period: int = 10_000,
        check_every: int | None = None,
        patience: int = 1,
        recluster_at: Sequence[int] = (),
        initial_log: ArrivalLog | None = None,
        value_offset: int = 2,
    ) -> None:
        """Rows are ``(ts, seq, values...)`` (``value_offset`` 2), or elements
        ``(ts, lin, sign, values...)`` (3); seq/lin is the row's input position."""
        if not 0.0 < theta <= 1.0:
            raise MqoError(f"theta {theta}: must be in (0, 1]")
        self.schemas = {
            s: {"ts": 0, **{c: i + value_offset for i, c in enumerate(cols)}} for s, cols in schemas.items()
        }
        self.clocks = dict(clocks or {})
        self.method = method
        self.theta = theta
        self.log_period = log_period
        self.check_every = check_every if method is Method.DYNAMIC else None
        self.patience = patience
        self.pending_reclusters = sorted(recluster_at) if method is Method.DYNAMIC else []
        self.now = NEVER
        self.next_check = NEVER if self.check_every is None else 0
        self.stats = JoinStats()
        self.handover = HandOver()
        self.history: list[Reclustering] = []
        self.queries: dict[str, ContinuousQuery] = {}
        self.filters: dict[str, QueryFilter] = {}
        self.groups: dict[int, list[str]] = {}
        self.clusters: list[ClusterRuntime] = []
        self.low_checks: dict[int, int] = {}
        self._next_group = 0
        self._layouts: dict[tuple[str, ...], Layout] = {}
        self.arrival_log: dict[str, deque[int]] = {}
        self.retention: dict[str, deque[Row]] = {}
        # While True, retained rows are kept whatever the windows (a replica
        # rebuilding its state may learn of wider queries at the end).
        self.hold_retention = False
        self._registered_after: dict[str, int] = {}
        for stream in self.schemas:
            self.retention[stream] = deque()
        for q in queries:
            self._check(q)
            self.queries[q.name] = q
        self._regroup(list(self.queries.values()))
        self._replan([], self._initial_clustering(initial_log), "start")

    # -- registration -------------------------------------------------

    def add(self, query: ContinuousQuery, registered_after: int | None = None) -> None:
        """Register ``query`` after instant ``registered_after`` (default: the
        current one): it sees rows that arrive after it and fires at master
        arrivals after it. It joins the base group (hence cluster) it fits,
        if any; the other clusters are not touched."""
        if query.name in self.queries:
            raise MqoError(f"query {query.name!r} is registered already")
        self._check(query)
        self.queries[query.name] = query
        self._registered_after[query.name] = self.now if registered_after is None else registered_after
        target = self._group_for(query)
        if target is None:
            gid = self._new_group([query.name])
            old: list[ClusterRuntime] = []
            groupings = [[gid]]
            if self.method is Method.SINGLE and self.clusters:
                old = [self.clusters[0]]
                groupings = [[*old[0].groups, gid]]
        else:
            self.groups[target].append(query.name)
            old = [self._cluster_of(target)]
            groupings = [old[0].groups]
        self._replan(old, groupings, f"add {query.name}", registered={query.name})

    def seed(self, name: str, fired_at: int) -> None:
        """Give a query registered while this replica was rebuilding its state
        the combinations it would hold had it seen them: everything in its
        window after ``fired_at``, joined again from the retained rows."""
        f = self.filters[name]
        q = f.query
        lo = self.now - q.window if q.window is not None else NEVER
        if f.registered_after is not None:
            lo = max(lo, f.registered_after + 1)
        key = self._top_key(name)
        items = [item for item in self._materialise(key, lo) if max(r[0] for r in item[1]) > fired_at]
        items.sort(key=lambda item: item[0])
        f.buffer = [Batch([item[0] for item in items], items)] if items else []
        f.fired_at = fired_at
        f.exclude_through = None

    def _top_key(self, name: str) -> ContentKey:
        return next(c.top[name].plan.key for c in self.clusters if name in c.top)

    def remove(self, name: str) -> None:
        if name not in self.queries:
            raise MqoError(f"no registered query {name!r}")
        gid = next(g for g, members in self.groups.items() if name in members)
        old = self._cluster_of(gid)
        self.groups[gid].remove(name)
        del self.queries[name]
        del self.filters[name]
        self._registered_after.pop(name, None)
        groups = old.groups
        if not self.groups[gid]:
            del self.groups[gid]
            groups = [g for g in groups if g != gid]
        self._replan([old], [groups] if groups else [], f"remove {name}")

    def recluster(self, reason: str = "on demand") -> None:
        """Cluster the base groups again from the arrival log of the last period."""
        sim, ids = self._group_similarity()
        groupings = self._clustering_policy(sim, ids)
        if sorted(map(sorted, groupings)) == sorted(sorted(c.groups) for c in self.clusters):
            self.history.append(Reclustering(self.now, f"{reason} (unchanged)", self.clustering()))
            return
        self._replan(list(self.clusters), groupings, reason, similarity=sim, ids=ids)

    # -- the data path -------------------------------------------------

    def process(self, t: int, arrivals: Mapping[str, Sequence[Row]]) -> dict[str, list[Combo]]:
        """Rows ``(ts, seq, values...)`` arriving at instant ``t`` (after every
        earlier one); returns each fired query's new results."""
        if t <= self.now:
            raise MqoError(f"instant {t} is not after {self.now}")
        self._control(t)
        self.now = t
        for stream, rows in arrivals.items():
            log = self.arrival_log.get(stream)
            if log is not None:
                log.extend([t] * len(rows))
                while log and log[0] <= t - self.log_period:
                    log.popleft()
            kept = self.retention.get(stream)
            if kept is not None:
                kept.extend(rows)
            items = [(row[0], (row,)) for row in rows]
            for node, side in self.subscribers.get(stream, ()):
                (node.left_delta if side == 0 else node.right_delta).extend(items)
        self._trim_retention(t)
        fired = [m for m in arrivals if m in self.by_master]
        fired += [c.name for c in self.clocks.values() if c.name in self.by_master and c.fires_at(t)]
        if not fired:
            return {}
        nodes: dict[int, JoinNode] = {}
        for m in fired:
            for order, node in self.by_master[m][0]:
                nodes[order] = node
        for order in sorted(nodes):
            nodes[order].run(t, self.stats)
        out: dict[str, list[Combo]] = {}
        for m in fired:
            for f in self.by_master[m][1]:
                if f.query.name not in out:
                    out[f.query.name] = results = f.fire(t)
                    self.stats.results += len(results)
        return out

    def rows(self, name: str, t: int, combos: Sequence[Combo]) -> list[dict[str, Any]]:
        """Results as JSON objects: ``ts`` and the qualified selected columns."""
        q = self.queries[name]
        layout = self.layout(tuple(sorted(q.sources)))
        columns = q.select or tuple(Column(s, c) for s in q.sources for c in self.schemas[s])
        getters = [(str(c), layout.getter(c)) for c in columns]
        return [{"ts": t, **{name: get(combo) for name, get in getters}} for combo in combos]

    def oldest_seq(self) -> int | None:
        """The smallest input position a replica must rebuild from (then
        :meth:`restore_fired`) to output what this one will."""
        # Buffered combinations a query can still output lie inside its window,
        # so their rows are retained too: the retention heads bound everything.
        seqs = [rows[0][1] for rows in self.retention.values() if rows]
        return min(seqs) if seqs else None

    def last_fired(self) -> dict[str, int]:
        return {name: f.fired_at for name, f in self.filters.items()}

    def restore_fired(self, fired: Mapping[str, int]) -> None:
        """Adopt another replica's last firing times: no query outputs again
        what it output at or before them."""
        for name, at in fired.items():
            f = self.filters.get(name)
            if f is not None and at > f.fired_at:
                f.fired_at = at
                f.exclude_through = at

    def clustering(self) -> list[list[str]]:
        return [[n for g in c.groups for n in self.groups[g]] for c in self.clusters]

    # -- control -------------------------------------------------------

    def _control(self, t: int) -> None:
        while self.pending_reclusters and self.pending_reclusters[0] < t:
            self.pending_reclusters.pop(0)
            self.recluster("forced")
        if self.check_every is None:
            return
        while self.next_check < t:
            self.next_check += self.check_every
            if self.now == NEVER:
                continue
            sim, ids = self._group_similarity()
            index = {g: i for i, g in enumerate(ids)}
            due = False
            for c in self.clusters:
                low = min_similarity(sim, [index[g] for g in c.groups]) < self.theta
                key = c.groups[0]
                self.low_checks[key] = self.low_checks.get(key, 0) + 1 if low else 0
                due = due or self.low_checks[key] >= self.patience
            if due:
                self.low_checks.clear()
                self.recluster("similarity below theta")

    def _log(self) -> ArrivalLog:
        times = {s: np.fromiter(log, dtype=np.int64, count=len(log)) for s, log in self.arrival_log.items()}
        return ArrivalLog(self.now - self.log_period, self.now, times, self.clocks)

    def _group_similarity(self, log: ArrivalLog | None = None) -> tuple[np.ndarray, list[int]]:
        log = log or self._log()
        ids = list(self.groups)
        return similarity_matrix([self._group_usage(g, log) for g in ids]), ids

    def _group_usage(self, gid: int, log: ArrivalLog) -> dict[str, Bitmap]:
        """USE of a base group: its members share their masters, so the union
        of their USE sets of a source is the USE set of the widest window
        among the members reading it."""
        members = [self.queries[n] for n in self.groups[gid]]
        widest: dict[str, int | None] = {}
        for q in members:
            for s in q.sources:
                w = widest.get(s, 0)
                widest[s] = None if w is None or q.window is None else max(w, q.window)
        if len({frozenset(q.masters) for q in members}) > 1:  # not a base group (method none/single)
            return union_usage([usage(q.masters, q.window, q.sources, log) for q in members])
        when = log.master_times(members[0].masters)
        return {s: use_bitmap(log.arrivals(s), when, w) for s, w in widest.items()}

    def _clustering_policy(self, sim: np.ndarray, ids: list[int]) -> list[list[int]]:
        if not ids:
            return []
        if self.method is Method.NONE:
            return [[g] for g in ids]
        if self.method is Method.SINGLE:
            return [ids]
        return [[ids[i] for i in members] for members in cluster(sim, self.theta)]

    def _initial_clustering(self, log: ArrivalLog | None) -> list[list[int]]:
        """Clusters at start: from the log when one is given (step 2 of 4.3:
        one cluster of every base group without one)."""
        ids = list(self.groups)
        if self.method is Method.NONE:
            return [[g] for g in ids]
        if not ids:
            return []
        if self.method is Method.SINGLE or log is None:
            return [ids]
        sim, ids = self._group_similarity(log)
        return self._clustering_policy(sim, ids)

    def _regroup(self, queries: list[ContinuousQuery]) -> None:
        if self.method in (Method.NONE, Method.SINGLE):
            for q in queries:
                self._new_group([q.name])
            return
        for members in base_groups(queries, self.theta):
            self._new_group([queries[i].name for i in members])

    def _new_group(self, names: list[str]) -> int:
        gid = self._next_group
        self._next_group += 1
        self.groups[gid] = names
        return gid

    def _group_for(self, query: ContinuousQuery) -> int | None:
        if self.method in (Method.NONE, Method.SINGLE):
            return None
        for gid, members in self.groups.items():
            if all(may_share_base_group(query, self.queries[n], self.theta) for n in members):
                return gid
        return None

    def _cluster_of(self, gid: int) -> ClusterRuntime:
        return next(c for c in self.clusters if gid in c.groups)

    def _check(self, q: ContinuousQuery) -> None:
        for s in q.sources:
            if s not in self.schemas:
                raise MqoError(
                    f"query {q.name}: no stream {s!r} (known: {', '.join(self.schemas) or 'none'})"
                )
        for c in [
            *(q.select or ()),
            *(o for p in q.where for o in (p.left, p.right) if isinstance(o, Column)),
        ]:
            if c.name not in self.schemas[c.source]:
                known = ", ".join(self.schemas[c.source])
                raise MqoError(f"query {q.name}: {c}: {c.source} has no column {c.name!r} (known: {known})")
        for m in q.masters:
            if m not in self.schemas and m not in self.clocks:
                raise MqoError(f"query {q.name}: master {m!r} is neither a stream nor a clock")

    # -- plans and hand-over --------------------------------------------

    def layout(self, sources: tuple[str, ...]) -> Layout:
        layout = self._layouts.get(sources)
        if layout is None:
            layout = self._layouts[sources] = Layout(sources, self.schemas)
        return layout

    def _replan(
        self,
        old: list[ClusterRuntime],
        groupings: list[list[int]],
        reason: str,
        registered: Set[str] = frozenset(),
        similarity: np.ndarray | None = None,
        ids: list[int] | None = None,
    ) -> None:
        for c in old:
            for node in c.nodes.values():
                node.run(self.now, self.stats)
        pool: dict[ContentKey, list[tuple[int | None, Relation]]] = {}
        for c in old:
            for node in c.nodes.values():
                for key, relation in node.relations():
                    pool.setdefault(key, []).append((node.window, relation))
        taken: set[int] = set()
        new = [self._build(groups, pool, taken, registered) for groups in groupings]
        self.clusters = [c for c in self.clusters if all(c is not o for o in old)] + new
        self._index()
        sims: list[float] = []
        if similarity is not None and ids is not None:
            index = {g: i for i, g in enumerate(ids)}
            sims = [min_similarity(similarity, [index[g] for g in c.groups]) for c in new]
        self.history.append(Reclustering(self.now, reason, self.clustering(), sims))

    def _build(
        self,
        groups: list[int],
        pool: dict[ContentKey, list[tuple[int | None, Relation]]],
        taken: set[int],
        registered: Set[str],
    ) -> ClusterRuntime:
        runtime = ClusterRuntime(groups)
        queries = [self.queries[n] for g in groups for n in self.groups[g]]
        plan = plan_cluster(queries)
        for key, node_plan in plan.nodes.items():
            left = right = None
            if node_plan.right is not None:
                left_columns = [lc for lc, _ in node_plan.equi]
                right_columns = [rc for _, rc in node_plan.equi]
                left = self._relation(node_plan.left, left_columns, node_plan.window, pool, taken)
                right = self._relation(((node_plan.right,), ()), right_columns, node_plan.window, pool, taken)
            node = JoinNode(node_plan, self.layout, left, right)
            runtime.nodes[key] = node
        for node in runtime.nodes.values():
            child = runtime.nodes.get(node.plan.left) if len(node.plan.left[0]) > 1 else None
            if child is not None:
                child.parents.append(node)
        for q in queries:
            top = runtime.nodes[plan.top[q.name]]
            old_filter = self.filters.get(q.name)
            f = QueryFilter(
                q,
                self.layout(tuple(sorted(q.sources))),
                self._registered_after.get(q.name)
                if q.name in registered
                else (old_filter.registered_after if old_filter else None),
            )
            if old_filter is not None:
                f.buffer = old_filter.buffer
                f.fired_at = old_filter.fired_at
                f.exclude_through = old_filter.exclude_through
            self.filters[q.name] = f
            top.filters.append(f)
            runtime.top[q.name] = top
        return runtime

    def _relation(
        self,
        key: ContentKey,
        columns: list[Column],
        window: int | None,
        pool: dict[ContentKey, list[tuple[int | None, Relation]]],
        taken: set[int],
    ) -> Relation:
        for saved_window, relation in pool.get(key, ()):
            if saved_window is None or (window is not None and saved_window >= window):
                if id(relation) in taken or relation.columns != tuple(columns):
                    self.handover.copied += 1
                    return relation.copy(columns)
                taken.add(id(relation))
                self.handover.reused += 1
                return relation
        relation = Relation(self.layout(key[0]), columns)
        if self.now != NEVER:
            self.handover.rebuilt += 1
            relation.insert(self._materialise(key, NEVER if window is None else self.now - window))
        return relation

    def _materialise(self, key: ContentKey, lo: int) -> list[Item]:
        """The content of a relation at ``now``, joined again from the rows
        the sources retain (a hand-over no saved relation could serve)."""
        sources, predicates = key
        items: list[Item] = [(r[0], (r,)) for r in self.retention[sources[0]] if r[0] >= lo]
        for k in range(1, len(sources)):
            so_far = sources[: k + 1]
            test = self.layout(so_far).test(
                [p for p in predicates if p.sources <= set(so_far) and sources[k] in p.sources]
            )
            rows = [r for r in self.retention[sources[k]] if r[0] >= lo]
            items = [
                (m if m < r[0] else r[0], (*c, r))
                for m, c in items
                for r in rows
                if test is None or test((*c, r))
            ]
        return items

    def _index(self) -> None:
        """Who receives each source's rows; what runs when a master arrives."""
        self.subscribers: dict[str, list[tuple[JoinNode, int]]] = {}
        self.by_master: dict[str, tuple[list[tuple[int, JoinNode]], list[QueryFilter]]] = {}
        order = 0
        for c in self.clusters:
            for node in c.nodes.values():
                plan: NodePlan = node.plan
                if len(plan.left[0]) == 1:
                    self.subscribers.setdefault(plan.left[0][0], []).append((node, 0))
                if plan.right is not None:
                    self.subscribers.setdefault(plan.right, []).append((node, 1))
                for m in plan.masters:
                    self.by_master.setdefault(m, ([], []))[0].append((order, node))
                order += 1
            for name, _top in c.top.items():
                for m in self.queries[name].masters:
                    self.by_master.setdefault(m, ([], []))[1].append(self.filters[name])
        widest: dict[str, int | None] = {}
        for q in self.queries.values():
            for s in q.sources:
                w = widest.get(s, 0)
                widest[s] = None if w is None or q.window is None else max(w, q.window)
            for s in (*q.sources, *q.masters):
                self.arrival_log.setdefault(s, deque())
        self.widest = widest
        for s in widest:
            self.retention.setdefault(s, deque())

    def _trim_retention(self, t: int) -> None:
        if self.hold_retention:
            return
        for s, rows in self.retention.items():
            w = self.widest.get(s, 0)
            if w is None:
                continue
            while rows and rows[0][0] < t - w:
                rows.popleft()
