"""Place a plan on a network by one named method, and price the result."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from semiactive.placement.exact import solve_exact
from semiactive.placement.network import Network
from semiactive.placement.plan import DUMMY, OperatorPlan
from semiactive.placement.problem import Placement, Problem
from semiactive.placement.relaxation import solve_relaxation
from semiactive.placement.search import solve_at_sink, solve_at_sources, solve_search

METHODS: dict[str, Callable[[Problem], Placement]] = {
    "relaxation": solve_relaxation,
    "search": solve_search,
    "exact": solve_exact,
    "sink": solve_at_sink,
    "sources": solve_at_sources,
}


@dataclass(frozen=True)
class Solution:
    method: str
    placement: dict[str, str]  # operator -> node
    network_usage: float  # bytes/s x ms
    seconds: float


def problem_for(plan: OperatorPlan, network: Network) -> Problem:
    """The plan with its ASSIGNs joined to their interests or to the dummy
    source (on an extra node at the mean latency), as arrays."""
    if plan.needs_dummy():
        network = network.with_dummy(DUMMY)
    return Problem.build(plan.with_sources(DUMMY in network.index), network)


def solve(problem: Problem, method: str) -> Solution:
    if method not in METHODS:
        raise ValueError(f"unknown placement method {method!r} (one of {', '.join(METHODS)})")
    started = time.perf_counter()
    where = METHODS[method](problem)
    seconds = time.perf_counter() - started
    return Solution(method, problem.named(where), problem.usage(where), seconds)
