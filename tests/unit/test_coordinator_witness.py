"""The coordinator's witness (ReportReply.alive) as a node takes it, over
the in-memory gRPC: whatever names a reply carries (empty, huge, unknown),
a node only asks "is my primary listed?"; a coordinator that stops
answering witnesses nothing, so the node falls back to its own detector."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import grpc

from semiactive.node.service.coordinator_link import CoordinatorLink
from semiactive.simulation.memory_network import Fabric
from semiactive.simulation.virtual_loop import VirtualLoop
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import coordinator_pb2 as cdpb
from semiactive.wire import coordinator_pb2_grpc as cdpb_grpc

GARBAGE = ["", "x" * 100_000, "node-2", "\x00\ufffd\u202e"]


class Coordinator(cdpb_grpc.CoordinatorServicer):
    def __init__(self) -> None:
        self.answering = True

    async def Report(self, request: cdpb.NodeReport, context: Any) -> cdpb.ReportReply:
        if not self.answering:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "down")
        return cdpb.ReportReply(alive=GARBAGE)


def test_garbage_names_are_only_names_and_silence_witnesses_nothing() -> None:
    loop = VirtualLoop()

    async def main() -> None:
        fabric = Fabric(loop, random.Random(1))
        network = fabric.network("coordinator", "coordinator#1")
        server = network.server()
        servicer = Coordinator()
        cdpb_grpc.add_CoordinatorServicer_to_server(servicer, server)
        network.listen(server, "coordinator:1")
        await server.start()
        link = CoordinatorLink(
            "coordinator:1",
            "node-4:1",
            lambda: cpb.NodeStatus(name="node-4"),
            lambda view: False,
            lambda: 0.1,
            network=fabric.network("node-4", "node-4#1"),
        )
        task = loop.spawn("node-4#1", link.run())
        await asyncio.sleep(0.5)
        assert link.alive is not None
        assert "node-2" in link.alive and "node-3" not in link.alive
        servicer.answering = False
        await asyncio.sleep(0.5)
        assert link.alive is None
        task.cancel()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
