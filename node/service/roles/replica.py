"""The stage role: one replica of a stage, primary or secondary, and the
HA protocol's I/O around the pure :class:`~semiactive.ha.replica.StageReplica`.

- operator loop: runs the replica whenever rows or time arrive; a full
  output log pauses it, an input backlog pauses the reading of inputs;
- acknowledgements (primary): Level-0 and the Level-1 point on each
  input's data stream, and a notice to the producer's secondary
  (ha-protocol.md "Flows"): every ``ack_interval_ms``, and at once when a
  consumer's acknowledgement arrives (Algorithm 1 lines 14-15);
- failure detection (secondary): heartbeats to the primary; on a missed
  deadline or a broken connection that cannot be re-established, takeover
  (Algorithm 2 lines 12-20): a new view with epoch + 1, broadcast to every
  node; the output queue becomes the log the consumers are fed from; the
  producers, seeing the view, send to us from our position.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from semiactive.ha.detector import FailureDetector, becoming_primary
from semiactive.ha.replica import Mode, StageReplica, capture_now
from semiactive.ha.routing import consumer_batch_sizes
from semiactive.ha.views import StageView, ViewTable
from semiactive.node.service.forked_capture import ForkedCapture, forking_is_safe
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.outbound import Outbound
from semiactive.node.service.peers import Peers
from semiactive.node.service.roles.ack_notices import AckNoticeReceiver
from semiactive.node.service.roles.acks import AckSender
from semiactive.node.service.roles.connection_manager import ConnectionManager
from semiactive.node.service.roles.inbound import InboundEdgeSession
from semiactive.node.service.roles.operator_loop import OperatorLoop
from semiactive.node.service.roles.receiver import ReplicaReceiver
from semiactive.node.service.roles.recovery import RecoveryWatch
from semiactive.node.service.roles.reprotection import ReprotectionWatch
from semiactive.node.service.roles.tasks import RoleTasks
from semiactive.node.service.transport import EdgeSender
from semiactive.runtime import clock
from semiactive.runtime.events import EventLog
from semiactive.runtime.messages import view_to_pb
from semiactive.topology import Stage, Topology
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import dataplane_pb2 as pb

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
        self.assigned = assigned
        self.witness = witness
        self.node = node
        self.stage = stage
        self.topology = topology
        self.views = views
        self.peers = peers
        self.metrics = metrics
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
        )
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
        self.wake = asyncio.Event()  # the operator loop's: something to run
        self.connections = ConnectionManager(stage, self.replica, metrics, events, self._session)
        self.receiver = ReplicaReceiver(
            stage, cfg, self.replica, self.connections, self.outbound, events, self.wake
        )
        self.recovery = RecoveryWatch(stage, self.replica, self.outbound, events)
        self.operator_loop = OperatorLoop(
            stage,
            self.replica,
            self.outbound,
            self.connections,
            events,
            ReprotectionWatch(stage, self.replica, events, assigned_at),
            self.recovery,
            self.wake,
            self.receiver.input_room,
        )
        self.acks = AckSender(
            node, stage, cfg, views, self.replica, self.outbound, peers, self._session, self.tasks.spawn
        )
        self.notices = AckNoticeReceiver(node, stage, views, self.replica)
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
            self.tasks.start_loop("heartbeats", self._watch_primary())

    def stop(self) -> None:
        self.outbound.stop()
        if self.forked_capture is not None:
            self.forked_capture.close()
        self.tasks.cancel()

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
            self.tasks.spawn(self._become_primary(view, reason="migration"))
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

    # -- failure detection and takeover ------------------------------------------------------

    async def _watch_primary(self) -> None:
        cfg = self.topology.config
        detector = FailureDetector(cfg.heartbeat_ms / 1000, cfg.timeout_ms / 1000)
        while self.replica.mode is Mode.SECONDARY:
            primary = self.views[self.stage.name].primary
            if primary == self.node:
                return
            detector.start(clock.monotonic())
            failed = await self._heartbeat(primary, detector)
            if not failed or self.replica.mode is not Mode.SECONDARY:
                continue
            if self.views[self.stage.name].primary != primary:
                continue  # someone else already took over
            await self.takeover(primary, detector.silent_for(clock.monotonic()))
            return

    async def _heartbeat(self, primary: str, detector: FailureDetector) -> bool:
        """Ping ``primary`` until it fails (True) or stops being the primary
        (False)."""
        interval = detector.interval
        call = self.peers.control(primary).Heartbeat()
        seen = detector.last_pong is not None

        async def pongs() -> None:
            with contextlib.suppress(grpc.aio.AioRpcError):
                async for _ in call:
                    detector.on_pong(clock.monotonic())

        reader = asyncio.create_task(pongs())
        n = 0
        try:
            while self.views[self.stage.name].primary == primary and self.replica.mode is Mode.SECONDARY:
                if reader.done():
                    # The stream broke: dead if it cannot be re-established
                    # now, or if the node there is no longer this stage's
                    # primary (restarted empty under its name).
                    never_reached = not (seen or detector.last_pong)
                    return await self._gone(
                        primary,
                        starting=never_reached and not self.assigned,
                        cut_off=never_reached and self.assigned,
                    )
                n += 1
                sent_at = clock.monotonic()
                with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                    await call.write(cpb.Ping(n=n, sender=self.node, stage=self.stage.name))
                self.metrics.heartbeats_sent.labels(self.stage.name).inc()
                deadline = clock.monotonic() + interval
                while clock.monotonic() < deadline:
                    if detector.expired(clock.monotonic()) and detector.last_pong is not None:
                        if await self._confirm(call, detector, n + 1):
                            return True
                        n += 1
                    if reader.done():
                        break
                    await asyncio.sleep(min(0.01, interval / 10))
                if detector.last_pong is None or detector.last_pong < sent_at:
                    self.metrics.heartbeats_missed.labels(self.stage.name).inc()
            return False
        finally:
            reader.cancel()
            call.cancel()

    async def _confirm(self, call: Any, detector: FailureDetector, n: int) -> bool:
        """Suspected: the deadline passed. Before declaring a failure, let
        pongs already received be read (this process may itself have been
        starved) and give one more ping a short grace."""
        await asyncio.sleep(0)
        if not detector.expired(clock.monotonic()):
            return False
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            await call.write(cpb.Ping(n=n, sender=self.node, stage=self.stage.name))
        grace = clock.monotonic() + detector.interval / 2
        while clock.monotonic() < grace:
            await asyncio.sleep(0.005)
            if not detector.expired(clock.monotonic()):
                return False
        return True

    async def _gone(self, primary: str, starting: bool, cut_off: bool = False) -> bool:
        """Whether ``primary`` no longer serves this stage: it does not
        answer (unless it may still be starting), or answers as something
        else.

        ``cut_off``: this replica was assigned to ``primary`` and never
        reached it. Then silence alone is no proof: if the coordinator still
        hears from the primary, it is alive and only cut off from here (a
        partition), and taking over would replace a healthy primary; a
        fenced old primary reassigned as its successor's secondary made the
        stage fail over back and forth for as long as the partition lasted.
        Wait for a pong, or for the witness to lose the primary too.

        A primary that answers as a secondary not yet switched to the view
        naming it (semiactive.ha.detector.becoming_primary) is alive too: wait."""
        try:
            status: cpb.NodeStatus = await self.peers.control(primary).Status(pb.Empty(), timeout=0.2)
        except grpc.aio.AioRpcError:
            if cut_off and self.witness(primary):
                await asyncio.sleep(self.topology.config.heartbeat_ms / 1000)
                return False
            return not starting
        name, epoch = self.stage.name, self.views[self.stage.name].epoch
        held = next((v.primary for v in status.views if v.stage == name), "")
        if becoming_primary(primary, status.role, status.stage, status.epoch, held, name, epoch):
            await asyncio.sleep(self.topology.config.heartbeat_ms / 1000)
            return False
        return status.role != "primary" or status.stage != self.stage.name

    async def takeover(self, old_primary: str, silent_for: float) -> None:
        """Algorithm 2 lines 12-20, with fencing: become the primary at
        epoch + 1 and tell everybody."""
        self.recovery.begin()
        view = self.views[self.stage.name].promoted(self.node)
        self.views.apply(view)
        self.events.emit(
            "failure_detected",
            stage=self.stage.name,
            primary=old_primary,
            silent_ms=round(silent_for * 1000, 1),
        )
        await self._become_primary(view, reason="failure")

    async def _become_primary(self, view: StageView, reason: str) -> None:
        """Serve the stage as ``view``'s primary: after a detected failure, or
        handed the stage by a migration (the view already applied)."""
        if self.replica.mode is not Mode.SECONDARY:
            return
        if reason != "failure":
            self.recovery.begin()
        self.replica.promote()
        self.events.emit(
            "takeover",
            stage=self.stage.name,
            epoch=view.epoch,
            warming_up=self.replica.warming_up,
            reason=reason,
        )
        self.outbound.reconcile()
        # Watch for the recovery target before telling the other nodes: a
        # frozen peer holds its UpdateView until the RPC times out, which
        # must not count as recovery time.
        self.tasks.spawn(self.recovery.await_target())
        await self.broadcast(view)
        self.wake.set()

    async def broadcast(self, view: object) -> None:
        message = view_to_pb(view)  # type: ignore[arg-type]

        async def tell(node: str) -> None:
            with contextlib.suppress(grpc.aio.AioRpcError):
                await self.peers.control(node).UpdateView(message, timeout=1.0)

        await asyncio.gather(*(tell(n) for n in self.peers.addresses if n != self.node))

    def on_notice(self, notice: pb.AckNotice) -> None:
        self.notices.on_notice(notice)

    def bytes_by_edge(self) -> Mapping[tuple[str, str], int]:
        return self.outbound.bytes_sent
