"""The node daemon: one process serving one role of the topology.

It owns the gRPC server (data plane, control plane, ingest), composes the
sections of its role, and runs until told to stop. A startup problem (port
taken, unknown node) raises :class:`StartupError`; a peer never reached
raises :class:`~node.transport.PeerUnreachable`; both end the process with a
one-line message and a non-zero exit code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path

import grpc

from node.codec import RowCodec
from node.metrics import NodeMetrics
from node.roles.inbound import InboundEdgeSession
from node.roles.sink import SinkRole
from node.roles.source import SourceRole
from node.roles.stage import StageRole
from node.sections.input import EdgeInput, InputSection
from node.sections.operator import OperatorSection
from node.sections.output import OutputSection
from node.sources import SourceDataError
from node.transport import GRPC_OPTIONS, DataPlaneServer, EdgeSender, Rejected
from semiactive.topology import Topology
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import control_pb2_grpc as cpb_grpc
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)


class StartupError(RuntimeError):
    pass


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
    ) -> None:
        if name not in topology.nodes:
            raise StartupError(
                f"no node named {name!r} in {topology.path}; nodes: {', '.join(topology.nodes)}"
            )
        self.topology = topology
        self.name = name
        self.info = topology.nodes[name]
        self.addresses = dict(addresses)
        self.listen = self.addresses[name]
        self.metrics_port = metrics_port
        self.run_dir = run_dir
        self.start_now = start_now
        self.started_at = time.monotonic()
        self.exit = asyncio.Event()
        self.drain_then_exit = False
        self.sessions: dict[str, InboundEdgeSession] = {}
        self.output: OutputSection | None = None
        self.source: SourceRole | None = None
        self.stage_role: StageRole | None = None
        self.sink: SinkRole | None = None
        self.inputs: InputSection | None = None
        stage = topology.stage_of(name)
        self.stage = stage
        self.metrics = NodeMetrics(name, stage.name if stage else "", self.info.role)
        cfg = topology.config
        if self.info.role == "source":
            assert stage is not None and stage.source is not None and stage.schema is not None
            self.output = OutputSection(name, stage, topology, self.addresses, self.metrics)
            self.source = SourceRole(name, stage.source, stage.schema, self.output, run_dir)
        elif self.info.role == "primary":
            assert stage is not None and stage.program is not None and stage.output is not None
            edges = [EdgeInput(e.id, e.stream, e.index, RowCodec(e.schema, e.kind)) for e in stage.inputs]
            self.inputs = InputSection(edges)
            self.output = OutputSection(name, stage, topology, self.addresses, self.metrics)
            assert stage.config is not None
            operator = OperatorSection(stage.program, stage.output, stage.config.cost_ms)
            self.stage_role = StageRole(self.inputs, operator, self.output, cfg.queue_rows)
            for edge in edges:
                self.sessions[edge.edge] = InboundEdgeSession(edge, self.metrics, self.stage_role.on_rows)
        elif self.info.role == "sink":
            assert stage is not None
            e = stage.inputs[0]
            edge = EdgeInput(e.id, e.stream, e.index, RowCodec(e.schema, e.kind))
            self.inputs = InputSection([edge])
            self.sink = SinkRole(name, edge, self.metrics, run_dir)
            self.sessions[edge.edge] = InboundEdgeSession(edge, self.metrics, self.sink.on_rows)
        else:
            raise StartupError(
                f"node {name} is a {self.info.role}; high availability roles arrive with the HA protocol"
            )

    # -- data plane ---------------------------------------------------------------

    def accept(self, hello: pb.Hello, peer: str) -> InboundEdgeSession:
        session = self.sessions.get(hello.edge)
        if session is None:
            raise Rejected(grpc.StatusCode.INVALID_ARGUMENT, f"{self.name} has no input edge {hello.edge!r}")
        expected = session.edge.codec.fingerprint()
        if hello.layout != expected:
            raise Rejected(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"edge {hello.edge}: row layout {hello.layout!r} does not match {expected!r}",
            )
        return session

    async def _ack_loop(self) -> None:
        interval = self.topology.config.ack_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            for session in self.sessions.values():
                session.ack()

    # -- control plane -------------------------------------------------------------

    def status(self) -> cpb.NodeStatus:
        st = cpb.NodeStatus(
            name=self.name,
            role=self.info.role,
            stage=self.stage.name if self.stage else "",
            finished=self.finished,
            uptime_s=time.monotonic() - self.started_at,
            state="running",
        )
        for session in self.sessions.values():
            e = session.edge
            st.inputs.add(edge=e.edge, seq=e.last_seq, watermark=e.watermark, end_of_stream=e.end_of_stream)
            st.tuples_in += e.received
        if self.output is not None:
            out = self.output.log
            for sender in self.output.senders:
                st.outputs.add(
                    edge=sender.edge,
                    peer=sender.target,
                    seq=out.head,
                    acked=sender.acked,
                    watermark=out.watermark,
                    end_of_stream=out.end_of_stream,
                    retained=out.retained,
                )
            st.tuples_out = out.head
        return st

    @property
    def finished(self) -> bool:
        if self.sink is not None:
            return self.sink.finished
        return self.output is not None and self.output.done

    def start(self, t0: float) -> None:
        if self.source is not None:
            self.source.start(t0)
        if self.sink is not None:
            self.sink.start(t0)

    def stop(self, exit_: bool, now: bool) -> None:
        if self.source is not None:
            self.source.stop()
        if now:
            self.exit.set()
        elif exit_:
            self.drain_then_exit = True
            if self.finished:
                self.exit.set()

    # -- lifecycle -------------------------------------------------------------------

    async def serve(self) -> int:
        server = grpc.aio.server(options=GRPC_OPTIONS)
        pb_grpc.add_DataPlaneServicer_to_server(DataPlaneServer(self.accept), server)
        cpb_grpc.add_ControlServicer_to_server(ControlServicer(self), server)
        if self.source is not None and self.source.config.kind == "ingest":
            pb_grpc.add_IngestServicer_to_server(IngestServicer(self.source), server)
        try:
            bound = server.add_insecure_port(self.listen)
        except RuntimeError as exc:
            raise StartupError(f"cannot listen on {self.listen}: {exc} (is the port in use?)") from None
        if not bound:
            raise StartupError(f"cannot listen on {self.listen} (is the port in use?)")
        await server.start()
        if self.metrics_port:
            try:
                self.metrics.serve(self.metrics_port, self.listen.rsplit(":", 1)[0])
            except OSError as exc:
                await server.stop(0)
                raise StartupError(
                    f"cannot serve metrics on port {self.metrics_port}: {exc.strerror}"
                ) from None
        log.info("%s (%s) listening on %s", self.name, self.info.role, self.listen)
        tasks = [asyncio.create_task(self._ack_loop(), name="acks")]
        senders: list[EdgeSender] = self.output.senders if self.output is not None else []
        tasks += [asyncio.create_task(s.run(), name=f"send {s.edge}") for s in senders]
        if self.source is not None:
            tasks.append(asyncio.create_task(self.source.run(), name="source"))
        if self.stage_role is not None:
            tasks.append(asyncio.create_task(self.stage_role.run(), name="operator"))
        tasks.append(asyncio.create_task(self._watch_finish(), name="finish"))
        if self.start_now:
            self.start(time.time())
        exit_waiter = asyncio.create_task(self.exit.wait())
        code = 0
        try:
            while not exit_waiter.done():
                done, _ = await asyncio.wait([exit_waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if task is exit_waiter:
                        continue
                    tasks.remove(task)  # type: ignore[arg-type]
                    error = task.exception()
                    if error is not None:
                        log.error("%s: %s", self.name, error)
                        code = 1
                        self.exit.set()
        finally:
            for s in senders:
                s.stop()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if self.sink is not None:
                self.sink.close()
            await server.stop(0.5)
        if self.source is not None and self.source.error:
            code = 1
        return code

    async def _watch_finish(self) -> None:
        reported = False
        while True:
            await asyncio.sleep(0.05)
            if self.finished and not reported:
                reported = True
                log.info("%s finished: end of stream delivered", self.name)
                self._write_summary()
            if self.finished and self.drain_then_exit:
                self.exit.set()

    def _write_summary(self) -> None:
        if self.run_dir is None:
            return
        (self.run_dir / "telemetry").mkdir(parents=True, exist_ok=True)
        summary = {
            "node": self.name,
            "role": self.info.role,
            "tuples_in": sum(s.edge.received for s in self.sessions.values()),
            "tuples_out": self.output.log.head if self.output else 0,
            "bytes_sent": self.output.bytes_sent() if self.output else 0,
        }
        (self.run_dir / "telemetry" / f"{self.name}.summary.json").write_text(json.dumps(summary))


class ControlServicer(cpb_grpc.ControlServicer):
    def __init__(self, node: NodeDaemon) -> None:
        self.node = node

    async def Status(self, request: pb.Empty, context: object) -> cpb.NodeStatus:
        return self.node.status()

    async def Start(self, request: cpb.StartRequest, context: object) -> pb.Empty:
        self.node.start(request.t0_unix)
        return pb.Empty()

    async def Stop(self, request: cpb.StopRequest, context: object) -> pb.Empty:
        self.node.stop(request.exit, request.now)
        return pb.Empty()


class IngestServicer(pb_grpc.IngestServicer):
    def __init__(self, source: SourceRole) -> None:
        self.source = source

    async def Send(
        self, request_iterator: object, context: grpc.aio.ServicerContext[pb.IngestBatch, pb.IngestReply]
    ) -> pb.IngestReply:
        accepted = 0
        async for batch in request_iterator:  # type: ignore[attr-defined]
            try:
                rows = [json.loads(r) for r in batch.rows]
                watermark = batch.watermark if batch.HasField("watermark") else None
                await self.source.output.wait_room()
                accepted += self.source.ingest(rows, watermark, batch.end_of_stream)
            except (json.JSONDecodeError, SourceDataError, AttributeError) as exc:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad ingest batch: {exc}")
        return pb.IngestReply(accepted=accepted, last_seq=self.source.output.log.head)
