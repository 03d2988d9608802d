"""The stage role: one replica of a stage, primary or secondary, and the
HA protocol's I/O around the pure :class:`~semiactive.ha.replica.StageReplica`.

:class:`ReplicaRole` builds the replica and wires the parts, each doing one
job (node/service/roles/):

- ``receiver``: what the inbound edges bring (rows, resync points,
  pressure), and pausing them while the input backlog is full;
- ``connection_manager``: ASSIGN candidates connected and disconnected;
- ``operator_loop``: runs the replica whenever rows or time arrive;
- ``acks``: a primary's Level-0 and Level-1 upstream, and the notices to
  its producers' secondaries;
- ``ack_notices``: the notices reaching a secondary from its consumers;
- ``heartbeats``: a secondary's failure detection;
- ``takeover``: a secondary becoming the primary;
- ``recovery``, ``reprotection``: telemetry of both;
- ``tasks``: the role's asyncio tasks.

The role itself follows the views: it steps down when replaced (fenced)
and takes over when the coordinator hands it the stage.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from semiactive.ha.replica import Mode, StageReplica, capture_now, columnar_stage_reason
from semiactive.ha.routing import consumer_batch_sizes
from semiactive.ha.views import ViewTable
from semiactive.node.service.forked_capture import ForkedCapture, forking_is_safe
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.outbound import Outbound
from semiactive.node.service.peers import Peers
from semiactive.node.service.roles.ack_notices import AckNoticeReceiver
from semiactive.node.service.roles.acks import AckSender
from semiactive.node.service.roles.connection_manager import ConnectionManager
from semiactive.node.service.roles.heartbeats import HeartbeatMonitor
from semiactive.node.service.roles.inbound import InboundEdgeSession
from semiactive.node.service.roles.operator_loop import OperatorLoop
from semiactive.node.service.roles.receiver import ReplicaReceiver
from semiactive.node.service.roles.recovery import RecoveryWatch
from semiactive.node.service.roles.reprotection import ReprotectionWatch
from semiactive.node.service.roles.takeover import TakeoverDriver
from semiactive.node.service.roles.tasks import RoleTasks
from semiactive.node.service.transport import EdgeSender
from semiactive.runtime import clock
from semiactive.runtime.events import EventLog
from semiactive.topology import Stage, Topology
from semiactive.wire import dataplane_pb2 as pb

log = logging.getLogger(__name__)

# Input rows per operator run (whole instants): a long backlog (a warm-up
# from a cut far back, a catch-up) is processed in runs of a fraction of a
# second, between which the node answers heartbeats and acknowledgements.
# One run over a whole backlog blocks the node for as long as it takes.
RUN_ROWS = 4096


class ReplicaRole:
    def __init__(
        self,
        node: str,
        stage: Stage,
        topology: Topology,
        views: ViewTable,
        peers: Peers,
        metrics: NodeMetrics,
        events: EventLog,
        mode: Mode,
        assigned: bool = False,
        witness: Callable[[str], bool | None] = lambda node: None,
        capture_in_child: bool = False,
    ) -> None:
        """``assigned``: made a secondary by the coordinator in a running
        cluster (not from the configuration at startup), so an unreachable
        primary is not still starting: dead, unless ``witness`` (whether the
        coordinator hears from a node; None: no answer) says it lives."""
        # Re-protection time counts from here, before the replica is built.
        assigned_at = clock.wall() if assigned else None
        cfg = topology.config
        self.node = node
        self.stage = stage
        self.views = views
        self.events = events
        self.forked_capture = ForkedCapture() if capture_in_child and forking_is_safe() else None
        self.replica = StageReplica(
            node,
            stage,
            mode,
            consumer_batch_sizes(topology, stage),
            capacity=cfg.queue_rows,
            run_rows=RUN_ROWS,
            snapshot_rows=cfg.snapshot_rows,
            # partition k of n captures k/n of the period early
            snapshot_phase=cfg.snapshot_rows * stage.partition.index // stage.partition.count
            if stage.partition is not None
            else 0,
            capture=self.forked_capture or capture_now,
            columnar=cfg.columnar_stages,
        )
        if cfg.columnar_stages:
            why = columnar_stage_reason(stage, snapshots=bool(cfg.snapshot_rows))
            log.info("stage %s runs on %s", stage.name, f"rows: {why}" if why else "record blocks")
        self.outbound = Outbound(
            node,
            stage,
            topology,
            peers.addresses,
            self.replica.log,
            views,
            metrics,
            epoch=lambda: self.views[stage.name].epoch,
            on_refused=self._refused,
            on_acknowledged=lambda: self.acks.consumer_acknowledged(),
            network=peers.network,
            events=events,
        )
        # The daemon opens the input edges' sessions once this role exists
        # (self.receiver is their receiver) and sets them here; the parts
        # look them up through _session.
        self.sessions: dict[str, InboundEdgeSession] = {}
        self.tasks = RoleTasks(stage.name, self.outbound.failures)
        wake = asyncio.Event()  # the operator loop's: something to run
        replica = self.replica
        self.connections = ConnectionManager(stage, replica, metrics, events, self._session)
        self.receiver = ReplicaReceiver(stage, cfg, replica, self.connections, self.outbound, events, wake)
        self.recovery = RecoveryWatch(stage, replica, self.outbound, events)
        self.operator_loop = OperatorLoop(
            stage,
            replica,
            self.outbound,
            self.connections,
            events,
            ReprotectionWatch(stage, replica, events, assigned_at),
            self.recovery,
            wake,
            self.receiver.input_room,
        )
        self.acks = AckSender(
            node, stage, cfg, views, replica, self.outbound, peers, self._session, self.tasks.spawn
        )
        self.notices = AckNoticeReceiver(node, stage, views, replica)
        self.takeover = TakeoverDriver(
            node, stage, views, replica, self.outbound, peers, events, self.recovery, self.tasks.spawn, wake
        )
        self.heartbeats = HeartbeatMonitor(
            node, stage, cfg, views, replica, peers, metrics, assigned, witness, self.takeover.take_over
        )
        self.fenced = asyncio.Event()

    @property
    def mode(self) -> Mode:
        return self.replica.mode

    def _session(self, edge: str) -> InboundEdgeSession | None:
        return self.sessions.get(edge)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.tasks.start_loop("operator", self.operator_loop.run())
        self.tasks.start_loop("acks", self.acks.run())
        if self.mode is Mode.PRIMARY:
            self.outbound.reconcile(starting=True)
        else:
            self.tasks.start_loop("heartbeats", self.heartbeats.run())

    def stop(self) -> None:
        self.outbound.stop()
        if self.forked_capture is not None:
            self.forked_capture.close()
        self.tasks.cancel()

    # -- views -------------------------------------------------------------------------------

    def on_view_change(self) -> None:
        """A view changed: follow it (retarget senders; step down if this
        replica was replaced)."""
        view = self.views[self.stage.name]
        role = view.role_of(self.node)
        if role == "none" or (role == "secondary" and self.mode is Mode.PRIMARY):
            self.fence(f"view {view.version}: stage served by {view.primary} at epoch {view.epoch}")
            return
        if role == "primary" and self.mode is Mode.SECONDARY:
            # The coordinator moved the stage here (a migration).
            self.tasks.spawn(self.takeover.become_primary(view, reason="migration"))
            return
        if self.mode is Mode.PRIMARY:
            self.outbound.reconcile()

    def fence(self, reason: str) -> None:
        if self.replica.mode is Mode.FENCED:
            return
        self.replica.fence()
        self.outbound.stop()
        self.events.emit("fenced", stage=self.stage.name, reason=reason)
        self.fenced.set()

    def _refused(self, sender: EdgeSender, details: str) -> None:
        """A consumer refused our epoch: we were replaced."""
        self.fence(f"refused by {sender.target}: {details}")

    # -- for the daemon ----------------------------------------------------------------------

    def on_notice(self, notice: pb.AckNotice) -> None:
        self.notices.on_notice(notice)

    def bytes_by_edge(self) -> Mapping[tuple[str, str], int]:
        return self.outbound.bytes_sent
