"""A plan on a network as arrays: what every placement method works on.

Operators are numbered in a topological order (producers first); each has
the set of nodes it may go to (its pinned node, or every placeable node).
``usage`` is :func:`semiactive.placement.usage.network_usage` for an array placement,
stream by stream, so that a local search can re-price one operator's moves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from semiactive.placement.network import Network, NetworkError
from semiactive.placement.plan import DUMMY, OperatorPlan, topological

Placement = npt.NDArray[np.int64]  # operator index -> node index


@dataclass
class Problem:
    plan: OperatorPlan
    network: Network
    names: list[str]
    pinned: npt.NDArray[np.int64]  # node index, or -1
    producers: list[int]  # operators with consumers
    consumers: list[list[int]]  # per operator
    inputs: list[list[int]]  # per operator
    rate: npt.NDArray[np.float64]  # of each operator's output stream
    latency: npt.NDArray[np.float64]
    # Per operator, the nodes it may go to when fewer than every placeable
    # one (a running cluster: only where a spare stands).
    candidates: dict[int, npt.NDArray[np.int64]] = dataclasses.field(default_factory=dict)

    @classmethod
    def build(cls, plan: OperatorPlan, network: Network) -> Problem:
        order = topological(plan.operators, plan.edges)
        assert order is not None  # OperatorPlan checks for cycles
        index = {n: i for i, n in enumerate(order)}
        pinned = np.full(len(order), -1, dtype=np.int64)
        for op in plan.operators:
            if op.pinned is not None:
                if op.pinned == DUMMY and DUMMY not in network.index:
                    raise NetworkError(f"operator {op.name!r} is pinned to the dummy source's node")
                node = network.find(op.pinned)
                if node is None:
                    raise NetworkError(
                        f"operator {op.name!r} is pinned to a node {network.name} does not have: "
                        + network.not_found(op.pinned)
                    )
                pinned[index[op.name]] = node
        consumers: list[list[int]] = [[] for _ in order]
        inputs: list[list[int]] = [[] for _ in order]
        rate = np.zeros(len(order))
        for e in plan.edges:
            a, b = index[e.source], index[e.target]
            consumers[a].append(b)
            inputs[b].append(a)
            rate[a] = e.rate
        producers = [i for i in range(len(order)) if consumers[i]]
        return cls(plan, network, order, pinned, producers, consumers, inputs, rate, network.latency_ms)

    def allowed(self, op: int) -> npt.NDArray[np.int64]:
        if self.pinned[op] >= 0:
            return np.array([self.pinned[op]], dtype=np.int64)
        if op in self.candidates:
            return self.candidates[op]
        return np.flatnonzero(self.network.placeable).astype(np.int64)

    def restrict(self, operator: str, nodes: Collection[str]) -> None:
        """Let ``operator`` go only to ``nodes``."""
        index = self.names.index(operator)
        self.candidates[index] = np.array(sorted(self.network.node(n) for n in nodes), dtype=np.int64)

    def stream_usage(self, producer: int, where: Placement) -> float:
        """What ``producer``'s output costs: once per distinct remote node."""
        here = where[producer]
        targets = {int(where[c]) for c in self.consumers[producer]} - {int(here)}
        return float(self.rate[producer] * sum(self.latency[here, m] for m in targets))

    def usage(self, where: Placement) -> float:
        return sum(self.stream_usage(p, where) for p in self.producers)

    def named(self, where: Placement) -> dict[str, str]:
        return {self.names[i]: self.network.nodes[int(n)] for i, n in enumerate(where)}

    def from_named(self, placement: Mapping[str, str]) -> Placement:
        return np.array([self.network.node(placement[n]) for n in self.names], dtype=np.int64)
