"""Local search on the true network usage, and the simple baselines.

The relaxation optimises a proxy (squared distances in an approximate
space) and rounds to the nearest node; a few rounds of moving one operator
at a time to the node that lowers u most close most of the gap to the
optimum. The baselines place every free operator at the sink or next to
its heaviest input, for comparison.
"""

from __future__ import annotations

import numpy as np

from semiactive.placement.problem import Placement, Problem
from semiactive.placement.relaxation import solve_relaxation

_ROUNDS = 50


def improve(problem: Problem, where: Placement) -> Placement:
    """Single-operator moves, best first, until none lowers u."""
    where = where.copy()
    free = [o for o in range(len(problem.names)) if problem.pinned[o] < 0]
    for _ in range(_ROUNDS):
        improved = False
        for o in free:
            streams = [o, *problem.inputs[o]] if problem.consumers[o] else list(problem.inputs[o])
            now = sum(problem.stream_usage(p, where) for p in streams)
            best_node, best = int(where[o]), now
            for n in problem.allowed(o):
                where[o] = n
                cost = sum(problem.stream_usage(p, where) for p in streams)
                if cost < best - 1e-9:
                    best_node, best = int(n), cost
            where[o] = best_node
            improved |= best < now - 1e-9
        if not improved:
            break
    return where


def solve_search(problem: Problem) -> Placement:
    return improve(problem, solve_relaxation(problem))


def solve_at_sink(problem: Problem) -> Placement:
    """Every free operator on the node of the first pinned operator downstream."""
    where = problem.pinned.copy()
    for o in reversed(range(len(problem.names))):  # consumers first
        if where[o] < 0:
            downstream = [where[c] for c in problem.consumers[o] if where[c] >= 0]
            where[o] = _nearest_allowed(problem, o, downstream[0] if downstream else -1)
    return where


def solve_at_sources(problem: Problem) -> Placement:
    """Every free operator on the node its heaviest input comes from."""
    where = problem.pinned.copy()
    for o in range(len(problem.names)):  # producers first
        if where[o] < 0 and problem.inputs[o]:
            heaviest = max(problem.inputs[o], key=lambda p: problem.rate[p])
            where[o] = _nearest_allowed(problem, o, int(where[heaviest]))
    if (where < 0).any():  # operators without inputs: downstream
        where = np.where(where < 0, solve_at_sink(problem), where)
    return where


def _nearest_allowed(problem: Problem, op: int, node: int) -> int:
    """``node`` if ``op`` may go there, else the nearest node it may go to
    (any, without a ``node``)."""
    allowed = problem.allowed(op)
    if node < 0:
        return int(allowed[0])
    return int(allowed[np.argmin(problem.latency[node, allowed])])
