"""Adaptive SAS in the coordinator: one batch-size tuner per edge into an
``asas`` stage, fed by the nodes' reports (docs/asas.md).

Nodes report cumulative counters (ha-protocol's cursors and the sections'
clocks); this module turns them into the SAS paper's measurements over a sliding
window (``window_ms``), runs the stage's tuner every ``interval_ms`` and
hands the decided B back in the reply to the producer's replicas, which set
it on their output log. Where each measurement comes from:

- the producer's primary (or source), per edge: backup batches it released
  (B_send), rows appended (the rate), bytes and rows written on the data
  channel (mean tuple bytes), and for each Level-1 cut that advanced the
  rows that waited for it (rows per round n; the Level-1 delay is n / rate);
- the consumer's primary and its secondary: seconds per row spent taking
  rows in off the edge (S_time) and in the operator section (R_ptime).

Pure: the caller passes the clock. A window restarts when the reporting
node changes (failover) or a counter goes back (a restarted or rebuilt
replica), so no rate ever spans two processes.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from semiactive.config import HaConfig
from semiactive.ha.algorithm3 import Algorithm3Tuner
from semiactive.ha.cost_model import Costs, Measurements
from semiactive.ha.model_tuner import ModelTuner
from semiactive.ha.tuning import BatchSizeTuner, Decision, Priority
from semiactive.runtime import clock
from semiactive.runtime.events import EventLog
from semiactive.topology import Edge, Topology
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import coordinator_pb2 as cdpb

# Rates need this much history (in the window) before a tuner acts on them.
MIN_SPAN_FRACTION = 0.5


class CounterWindow:
    """Samples of one node's cumulative counters over the last ``window_s``."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._samples: deque[tuple[float, tuple[float, ...]]] = deque()
        self.node = ""

    def add(self, now: float, node: str, values: tuple[float, ...]) -> None:
        if not all(math.isfinite(v) and v >= 0 for v in values):
            return  # a malformed report (NaN, inf, negative seconds): no sample
        last = self._samples[-1][1] if self._samples else None
        if node != self.node or (last is not None and any(v < w for v, w in zip(values, last, strict=True))):
            self._samples.clear()
            self.node = node
        self._samples.append((now, values))
        # Keep one sample at or before the window's start as the base.
        while len(self._samples) > 2 and self._samples[1][0] <= now - self.window_s:
            self._samples.popleft()

    def delta(self, now: float) -> tuple[float, tuple[float, ...]] | None:
        """(span in s, increase of each counter) over the window, or None
        while there is too little history (or it is stale)."""
        if len(self._samples) < 2:
            return None
        (t0, first), (t1, last) = self._samples[0], self._samples[-1]
        span = t1 - t0
        if span < self.window_s * MIN_SPAN_FRACTION or now - t1 > self.window_s:
            return None
        return span, tuple(b - a for a, b in zip(first, last, strict=True))


def make_tuner(ha: HaConfig, initial: int) -> BatchSizeTuner:
    assert ha.bw_max is not None and ha.recovery_max_ms is not None
    initial = min(max(1, initial), ha.max_batch_size)
    priority = Priority(ha.priority)
    limits = (ha.bw_max, ha.recovery_max_ms / 1000)
    if ha.tuner == "algorithm3":
        return Algorithm3Tuner(*limits, priority, ha.step, initial, ha.max_batch_size)
    return ModelTuner(*limits, priority, initial, ha.max_batch_size)


class EdgeTuning:
    """The tuner of one edge ``U -> X`` into an asas stage X."""

    def __init__(self, edge: Edge, ha: HaConfig, events: EventLog) -> None:
        self.edge = edge
        self.ha = ha
        self.events = events
        self.interval_s = ha.interval_ms / 1000
        window = ha.window_ms / 1000
        # appended, backup batches, backup bytes, data rows, data bytes, cuts, uncut rows
        self.producer = CounterWindow(window)
        # received rows, receive seconds, operator rows, operator seconds
        self.primary = CounterWindow(window)
        self.secondary = CounterWindow(window)
        self.tuner: BatchSizeTuner | None = None
        self.last_run = -1e9
        self.decision: Decision | None = None
        self.measurements: Measurements | None = None
        self.backup_bytes_per_s = 0.0
        self.changes = 0
        # Last known values, for windows in which nothing of that kind happened.
        self._tuple_bytes: float | None = None
        self._rows_per_round: float | None = None
        self._costs: dict[str, Costs] = {}

    @property
    def batch_size(self) -> int | None:
        return self.tuner.batch_size if self.tuner is not None else None

    def observe_producer(self, now: float, node: str, out: cpb.EdgeStatus) -> None:
        if self.tuner is None:
            self.tuner = make_tuner(self.ha, out.batch_size or self.ha.initial_batch_size)
        values = (out.seq, out.backup_batches, out.backup_bytes, out.data_rows, out.data_bytes, out.cuts)
        self.producer.add(now, node, (*map(float, values), float(out.uncut_rows)))

    def observe_consumer(self, now: float, status: cpb.NodeStatus, edge: cpb.EdgeStatus) -> None:
        window = self.primary if status.role == "primary" else self.secondary
        values = (edge.received_rows, edge.receive_s, status.operator_rows, status.operator_busy_s)
        window.add(now, status.name, tuple(map(float, values)))

    def measure(self, now: float) -> Measurements | None:
        """This window's measurements, or None while some are still unknown."""
        produced = self.producer.delta(now)
        if produced is None:
            return None
        span, (appended, batches, backup_bytes, data_rows, data_bytes, cuts, uncut) = produced
        if data_rows > 0:
            self._tuple_bytes = data_bytes / data_rows
        if cuts > 0:
            self._rows_per_round = uncut / cuts
        primary = self._window_costs(self.primary, now)
        if primary is not None:
            self._costs["primary"] = primary
        # The secondary's costs only from this window: when no batch reaches
        # it (B above the rows per round), old ones would hide a cost change
        # and the primary's current costs stand in (docs/asas.md).
        secondary = self._window_costs(self.secondary, now)
        if self._tuple_bytes is None or self._rows_per_round is None or "primary" not in self._costs:
            return None
        rate = appended / span
        self.backup_bytes_per_s = backup_bytes / span
        return Measurements(
            backup_batches_per_s=batches / span,
            tuple_bytes=self._tuple_bytes,
            input_rate_per_s=rate,
            level1_delay_s=self._rows_per_round / rate if rate > 0 else 0.0,
            primary=self._costs["primary"],
            secondary=secondary,
        )

    @staticmethod
    def _window_costs(window: CounterWindow, now: float) -> Costs | None:
        seen = window.delta(now)
        if seen is None:
            return None
        _, (received, receive_s, processed, busy_s) = seen
        if received <= 0 or processed <= 0:
            return None
        return Costs(send_time_s=receive_s / received, reprocess_time_s=busy_s / processed)

    def step(self, now: float) -> Decision | None:
        """Run the tuner if its interval has passed and it has measurements."""
        if self.tuner is None or now - self.last_run < self.interval_s * 0.999:
            return None
        self.last_run = now
        m = self.measure(now)
        if m is None:
            return None
        self.measurements = m
        decision = self.tuner.next(m)
        self.decision = decision
        self.events.append("tuning", [self._sample(decision, m)])
        if decision.changed:
            self.changes += 1
            self.events.emit(
                "batch_size_changed",
                stage=self.edge.consumer,
                edge=self.edge.id,
                tuner=self.ha.tuner,
                previous=decision.previous_batch_size,
                batch_size=decision.batch_size,
                branch=decision.branch.value,
                bw_estimate_bytes_per_s=round(decision.bandwidth_bytes_per_s, 1),
                recovery_estimate_s=round(decision.recovery_s, 6),
                predicted_bw_bytes_per_s=_rounded(decision.predicted_bandwidth_bytes_per_s, 1),
                predicted_recovery_s=_rounded(decision.predicted_recovery_s, 6),
                input_rate_per_s=round(m.input_rate_per_s, 1),
                backup_batches_per_s=round(m.backup_batches_per_s, 2),
                backup_bytes_per_s=round(self.backup_bytes_per_s, 1),
                level1_delay_s=round(m.level1_delay_s, 4),
                tuple_bytes=round(m.tuple_bytes, 1),
                send_time_s=m.recovery_costs.send_time_s,
                reprocess_time_s=m.recovery_costs.reprocess_time_s,
                costs_from="secondary" if m.secondary is not None else "primary",
            )
        return decision

    def _sample(self, decision: Decision, m: Measurements) -> dict[str, Any]:
        """One tuner step for the report job (docs/telemetry.md)."""
        assert self.ha.bw_max is not None and self.ha.recovery_max_ms is not None
        return {
            "t": clock.wall(),
            "edge": self.edge.id,
            "stage": self.edge.consumer,
            "tuner": self.ha.tuner,
            "batch_size": decision.batch_size,
            "previous": decision.previous_batch_size,
            "bw_estimate_bytes_per_s": decision.bandwidth_bytes_per_s,
            "recovery_estimate_s": decision.recovery_s,
            "bw_max_bytes_per_s": self.ha.bw_max,
            "recovery_max_s": self.ha.recovery_max_ms / 1000,
            "input_rate_per_s": m.input_rate_per_s,
            "backup_bytes_per_s": self.backup_bytes_per_s,
            "branch": decision.branch.value,
        }

    def state(self) -> cdpb.EdgeTuning:
        assert self.ha.bw_max is not None and self.ha.recovery_max_ms is not None
        out = cdpb.EdgeTuning(
            edge=self.edge.id,
            tuner=self.ha.tuner,
            batch_size=self.batch_size or 0,
            bw_max_bytes_per_s=self.ha.bw_max,
            recovery_max_s=self.ha.recovery_max_ms / 1000,
            backup_bytes_per_s=self.backup_bytes_per_s,
            changes=self.changes,
        )
        if self.decision is not None and self.measurements is not None:
            out.measured = True
            out.bw_estimate_bytes_per_s = self.decision.bandwidth_bytes_per_s
            out.recovery_estimate_s = self.decision.recovery_s
            out.input_rate_per_s = self.measurements.input_rate_per_s
            out.branch = self.decision.branch.value
        return out


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


class AdaptiveBackup:
    """Every A-SAS edge of a topology, fed by node reports."""

    def __init__(self, topology: Topology, events: EventLog) -> None:
        self.edges: dict[str, EdgeTuning] = {}
        for stage in topology.stages.values():
            if stage.config is None or stage.config.ha.mode != "asas":
                continue
            for edge in stage.inputs:
                self.edges[edge.id] = EdgeTuning(edge, stage.config.ha, events)
        intervals = [t.interval_s for t in self.edges.values()]
        self.interval_s = min(intervals) if intervals else 0.0

    def observe(self, status: cpb.NodeStatus, now: float) -> None:
        if not self.edges:
            return
        if status.role in ("primary", "source"):
            for out in status.outputs:
                tuning = self.edges.get(out.edge)
                if tuning is not None and tuning.edge.producer == status.stage:
                    tuning.observe_producer(now, status.name, out)
        if status.role in ("primary", "secondary"):
            for edge in status.inputs:
                tuning = self.edges.get(edge.edge)
                if tuning is not None and tuning.edge.consumer == status.stage:
                    tuning.observe_consumer(now, status, edge)

    def batch_sizes_for(self, status: cpb.NodeStatus) -> dict[str, int]:
        """The B of each A-SAS edge this node produces on (as primary or as
        the producer's secondary, which needs it the moment it takes over)."""
        out = {}
        for edge in status.outputs:
            tuning = self.edges.get(edge.edge)
            if tuning is not None and tuning.batch_size is not None:
                out[edge.edge] = tuning.batch_size
        return out

    def step(self, now: float) -> list[Decision]:
        return [d for t in self.edges.values() if (d := t.step(now)) is not None]

    def stage_states(self, stage: str) -> list[cdpb.EdgeTuning]:
        return [t.state() for t in self.edges.values() if t.edge.consumer == stage]
