"""A sink's inbound session for one edge, served over real gRPC on loopback:
what the data-plane unit tests talk to."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc

from semiactive.ha.views import ViewTable
from semiactive.node.sections.codec import RowCodec
from semiactive.node.sections.input import EdgeInput, InputSection
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.roles.inbound import InboundEdgeSession
from semiactive.node.service.roles.sink import SinkRole
from semiactive.node.service.transport import DataPlaneServer
from semiactive.runtime.network import GRPC_OPTIONS
from semiactive.topology import Edge
from semiactive.wire import dataplane_pb2_grpc as pb_grpc
from tests.waiting import wait_until_async


@asynccontextmanager
async def served_sink(
    edge: Edge, codec: RowCodec
) -> AsyncIterator[tuple[pb_grpc.DataPlaneStub, InboundEdgeSession, SinkRole, NodeMetrics]]:
    """A stub connected to the session, the session, its sink and metrics."""
    metrics = NodeMetrics("n", edge.consumer, "sink")
    sink = SinkRole(edge.consumer, InputSection([EdgeInput(edge.id, edge.stream, 0, codec)]), metrics, None)
    session = InboundEdgeSession(edge, ViewTable(), sink, metrics, on_rewind=lambda edges: None)
    server = grpc.aio.server(options=GRPC_OPTIONS)
    pb_grpc.add_DataPlaneServicer_to_server(DataPlaneServer(lambda h, peer: session), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS)
    try:
        yield pb_grpc.DataPlaneStub(channel), session, sink, metrics
    finally:
        await channel.close()
        await server.stop(0)


async def until_next_seq(sink: SinkRole, next_seq: int, timeout: float = 10.0) -> None:
    """Wait until the sink's first input edge wants ``next_seq`` (it has
    every row before); fail after ``timeout`` seconds."""
    edge = sink.inputs.edges[0]
    await wait_until_async(
        lambda: edge.next_seq,
        until=lambda wanted: wanted >= next_seq,
        what=f"the sink to want seq {next_seq}",
        timeout=timeout,
        interval=0.02,
    )
    assert edge.next_seq == next_seq
