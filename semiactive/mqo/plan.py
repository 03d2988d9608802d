"""Shared plans for a cluster of queries (the MQO paper, 3.2).

Every query is a left-deep chain of window joins over its sources. A join
node is named by its content: the set of sources joined so far and the
join predicates among them; queries of a cluster whose chains reach the same
content share the node. A shared node runs at the union of its consumers'
masters with the largest of their windows; each query's own window, master
and constant filters are restored by a per-query filter above its top node
(``executor.QueryRuntime``). Of the possible join orders, each query takes
its sources most read in the cluster first (connected by a predicate where
possible), which makes prefixes, hence shared nodes, as long as they can be.

Rows of a node are combinations with one row per source in sorted source
order, whatever the join order: a relation's layout depends only on its
content, so it can be handed to another node with the same content.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from semiactive.mqo.query import Column, Comparison, ContinuousQuery

ContentKey = tuple[tuple[str, ...], tuple[Comparison, ...]]


def content_key(sources: Sequence[str], predicates: Sequence[Comparison]) -> ContentKey:
    return tuple(sorted(sources)), tuple(sorted(predicates))


@dataclass
class NodePlan:
    """One node of a cluster's plan. ``left`` is a child node's key or a
    source's; ``right`` the source joined in (None: a scan of one source,
    the top of a single-source query)."""

    key: ContentKey
    left: ContentKey
    right: str | None
    equi: tuple[tuple[Column, Column], ...] = ()  # (left column, right column)
    residual: tuple[Comparison, ...] = ()
    window: int | None = 0
    masters: list[str] = field(default_factory=list)
    consumers: list[str] = field(default_factory=list)  # query names using it on their chain

    @property
    def sources(self) -> tuple[str, ...]:
        return self.key[0]


@dataclass
class ClusterPlan:
    queries: list[ContinuousQuery]
    nodes: dict[ContentKey, NodePlan]  # children before parents
    top: dict[str, ContentKey]  # query name -> its top node


def leaf_key(source: str) -> ContentKey:
    return (source,), ()


def join_order(query: ContinuousQuery, popularity: Counter[str]) -> list[str]:
    """The query's sources, most popular first, each next one connected by a
    join predicate to those before it when any is."""
    remaining = sorted(query.sources, key=lambda s: (-popularity[s], s))
    order = [remaining.pop(0)]
    joins = query.join_predicates
    while remaining:
        connected = [
            s for s in remaining if any(s in c.sources and c.sources - {s} <= set(order) for c in joins)
        ]
        nxt = (connected or remaining)[0]
        remaining.remove(nxt)
        order.append(nxt)
    return order


def _max_window(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else max(a, b)


def _chain(query: ContinuousQuery, popularity: Counter[str]) -> list[NodePlan]:
    """The left-deep chain of ``query``'s join nodes, first join first."""
    order = join_order(query, popularity)
    joins = sorted(query.join_predicates)
    if len(order) == 1:
        return [NodePlan(leaf_key(order[0]), leaf_key(order[0]), None)]
    chain = []
    left = leaf_key(order[0])
    for k in range(1, len(order)):
        so_far = set(order[: k + 1])
        new = order[k]
        preds = [c for c in joins if c.sources <= so_far]
        equi: list[tuple[Column, Column]] = []
        residual: list[Comparison] = []
        for c in preds:
            if new not in c.sources:
                continue
            if c.is_equijoin and isinstance(c.left, Column) and isinstance(c.right, Column):
                equi.append((c.right, c.left) if c.left.source == new else (c.left, c.right))
            else:
                residual.append(c)
        key = content_key(order[: k + 1], preds)
        chain.append(NodePlan(key, left, new, tuple(equi), tuple(residual)))
        left = key
    return chain


def plan_cluster(queries: Sequence[ContinuousQuery]) -> ClusterPlan:
    popularity: Counter[str] = Counter(s for q in queries for s in q.sources)
    nodes: dict[ContentKey, NodePlan] = {}
    top: dict[str, ContentKey] = {}
    # Queries of the same sources and join predicates have the same chain:
    # derived once (a cluster of 300 template queries derives one).
    chains: dict[tuple[frozenset[str], frozenset[Comparison]], list[ContentKey]] = {}
    for q in queries:
        shape = (frozenset(q.sources), q.join_predicates)
        keys = chains.get(shape)
        if keys is None:
            keys = chains[shape] = [nodes.setdefault(n.key, n).key for n in _chain(q, popularity)]
        for key in keys:
            shared = nodes[key]
            shared.window = q.window if not shared.consumers else _max_window(shared.window, q.window)
            if not set(q.masters) <= set(shared.masters):
                shared.masters = sorted(set(shared.masters) | set(q.masters))
            shared.consumers.append(q.name)
        top[q.name] = keys[-1]
    return ClusterPlan(list(queries), nodes, top)
