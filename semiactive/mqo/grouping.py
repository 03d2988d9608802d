"""Base groups (the MQO paper, 4.1) and the hierarchical clustering (3.1).

A base group holds queries that any arrival log would put together: the
same masters, a shared source and windows within a ratio theta, checked
against *every* member (the relation is not transitive, so groups are not
chained). Clustering is complete linkage on 1 - sim cut at 1 - theta: a
cluster's largest distance is its smallest similarity, so every pair in a
cluster has sim >= theta.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from semiactive.mqo.query import ContinuousQuery

# Similarities computed in float32 may miss theta by rounding; the cut allows it.
_EPSILON = 1e-6


def window_ratio(a: int | None, b: int | None) -> float:
    """min/max of two windows; an unbounded window is infinitely large."""
    if a is None and b is None:
        return 1.0
    if a is None or b is None:
        return 0.0
    return min(a, b) / max(a, b)


def may_share_base_group(a: ContinuousQuery, b: ContinuousQuery, theta: float) -> bool:
    return (
        set(a.masters) == set(b.masters)
        and bool(set(a.sources) & set(b.sources))
        and window_ratio(a.window, b.window) >= theta
    )


def base_groups(queries: Sequence[ContinuousQuery], theta: float) -> list[list[int]]:
    """Indices of ``queries`` in base groups; a query joins the first group
    whose every member it may share with, else starts its own. Members are
    compared by what the conditions read (masters, sources, window), so a
    group of 300 identical queries costs one comparison."""
    groups: list[list[int]] = []
    shapes: list[dict[tuple[frozenset[str], frozenset[str], int | None], ContinuousQuery]] = []
    for i, q in enumerate(queries):
        shape = (frozenset(q.masters), frozenset(q.sources), q.window)
        for group, seen in zip(groups, shapes, strict=True):
            if all(may_share_base_group(q, other, theta) for other in seen.values()):
                group.append(i)
                seen.setdefault(shape, q)
                break
        else:
            groups.append([i])
            shapes.append({shape: q})
    return groups


def load_clustering() -> None:
    """Import what :func:`cluster` needs now: scipy's import takes about a
    second, and a node that first clusters while it serves would stop its
    event loop that long (a primary silent for that long is taken over)."""
    import scipy.cluster.hierarchy
    import scipy.spatial.distance  # noqa: F401


def cluster(sim: npt.NDArray[np.float64], theta: float) -> list[list[int]]:
    """Complete-linkage clusters of the items of ``sim``, each pair >= theta,
    listed by their first item (deterministic)."""
    m = len(sim)
    if m <= 1:
        return [list(range(m))]
    distance = np.clip(1.0 - (sim + sim.T) / 2, 0.0, 1.0)
    np.fill_diagonal(distance, 0.0)
    # Imported here: every node process imports this module, few cluster
    # (those that do call load_clustering first).
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    tree = linkage(squareform(distance, checks=False), method="complete")
    labels = fcluster(tree, t=1.0 - theta + _EPSILON, criterion="distance")
    by_label: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        by_label.setdefault(int(label), []).append(i)
    return sorted(by_label.values())


def min_similarity(sim: npt.NDArray[np.float64], members: Sequence[int]) -> float:
    """The smallest similarity between two members (1 for one member)."""
    if len(members) < 2:
        return 1.0
    block = sim[np.ix_(members, members)]
    return float(block.min())
