"""A sink role behind a real gRPC data-plane server on loopback: what an
:class:`~semiactive.node.service.transport.EdgeSender` under test sends to."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc

from semiactive.ha.output_log import OutputLog
from semiactive.ha.views import ViewTable
from semiactive.node.sections.codec import RowCodec
from semiactive.node.sections.input import EdgeInput, InputSection
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.roles.inbound import InboundEdgeSession
from semiactive.node.service.roles.sink import SinkRole
from semiactive.node.service.transport import DataPlaneServer, EdgeSender
from semiactive.topology import Edge
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc


@contextlib.asynccontextmanager
async def sink_server(edge: Edge) -> AsyncIterator[tuple[SinkRole, int]]:
    """The sink of ``edge`` and the ephemeral port it listens on; stopped on exit."""
    codec = RowCodec(edge.schema, edge.kind)
    metrics = NodeMetrics("n", edge.consumer, "sink")
    role = SinkRole(edge.consumer, InputSection([EdgeInput(edge.id, edge.stream, 0, codec)]), metrics, None)
    session = InboundEdgeSession(edge, ViewTable(), role, metrics, on_rewind=lambda edges: None)
    server = grpc.aio.server()
    pb_grpc.add_DataPlaneServicer_to_server(DataPlaneServer(lambda h, peer: session), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield role, port
    finally:
        await server.stop(0)


def sender_to(
    edge: Edge, port: int, log: OutputLog, linger: float = 0.0, busy_linger: float | None = None
) -> EdgeSender:
    """An upstream replica's sender of ``log`` on ``edge`` to the sink at ``port``."""
    return EdgeSender(
        sender="up-1",
        edge=edge.id,
        target=edge.consumer,
        address=f"127.0.0.1:{port}",
        log=log,
        codec=RowCodec(edge.schema, edge.kind),
        channel=pb.DATA,
        epoch=lambda: 0,
        on_feedback=lambda s, f: None,
        linger=linger,
        busy_linger=busy_linger,
    )
