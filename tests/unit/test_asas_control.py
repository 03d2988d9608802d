"""The coordinator's A-SAS loop (coordinator/adaptive_backup.py) against a
simulated edge: the nodes' counters evolve as SAS makes them (rows appended
at a rate, a backup batch each time B rows are unsent, a Level-1 cut every
round dropping the unsent rest) and are reported as the daemons report them.
Time is passed in: no clock, no socket."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from semiactive import config, topology
from semiactive.coordinator.adaptive_backup import CounterWindow
from semiactive.coordinator.control import Coordinator
from semiactive.runtime.events import EventLog
from semiactive.wire import control_pb2 as cpb

EDGE = "select-1->select-2"
TUPLE_BYTES = 44


def _config(tmp: Path, **ha: Any) -> topology.Topology:
    settings = {
        "mode": "asas",
        "secondary": "node-4",
        "bw_max": "30KB/s",
        "recovery_max_ms": 80,
        "interval_ms": 10,
        "initial_batch_size": 1,
        "tuner": "model",
        **ha,
    }
    cfg = {
        "name": "asas",
        "sources": [{"name": "node-0", "stream": "readings", "rate": [{"tuples_per_s": 100}]}],
        "stages": [
            {"name": "select-1", "node": "node-1", "query": "REGISTER QUERY s1 AS SELECT * FROM readings"},
            {
                "name": "select-2",
                "node": "node-2",
                "ha": settings,
                "query": "REGISTER QUERY s2 AS SELECT * FROM s1",
            },
        ],
        "sinks": [{"name": "sink", "input": "s2"}],
    }
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "asas.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return topology.resolve(config.load(path))


@dataclass
class Edge:
    """The producer's cursors on the edge, driven as SAS drives them."""

    batch_size: int = 1
    round_s: float = 0.3  # Level-1 delay: a cut this long after the previous one
    appended: float = 0.0
    unsent: float = 0.0
    batches: int = 0
    backup_bytes: int = 0
    cuts: int = 0
    uncut: float = 0.0
    since_cut: float = 0.0
    last_cut_at: float = 0.0
    cut_unsent_batches: bool = True  # False: no cut ever drops rows (so B_send = rate / B)

    def advance(self, now: float, rows: float) -> None:
        self.appended += rows
        self.since_cut += rows
        self.unsent += rows
        while self.unsent >= self.batch_size:
            self.batches += 1
            self.backup_bytes += self.batch_size * TUPLE_BYTES
            self.unsent -= self.batch_size
        if now - self.last_cut_at >= self.round_s:
            self.cuts += 1
            self.uncut += self.since_cut
            self.since_cut = 0.0
            self.last_cut_at = now
            if self.cut_unsent_batches:
                self.unsent = 0.0


class Plant:
    """A coordinator and the reports of node-1 (producer primary), node-2
    (consumer primary) and node-4 (its secondary) every 10 ms."""

    def __init__(self, tmp: Path, **ha: Any) -> None:
        self.run_dir = tmp / "run"
        self.topology = _config(tmp, **ha)
        addresses = {n: f"127.0.0.1:{i}" for i, n in enumerate(self.topology.nodes, start=1000)}
        self.coordinator = Coordinator(self.topology, addresses, EventLog("coordinator", self.run_dir), 0.0)
        self.edge = Edge()
        self.now = 0.0
        self.rate = 100.0
        self.producer = "node-1"
        # S_time, R_ptime at the consumer's primary and at its secondary
        self.seconds_per_row = {"primary": (0.0001, 0.0002), "secondary": (0.0001, 0.0002)}
        self.received = 0.0
        self.replies: dict[str, dict[str, int]] = {}
        self.received_by_secondary = True

    def producer_status(self, name: str, role: str = "primary") -> cpb.NodeStatus:
        e = self.edge
        status = cpb.NodeStatus(name=name, role=role, stage="select-1")
        status.outputs.add(
            edge=EDGE,
            seq=int(e.appended),
            batch_size=e.batch_size,
            backup_batches=e.batches,
            backup_bytes=e.backup_bytes,
            data_rows=int(e.appended),
            data_bytes=int(e.appended) * TUPLE_BYTES,
            cuts=e.cuts,
            uncut_rows=int(e.uncut),
        )
        return status

    def consumer_status(self, name: str, role: str) -> cpb.NodeStatus:
        send, process = self.seconds_per_row[role]
        rows = int(self.received)
        status = cpb.NodeStatus(
            name=name, role=role, stage="select-2", operator_rows=rows, operator_busy_s=rows * process
        )
        status.inputs.add(edge=EDGE, seq=rows, received_rows=rows, receive_s=rows * send)
        return status

    def tick(self, seconds: float = 0.01) -> None:
        self.now += seconds
        self.edge.advance(self.now, self.rate * seconds)
        self.received += self.rate * seconds
        for status in (
            self.producer_status(self.producer),
            self.producer_status("sec-1", role="secondary"),
            self.consumer_status("node-2", "primary"),
            *([self.consumer_status("node-4", "secondary")] if self.received_by_secondary else []),
        ):
            self.coordinator.on_report(status, "", self.now)
            self.replies[status.name] = self.coordinator.batch_sizes_for(status)
        self.coordinator.tune(self.now)
        # The producer applies the reply to its cursors (node/service/daemon.py).
        self.edge.batch_size = self.replies[self.producer].get(EDGE, self.edge.batch_size)

    def run(self, seconds: float) -> None:
        for _ in range(round(seconds / 0.01)):
            self.tick()

    def events(self) -> list[dict[str, Any]]:
        path = self.run_dir / "telemetry" / "events-coordinator.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("tuner", ["algorithm3", "model"])
def test_a_rate_step_moves_b_until_both_limits_hold(tmp_path: Path, tuner: str) -> None:
    plant = Plant(tmp_path, tuner=tuner)
    plant.run(2.0)
    assert plant.edge.batch_size < 50  # 100 rows/s x 44 B: even AS is within 30 KB/s
    plant.rate = 1000.0
    plant.run(4.0)
    tuning = plant.coordinator.tuning.edges[EDGE]
    assert tuning.decision is not None
    assert tuning.batch_size == plant.edge.batch_size > 50
    # Within both limits by the estimates the tuner acts on.
    assert tuning.decision.bandwidth_bytes_per_s <= 30_000 * 1.15
    assert tuning.decision.recovery_s <= 0.080
    changes = [e for e in plant.events() if e["event"] == "batch_size_changed"]
    assert changes and changes[-1]["batch_size"] == plant.edge.batch_size
    assert {"bw_estimate_bytes_per_s", "recovery_estimate_s", "branch", "previous"} <= set(changes[-1])


def test_the_producers_secondary_is_told_b_too(tmp_path: Path) -> None:
    plant = Plant(tmp_path)
    plant.rate = 1000.0
    plant.run(2.0)
    assert plant.replies["sec-1"] == plant.replies["node-1"] == {EDGE: plant.edge.batch_size}
    assert plant.replies["node-2"] == {}  # a consumer has no such output edge


def test_b_send_is_the_counted_batches_not_rate_over_b(tmp_path: Path) -> None:
    # At B = 400 > rows per round, cuts drop every row unsent: no batch goes
    # out, so eq. 2 must give ~0. Computed as rate / B it would give
    # rate x tuple bytes = 44 KB/s, over the 30 KB/s limit.
    plant = Plant(tmp_path, tuner="algorithm3", initial_batch_size=400, recovery_max_ms=1000)
    plant.rate = 1000.0
    plant.edge.batch_size = 400
    plant.run(1.0)
    decision = plant.coordinator.tuning.edges[EDGE].decision
    assert decision is not None
    assert decision.bandwidth_bytes_per_s < 1_000
    assert decision.batch_size == 400  # both hold: kept


def test_without_cuts_that_drop_rows_bandwidth_is_the_whole_stream(tmp_path: Path) -> None:
    # The same B, but every batch fills (no Level-1 saving): measured B_send
    # then really is rate / B and BW* is over the limit, so Algorithm 3 moves.
    plant = Plant(tmp_path, tuner="algorithm3", initial_batch_size=400, recovery_max_ms=1000)
    plant.rate = 1000.0
    plant.edge.batch_size = 400
    plant.edge.cut_unsent_batches = False
    plant.run(1.0)
    decision = plant.coordinator.tuning.edges[EDGE].decision
    assert decision is not None
    assert decision.bandwidth_bytes_per_s > 30_000


def test_a_slower_secondary_is_what_recovery_is_estimated_from(tmp_path: Path) -> None:
    # Unequal machines: node-4 reprocesses 4x slower than node-2. It is the
    # one that replays after a failure, so eq. 3 must use its costs, and B
    # must shrink to keep R* within the limit.
    equal = Plant(tmp_path / "equal", tuner="model")
    equal.rate = 1000.0
    equal.run(3.0)
    slow = Plant(tmp_path / "slow", tuner="model")
    slow.seconds_per_row["secondary"] = (0.0001, 0.0008)
    slow.rate = 1000.0
    slow.run(3.0)
    m = slow.coordinator.tuning.edges[EDGE].measurements
    assert m is not None and m.secondary is not None
    assert m.recovery_costs.reprocess_time_s == pytest.approx(0.0008, rel=0.01)
    assert slow.edge.batch_size < equal.edge.batch_size
    assert slow.edge.batch_size * 0.0009 <= 0.080


def test_a_failover_restarts_the_window_and_keeps_b(tmp_path: Path) -> None:
    plant = Plant(tmp_path)
    plant.rate = 1000.0
    plant.run(2.0)
    before = plant.edge.batch_size
    tuning = plant.coordinator.tuning.edges[EDGE]
    # The producer's secondary took over: its counters start from zero.
    plant.producer = "sec-1"
    plant.edge = Edge(batch_size=before)
    plant.tick()
    assert tuning.producer.delta(plant.now) is None  # no rate across two processes
    assert plant.replies["sec-1"] == {EDGE: before}
    plant.run(1.0)
    assert tuning.producer.node == "sec-1"


def test_a_restarted_coordinator_resumes_from_the_b_in_force(tmp_path: Path) -> None:
    plant = Plant(tmp_path)
    plant.rate = 1000.0
    plant.run(2.0)
    b = plant.edge.batch_size
    assert b > 1
    addresses = {n: "" for n in plant.topology.nodes}
    plant.coordinator = Coordinator(plant.topology, addresses, EventLog("coordinator", None), plant.now)
    plant.tick()
    assert plant.replies["node-1"] == {EDGE: b}  # not back to initial_batch_size 1


def test_status_shows_b_and_the_estimates_against_the_limits(tmp_path: Path) -> None:
    plant = Plant(tmp_path)
    plant.rate = 1000.0
    plant.run(2.0)
    stage = next(s for s in plant.coordinator.cluster_state(plant.now).stages if s.stage == "select-2")
    assert stage.mode == "asas" and stage.batch_size == plant.edge.batch_size
    (row,) = stage.tuning
    assert row.edge == EDGE and row.measured and row.tuner == "model"
    assert row.bw_max_bytes_per_s == 30_000 and row.recovery_max_s == pytest.approx(0.08)
    assert row.recovery_estimate_s > 0 and row.input_rate_per_s == pytest.approx(1000, rel=0.1)


def test_a_counter_that_goes_back_restarts_the_window() -> None:
    window = CounterWindow(0.25)
    for i in range(30):
        window.add(i * 0.01, "n", (float(i),))
    delta = window.delta(0.29)
    assert delta is not None
    span, (increase,) = delta
    assert 0.25 <= span <= 0.26 + 1e-9 and increase == pytest.approx(span * 100)
    window.add(0.30, "n", (3.0,))  # a rebuilt replica's counters
    assert window.delta(0.30) is None
    assert window.delta(5.0) is None  # stale: nothing heard for a window


def test_a_secondary_that_receives_nothing_leaves_recovery_to_the_primarys_current_costs(
    tmp_path: Path,
) -> None:
    # Its costs from earlier windows are stale: when the per-row cost rises
    # while no batch reaches the secondary, eq. 3 must see the rise.
    plant = Plant(tmp_path, tuner="algorithm3", initial_batch_size=400, recovery_max_ms=1000)
    plant.rate = 1000.0
    plant.edge.batch_size = 400
    plant.run(1.0)
    plant.seconds_per_row["primary"] = (0.0001, 0.001)
    plant.received_by_secondary = False
    plant.run(1.0)
    m = plant.coordinator.tuning.edges[EDGE].measurements
    assert m is not None and m.secondary is None
    assert m.recovery_costs.reprocess_time_s == pytest.approx(0.001, rel=0.01)


def test_garbage_in_a_report_is_no_sample_and_no_error(tmp_path: Path) -> None:
    # An authenticated but broken (or hostile) node reports NaN, infinite and
    # negative seconds and absurd counters: the tuner must neither raise (a
    # coordinator_error) nor act on them.
    plant = Plant(tmp_path)
    plant.rate = 1000.0
    plant.run(1.0)
    for seconds in (float("nan"), float("inf"), -1.0):
        bad = plant.consumer_status("node-2", "primary")
        bad.operator_busy_s = seconds
        bad.inputs[0].receive_s = seconds
        plant.coordinator.on_report(bad, "", plant.now)
        plant.coordinator.tune(plant.now + 0.01)
    huge = plant.producer_status("node-1")
    huge.outputs[0].backup_batches = 2**64 - 1
    plant.coordinator.on_report(
        huge, "", plant.now
    )  # a counter jump: the next real report restarts the window
    plant.run(1.0)
    m = plant.coordinator.tuning.edges[EDGE].measurements
    assert m is not None and m.primary.reprocess_time_s == pytest.approx(0.0002, rel=0.01)
    assert m.backup_batches_per_s < 1_000
    assert not [e for e in plant.events() if e["event"] == "coordinator_error"]
