"""What the coordinator's web page shows, as JSON (pure).

:class:`LiveView` follows the coordinator: it keeps the network usage over
time (one sample per :meth:`sample`), rows/s per edge and the sinks'
latency over time (:class:`~semiactive.coordinator.edge_rates.EdgeRates`,
for any cluster), and the latest control events (its own: migrations,
re-placements, re-protections; and failovers, seen as a stage's epoch going
up without a migration handing it over). A snapshot holds every stage with
its replicas, every node, the edges with their rows/s and bytes/s (data
and backup channels) and the history of both; with a ``network:`` block
also the topology (sites with positions, links with the bytes/s the
current placement puts on them), each edge's latency, u and its history.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from semiactive.coordinator.edge_rates import EdgeRate, EdgeRates
from semiactive.placement.network import Network

if TYPE_CHECKING:
    from semiactive.coordinator.control import Coordinator

HISTORY = 600  # samples of u kept (5 minutes at the page's 0.5 s)
EVENTS = 100
SHOWN = {
    "migration_started",
    "migration_handover",
    "migrated",
    "migration_aborted",
    "replacement",
    "assigned",
}


class LiveView:
    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        self.usage: deque[tuple[float, float]] = deque(maxlen=HISTORY)
        self.events: deque[dict[str, Any]] = deque(maxlen=EVENTS)
        self.epochs: dict[str, int] = {}
        self.handed_over: set[tuple[str, int]] = set()
        self.listeners: list[deque[dict[str, Any]]] = []
        self.rates = EdgeRates(e.id for e in coordinator.topology.edges)
        coordinator.events.observers.append(self._observe)

    def _observe(self, record: dict[str, Any]) -> None:
        if record.get("event") not in SHOWN:
            return
        if record["event"] == "migration_handover":
            self.handed_over.add((str(record.get("stage")), int(record.get("epoch", 0))))
        self._add({k: v for k, v in record.items() if k != "node"})

    def _add(self, record: dict[str, Any]) -> None:
        self.events.append(record)
        for queue in self.listeners:
            queue.append(record)

    def sample(self, now_wall: float, now: float | None = None) -> None:
        """Record rates and u now, and a failover for every epoch that went
        up unasked; ``now``: the coordinator's clock (None: the newest
        report's time)."""
        c = self.coordinator
        self.rates.sample(c.nodes.values(), now, now_wall)
        for stage, view in c.views.items():
            before = self.epochs.get(stage)
            self.epochs[stage] = view.epoch
            if before is not None and view.epoch > before and (stage, view.epoch) not in self.handed_over:
                self._add({"t": now_wall, "event": "failover", "stage": stage, "primary": view.primary,
                           "epoch": view.epoch})  # fmt: skip
        if c.monitor is not None:
            usage = c.monitor.usage_bytes(c)
            self.usage.append((now_wall, usage))
            # For benchmarks and reports: telemetry/network-coordinator.jsonl.
            c.events.append(
                "network",
                [
                    {
                        "t": now_wall,
                        "usage_bytes": round(usage, 3),
                        "rates": {edge: round(rate, 1) for edge, rate in sorted(c.monitor.rates.items())},
                        "primaries": {stage: view.primary for stage, view in sorted(c.views.items())},
                    }
                ],
            )

    def snapshot(self, now: float) -> dict[str, Any]:
        c = self.coordinator
        state = c.cluster_state(now)
        sites = c.topology.network.sites if c.topology.network is not None else {}
        out: dict[str, Any] = {
            "cluster": state.name,
            "uptime_s": round(state.uptime_s, 1),
            "stages": [
                {
                    "stage": s.stage,
                    "role": s.role,
                    "mode": s.mode,
                    "primary": s.primary,
                    "secondary": s.secondary,
                    "epoch": s.epoch,
                    "protected": s.protected,
                    "inputs": [e.producer for e in c.topology.stages[s.stage].inputs],
                    "idle": _idle_inputs(c, s.stage, s.primary),
                }
                for s in state.stages
            ],
            "nodes": [
                {
                    "name": n.name,
                    "role": n.role,
                    "stage": n.stage,
                    "liveness": n.liveness,
                    "site": sites.get(n.name),
                }
                for n in state.nodes
            ],
            "migrations": [
                {"stage": m.stage, "target": m.target, "phase": m.phase} for m in c.migrations.active.values()
            ],
            "events": list(self.events),
            "usage_history": [[round(t, 3), round(u, 3)] for t, u in self.usage],
            "edges": [
                {
                    "edge": e.id,
                    "from": _node_of(c, e.producer),
                    "to": _node_of(c, e.consumer),
                    "rows_per_s": round(rate.rows_per_s, 1),
                    "bytes_per_s": round(rate.bytes_per_s, 1),
                    "backup_rows_per_s": round(rate.backup_rows_per_s, 1),
                    "backup_bytes_per_s": round(rate.backup_bytes_per_s, 1),
                }
                for e in c.topology.edges
                for rate in [self.rates.current.get(e.id) or EdgeRate(e.id, 0.0, 0.0, 0.0, 0.0)]
            ],
            "rates_history": _history(self.rates),
        }
        if c.monitor is not None and c.topology.network is not None:
            edges = c.monitor.edges(c)
            out["usage_bytes"] = c.monitor.usage_bytes(c)
            for row, e in zip(out["edges"], edges, strict=True):
                row["rate_bytes_per_s"] = round(e.rate_bytes_per_s, 1)
                row["latency_ms"] = round(e.latency_s * 1000, 3)
            out["network"] = _network(c.topology.network.network, c, edges)
        return out


def _node_of(c: Coordinator, stage: str) -> str:
    view = c.views.get(stage)
    return view.primary if view is not None else c.topology.stages[stage].primary


def _history(rates: EdgeRates) -> dict[str, Any]:
    """Rows/s per edge and latency per sink, one value per sample (null: none)."""
    points = list(rates.history)
    sinks = sorted({s for _, _, latency in points for s in latency})

    def ms(v: float | None) -> float | None:
        return None if v is None else round(v, 1)

    return {
        "t": [round(t, 3) for t, _, _ in points],
        "rows_per_s": {e: [round(r.get(e, 0.0), 1) for _, r, _ in points] for e in rates.edges},
        "latency_ms": {s: [ms(latency.get(s)) for _, _, latency in points] for s in sinks},
    }


def _network(network: Network, c: Coordinator, edges: list[Any]) -> dict[str, Any]:
    """Sites, and links with the bytes/s routed over them."""
    assert c.topology.network is not None
    sites = c.topology.network.sites
    load: dict[tuple[int, int], float] = {}
    for e in edges:
        a, b = network.index[sites[e.producer_node]], network.index[sites[e.consumer_node]]
        for x, y in network.path(a, b):
            key = (min(x, y), max(x, y))
            load[key] = load.get(key, 0.0) + e.rate_bytes_per_s
    return {
        "name": network.title,
        "sites": [{"name": n, "pos": network.positions.get(n)} for n in network.nodes],
        "links": [
            {
                "a": network.nodes[link.a],
                "b": network.nodes[link.b],
                "latency_ms": link.latency_ms,
                "rate_bytes_per_s": round(load.get((min(link.a, link.b), max(link.a, link.b)), 0.0), 1),
            }
            for link in network.links
        ],
    }


def _idle_inputs(c: Coordinator, stage: str, primary: str) -> list[str]:
    """The producers whose rows the stage's primary reported it does not
    want whole now (connection management: candidates no query names)."""
    record = c.nodes.get(primary)
    if record is None or record.status is None or record.stage != stage:
        return []
    producers = {e.id: e.producer for e in c.topology.stages[stage].inputs}
    return [
        producers[e.edge]
        for e in record.status.inputs
        if e.edge in producers and e.HasField("connected") and not e.connected
    ]
