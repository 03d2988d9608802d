"""The coordinator's decisions (coordinator/control.py) against an
in-memory cluster: nodes report as the daemons do (node/service/coordinator_link.py)
and adopt the views the replies carry (node/service/daemon.py: a spare named
secondary in a newer view becomes it). Time is passed in: no clock, no
socket."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from semiactive import config, topology
from semiactive.coordinator.control import NEVER_REPORTED_GRACE_S, SILENCE_S, WARMUP_S, Coordinator, Liveness
from semiactive.ha.routing import initial_views
from semiactive.ha.views import StageView, ViewTable
from semiactive.runtime.events import EventLog
from semiactive.runtime.messages import view_to_pb
from semiactive.wire import control_pb2 as cpb
from tests.faults.harness import AGGREGATE, protected_chain


@dataclass
class FakeNode:
    name: str
    role: str
    stage: str
    views: ViewTable
    alive: bool = True  # a dead process: its port refuses connections
    answering: bool = True  # frozen: alive, port open, no reports
    told: list[StageView] = field(default_factory=list)

    def status(self) -> cpb.NodeStatus:
        status = cpb.NodeStatus(name=self.name, role=self.role, stage=self.stage)
        status.views.extend(view_to_pb(v) for v in self.views)
        return status

    def adopt(self, view: StageView) -> None:
        self.told.append(view)
        if self.views.apply(view) and self.role == "spare" and view.secondary == self.name:
            self.role, self.stage = "secondary", view.stage


class FakeCluster:
    def __init__(self, tmp: Path, spares: list[str]) -> None:
        self.run_dir = tmp / "run"
        self.topology = topology.resolve(config.load(str(protected_chain(tmp, AGGREGATE, spares=spares))))
        self.processes: dict[str, FakeNode] = {}
        for name, info in self.topology.nodes.items():
            self.processes[name] = FakeNode(name, info.role, info.stage or "", initial_views(self.topology))
        self.now = 0.0
        addresses = {name: f"127.0.0.1:{i}" for i, name in enumerate(self.processes, start=1000)}
        self.coordinator = Coordinator(
            self.topology, addresses, EventLog("coordinator", self.run_dir), self.now
        )

    def round(self, seconds: float = 0.1) -> None:
        """One report interval: every answering node reports and adopts the
        reply; silent nodes are probed; the coordinator decides."""
        self.now += seconds
        for node in self.processes.values():
            if node.alive and node.answering:
                for view in self.coordinator.on_report(node.status(), "", self.now):
                    node.adopt(view)
        for name in self.coordinator.to_probe(self.now):
            self.coordinator.probed(name, self.processes[name].alive)
        self.coordinator.step(self.now)

    def rounds(self, seconds: float) -> None:
        for _ in range(round(seconds / 0.1)):
            self.round()

    def restart_as_spare(self, name: str) -> None:
        """A replacement machine: same name, no state, the config's views."""
        self.processes[name] = FakeNode(name, "spare", "", initial_views(self.topology))

    def view(self, stage: str) -> StageView:
        return self.coordinator.views[stage]


def _started(tmp: Path, spares: list[str]) -> FakeCluster:
    """A cluster as configured, heard by its coordinator past the warm-up."""
    cluster = FakeCluster(tmp, spares)
    cluster.rounds(WARMUP_S + 0.2)
    assert all(not n.told for n in cluster.processes.values())
    return cluster


def test_a_secondary_restarted_under_its_name_is_made_the_stages_secondary_again(tmp_path: Path) -> None:
    # No standing spare: sec-2 dies and comes back empty under its name. Its
    # stage's view (never changed) still names it, so the restarted node
    # holds that very view and would not act on it: the coordinator must
    # give the stage a secondary with a new version.
    cluster = _started(tmp_path, spares=[])
    cluster.processes["sec-2"].alive = False
    cluster.rounds(SILENCE_S + 0.2)
    assert cluster.coordinator.liveness("sec-2", cluster.now) is Liveness.DOWN
    cluster.restart_as_spare("sec-2")
    cluster.rounds(0.3)
    node = cluster.processes["sec-2"]
    assert (node.role, node.stage) == ("secondary", "stage-2")
    assert cluster.view("stage-2").secondary == "sec-2"
    assert cluster.view("stage-2").version == 1  # once, not again while it adopts it
    assert cluster.processes["node-2"].views["stage-2"].version == 1


def test_a_spare_goes_to_one_unprotected_stage_only(tmp_path: Path) -> None:
    cluster = _started(tmp_path, spares=["spare-1"])
    cluster.processes["sec-1"].alive = False
    cluster.processes["sec-3"].alive = False
    cluster.rounds(SILENCE_S + 0.5)
    secondaries = {s: cluster.view(s).secondary for s in ("stage-1", "stage-2", "stage-3")}
    assert secondaries == {"stage-1": "spare-1", "stage-2": "sec-2", "stage-3": "sec-3"}
    assert cluster.processes["spare-1"].stage == "stage-1"


def test_a_stage_that_lost_both_replicas_gets_a_spare_that_rebuilds_it(tmp_path: Path) -> None:
    # No standing spare: node-2 and sec-2 die together and come back empty
    # under their names. sec-2 may be given the stage (it will find node-2
    # gone and take over); node-2, the name the view gives the primary,
    # must not: it would watch itself.
    cluster = _started(tmp_path, spares=[])
    cluster.processes["node-2"].alive = False
    cluster.processes["sec-2"].alive = False
    cluster.rounds(SILENCE_S + 0.2)
    cluster.restart_as_spare("node-2")
    cluster.rounds(0.3)
    assert cluster.view("stage-2").secondary == "sec-2"  # still dead: nothing to assign
    cluster.restart_as_spare("sec-2")
    cluster.rounds(0.3)
    view = cluster.view("stage-2")
    assert (view.primary, view.secondary, view.version) == ("node-2", "sec-2", 1)
    assert cluster.processes["sec-2"].stage == "stage-2"
    assert cluster.processes["node-2"].role == "spare"
    events = (cluster.run_dir / "telemetry" / "events-coordinator.jsonl").read_text()
    assert '"rebuild": true' in events


def test_a_secondary_that_does_not_answer_is_not_replaced(tmp_path: Path) -> None:
    # Alive but silent (frozen, or busy taking over): its port still accepts
    # connections; replacing it could make two nodes take over the same stage.
    cluster = _started(tmp_path, spares=["spare-1"])
    cluster.processes["node-2"].alive = False
    cluster.processes["sec-2"].answering = False
    cluster.rounds(2.0)
    assert cluster.coordinator.liveness("sec-2", cluster.now) is Liveness.SILENT
    assert cluster.view("stage-2").secondary == "sec-2"
    assert cluster.processes["spare-1"].role == "spare"


def test_a_restarted_coordinator_rebuilds_its_state_from_the_reports(tmp_path: Path) -> None:
    cluster = _started(tmp_path, spares=["spare-1"])
    # A takeover happened: sec-2 is stage-2's primary at epoch 1.
    promoted = cluster.view("stage-2").promoted("sec-2")
    for node in cluster.processes.values():
        node.views.apply(promoted)
    cluster.processes["sec-2"].role = "primary"
    cluster.processes["node-2"].alive = False
    # A new coordinator, knowing nothing, decides nothing during its warm-up...
    cluster.coordinator = Coordinator(
        cluster.topology,
        {n: f"127.0.0.1:{i}" for i, n in enumerate(cluster.processes, start=1000)},
        EventLog("coordinator", cluster.run_dir),
        cluster.now,
    )
    cluster.round()
    assert cluster.view("stage-2").epoch == 1 and cluster.view("stage-2").secondary is None
    # ...then re-protects the stage from what it heard.
    cluster.rounds(WARMUP_S + 0.2)
    assert (cluster.view("stage-2").primary, cluster.view("stage-2").secondary) == ("sec-2", "spare-1")
    state = cluster.coordinator.cluster_state(cluster.now)
    stage2 = next(s for s in state.stages if s.stage == "stage-2")
    assert (stage2.primary, stage2.secondary, stage2.epoch, stage2.protected) == ("sec-2", "spare-1", 1, True)
    # node-2 died before this coordinator started: it may have been starting...
    assert {n.name: n.liveness for n in state.nodes}["node-2"] == "unknown"
    cluster.rounds(NEVER_REPORTED_GRACE_S)
    state = cluster.coordinator.cluster_state(cluster.now)
    assert {n.name: n.liveness for n in state.nodes}["node-2"] == "down"


def test_nodes_still_starting_are_not_taken_for_dead(tmp_path: Path) -> None:
    """Under load a node may take seconds to listen: its refused port at
    start proves nothing. (A spare once "rebuilt" a healthy stage because
    its replicas were not listening yet when the warm-up ended.)"""
    cluster = FakeCluster(tmp_path, spares=["spare-1"])
    for name in ("node-2", "sec-2"):
        cluster.processes[name].alive = False  # not listening yet
    cluster.rounds(3.0)
    assert cluster.view("stage-2").version == 0
    assert cluster.processes["spare-1"].role == "spare"
    for name in ("node-2", "sec-2"):
        cluster.processes[name].alive = True
    cluster.rounds(1.0)
    assert cluster.view("stage-2").version == 0


def test_a_node_listening_but_never_reporting_is_still_starting(tmp_path: Path) -> None:
    """A container's node may listen long before its first report (it waits
    for its peers; a loaded host): however long, its stage is not
    re-protected. (A deployment's secondary reporting 10.6 s after the
    coordinator started once got a spare as its replacement.)"""
    cluster = FakeCluster(tmp_path, spares=["spare-1"])
    cluster.processes["sec-2"].answering = False  # listening, not reporting
    cluster.rounds(NEVER_REPORTED_GRACE_S + 2)
    state = cluster.coordinator.cluster_state(cluster.now)
    assert {n.name: n.liveness for n in state.nodes}["sec-2"] == "unknown"
    assert cluster.view("stage-2").version == 0
    assert cluster.processes["spare-1"].role == "spare"


def test_a_fenced_old_primary_hears_of_its_replacement_in_the_reply(tmp_path: Path) -> None:
    cluster = _started(tmp_path, spares=[])
    promoted = cluster.view("stage-2").promoted("sec-2")
    cluster.processes["sec-2"].views.apply(promoted)
    cluster.round()  # sec-2 reports the newer view
    cluster.round()  # node-2 (resumed) reports the old one and is answered
    assert cluster.processes["node-2"].views["stage-2"].epoch == 1


def test_a_reported_outage_reaches_the_status_as_one_bounded_line(tmp_path: Path) -> None:
    cluster = _started(tmp_path, spares=["spare-1"])
    garbage = "broker gone\n\x1b[31mred\x00" + "x" * 5000
    status = cluster.processes["node-0"].status()
    status.outage = garbage
    cluster.coordinator.on_report(status, "", cluster.now)
    shown = {n.name: n.outage for n in cluster.coordinator.cluster_state(cluster.now).nodes}
    assert shown["node-0"].startswith("broker gone  [31mred ") and len(shown["node-0"]) == 200
    assert "\n" not in shown["node-0"] and shown["node-1"] == ""
