"""The optimum placement, to compare the heuristics with.

A plan in which every operator feeds at most one other (a forest of query
trees, sources at the leaves) is solved exactly by dynamic programming over
the tree in O(operators x nodes^2): an operator's best cost at each node is
the sum, over its inputs, of the input's best cost at some node plus the
transfer. Shared plans (an operator feeding several) are an integer
program solved by HiGHS (scipy's ``milp``) that counts a stream once per
node pair, as :mod:`semiactive.placement.usage` does.
"""

from __future__ import annotations

import numpy as np

from semiactive.placement.problem import Placement, Problem


def load_solver() -> None:
    """Import scipy's solver now. Its import takes 1-2 s of CPU, which
    every coordinator paid at its start when this module imported it; a
    coordinator that will place (a ``network:`` block) calls this at its
    start, so the first placement does not stall its event loop."""
    import scipy.optimize
    import scipy.sparse  # noqa: F401


def is_forest(problem: Problem) -> bool:
    return all(len(c) <= 1 for c in problem.consumers)


def solve_exact(problem: Problem) -> Placement:
    return tree_optimum(problem) if is_forest(problem) else ilp_optimum(problem)


def tree_optimum(problem: Problem) -> Placement:
    size = len(problem.network)
    count = len(problem.names)
    best = np.zeros((count, size))
    choice: dict[tuple[int, int], np.ndarray] = {}  # (child, parent) -> child's node per parent node
    for op in range(count):  # topological: inputs before consumers
        base = np.full(size, np.inf)
        base[problem.allowed(op)] = 0.0
        for child in problem.inputs[op]:
            # total[m, n]: child at m, this operator at n
            total = best[child][:, None] + problem.rate[child] * problem.latency
            choice[(child, op)] = np.argmin(total, axis=0)
            base += total.min(axis=0)
        best[op] = base
    where = np.full(count, -1, dtype=np.int64)
    for op in reversed(range(count)):
        if not problem.consumers[op]:
            where[op] = int(np.argmin(best[op]))
        for child in problem.inputs[op]:
            where[child] = choice[(child, op)][where[op]]
    return where


def ilp_optimum(problem: Problem) -> Placement:
    """x[o, n]: o on n; y[p, m]: p's stream reaches m; z[p, n, m] >= x[p, n] + y[p, m] - 1."""
    size = len(problem.network)
    count = len(problem.names)
    producers = problem.producers
    nx, ny = count * size, len(producers) * size
    pairs = [(n, m) for n in range(size) for m in range(size) if n != m]
    nz = len(producers) * len(pairs)
    total = nx + ny + nz

    def x(o: int, n: int) -> int:
        return o * size + n

    def y(k: int, m: int) -> int:
        return nx + k * size + m

    cost = np.zeros(total)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lower: list[float] = []
    upper: list[float] = []

    def row(entries: list[tuple[int, float]], lo: float, hi: float) -> None:
        r = len(lower)
        for c, v in entries:
            rows.append(r)
            cols.append(c)
            vals.append(v)
        lower.append(lo)
        upper.append(hi)

    for o in range(count):
        row([(x(o, n), 1.0) for n in range(size)], 1.0, 1.0)
    for k, p in enumerate(producers):
        for c in problem.consumers[p]:
            for m in range(size):
                row([(y(k, m), 1.0), (x(c, m), -1.0)], 0.0, np.inf)
        for j, (n, m) in enumerate(pairs):
            z = nx + ny + k * len(pairs) + j
            cost[z] = problem.rate[p] * problem.latency[n, m]
            row([(z, 1.0), (x(p, n), -1.0), (y(k, m), -1.0)], -1.0, np.inf)
    lb = np.zeros(total)
    ub = np.ones(total)
    for o in range(count):
        allowed = np.zeros(size, dtype=bool)
        allowed[problem.allowed(o)] = True
        ub[o * size : (o + 1) * size] = allowed
    integrality = np.zeros(total)
    integrality[:nx] = 1
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_matrix

    matrix = csr_matrix((vals, (rows, cols)), shape=(len(lower), total))
    result = milp(
        cost,
        constraints=LinearConstraint(matrix, lower, upper),
        bounds=Bounds(lb, ub),
        integrality=integrality,
    )
    if result.x is None:
        raise ValueError(f"the placement program has no solution: {result.message}")
    chosen: Placement = np.argmax(result.x[:nx].reshape(count, size), axis=1).astype(np.int64)
    return chosen
