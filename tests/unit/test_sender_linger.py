"""``linger_ms`` over real gRPC (node/service/transport.py): a partial batch
leaves at least ``linger`` after the sender's previous frame, so rows that
come close together share a frame, and a row after a quiet spell is not
held back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
import pytest

from semiactive.ha.output_log import OutputLog
from semiactive.ha.views import ViewTable
from semiactive.node.cql import plan
from semiactive.node.sections.codec import RowCodec
from semiactive.node.sections.input import EdgeInput, InputSection
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.roles.inbound import InboundEdgeSession
from semiactive.node.service.roles.sink import SinkRole
from semiactive.node.service.transport import DataPlaneServer, EdgeSender
from semiactive.topology import Edge
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc

SCHEMA = plan.Schema((plan.Column("id", plan.INTEGER),))
EDGE = Edge("up", "down", "s", SCHEMA, plan.Kind.STREAM, 0)
LINGER_S = 2.0


@pytest.fixture
async def sink() -> AsyncIterator[tuple[SinkRole, int]]:
    codec = RowCodec(SCHEMA, plan.Kind.STREAM)
    metrics = NodeMetrics("n", "down", "sink")
    role = SinkRole("down", InputSection([EdgeInput(EDGE.id, EDGE.stream, 0, codec)]), metrics, None)
    session = InboundEdgeSession(EDGE, ViewTable(), role, metrics, on_rewind=lambda edges: None)
    server = grpc.aio.server()
    pb_grpc.add_DataPlaneServicer_to_server(DataPlaneServer(lambda h, peer: session), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield role, port
    finally:
        await server.stop(0)


async def _delivered(role: SinkRole, count: int) -> float:
    """Wait until ``count`` rows have reached the sink; when they did."""
    async with asyncio.timeout(30):
        while role.delivered < count:
            await asyncio.sleep(0.005)
    return time.monotonic()


@pytest.mark.parametrize("linger_s", [0.0, LINGER_S])
async def test_rows_close_together_share_a_frame_a_lone_row_goes_at_once(
    sink: tuple[SinkRole, int], linger_s: float
) -> None:
    role, port = sink
    log = OutputLog()
    log.add_edge(EDGE.id)
    sender = EdgeSender(
        sender="up-1",
        edge=EDGE.id,
        target="down",
        address=f"127.0.0.1:{port}",
        log=log,
        codec=RowCodec(SCHEMA, plan.Kind.STREAM),
        channel=pb.DATA,
        epoch=lambda: 0,
        on_feedback=lambda s, f: None,
        linger=linger_s,
    )
    task = asyncio.create_task(sender.run())
    try:
        await asyncio.wait_for(sender.connected.wait(), timeout=30)
        started = time.monotonic()
        log.append([(1, 1, 1, 0)], 1)
        sender.wake.set()
        first = await _delivered(role, 1)
        for ts in range(2, 7):
            await asyncio.sleep(0.02)
            log.append([(ts, ts, 1, ts)], ts)
            sender.wake.set()
        last = await _delivered(role, 6)
    finally:
        sender.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    # The first row followed no frame: it was not held for the linger.
    assert first - started < LINGER_S / 2
    if linger_s:
        assert sender.frames_sent == 2, "the five rows 20 ms apart went in one frame"
        assert last - first >= linger_s * 0.9
    else:
        assert sender.frames_sent == 6, "without linger, a frame per row"
