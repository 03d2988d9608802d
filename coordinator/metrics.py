"""Prometheus metrics of the coordinator (docs/operations.md lists them).

Read at scrape time from what ``semiactive status`` shows
(:meth:`semiactive.coordinator.control.Coordinator.cluster_state`): per stage its
primary, secondary, epoch and whether it is protected; per A-SAS edge the
tuner's B, its estimates BW* and R* and their limits; per node its
liveness. Re-protections are counted from the coordinator's events.

Failovers per stage are the stage's epoch: it starts at 0 and goes up by
one at every takeover, so the counter survives a coordinator restart (the
coordinator learns the epoch back from the nodes' reports).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest

from semiactive.coordinator.control import Coordinator, Liveness
from semiactive.runtime import clock
from semiactive.runtime.metrics_endpoint import with_labels
from semiactive.wire import coordinator_pb2 as cdpb

NODE = "coordinator"


class CoordinatorMetrics:
    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        self.registry = CollectorRegistry()
        self.reprotections = Counter(
            "semiactive_coordinator_reprotections_total",
            "Spares the coordinator assigned as a stage's new secondary.",
            ["stage"],
            registry=self.registry,
        )
        self.errors = Counter(
            "semiactive_coordinator_errors_total",
            "Steps of the control or tuning loop that failed (logged; the loop goes on).",
            registry=self.registry,
        )
        self.migrations = Counter(
            "semiactive_coordinator_migrations_total",
            "Migrations of a stage to another node that ended, by outcome (done: the target serves "
            "it; aborted: the stage stayed where it was, or a failover ended it).",
            ["stage", "outcome"],
            registry=self.registry,
        )
        for stage in coordinator.topology.stages.values():
            if stage.config is not None and stage.config.ha.mode != "none":
                self.reprotections.labels(stage.name)
                for outcome in ("done", "aborted"):
                    self.migrations.labels(stage.name, outcome)
        ProcessCollector(registry=self.registry)
        self.exposed = CollectorRegistry(auto_describe=False)
        self.exposed.register(_Exposition(self))
        coordinator.events.observers.append(self.observe_event)

    def observe_event(self, record: dict[str, Any]) -> None:
        match record.get("event"):
            case "assigned":
                self.reprotections.labels(str(record.get("stage", ""))).inc()
            case "coordinator_error":
                self.errors.inc()
            case "migrated":
                self.migrations.labels(str(record.get("stage", "")), "done").inc()
            case "migration_aborted":
                self.migrations.labels(str(record.get("stage", "")), "aborted").inc()

    def exposition(self) -> bytes:
        return generate_latest(self.exposed)


class _Exposition:
    def __init__(self, metrics: CoordinatorMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        state = self.metrics.coordinator.cluster_state(clock.monotonic())
        families = [*_stage_families(state), *_tuning_families(state), *_node_families(state)]
        families.extend(_network_families(self.metrics.coordinator))
        # Its process metrics say which process they are of, as the nodes' do.
        families.extend(with_labels(f, {"node": NODE}) for f in self.metrics.registry.collect())
        return families


def _stage_families(state: cdpb.ClusterStatus) -> Iterator[Metric]:
    info = GaugeMetricFamily(
        "semiactive_coordinator_stage_info",
        "Constant 1; labels say who serves each stage: role (source, stage, sink), HA mode, "
        "primary and secondary (empty: none), as the coordinator's newest view has it.",
        labels=["stage", "role", "mode", "primary", "secondary"],
    )
    epoch = GaugeMetricFamily(
        "semiactive_coordinator_stage_epoch", "Epoch of the stage's newest view.", labels=["stage"]
    )
    version = GaugeMetricFamily(
        "semiactive_coordinator_stage_view_version",
        "Version of the stage's newest view (changes on every view change).",
        labels=["stage"],
    )
    protected = GaugeMetricFamily(
        "semiactive_coordinator_stage_protected",
        "1 when the stage has a secondary that is alive and serves it.",
        labels=["stage"],
    )
    batch = GaugeMetricFamily(
        "semiactive_coordinator_stage_batch_size_rows",
        "SAS: rows per backup batch into the stage (A-SAS: the largest B over its input edges).",
        labels=["stage"],
    )
    failovers = CounterMetricFamily(
        "semiactive_coordinator_failovers",
        "Takeovers of the stage since the cluster started (its epoch).",
        labels=["stage"],
    )
    for s in state.stages:
        info.add_metric([s.stage, s.role, s.mode, s.primary, s.secondary], 1)
        epoch.add_metric([s.stage], s.epoch)
        version.add_metric([s.stage], s.version)
        batch.add_metric([s.stage], s.batch_size)
        if s.mode != "none":
            protected.add_metric([s.stage], float(s.protected))
        if s.role == "stage":
            failovers.add_metric([s.stage], s.epoch)
    yield from (info, epoch, version, protected, batch, failovers)


def _tuning_families(state: cdpb.ClusterStatus) -> Iterator[Metric]:
    labels = ["stage", "edge"]
    batch = GaugeMetricFamily(
        "semiactive_asas_batch_size_rows",
        "A-SAS: the backup batch size B the tuner decided for an edge into the stage.",
        labels=[*labels, "tuner"],
    )
    changes = CounterMetricFamily(
        "semiactive_asas_batch_size_changes", "A-SAS: decisions that changed B.", labels=labels
    )
    gauges = {
        key: GaugeMetricFamily(name, doc, labels=labels)
        for key, name, doc in (
            ("bw_max", "semiactive_asas_bandwidth_limit_bytes_per_second", "A-SAS: bw_max, the BW* limit."),
            (
                "recovery_max",
                "semiactive_asas_recovery_limit_seconds",
                "A-SAS: recovery_max_ms, the R* limit, in seconds.",
            ),
            (
                "backup",
                "semiactive_asas_backup_bandwidth_bytes_per_second",
                "A-SAS: backup bandwidth measured over the tuner's window.",
            ),
            (
                "bw",
                "semiactive_asas_bandwidth_estimate_bytes_per_second",
                "A-SAS: BW* (eq. 2), the estimated backup bandwidth at the B measured under.",
            ),
            (
                "recovery",
                "semiactive_asas_recovery_estimate_seconds",
                "A-SAS: R* (eq. 3), the estimated recovery time at the B measured under.",
            ),
            ("rate", "semiactive_asas_input_rate_rows_per_second", "A-SAS: rows per second into the edge."),
        )
    }
    for s in state.stages:
        for t in s.tuning:
            key = [s.stage, t.edge]
            batch.add_metric([*key, t.tuner], t.batch_size)
            changes.add_metric(key, t.changes)
            gauges["bw_max"].add_metric(key, t.bw_max_bytes_per_s)
            gauges["recovery_max"].add_metric(key, t.recovery_max_s)
            gauges["backup"].add_metric(key, t.backup_bytes_per_s)
            if t.measured:  # the estimates need a full window of measurements
                gauges["bw"].add_metric(key, t.bw_estimate_bytes_per_s)
                gauges["recovery"].add_metric(key, t.recovery_estimate_s)
                gauges["rate"].add_metric(key, t.input_rate_per_s)
    yield from (batch, changes, *gauges.values())


def _node_families(state: cdpb.ClusterStatus) -> Iterator[Metric]:
    liveness = GaugeMetricFamily(
        "semiactive_coordinator_node_liveness",
        "1 for each node's liveness as the coordinator sees it (up: reporting; silent: not "
        "reporting, port open; down: port refused; unknown), 0 for the others.",
        labels=["node", "liveness"],
    )
    age = GaugeMetricFamily(
        "semiactive_coordinator_node_report_age_seconds",
        "Seconds since the node's last report (nodes that reported at least once).",
        labels=["node"],
    )
    alive = GaugeMetricFamily("semiactive_coordinator_nodes_alive", "Nodes reporting (liveness up).")
    for n in state.nodes:
        for value in Liveness:
            liveness.add_metric([n.name, value.value], float(n.liveness == value.value))
        if n.last_report_s >= 0:
            age.add_metric([n.name], n.last_report_s)
    alive.add_metric([], sum(n.liveness == Liveness.UP.value for n in state.nodes))
    yield from (liveness, age, alive)


def _network_families(coordinator: Coordinator) -> Iterator[Metric]:
    """Seed 004, with a ``network:`` block: the measured edge rates and the
    network usage they make at the current placement."""
    monitor = coordinator.monitor
    if monitor is None:
        return
    usage = GaugeMetricFamily(
        "semiactive_coordinator_network_usage_bytes",
        "Network usage u (the placement paper, eq. 2) of the current placement: sum over edges of the "
        "measured rate times the latency between the sites of producer and consumer (bytes in flight).",
    )
    usage.add_metric([], monitor.usage_bytes(coordinator))
    rate = GaugeMetricFamily(
        "semiactive_coordinator_edge_rate_bytes_per_second",
        "Data bytes per second on each edge, measured over the rate window.",
        labels=["edge"],
    )
    latency = GaugeMetricFamily(
        "semiactive_coordinator_edge_latency_seconds",
        "One-way latency between the sites of an edge's producer and consumer primaries.",
        labels=["edge"],
    )
    for e in monitor.edges(coordinator):
        rate.add_metric([e.edge], e.rate_bytes_per_s)
        latency.add_metric([e.edge], e.latency_s)
    yield from (usage, rate, latency)
