"""Prometheus metrics of one node daemon (docs/operations.md lists them).

Most of them are read at scrape time from the node's status snapshot
(``NodeStatus``, :meth:`NodeMetrics.follow`), the very record the
coordinator and the telemetry samples are made of, so a scrape and a
telemetry sample taken at the same moment agree exactly. The rest are
counted where they happen: events (failure detected, takeover, recovered,
fenced, reprotected: :meth:`NodeMetrics.observe_event`), frames and
requests refused, duplicates, heartbeats, sink latency.

Names follow Prometheus conventions: ``semiactive_`` prefix, base units
(seconds, bytes), ``_total`` for counters. Every sample carries the
``node`` label (the process's name); the snapshot's carry ``stage`` too.
Other labels are bounded by the topology (edge ids ``producer->consumer``,
channel ``data``/``backup``, direction, request kinds), never data values.

The endpoint is served on the node's event loop
(:mod:`semiactive.runtime.metrics_endpoint`), so a scrape reads the node's
state between two steps of it, never halfway.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest

from semiactive.runtime.metrics_endpoint import serve_metrics, with_labels
from semiactive.wire import control_pb2 as cpb

# No ``*_created`` series: the counters' start is the process's
# (``process_start_time_seconds``).
disable_created_metrics()  # type: ignore[no-untyped-call]

log = logging.getLogger(__name__)

# What generate_latest writes (Prometheus's text format 0.0.4).
EXPOSITION_FORMAT = "text/plain; version=0.0.4; charset=utf-8"
# Detection (silence before a failure is declared) and recovery times.
TIME_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 10.0, 30.0)
REFUSED_REQUESTS = ("push", "ack", "start", "stop", "view", "heartbeat")
REFUSED_FRAMES = ("undecodable", "ts_decreasing", "ts_below_watermark", "elided")
REPLICA_ROLES = ("primary", "secondary", "fenced")
NO_WATERMARK = -(2**61)  # below: the output log's "nothing yet" (ha/output_log.py)


class NodeMetrics:
    """``stage`` and ``role``: what the node starts as; once it follows its
    snapshot, the snapshot says what it serves now."""

    def __init__(self, node: str, stage: str, role: str) -> None:
        self.node = node
        self.snapshot: Callable[[], cpb.NodeStatus] = lambda: cpb.NodeStatus(
            name=node, stage=stage, role=role, state=role
        )
        # What is counted where it happens (the snapshot's metrics are read
        # at scrape time). The exposition adds the node label to all.
        self.registry = CollectorRegistry()
        r = self.registry
        self.duplicates = Counter(
            "semiactive_duplicate_tuples_total",
            "Rows dropped as already received (by seq).",
            ["edge"],
            registry=r,
        )
        self.frames_refused = Counter(
            "semiactive_frames_refused_total",
            "Frames an inbound edge refused (and closed the stream for), per reason: "
            "undecodable, ts_decreasing, ts_below_watermark, elided.",
            ["edge", "reason"],
            registry=r,
        )
        self.requests_refused = Counter(
            "semiactive_requests_refused_total",
            "Requests refused because the caller may not make them, per kind: "
            "push, ack, start, stop, view, heartbeat.",
            ["request"],
            registry=r,
        )
        self.connection_changes = Counter(
            "semiactive_candidate_connection_changes_total",
            "Connection management (the placement paper): a candidate source of an ASSIGN connected "
            "(wanted whole) or disconnected (its rows elided), per input edge.",
            ["edge", "change"],
            registry=r,
        )
        self.candidate_connected = Gauge(
            "semiactive_candidate_connected",
            "1 while a managed candidate input edge of an ASSIGN is wanted whole, 0 while idle.",
            ["edge"],
            registry=r,
        )
        self.rows_lost = Counter(
            "semiactive_rows_lost_total",
            "Rows a consumer needed that this node's output log had already freed (never expected).",
            ["edge"],
            registry=r,
        )
        self.latency = Histogram(
            "semiactive_sink_latency_seconds",
            "Source-to-sink latency of delivered rows (a sample of each batch).",
            buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
            registry=r,
        )
        self.sink_outages = Counter(
            "semiactive_sink_outages_total",
            "Times a sink found its database gone; it retried until it came back, holding its input.",
            registry=r,
        )
        self.source_rejected = Counter(
            "semiactive_source_rejected_total",
            "Messages a broker source sent to its dead letters instead of the stream, by reason.",
            ["source", "reason"],
            registry=r,
        )
        self.source_outages = Counter(
            "semiactive_source_outages_total",
            "Times a broker source found its broker gone; it went on reading when it came back.",
            registry=r,
        )
        self.heartbeats_sent = Counter(
            "semiactive_heartbeats_sent_total",
            "Heartbeats a secondary sent to its stage's primary.",
            ["stage"],
            registry=r,
        )
        self.heartbeats_missed = Counter(
            "semiactive_heartbeats_missed_total",
            "Heartbeats the primary did not answer within the heartbeat interval.",
            ["stage"],
            registry=r,
        )
        self.detection = Histogram(
            "semiactive_failure_detection_seconds",
            "Failures of the primary this secondary detected: how long it had been silent.",
            ["stage"],
            buckets=TIME_BUCKETS,
            registry=r,
        )
        self.takeovers = Counter(
            "semiactive_takeovers_total", "Failovers: this node took over its stage.", ["stage"], registry=r
        )
        self.recovery = Histogram(
            "semiactive_recovery_seconds",
            "Recovery time of a takeover: from detection to reproducing the old primary's output.",
            ["stage"],
            buckets=TIME_BUCKETS,
            registry=r,
        )
        self.fenced = Counter(
            "semiactive_fenced_total",
            "Times this node lost its stage to another primary.",
            ["stage"],
            registry=r,
        )
        self.pressed = Counter(
            "semiactive_pressed_total",
            "Times a producer said this node's cut held its output log (a capture out of turn).",
            ["stage"],
            registry=r,
        )
        self.reprotections = Counter(
            "semiactive_reprotections_total",
            "Times this node became a stage's new secondary and caught up with its primary.",
            ["stage"],
            registry=r,
        )
        self.warmup = Histogram(
            "semiactive_reprotection_warmup_seconds",
            "From assignment as secondary to holding the primary's state.",
            ["stage"],
            buckets=TIME_BUCKETS,
            registry=r,
        )
        ProcessCollector(registry=r)
        self._per_stage: tuple[Counter | Histogram, ...] = (
            self.detection,
            self.takeovers,
            self.recovery,
            self.fenced,
            self.reprotections,
            self.pressed,
            self.warmup,
            self.heartbeats_sent,
            self.heartbeats_missed,
        )
        self.exposed = CollectorRegistry(auto_describe=False)
        self.exposed.register(_Exposition(self))
        self._server: asyncio.Server | None = None

    def follow(self, snapshot: Callable[[], cpb.NodeStatus]) -> None:
        """Read gauges and counters from ``snapshot()`` (the node's
        ``NodeStatus``) at scrape time."""
        self.snapshot = snapshot

    def observe_event(self, record: dict[str, Any]) -> None:
        """Count failovers, observe detection and recovery times."""
        stage = str(record.get("stage", ""))
        match record.get("event"):
            case "failure_detected":
                self.detection.labels(stage).observe(float(record.get("silent_ms", 0.0)) / 1000)
            case "takeover":
                self.takeovers.labels(stage).inc()
            case "recovered":
                self.recovery.labels(stage).observe(float(record.get("recovery_ms", 0.0)) / 1000)
            case "fenced":
                self.fenced.labels(stage).inc()
            case "sink_unavailable":
                self.sink_outages.inc()
            case "source_unavailable":
                self.source_outages.inc()
            case "pressed":
                self.pressed.labels(stage).inc()
            case "reprotected":
                self.reprotections.labels(stage).inc()
                if "warmup_ms" in record:
                    self.warmup.labels(stage).observe(float(record["warmup_ms"]) / 1000)

    def exposition(self) -> bytes:
        """The text a scrape gets."""
        return generate_latest(self.exposed)

    async def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Serve ``/metrics`` on the running event loop until :meth:`close`;
        a port in use raises :class:`OSError`."""
        self._server = await serve_metrics(host, port, self.exposition)

    def close(self) -> None:
        if self._server is not None:
            self._server.close()

    # -- at scrape time ------------------------------------------------------------------------

    def _families(self, st: cpb.NodeStatus) -> Iterator[Metric]:
        stage, node_labels = st.stage, ["stage"]
        info = GaugeMetricFamily(
            "semiactive_node_info",
            "Constant 1; labels say what the node serves now: stage, role "
            "(source, primary, secondary, sink, spare, fenced) and state.",
            labels=["stage", "role", "state"],
        )
        info.add_metric([stage, st.role, st.state], 1)
        yield info
        for name, kind, doc, value in (
            ("semiactive_stage_epoch", "gauge", "Epoch of the stage as this node holds it.", st.epoch),
            (
                "semiactive_node_finished",
                "gauge",
                "1 once end of stream was reached and delivered.",
                st.finished,
            ),
            ("semiactive_input_backlog_rows", "gauge", "Rows received, not yet processed.", st.input_backlog),
            (
                "semiactive_output_log_rows",
                "gauge",
                "Rows retained in the output log (not yet cut by Level-1 acknowledgements).",
                st.outputs[0].retained if st.outputs else 0,
            ),
            ("semiactive_produced_rows", "counter", "Rows appended to the output log.", st.tuples_out),
            ("semiactive_operator_rows", "counter", "Rows the operator section processed.", st.operator_rows),
            (
                "semiactive_operator_busy_seconds",
                "counter",
                "Seconds the operator section spent processing.",
                st.operator_busy_s,
            ),
            ("semiactive_resyncs", "counter", "Times this replica rebuilt from a resync point.", st.resyncs),
        ):
            family = _family(name, kind, doc, node_labels)
            family.add_metric([stage], float(value))
            yield family
        if st.outputs and st.outputs[0].watermark > NO_WATERMARK:
            watermark = GaugeMetricFamily(
                "semiactive_watermark_seconds",
                "Event time the output log is complete up to.",
                labels=node_labels,
            )
            watermark.add_metric([stage], st.outputs[0].watermark / 1000)
            yield watermark
        yield from _edge_families(st)

    def _prepare(self, st: cpb.NodeStatus) -> None:
        """Create the series events and refusals would count in, at 0, so
        that they exist (and ``increase`` sees their first count) before
        anything happened."""
        for request in REFUSED_REQUESTS:
            self.requests_refused.labels(request)
        for out in st.outputs:
            self.rows_lost.labels(out.edge)
        for edge in st.inputs:
            self.duplicates.labels(edge.edge)
            for reason in REFUSED_FRAMES:
                self.frames_refused.labels(edge.edge, reason)
        if st.stage and st.role in REPLICA_ROLES:
            for family in self._per_stage:
                family.labels(st.stage)


def _family(name: str, kind: str, doc: str, labels: list[str]) -> GaugeMetricFamily | CounterMetricFamily:
    if kind == "counter":
        return CounterMetricFamily(name, doc, labels=labels)
    return GaugeMetricFamily(name, doc, labels=labels)


EDGE_LABELS = ["stage", "edge"]
OUT_FIELDS: tuple[tuple[str, str, str, Callable[[cpb.EdgeStatus], float]], ...] = (
    (
        "semiactive_edge_acked_seq",
        "gauge",
        "Output edge: the lowest Level-0 acknowledged seq over the consumer's replicas.",
        lambda e: e.acked,
    ),
    (
        "semiactive_edge_ack_lag_rows",
        "gauge",
        "Output edge: rows produced, not yet acknowledged at Level-0 (seq - acked).",
        lambda e: max(0, e.seq - e.acked),
    ),
    (
        "semiactive_edge_retained_rows",
        "gauge",
        "Output edge: rows kept in the output log, not yet cut by a Level-1 acknowledgement (Level-1 lag).",
        lambda e: e.retained,
    ),
    (
        "semiactive_edge_backup_batch_size_rows",
        "gauge",
        "Output edge: rows per backup batch B in force (0: no backup, UB or no HA).",
        lambda e: e.batch_size,
    ),
    (
        "semiactive_edge_backup_batches",
        "counter",
        "Output edge: backup batches released to the consumer's secondary.",
        lambda e: e.backup_batches,
    ),
    (
        "semiactive_edge_level1_cuts",
        "counter",
        "Output edge: Level-1 cuts that advanced (rows freed from the output log).",
        lambda e: e.cuts,
    ),
)
IN_FIELDS: tuple[tuple[str, str, str, Callable[[cpb.EdgeStatus], float]], ...] = (
    (
        "semiactive_edge_received_rows",
        "counter",
        "Input edge: rows received and admitted (duplicates excluded).",
        lambda e: e.received_rows,
    ),
    (
        "semiactive_edge_receive_seconds",
        "counter",
        "Input edge: seconds spent receiving rows (decode, admit).",
        lambda e: e.receive_s,
    ),
)


def _edge_families(st: cpb.NodeStatus) -> Iterator[Metric]:
    stage = st.stage
    rows = CounterMetricFamily(
        "semiactive_edge_sent_rows",
        "Output edge: rows written per channel (data: to the consumer's primary; backup: to its secondary).",
        labels=[*EDGE_LABELS, "channel"],
    )
    size = CounterMetricFamily(
        "semiactive_edge_sent_bytes",
        "Output edge: bytes of frames written per channel (data, backup).",
        labels=[*EDGE_LABELS, "channel"],
    )
    seq = GaugeMetricFamily(
        "semiactive_edge_last_seq",
        "Last seq produced (direction out) or received (in) on an edge.",
        labels=[*EDGE_LABELS, "direction"],
    )
    for e in st.outputs:
        rows.add_metric([stage, e.edge, "data"], e.data_rows)
        rows.add_metric([stage, e.edge, "backup"], e.backup_rows)
        size.add_metric([stage, e.edge, "data"], e.data_bytes)
        size.add_metric([stage, e.edge, "backup"], e.backup_bytes)
        seq.add_metric([stage, e.edge, "out"], e.seq)
    for e in st.inputs:
        seq.add_metric([stage, e.edge, "in"], e.seq)
    yield from (rows, size, seq)
    for fields, edges in ((OUT_FIELDS, st.outputs), (IN_FIELDS, st.inputs)):
        for name, kind, doc, read in fields:
            family = _family(name, kind, doc, EDGE_LABELS)
            for e in edges:
                family.add_metric([stage, e.edge], float(read(e)))
            yield family


class _Exposition:
    """What a scrape of a node gets: the snapshot's metrics and the counted
    ones, each sample labelled with the node's name."""

    def __init__(self, metrics: NodeMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        m = self.metrics
        status = m.snapshot()
        m._prepare(status)
        families = list(m._families(status))
        sink = status.role == "sink"
        families.extend(
            f for f in m.registry.collect() if sink or f.name != "semiactive_sink_latency_seconds"
        )
        return [with_labels(f, {"node": m.node}) for f in families]
