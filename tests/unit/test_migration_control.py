"""The coordinator's migration state machine (coordinator/migration.py)
against the in-memory cluster of test_coordinator_control: refusals, the
handover only once the target has caught up, the end on the target's
report, and a failover during a migration. No socket, no clock."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from semiactive.coordinator.control import WARMUP_S
from semiactive.coordinator.migration import TIMEOUT_S
from semiactive.ha.views import StageView
from semiactive.wire import control_pb2 as cpb
from tests.unit.test_coordinator_control import FakeCluster, FakeNode


@dataclass
class ReplicaNode(FakeNode):
    """A FakeNode that also reports its inputs and epoch, and follows views
    as a replica does: named primary, it takes over; no longer named, it
    is fenced and becomes a spare."""

    received: int = 0
    warming_up: bool = False

    def status(self) -> cpb.NodeStatus:
        status = super().status()
        if self.stage:
            status.epoch = self.views[self.stage].epoch
            status.inputs.add(edge=f"x->{self.stage}", seq=self.received)
        status.state = "warming-up" if self.warming_up else self.role
        return status

    def adopt(self, view: StageView) -> None:
        super().adopt(view)
        if view.stage != self.stage:
            return
        role = view.role_of(self.name)
        if role == "primary":
            self.role = "primary"
        elif role == "none":
            self.role, self.stage = "spare", ""


def cluster_of(tmp: Path) -> FakeCluster:
    cluster = FakeCluster(tmp, ["spare-1", "spare-2"])
    for name, node in list(cluster.processes.items()):
        cluster.processes[name] = ReplicaNode(node.name, node.role, node.stage, node.views, received=1000)
    cluster.rounds(WARMUP_S + 0.2)
    return cluster


def moving(tmp_path: Path) -> tuple[FakeCluster, ReplicaNode]:
    """stage-2 asked to move to spare-1, which has received nothing yet."""
    cluster = cluster_of(tmp_path)
    target = cluster.processes["spare-1"]
    assert isinstance(target, ReplicaNode)
    target.received = 0
    assert cluster.coordinator.migrations.request("stage-2", "spare-1", cluster.now) is None
    return cluster, target


def events(cluster: FakeCluster) -> list[str]:
    path = cluster.run_dir / "telemetry" / "events-coordinator.jsonl"
    names = [json.loads(line)["event"] for line in path.read_text().splitlines()]
    return [n for n in names if n.startswith("migrat")]


def test_refusals_say_why(tmp_path: Path) -> None:
    cluster = cluster_of(tmp_path)
    request = cluster.coordinator.migrations.request
    assert "no stage" in (request("sink", "spare-1", cluster.now) or "")
    assert "no stage" in (request("nope", "spare-1", cluster.now) or "")
    assert "already runs on node-2" in (request("stage-2", "node-2", cluster.now) or "")
    assert "neither a free spare" in (request("stage-2", "sec-1", cluster.now) or "")
    assert "no node named" in (request("stage-2", "ghost", cluster.now) or "")
    assert request("stage-2", "spare-1", cluster.now) is None
    assert "already moving to spare-1" in (request("stage-2", "spare-2", cluster.now) or "")
    # spare-1 is named by stage-2's view now: no other stage may take it.
    assert "neither a free spare" in (request("stage-3", "spare-1", cluster.now) or "")


def test_the_handover_waits_until_the_target_caught_up(tmp_path: Path) -> None:
    cluster, target = moving(tmp_path)
    assert cluster.view("stage-2").secondary == "spare-1"
    cluster.rounds(1.0)
    assert (target.role, cluster.view("stage-2").epoch) == ("secondary", 0)  # far behind
    target.received, target.warming_up = 990, True
    cluster.rounds(0.5)
    assert cluster.view("stage-2").epoch == 0  # still rebuilding
    target.warming_up = False
    cluster.rounds(0.3)
    view = cluster.view("stage-2")
    assert (view.primary, view.epoch) == ("spare-1", 1)
    assert view.secondary not in (None, "spare-1")  # re-protected at once
    assert target.role == "primary"
    assert "node-2" not in (view.primary, view.secondary) or cluster.processes["node-2"].role == "secondary"
    assert events(cluster) == ["migration_started", "migration_handover", "migrated"]
    assert not cluster.coordinator.migrations.active


def test_a_failover_to_the_target_finishes_the_migration(tmp_path: Path) -> None:
    cluster, target = moving(tmp_path)
    cluster.rounds(0.3)
    cluster.processes["node-2"].alive = False  # the primary dies; the target takes over by itself
    target.views.apply(cluster.view("stage-2").promoted("spare-1"))
    target.role = "primary"
    cluster.rounds(0.5)
    assert events(cluster) == ["migration_started", "migrated"]


def test_a_dead_target_aborts_and_the_stage_is_reprotected(tmp_path: Path) -> None:
    cluster, target = moving(tmp_path)
    cluster.rounds(0.3)
    target.alive = False
    cluster.rounds(1.5)
    assert events(cluster) == ["migration_started", "migration_aborted"]
    view = cluster.view("stage-2")
    assert view.primary == "node-2" and view.secondary not in (None, "spare-1")


def test_a_target_that_never_catches_up_is_abandoned(tmp_path: Path) -> None:
    cluster, _ = moving(tmp_path)
    cluster.rounds(TIMEOUT_S + 1)
    assert events(cluster) == ["migration_started", "migration_aborted"]
    assert cluster.view("stage-2").primary == "node-2"


def test_a_coordinator_that_stops_ends_the_migrations_it_started(tmp_path: Path) -> None:
    cluster, _ = moving(tmp_path)
    cluster.rounds(0.3)
    cluster.coordinator.migrations.abandon("the coordinator stopped")
    assert events(cluster) == ["migration_started", "migration_aborted"]
    assert not cluster.coordinator.migrations.active
    assert cluster.view("stage-2").primary == "node-2"
