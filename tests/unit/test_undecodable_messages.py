"""Bytes no message parses from are refused as INVALID_ARGUMENT by the
node's streaming handlers, over real gRPC and over the simulation's
in-memory gRPC alike: no handler raises (which gRPC answers UNKNOWN, with a
traceback in the node's log per message, a way to flood it)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import grpc
import pytest

from semiactive.node.service.transport import DataPlaneServer, Rejected
from semiactive.simulation.memory_network import Fabric
from semiactive.simulation.virtual_loop import VirtualLoop
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc

PUSH = "/semiactive.wire.DataPlane/Push"


def refuse(hello: pb.Hello, caller: str | None) -> Any:
    raise Rejected(grpc.StatusCode.UNAVAILABLE, "no such edge")


async def push_garbage(channel: Any) -> tuple[grpc.StatusCode, str]:
    call = channel.stream_stream(PUSH)()
    await call.write(b"\xff\xff\xff")
    try:
        await call.read()
        await call
    except grpc.aio.AioRpcError as exc:
        return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


def test_real_grpc() -> None:
    async def main() -> tuple[grpc.StatusCode, str]:
        server = grpc.aio.server()
        pb_grpc.add_DataPlaneServicer_to_server(DataPlaneServer(refuse), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                return await push_garbage(channel)
        finally:
            await server.stop(0)

    assert asyncio.run(main()) == (grpc.StatusCode.INVALID_ARGUMENT, "undecodable frame")


async def in_memory_server(loop: VirtualLoop, seed: int) -> Fabric:
    """A fabric where process b serves the data plane at b:1, refusing every edge."""
    fabric = Fabric(loop, random.Random(seed))
    network = fabric.network("b", "b#1")
    server = network.server()
    pb_grpc.add_DataPlaneServicer_to_server(DataPlaneServer(refuse), server)
    network.listen(server, "b:1")
    await server.start()
    return fabric


def test_in_memory_grpc_behaves_alike() -> None:
    loop = VirtualLoop()

    async def main() -> tuple[grpc.StatusCode, str]:
        fabric = await in_memory_server(loop, 1)
        result = await push_garbage(fabric.network("a", "a#1").channel("b:1", "b"))
        assert not fabric.handler_errors
        return result

    try:
        assert loop.run_until_complete(main()) == (grpc.StatusCode.INVALID_ARGUMENT, "undecodable frame")
    finally:
        loop.close()


def test_decodable_bytes_still_reach_the_acceptor() -> None:
    """A hello that parses is the acceptor's to refuse (here: UNAVAILABLE)."""
    loop = VirtualLoop()

    async def main() -> grpc.StatusCode:
        fabric = await in_memory_server(loop, 2)
        call = fabric.network("a", "a#1").channel("b:1", "b").stream_stream(PUSH)()
        await call.write(pb.Frame(hello=pb.Hello(edge="x->y")).SerializeToString())
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call.read()
        return refused.value.code()

    try:
        assert loop.run_until_complete(main()) is grpc.StatusCode.UNAVAILABLE
    finally:
        loop.close()
