"""Network usage (the placement paper, eq. 2): u = sum over links of rate x latency.

A placement maps every operator to a node; an edge whose ends share a node
costs nothing. One operator's output sent from node n to node m is sent
once, however many of its consumers run on m: that is the seed's shared
connection (two queries reading one source from one node share the link),
counted once. Units: bytes/s x ms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from semiactive.placement.network import Network
from semiactive.placement.plan import OperatorPlan


@dataclass(frozen=True)
class Transfer:
    """One stream crossing the network: producer, from node, to node."""

    producer: str
    source: int
    target: int
    rate: float
    latency_ms: float

    @property
    def usage(self) -> float:
        return self.rate * self.latency_ms


def transfers(plan: OperatorPlan, network: Network, placement: Mapping[str, int]) -> list[Transfer]:
    out: dict[tuple[str, int, int], Transfer] = {}
    for e in plan.edges:
        a, b = placement[e.source], placement[e.target]
        if a != b and (e.source, a, b) not in out:
            out[(e.source, a, b)] = Transfer(e.source, a, b, e.rate, float(network.latency_ms[a, b]))
    return list(out.values())


def network_usage(plan: OperatorPlan, network: Network, placement: Mapping[str, int]) -> float:
    return sum(t.usage for t in transfers(plan, network, placement))


def link_rates(
    plan: OperatorPlan, network: Network, placement: Mapping[str, int]
) -> dict[tuple[int, int], float]:
    """Bytes/s on each physical link (node pair, lower index first): what
    a map of the network colours its links by."""
    rates: dict[tuple[int, int], float] = {}
    for t in transfers(plan, network, placement):
        for a, b in network.path(t.source, t.target):
            key = (min(a, b), max(a, b))
            rates[key] = rates.get(key, 0.0) + t.rate
    return rates
