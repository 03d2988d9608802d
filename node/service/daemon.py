"""The node daemon: one process serving one role of the topology.

It owns the gRPC server (data plane, control plane, ingest) and the views
(who serves which stage). Its role is what the views say: the source or
sink it was configured as, or a replica of a stage, primary or secondary,
or a spare waiting to be assigned. A replaced primary is fenced and becomes
a spare; a spare named secondary of a stage becomes that stage's replica and
bootstraps from its producers' retained logs.

A startup problem (port taken, unknown node) raises :class:`StartupError`;
a peer never reached raises :class:`~semiactive.node.service.transport.PeerUnreachable`; both
end the process with a one-line message and a non-zero exit code.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

import grpc

from semiactive.errors import UserError
from semiactive.ha.output_log import UNBOUNDED, OutputLog
from semiactive.ha.replica import Mode
from semiactive.ha.routing import consumer_batch_sizes, initial_views, producer_secondary
from semiactive.node.connectors.event_time_merge import MergeCheckpoint
from semiactive.node.connectors.postgres import PostgresTable, run_name
from semiactive.node.sections.codec import RowCodec
from semiactive.node.sections.input import EdgeInput, InputSection
from semiactive.node.service.coordinator_link import CoordinatorLink
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.outbound import Outbound
from semiactive.node.service.peers import Peers
from semiactive.node.service.roles.acks import unacked_rows
from semiactive.node.service.roles.inbound import InboundEdgeSession, Receiver
from semiactive.node.service.roles.replica import ReplicaRole
from semiactive.node.service.roles.serving_lock import ServingLock
from semiactive.node.service.roles.sink import DurableOutput, SinkRole
from semiactive.node.service.roles.source import SourceRole, open_reader
from semiactive.node.service.roles.source_progress import SourceProgress
from semiactive.node.service.roles.standby import StandbyRole
from semiactive.node.service.roles.takeover import announce_view
from semiactive.node.service.servicers import ControlServicer, IngestServicer
from semiactive.node.service.transport import DataPlaneServer, Rejected
from semiactive.runtime import authorization, clock, telemetry
from semiactive.runtime.atomic_file import write_json
from semiactive.runtime.events import EventLog
from semiactive.runtime.health import Health
from semiactive.runtime.messages import point_to_pb, view_from_pb, view_to_pb
from semiactive.runtime.network import Network, insecure
from semiactive.topology import NodeRole, Stage, Topology
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import control_pb2_grpc as cpb_grpc
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)


DRAIN_LIMIT_S = 10.0
REPORT_INTERVAL_S = 0.1  # to the coordinator
MAX_BATCH_SIZE = 2**31 - 1
RECOVERY_WAIT_S = 10.0  # a standby that took over: until its peers are connected


class StartupError(RuntimeError):
    pass


def tuning_intervals(topology: Topology) -> dict[str, float]:
    """Per stage that is A-SAS or feeds one: the shortest tuning interval, s."""
    out: dict[str, float] = {}
    for stage in topology.stages.values():
        if stage.config is None or stage.config.ha.mode != "asas":
            continue
        interval = stage.config.ha.interval_ms / 1000
        for name in (stage.name, *(e.producer for e in stage.inputs)):
            out[name] = min(out.get(name, REPORT_INTERVAL_S), interval)
    return out


class NodeDaemon:
    def __init__(
        self,
        topology: Topology,
        name: str,
        addresses: Mapping[str, str],
        *,
        metrics_port: int | None = None,
        run_dir: Path | None = None,
        start_now: bool = False,
        spare: bool = False,
        resume: bool = False,
        coordinator: str | None = None,
        network: Network | None = None,
        capture_in_child: bool = True,
    ) -> None:
        """``capture_in_child``: take operator state snapshots in a forked
        child (node/service/forked_capture.py), not on the event loop; the in-memory
        simulation, whose processes share one loop, turns it off.
        ``resume``: a file or generator source started again goes on from
        the progress its predecessor left in ``run_dir`` (without it, a
        source starts from its first row: a run directory kept from an
        earlier deployment must not skip rows); a durable sink started
        without it in a run directory refuses a table or subject that
        already holds rows of the run's name."""
        if name not in topology.nodes:
            raise StartupError(
                f"no node named {name!r} in {topology.path}; nodes: {', '.join(topology.nodes)}"
            )
        self.topology = topology
        self.name = name
        role = NodeRole.SPARE if spare else topology.nodes[name].role
        self.addresses = dict(addresses)
        self.listen = self.addresses[name]
        self.metrics_port = metrics_port
        self.run_dir = run_dir
        self.resume = resume
        self.outage = ""  # a durable sink's database or server away: why
        self.start_now = start_now
        self.coordinator = coordinator
        self.capture_in_child = capture_in_child
        self.started_at = clock.monotonic()
        self.since = clock.wall()  # names this incarnation's series of counters
        self._tuning_intervals = tuning_intervals(topology)
        self.exit = asyncio.Event()
        self.drain_then_exit = False
        self.drain_deadline = 0.0
        self.views = initial_views(topology)
        self.network = network or insecure(name)
        self.peers = Peers(self.addresses, self.network)
        self.events = EventLog(name, run_dir)
        stage = None if spare else topology.stage_of(name)
        self.stage: Stage | None = stage
        self.metrics = NodeMetrics(name, stage.name if stage else "", role)
        # One snapshot (status()) feeds the coordinator, the telemetry
        # samples and the Prometheus scrape; events feed the histograms.
        self.metrics.follow(self.status)
        self.events.observers.append(self.metrics.observe_event)
        self.sessions: dict[str, InboundEdgeSession] = {}
        self._sink_acks_due = asyncio.Event()
        # What this node serves; its class is its role (None: a spare).
        self.serving: SourceRole | SinkRole | ReplicaRole | StandbyRole | None = None
        self.link: CoordinatorLink | None = None
        self._group: asyncio.TaskGroup | None = None  # the node's loops (serve())
        self._served: list[asyncio.Task[None]] = []  # a standby's loops once it serves: ended at exit
        if role in (NodeRole.SOURCE, NodeRole.SINK) and stage is not None and stage.secondary is not None:
            if run_dir is None:
                raise StartupError(
                    f"{stage.role} {stage.name} has a standby (ha: secondary): its two processes share "
                    "a run directory (the serving lock, the progress): give --run-dir"
                )
            self.serving = StandbyRole(name, stage, ServingLock(run_dir, stage.name), resume)
        elif role is NodeRole.SOURCE:
            assert stage is not None
            self._become_source(stage, resume)
        elif role in (NodeRole.PRIMARY, NodeRole.SECONDARY):
            assert stage is not None
            self._become_replica(stage, Mode.PRIMARY if role is NodeRole.PRIMARY else Mode.SECONDARY)
        elif role is NodeRole.SINK:
            assert stage is not None
            self._become_sink(stage)

    def _become_source(self, stage: Stage, resume: bool) -> SourceRole:
        """Serve ``stage``'s source; ``resume``: from the progress its last
        incarnation left. Its files are named after the stage (which both
        members of a protected source share), its messages after the node."""
        assert stage.source is not None and stage.schema is not None
        run_dir, name = self.run_dir, stage.name
        progress = None
        if run_dir is not None and stage.source.restartable:
            progress = SourceProgress(run_dir, name)
        freed = progress.load() if progress is not None and resume else None
        checkpoint = None
        if freed and stage.source.kind in ("kafka", "nats"):
            assert progress is not None
            try:
                checkpoint = MergeCheckpoint.from_json(progress.checkpoint)
            except (ValueError, KeyError, TypeError, AttributeError):
                raise StartupError(
                    f"source {name}: {progress.path} has no readable checkpoint: remove it to read "
                    "the topic again from the group's committed offsets (the rows will be numbered anew)"
                ) from None
            freed = checkpoint.seq
        out = OutputLog(self.topology.config.queue_rows, first_seq=(freed or 0) + 1)
        for edge_id, size in consumer_batch_sizes(self.topology, stage).items():
            out.add_edge(edge_id, size)
        views = self.views
        outbound = Outbound(
            self.name,
            stage,
            self.topology,
            self.addresses,
            out,
            views,
            self.metrics,
            # Changes only when a protected source's standby takes over.
            epoch=lambda: views[name].epoch,
            on_refused=lambda sender, details: None,
            network=self.network,
            events=self.events,
        )
        metrics = self.metrics
        source = SourceRole(
            name,
            stage.source,
            stage.schema,
            out,
            outbound,
            run_dir,
            progress,
            checkpoint,
            on_rejected=lambda reason: metrics.source_rejected.labels(name, reason).inc(),
            on_outage=lambda error: self.events.emit(
                "source_unavailable" if error else "source_available", source=name, error=error
            ),
        )
        if progress is not None and freed is not None and progress.t0 is not None:
            # On the run's schedule at once: a supervisor other than the
            # launcher does not send Start again (the launcher's is the same t0).
            source.start(progress.t0)
        self.serving = source
        return source

    def _become_sink(self, stage: Stage, prepared: DurableOutput | None = None) -> SinkRole:
        """Serve ``stage``'s sink (named after the stage, as its files are).
        ``prepared``: its output connected beforehand (a standby's)."""
        assert stage.sink is not None
        sink = SinkRole(
            stage.name,
            InputSection(
                [EdgeInput(e.id, e.stream, e.index, RowCodec(e.schema, e.kind)) for e in stage.inputs]
            ),
            self.metrics,
            self.run_dir,
            stage.sink.split_by,
            prepared if prepared is not None else self._sink_output(stage, self.run_dir),
        )
        self.serving = sink
        self._open_inputs(stage, sink, self._sink_acks_due.set)
        return sink

    def _sink_output(self, stage: Stage, run_dir: Path | None) -> DurableOutput | None:
        """Where a durable sink writes; None for a file sink."""
        sink = stage.sink
        if sink is None or not sink.durable:
            return None
        edge = stage.inputs[0]
        run = run_name(run_dir, self.topology.config.name)

        def outage(error: str | None) -> None:
            self.outage = error or ""
            self.events.emit("sink_unavailable" if error else "sink_available", sink=self.name, error=error)

        try:
            if sink.postgres is not None:
                return PostgresTable(sink.postgres, run, edge.schema, edge.kind, on_outage=outage)
            # Imported here: only a NATS or Kafka sink's process pays for its client.
            if sink.kafka is not None:
                from semiactive.node.connectors.kafka_sink import KafkaTopic

                return KafkaTopic(sink.kafka, run, edge.schema, edge.kind, on_outage=outage)
            assert sink.nats is not None
            from semiactive.node.connectors.nats import NatsSubject

            return NatsSubject(sink.nats, run, edge.schema, edge.kind, on_outage=outage)
        except UserError as exc:
            raise StartupError(str(exc)) from None

    async def _serve_when_holding(self, standby: StandbyRole) -> None:
        """A protected source's or sink's member: wait for the serving lock,
        then serve (at the next epoch, announced, after a dead holder)."""
        stage = standby.stage
        # Connected before it waits: a takeover then tells the others, reads
        # and writes at once (measured: 50-100 ms of handshakes otherwise).
        # Outside the node's task group, which would wait at exit for a peer
        # that never comes up; ended here, at the take or the exit.
        connecting = asyncio.create_task(self.peers.connect(skip=self.name), name="connect peers")
        try:
            prepared = None
            output = None
            if stage.source is not None:
                try:
                    prepared = await open_reader(stage.source, stage.name)
                except UserError as exc:
                    raise StartupError(f"source {stage.name}: {exc}") from None
            else:
                output = self._sink_output(stage, self.run_dir)
                if output is not None:
                    await output.prepare()
            await standby.until_primary_served(self._status_of)
            view = await standby.take(self.views)
        finally:
            connecting.cancel()
        detected_at = clock.wall()
        if view is not None:
            self.views.apply(view)
            self.events.emit(
                "failure_detected",
                stage=stage.name,
                primary=standby.other,
                # At most this long between the holder's death and the take.
                silent_ms=round(standby.unnoticed_s * 1000, 1),
                by="serving_lock",
            )
        resume = self.resume or view is not None
        role: SourceRole | SinkRole
        try:
            if stage.role == "source":
                role = self._become_source(stage, resume)
                await role.open(prepared)
            else:
                role = self._become_sink(stage, output)
                await role.open(fresh=not resume)
        except UserError as exc:
            raise StartupError(f"{stage.role} {stage.name}: {exc}") from None
        epoch = self.views[stage.name].epoch
        log.info("%s serves %s %s (epoch %d)", self.name, stage.role, stage.name, epoch)
        assert self._group is not None
        for name, loop in self._role_loops():
            self._served.append(self._group.create_task(loop, name=name))
        if isinstance(role, SourceRole):
            if standby.t0 is not None:
                role.start(standby.t0)
            if standby.stopped:
                role.stop()
        if view is not None:
            self.events.emit("takeover", stage=stage.name, epoch=view.epoch, reason="standby")
            # Not awaited: a frozen peer holds its UpdateView for a second;
            # peers that have not heard yet refuse the rows as lagging and
            # are sent them again.
            announce = announce_view(self.peers, self.name, view)
            self._served.append(self._group.create_task(announce, name="announce"))
            recovery = self._report_recovery(stage, detected_at)
            self._served.append(self._group.create_task(recovery, name="recovery"))

    async def _status_of(self, node: str) -> cpb.NodeStatus | None:
        try:
            status: cpb.NodeStatus = await self.peers.control(node).Status(pb.Empty(), timeout=0.5)
        except grpc.aio.AioRpcError:
            return None
        return status

    async def _report_recovery(self, stage: Stage, detected_at: float) -> None:
        """A standby that took over has recovered once its peers are
        connected: a source's consumers have told it where they are, a
        sink's producer streams to it."""
        deadline = clock.monotonic() + RECOVERY_WAIT_S
        while clock.monotonic() < deadline:
            if self.source is not None:
                done = len(self.source.outbound.consumer_positions()) >= len(stage.outputs)
            else:
                done = all(session.streams for session in self.sessions.values())
            if done:
                self.events.emit(
                    "recovered", stage=stage.name, recovery_ms=round((clock.wall() - detected_at) * 1000, 1)
                )
                return
            await asyncio.sleep(0.002)

    # -- roles -------------------------------------------------------------------------------

    @property
    def role(self) -> str:
        """source, sink, spare, or what its replica is now: primary,
        secondary or fenced (a secondary that took over is a primary)."""
        match self.serving:
            case SourceRole():
                return NodeRole.SOURCE.value
            case SinkRole():
                return NodeRole.SINK.value
            case StandbyRole():
                return "standby"
            case ReplicaRole(mode=mode):
                return mode.value
            case None:
                return NodeRole.SPARE.value

    @property
    def sends_nothing(self) -> bool:
        """A spare or a secondary: no consumer waits for it, so it may exit
        without draining."""
        if isinstance(self.serving, StandbyRole):
            return True
        return self.serving is None or (self.replica is not None and self.replica.mode is Mode.SECONDARY)

    @property
    def source(self) -> SourceRole | None:
        return self.serving if isinstance(self.serving, SourceRole) else None

    @property
    def sink(self) -> SinkRole | None:
        return self.serving if isinstance(self.serving, SinkRole) else None

    @property
    def replica(self) -> ReplicaRole | None:
        return self.serving if isinstance(self.serving, ReplicaRole) else None

    def _open_inputs(self, stage: Stage, receiver: Receiver, on_unacked: Callable[[], None]) -> None:
        limit = unacked_rows(self.topology.config)
        self.sessions = {
            e.id: InboundEdgeSession(e, self.views, receiver, self.metrics, self._rewind, on_unacked, limit)
            for e in stage.inputs
        }

    def _become_replica(self, stage: Stage, mode: Mode, assigned: bool = False) -> ReplicaRole:
        role = ReplicaRole(
            self.name,
            stage,
            self.topology,
            self.views,
            self.peers,
            self.metrics,
            self.events,
            mode,
            assigned=assigned,
            witness=self.coordinator_hears,
            capture_in_child=self.capture_in_child,
        )
        self.serving = role
        self.stage = stage
        self._open_inputs(stage, role.receiver, role.acks.ack_soon)
        role.sessions = self.sessions
        return role

    def coordinator_hears(self, node: str) -> bool | None:
        """Whether the coordinator heard from ``node`` lately (None: no
        coordinator answers this node)."""
        if self.link is None or self.link.alive is None:
            return None
        return node in self.link.alive

    def _rewind(self, edges: set[str]) -> None:
        for edge in edges:
            session = self.sessions.get(edge)
            if session is not None:
                session.rewind()

    def apply_view(self, message: cpb.StageView) -> bool:
        view = view_from_pb(message)
        if not self.views.apply(view):
            return False
        for session in self.sessions.values():
            session.fence_stale()
        if self.source is not None:
            self.source.outbound.reconcile()
        if self.replica is not None:
            self.replica.on_view_change()
            if self.replica.mode is Mode.FENCED:
                self._become_spare()
        if self.serving is None and view.secondary == self.name:
            stage = self.topology.stages[view.stage]
            self.events.emit("assigned", stage=stage.name, role="secondary", version=view.version)
            self._become_replica(stage, Mode.SECONDARY, assigned=True).start()
        return True

    def _become_spare(self) -> None:
        assert self.replica is not None
        self.replica.stop()
        for session in self.sessions.values():
            for stream in list(session.streams):
                stream.close(grpc.StatusCode.UNAVAILABLE, f"{self.name} no longer serves this edge")
        self.serving = None
        self.sessions = {}
        self.stage = None

    # -- data plane ---------------------------------------------------------------------------

    def accept(self, hello: pb.Hello, caller: str | None) -> InboundEdgeSession:
        session = self.sessions.get(hello.edge)
        if session is None:
            known = any(hello.edge == e.id for e in self.topology.edges)
            code = grpc.StatusCode.UNAVAILABLE if known else grpc.StatusCode.INVALID_ARGUMENT
            raise Rejected(code, f"{self.name} has no input edge {hello.edge!r} ({self.role})")
        producer = session.edge.producer
        refusal = authorization.may_send_as(caller, self.views, hello.sender, producer, hello.epoch)
        if refusal is not None:
            # A replica this node has not heard of yet may be one the views
            # will name in a moment: it retries. A forged name never passes.
            lagging = hello.sender == caller and hello.epoch <= self.views[producer].epoch + 1
            self.record_refusal("push", caller, refusal)
            code = grpc.StatusCode.UNAVAILABLE if lagging else grpc.StatusCode.PERMISSION_DENIED
            raise Rejected(code, refusal)
        session.check(hello)
        return session

    def record_refusal(self, what: str, caller: str | None, reason: str) -> None:
        """A request refused for its caller: log line, metric, event."""
        log.warning("%s: refused %s: %s", self.name, what, reason)
        self.metrics.requests_refused.labels(what).inc()
        self.events.emit("refused", request=what, caller=caller, reason=reason)

    async def on_ack(self, notice: pb.AckNotice, caller: str | None) -> None:
        consumer = notice.edge.split("->", 1)[1] if "->" in notice.edge else ""
        refusal = authorization.may_acknowledge(caller, self.views, notice.sender, consumer)
        if refusal is not None:
            self.record_refusal("ack", caller, refusal)
            raise Rejected(grpc.StatusCode.PERMISSION_DENIED, refusal)
        if self.replica is not None:
            self.replica.on_notice(notice)

    async def _sink_acks(self) -> None:
        assert self.sink is not None and self.stage is not None
        interval = self.topology.config.ack_interval_ms / 1000
        due = self._sink_acks_due
        while True:
            # Every interval, or once an input edge has many rows unacknowledged.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(due.wait(), interval)
            due.clear()
            point = point_to_pb(self.sink.level1())
            # Changes only when a protected sink's standby takes over.
            epoch = self.views[self.stage.name].epoch
            for edge in self.stage.inputs:
                seq = self.sink.inputs.by_name[edge.id].last_seq
                self.sessions[edge.id].ack(seq, point, epoch)
                secondary = producer_secondary(self.views, edge)
                if secondary is not None:
                    notice = pb.AckNotice(edge=edge.id, sender=self.name, epoch=epoch, seq=seq, point=point)
                    with contextlib.suppress(grpc.aio.AioRpcError):
                        await self.peers.data(secondary).Ack(notice, timeout=1.0)

    # -- control plane --------------------------------------------------------------------------

    def status(self) -> cpb.NodeStatus:
        st = cpb.NodeStatus(
            name=self.name,
            role=self.role,
            stage=self.stage.name if self.stage else "",
            finished=self.finished,
            uptime_s=clock.monotonic() - self.started_at,
            state=self.role,
            outage=self.outage,
        )
        st.views.extend(view_to_pb(v) for v in self.views)
        if self.stage is not None:
            st.epoch = self.views[self.stage.name].epoch
        for session in self.sessions.values():
            receiver = session.receiver
            edge_id = session.edge.id
            seq = receiver.next_seq(edge_id) - 1
            status = st.inputs.add(
                edge=edge_id, seq=seq, received_rows=session.received_rows, receive_s=session.receive_s
            )
            if receiver.manages(edge_id):
                status.connected = receiver.idle_from(edge_id) is None
            st.tuples_in += seq
        out: OutputLog | None = None
        if self.replica is not None:
            out = self.replica.replica.log
            st.resyncs = self.replica.replica.resyncs
            if self.replica.replica.warming_up:
                st.state = "warming-up"
        elif self.source is not None:
            out = self.source.log
            st.outage = self.source.outage or ""
            st.rejected = sum(self.source.rejected.values())
        if out is not None:
            outbound = self._outbound()
            sent = outbound.rows_sent if outbound is not None else {}
            sent_bytes = outbound.bytes_sent if outbound is not None else {}
            for edge, cursors in out.edges.items():
                st.outputs.add(
                    edge=edge,
                    seq=out.head,
                    acked=cursors.acked,
                    watermark=out.watermark,
                    end_of_stream=out.end_of_stream,
                    retained=out.retained,
                    batch_size=cursors.batch_size if cursors.batch_size < UNBOUNDED else 0,
                    backup_batches=cursors.batches,
                    backup_rows=cursors.shipped,
                    backup_bytes=sent_bytes.get((edge, "backup"), 0),
                    data_rows=sent.get((edge, "data"), 0),
                    data_bytes=sent_bytes.get((edge, "data"), 0),
                    cuts=cursors.cuts,
                    uncut_rows=cursors.uncut_rows,
                )
            st.tuples_out = out.head
        if self.replica is not None:
            operator = self.replica.replica.operator
            st.operator_rows, st.operator_busy_s = operator.rows_in, operator.busy_s
            st.input_backlog = self.replica.replica.inputs.backlog
        if self.sink is not None:
            st.latency_rows, st.latency_sum_s = self.sink.latency_rows, self.sink.latency_sum_s
        return st

    def _outbound(self) -> Outbound | None:
        match self.serving:
            case SourceRole(outbound=outbound) | ReplicaRole(outbound=outbound):
                return outbound
            case _:
                return None

    def apply_batch_sizes(self, sizes: Mapping[str, int]) -> None:
        """A-SAS: the coordinator's B for output edges of this node."""
        outbound = self._outbound()
        if outbound is None:
            return
        changed = False
        for edge, size in sizes.items():
            cursors = outbound.log.edges.get(edge)
            if cursors is None or not 1 <= size <= MAX_BATCH_SIZE:
                continue
            if cursors.batch_size != size:
                cursors.batch_size = size
                changed = True
        if changed:
            outbound.appended()  # a smaller B may make a batch due now

    @property
    def finished(self) -> bool:
        if self.sink is not None:
            return self.sink.finished
        if self.source is not None:
            return self.source.outbound.done
        if self.replica is not None and self.replica.mode is Mode.PRIMARY:
            return self.replica.outbound.done
        return False

    def start(self, t0: float) -> None:
        if self.source is not None:
            self.source.start(t0)
        if isinstance(self.serving, StandbyRole):
            self.serving.t0 = t0

    def stop(self, exit_: bool, now: bool) -> None:
        if self.source is not None:
            self.source.stop()
        if isinstance(self.serving, StandbyRole):
            self.serving.stopped = True
        if now:
            self.exit.set()
        elif exit_:
            # Exit once drained, or after DRAIN_LIMIT_S if a consumer never
            # acknowledges the end (it may be gone).
            self.drain_then_exit = True
            self.drain_deadline = clock.monotonic() + DRAIN_LIMIT_S
            if self.sends_nothing or (self.finished and self.sink is None):
                self.exit.set()

    # -- lifecycle -------------------------------------------------------------------------------

    async def serve(self) -> int:
        server = self.network.server()
        pb_grpc.add_DataPlaneServicer_to_server(DataPlaneServer(self.accept, self.on_ack), server)
        cpb_grpc.add_ControlServicer_to_server(ControlServicer(self), server)
        health = Health(server)
        if self.source is not None and self.source.config.kind in ("ingest", "registry"):
            pb_grpc.add_IngestServicer_to_server(IngestServicer(self.source), server)
        if self.source is not None:
            try:
                await self.source.open()
            except UserError as exc:  # its broker unreachable, no such topic
                raise StartupError(f"source {self.name}: {exc}") from None
        if self.sink is not None:
            try:
                await self.sink.open(fresh=not self.resume and self.run_dir is not None)
            except UserError as exc:  # its database or server unreachable, a stream that refuses it
                raise StartupError(f"sink {self.name}: {exc}") from None
        if not self.network.listen(server, self.listen):
            raise StartupError(f"cannot listen on {self.listen} (is the port in use?)")
        await server.start()
        if self.metrics_port:
            try:
                await self.metrics.serve(self.metrics_port, self.listen.rsplit(":", 1)[0])
            except OSError as exc:
                await server.stop(0)
                raise StartupError(
                    f"cannot serve metrics on port {self.metrics_port}: {exc.strerror}"
                ) from None
        log.info("%s (%s) listening on %s", self.name, self.role, self.listen)
        if self.coordinator:
            self.link = CoordinatorLink(
                self.coordinator,
                self.listen,
                self.status,
                self.apply_view,
                self.report_interval,
                self.apply_batch_sizes,
                self.network,
            )
        code = 0
        startup_error: BaseException | None = None
        try:
            # Structured: the node's loops live in one task group; one that
            # fails ends the node (exit 1), and leaving ends them all.
            async with asyncio.TaskGroup() as group:
                self._group = group
                loops = [group.create_task(loop, name=name) for name, loop in self._loops()]
                if self.replica is not None:
                    self.replica.start()
                if self.start_now:
                    self.start(clock.wall())
                code = await self._until_exit()
                for task in [*loops, *self._served]:
                    task.cancel()
        except* StartupError as failed:
            # A standby's source or sink that cannot open when it takes the
            # lock: the same one-line error and status as at start-up.
            startup_error = failed.exceptions[0]
        except* Exception as failed:
            for error in failed.exceptions:
                log.error("%s: %s", self.name, error)
            code = 1
        finally:
            if self.replica is not None:
                self.replica.stop()
            if self.source is not None:
                self.source.outbound.stop()
            if self.sink is not None:
                await self.sink.aclose()
            self._write_summary()
            if self.topology.config.telemetry_interval_ms:
                self._sample()  # the final counts
            self.events.close()
            await health.shutting_down()
            await self.peers.close()
            self.metrics.close()
            await server.stop(0.5)
        if startup_error is not None:
            raise startup_error
        if self.source is not None and self.source.error:
            code = 1
        return code

    def _loops(self) -> list[tuple[str, Coroutine[Any, Any, None]]]:
        """What runs for as long as the node does, by role."""
        loops: list[tuple[str, Coroutine[Any, Any, None]]] = [("watch", self._watch())]
        loops += self._role_loops()
        if isinstance(self.serving, StandbyRole):
            loops.append(("standby", self._serve_when_holding(self.serving)))
        if self.link is not None:
            loops.append(("coordinator", self.link.run()))
        return loops

    def _role_loops(self) -> list[tuple[str, Coroutine[Any, Any, None]]]:
        """A source's or a sink's own loops (a standby's once it serves)."""
        loops: list[tuple[str, Coroutine[Any, Any, None]]] = []
        if self.source is not None:
            self.source.outbound.reconcile(starting=True)
            loops.append(("source", self.source.run()))
        if self.sink is not None:
            loops.append(("acks", self._sink_acks()))
        return loops

    async def _until_exit(self) -> int:
        """0 when asked to exit; 1 when a peer was never reached (the
        sender's :class:`~semiactive.node.service.transport.PeerUnreachable`) or a task of the
        role failed (``Outbound.failures``)."""
        exit_waiter = asyncio.ensure_future(self.exit.wait())
        try:
            while not exit_waiter.done():
                outbound = self._outbound()
                getter = asyncio.ensure_future(outbound.failures.get()) if outbound is not None else None
                waits = [exit_waiter] if getter is None else [exit_waiter, getter]
                # Re-checked every second: the outbound changes with the role.
                await asyncio.wait(waits, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
                if getter is not None and getter.done():
                    log.error("%s: %s", self.name, getter.result())
                    return 1
                if getter is not None:
                    getter.cancel()
            return 0
        finally:
            exit_waiter.cancel()

    async def _watch(self) -> None:
        """Report finishing once; sample telemetry; exit when asked to
        once drained."""
        finished_at: float | None = None
        last_summary = last_sample = clock.monotonic()
        sample_every = self.topology.config.telemetry_interval_ms / 1000
        # A sink acknowledges every ack interval: it lingers for two after
        # its end of stream, so that its producer hears that everything
        # arrived and finishes too (it would wait out the drain limit).
        linger = 2 * self.topology.config.ack_interval_ms / 1000 if self.sink is not None else 0.0
        while True:
            await asyncio.sleep(0.05)
            now = clock.monotonic()
            if now - last_summary > 0.5:
                last_summary = now
                self._write_summary()  # a killed node leaves its last counts
            if sample_every and now - last_sample >= sample_every:
                last_sample = now
                self._sample()
            if self.finished and finished_at is None:
                finished_at = now
                log.info("%s finished: end of stream delivered", self.name)
                self._write_summary()
            drained = finished_at is not None and now - finished_at >= linger
            if self.drain_then_exit and (drained or self.sends_nothing or now > self.drain_deadline):
                self.exit.set()

    def _sample(self) -> None:
        for kind, records in telemetry.sample(self.status(), clock.wall(), self.since).items():
            self.events.append(kind, records)

    def report_interval(self) -> float:
        """How often to report to the coordinator: every A-SAS interval
        while this node serves an A-SAS stage or one feeding it (its B
        must follow the tuner within one interval), else every 100 ms."""
        if self.stage is None:
            return REPORT_INTERVAL_S
        return self._tuning_intervals.get(self.stage.name, REPORT_INTERVAL_S)

    def _write_summary(self) -> None:
        if self.run_dir is None:
            return
        (self.run_dir / "telemetry").mkdir(parents=True, exist_ok=True)
        outbound = self._outbound()
        summary = {
            "node": self.name,
            "role": self.role,
            "stage": self.stage.name if self.stage else None,
            "tuples_in": sum(s.receiver.next_seq(s.edge.id) - 1 for s in self.sessions.values()),
            "tuples_out": outbound.log.head if outbound else 0,
            "bytes": [
                {"edge": edge, "channel": channel, "bytes": size}
                for (edge, channel), size in (outbound.bytes_sent.items() if outbound else [])
            ],
        }
        write_json(self.run_dir / "telemetry" / f"{self.name}.summary.json", summary)
