"""The coordinator's re-protection (coordinator/control.py) against an
in-memory cluster whose nodes answer Status and apply views as the daemons
do (node/daemon.py: a spare named secondary in a newer view becomes it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator.control import Coordinator
from ha.routing import initial_views
from ha.views import StageView, ViewTable
from node.messages import view_from_pb, view_to_pb
from semiactive import config, topology
from semiactive.wire import control_pb2 as cpb
from tests.faults.harness import AGGREGATE, protected_chain


@dataclass
class FakeNode:
    name: str
    role: str
    stage: str
    views: ViewTable
    alive: bool = True
    answering: bool = True
    popen: Any = None
    told: list[StageView] = field(default_factory=list)

    async def UpdateView(self, message: cpb.StageView, timeout: float) -> None:
        view = view_from_pb(message)
        self.told.append(view)
        if self.views.apply(view) and self.role == "spare" and view.secondary == self.name:
            self.role, self.stage = "secondary", view.stage


class FakeCluster:
    def __init__(self, tmp: Path, spares: list[str]) -> None:
        self.run_dir = tmp / "run"
        (self.run_dir / "telemetry").mkdir(parents=True)
        self.topology = topology.resolve(config.load(str(protected_chain(tmp, AGGREGATE, spares=spares))))
        self.processes: dict[str, FakeNode] = {}
        for name, info in self.topology.nodes.items():
            self.processes[name] = FakeNode(name, info.role, info.stage or "", initial_views(self.topology))

    def control(self, name: str) -> FakeNode:
        return self.processes[name]

    async def status(self, name: str, timeout: float) -> cpb.NodeStatus | None:
        node = self.processes[name]
        if not node.answering:
            return None
        status = cpb.NodeStatus(name=name, role=node.role, stage=node.stage)
        status.views.extend(view_to_pb(v) for v in node.views)
        return status

    def restart_as_spare(self, name: str) -> None:
        """A replacement machine: same name, no state, the config's views."""
        self.processes[name] = FakeNode(name, "spare", "", initial_views(self.topology))


async def _started(tmp: Path, spares: list[str]) -> tuple[FakeCluster, Coordinator]:
    """A cluster as configured, and a coordinator that has seen it once."""
    cluster = FakeCluster(tmp, spares)
    coordinator = Coordinator(cluster)  # type: ignore[arg-type]
    await coordinator.step()
    return cluster, coordinator


async def test_a_secondary_restarted_under_its_name_is_made_the_stages_secondary_again(
    tmp_path: Path,
) -> None:
    # No standing spare: sec-2 dies and comes back empty under its name. Its
    # stage's view (never changed) still names it, so the restarted node
    # holds that very view and would not act on it: the coordinator must
    # give the stage a secondary with a new version.
    cluster, coordinator = await _started(tmp_path, spares=[])
    assert all(not n.told for n in cluster.processes.values())

    cluster.processes["sec-2"].alive = False
    await coordinator.step()
    cluster.restart_as_spare("sec-2")
    await coordinator.step()

    node = cluster.processes["sec-2"]
    assert (node.role, node.stage) == ("secondary", "stage-2")
    assert coordinator.views["stage-2"].secondary == "sec-2"
    assert coordinator.views["stage-2"].version == 1
    assert cluster.processes["node-2"].views["stage-2"].version == 1


async def test_a_spare_goes_to_one_unprotected_stage_only(tmp_path: Path) -> None:
    cluster, coordinator = await _started(tmp_path, spares=["spare-1"])
    cluster.processes["sec-1"].alive = False
    cluster.processes["sec-3"].alive = False
    await coordinator.step()
    secondaries = {s: coordinator.views[s].secondary for s in ("stage-1", "stage-2", "stage-3")}
    assert secondaries == {"stage-1": "spare-1", "stage-2": "sec-2", "stage-3": "sec-3"}
    assert cluster.processes["spare-1"].stage == "stage-1"


async def test_a_stage_that_lost_both_replicas_gets_a_spare_that_rebuilds_it(tmp_path: Path) -> None:
    # No standing spare: node-2 and sec-2 die together and come back empty
    # under their names. sec-2 may be given the stage (it will find node-2
    # gone and take over); node-2, the name the view gives the primary,
    # must not: it would watch itself.
    cluster, coordinator = await _started(tmp_path, spares=[])
    cluster.processes["node-2"].alive = False
    cluster.processes["sec-2"].alive = False
    await coordinator.step()
    cluster.restart_as_spare("node-2")
    await coordinator.step()
    assert coordinator.views["stage-2"].secondary == "sec-2"  # still dead: nothing to assign
    cluster.restart_as_spare("sec-2")
    await coordinator.step()
    assert (coordinator.views["stage-2"].primary, coordinator.views["stage-2"].secondary) == (
        "node-2",
        "sec-2",
    )
    assert coordinator.views["stage-2"].version == 1
    assert cluster.processes["sec-2"].stage == "stage-2"
    assert cluster.processes["node-2"].role == "spare"
    events = (cluster.run_dir / "telemetry" / "events-coordinator.jsonl").read_text()
    assert '"rebuild": true' in events


async def test_a_secondary_that_does_not_answer_is_not_replaced(tmp_path: Path) -> None:
    # Alive but silent (frozen, or busy taking over): replacing it could
    # make two nodes take over the same stage.
    cluster, coordinator = await _started(tmp_path, spares=["spare-1"])
    cluster.processes["node-2"].alive = False
    cluster.processes["sec-2"].answering = False
    await coordinator.step()
    assert coordinator.views["stage-2"].secondary == "sec-2"
    assert cluster.processes["spare-1"].role == "spare"
