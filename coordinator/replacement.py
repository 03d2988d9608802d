"""Seed 004 on a running cluster: measure, price, and move stages.

:class:`NetworkMonitor` turns the cumulative byte counters the nodes report
per output edge into rates (bytes/s over a sliding window) and prices the
current placement: u = sum over edges of rate x latency between the sites
of the producer's and the consumer's primaries, in bytes (bytes/s x s: the
data in flight on the wide area).

:class:`Replacer` is Fig. 7: every ``replace_every_s`` it builds the plan
from the topology and the measured rates (sources, sinks and unprotected
stages pinned where they run; a protected stage may go to its own site,
its secondary's, or the site of any free spare), solves it exactly, and when the optimum is
below ``(1 - min_gain)`` x the current u it migrates the one stage whose
move gains most. The seed moves whenever the new plan is cheaper; the
margin and one migration at a time (the next decision waits for it and
then for a whole rate window measured after it, plus a report) keep
measurement noise from making stages flap.
Pure: the coordinator feeds it reports and time.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from semiactive.placement.exact import load_solver
from semiactive.placement.plan import Edge, Operator, OperatorPlan
from semiactive.placement.problem import Problem
from semiactive.placement.solve import solve
from semiactive.topology import SiteMap, Topology
from semiactive.wire import control_pb2 as cpb

if TYPE_CHECKING:
    from semiactive.coordinator.control import Coordinator


@dataclass(frozen=True)
class EdgeUsage:
    edge: str
    producer_node: str
    consumer_node: str
    rate_bytes_per_s: float
    latency_s: float

    @property
    def usage_bytes(self) -> float:
        return self.rate_bytes_per_s * self.latency_s


class NetworkMonitor:
    """Rates per edge from the reports, and the network usage they make."""

    def __init__(self, topology: Topology, sites: SiteMap, window_s: float) -> None:
        self.topology = topology
        self.sites = sites
        self.window_s = window_s
        # (edge, reporting node) -> (time, cumulative data bytes): a new
        # primary's counters start from zero, so samples are per node.
        self.samples: dict[tuple[str, str], deque[tuple[float, int]]] = {}
        self.rates: dict[str, float] = {}

    def observe(self, status: cpb.NodeStatus, now: float) -> None:
        if status.role not in ("primary", "source"):
            return
        for out in status.outputs:
            key = (out.edge, status.name)
            samples = self.samples.setdefault(key, deque())
            if out.data_bytes and samples and not samples[-1][1]:
                # An edge's first bytes: the time before them (nodes up,
                # sources not yet started) is no rate. A decision 0.4 s into
                # a run once priced the replacement chain at half its rates.
                while len(samples) > 1:
                    samples.popleft()
            samples.append((now, out.data_bytes))
            while len(samples) > 2 and now - samples[1][0] >= self.window_s:
                samples.popleft()
            (t0, b0), (t1, b1) = samples[0], samples[-1]
            # A silent edge is measured at 0 only over a whole window.
            enough = self.window_s if not b1 else min(0.5, self.window_s / 2)
            if t1 - t0 >= enough and b1 >= b0:
                self.rates[out.edge] = (b1 - b0) / (t1 - t0)

    def measured_every_edge(self) -> bool:
        """Whether every edge has a rate. Until then a plan would price the
        unmeasured edges at nothing: at start-up the edges measured first
        (rates of the first half second, before connection management let
        the idle candidates go) moved a stage to the wrong site."""
        return all(e.id in self.rates for e in self.topology.edges)

    def node_of(self, stage: str, coordinator: Coordinator) -> str:
        view = coordinator.views.get(stage)
        return view.primary if view is not None else self.topology.stages[stage].primary

    def edges(self, coordinator: Coordinator) -> list[EdgeUsage]:
        out = []
        for edge in self.topology.edges:
            a, b = self.node_of(edge.producer, coordinator), self.node_of(edge.consumer, coordinator)
            rate = self.rates.get(edge.id, 0.0)
            out.append(EdgeUsage(edge.id, a, b, rate, self.sites.latency_s(a, b)))
        return out

    def usage_bytes(self, coordinator: Coordinator) -> float:
        """u of the current placement: one transfer per producer and site pair."""
        seen: dict[tuple[str, str, str], float] = {}
        for e in self.edges(coordinator):
            producer = e.edge.split("->", 1)[0]
            key = (producer, self.sites.sites[e.producer_node], self.sites.sites[e.consumer_node])
            seen[key] = max(seen.get(key, 0.0), e.usage_bytes)
        return sum(seen.values())


@dataclass(frozen=True)
class Decision:
    usage_now: float  # bytes, as the plan prices it
    usage_best: float
    stage: str | None = None  # the stage to move, when worth it
    target: str | None = None  # a free spare at the better site


class Replacer:
    def __init__(self, coordinator: Coordinator, monitor: NetworkMonitor) -> None:
        cfg = coordinator.topology.config.network
        assert cfg is not None
        self.coordinator = coordinator
        self.monitor = monitor
        self.every_s = cfg.replace_every_s
        self.min_gain = cfg.min_gain
        self.last = coordinator.started
        # No decision before this: rates over a window that held a
        # migration count its traffic (the new primary catching up from its
        # producers' logs, backups to a new secondary), and a stage moved on
        # them flapped between cities in person tracking.
        self.quiet_until = coordinator.started
        self.settle_s = monitor.window_s + coordinator.topology.config.heartbeat_ms / 1000
        self.decisions = 0
        load_solver()

    def step(self, now: float) -> None:
        if self.coordinator.migrations.active:
            self.quiet_until = now + self.settle_s
            return
        if not self.every_s or now - self.last < self.every_s or now < self.quiet_until:
            return
        self.last = now
        decision = self.decide(now)
        if decision is None or decision.stage is None or decision.target is None:
            return
        problem = self.coordinator.migrations.request(decision.stage, decision.target, now)
        self.coordinator.events.emit(
            "replacement",
            stage=decision.stage,
            target=decision.target,
            usage_now_bytes=round(decision.usage_now, 3),
            usage_best_bytes=round(decision.usage_best, 3),
            refused=problem,
        )
        self.decisions += 1

    def _targets(self, stage: str, spares: list[str], now: float) -> list[str]:
        """Where ``stage`` may go: its secondary first (caught up already,
        and re-protection tends to put it near the stage's sources), then
        the free spares."""
        c = self.coordinator
        view = c.views[stage]
        own = [view.secondary] if view.secondary and c.is_serving(view.secondary, stage, now) else []
        return own + [n for n in spares if c.is_free_spare(n, view, now)]

    def decide(self, now: float) -> Decision | None:
        """The cheapest placement reachable now, and the move toward it."""
        c, sites = self.coordinator, self.monitor.sites
        current = {st: self.monitor.node_of(st, c) for st in c.topology.stages}
        if not self.monitor.measured_every_edge() or not all(e.producer in current for e in c.topology.edges):
            return None
        spares = [n for n in sorted(c.nodes) if c.nodes[n].role == "spare"]
        operators, movable = [], []
        for name, st in c.topology.stages.items():
            protected = st.config is not None and st.config.ha.mode != "none"
            if st.role == "stage" and protected:
                operators.append(Operator(name))
                movable.append(name)
            else:
                operators.append(Operator(name, pinned=sites.sites[current[name]]))
        rates = self.monitor.rates
        edges = [Edge(e.producer, e.consumer, rates.get(e.id, 0.0)) for e in c.topology.edges]
        plan = OperatorPlan(tuple(operators), tuple(edges))
        problem = Problem.build(plan, sites.network)
        for name in movable:
            view = c.views.get(name)
            if view is None:
                return None
            free = self._targets(name, spares, now)
            problem.restrict(name, {sites.sites[current[name]], *(sites.sites[n] for n in free)})
        here = problem.from_named({n: sites.sites[current[n]] for n in problem.names})
        now_u = problem.usage(here)
        best = solve(problem, "exact")
        if best.network_usage >= (1 - self.min_gain) * now_u:
            return Decision(now_u / 1000, best.network_usage / 1000)
        gains = []
        for name in movable:
            site = best.placement[name]
            if site == sites.sites[current[name]]:
                continue
            moved = here.copy()
            moved[problem.names.index(name)] = sites.network.node(site)
            gains.append((now_u - problem.usage(moved), name, site))
        if not gains:
            return Decision(now_u / 1000, best.network_usage / 1000)
        gain, chosen, site = max(gains)
        if gain <= 0:
            return Decision(now_u / 1000, best.network_usage / 1000)
        target = next(n for n in self._targets(chosen, spares, now) if sites.sites[n] == site)
        # The plan prices bytes/s x ms; the monitor and the metrics speak bytes.
        return Decision(now_u / 1000, best.network_usage / 1000, chosen, target)
