"""The simulation's runtime on its own: the virtual-clock loop (time jumps,
hangs detected, processes killed and frozen) and the in-memory gRPC
(generated stubs and servicers over it, status codes, flow control, cut
and stalled links, deadlines, authentication)."""

from __future__ import annotations

import asyncio
import gc
import random
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from semiactive.simulation.memory_network import WINDOW, Fabric
from semiactive.simulation.virtual_loop import EPOCH_UNIX_S, Stalled, VirtualLoop
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import control_pb2_grpc as cpb_grpc
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc


def run(coro: Any) -> Any:
    loop = VirtualLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def test_time_jumps_to_the_next_timer() -> None:
    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(3600)
        return loop.time(), loop.wall_time()  # type: ignore[attr-defined]

    now, wall = run(main())
    assert now == pytest.approx(3600)
    assert wall == pytest.approx(EPOCH_UNIX_S + 3600)


def test_a_task_waiting_forever_is_a_hang() -> None:
    async def main() -> None:
        await asyncio.Event().wait()

    with pytest.raises(Stalled):
        run(main())


def test_a_killed_process_never_runs_again_and_a_frozen_one_resumes_late() -> None:
    loop = VirtualLoop()
    ticks: dict[str, list[float]] = {"a": [], "b": []}

    async def ticker(name: str) -> None:
        while True:
            ticks[name].append(loop.time())
            await asyncio.sleep(0.1)

    async def main() -> None:
        loop.spawn("a#1", ticker("a"))
        loop.spawn("b#1", ticker("b"))
        await asyncio.sleep(0.25)
        loop.kill("a#1")
        loop.freeze("b#1")
        await asyncio.sleep(1.0)
        loop.thaw("b#1")
        await asyncio.sleep(0.05)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert ticks["a"] == pytest.approx([0.0, 0.1, 0.2])
    # b ran until frozen, not while frozen, and at once when thawed.
    assert ticks["b"][:3] == pytest.approx([0.0, 0.1, 0.2])
    assert ticks["b"][3] == pytest.approx(1.25)


def test_a_killed_process_runs_no_finally_block_even_when_collected() -> None:
    """A SIGKILLed process's coroutines must not run their ``finally``
    when the garbage collector finds them: that ran node code at a time set
    by the collector, and two runs of one seed differed."""
    loop = VirtualLoop()
    loop.set_exception_handler(lambda loop, context: None)  # the victim dies pending, as in a run
    finished: list[str] = []

    async def victim() -> None:
        try:
            await loop.create_future()  # held by nothing else, like a dropped call's
        finally:
            finished.append("victim")

    async def main() -> None:
        loop.spawn("a#1", victim())
        await asyncio.sleep(0.1)
        loop.kill("a#1")
        gc.collect()
        await asyncio.sleep(1.0)

    try:
        loop.run_until_complete(main())
        assert finished == []
    finally:
        loop.close()


def test_timers_due_at_one_instant_run_in_the_order_they_were_set() -> None:
    """asyncio's heap leaves ties to its history (here: cancellations and
    the purge of cancelled timers); the simulation's order must not."""
    ran: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        decoys = [loop.call_at(5.0, lambda: None) for _ in range(300)]
        handles = [loop.call_at(1.0, ran.append, i) for i in range(50)]
        for decoy in decoys:
            decoy.cancel()
        for i in range(0, 50, 7):
            handles[i].cancel()
        await asyncio.sleep(2.0)

    run(main())
    assert ran == [i for i in range(50) if i % 7]


class Echo(pb_grpc.DataPlaneServicer):
    """Push: answers each frame's batch first_seq as a level-0 ack; Ack:
    refuses the edge "bad"; records the caller."""

    def __init__(self) -> None:
        self.callers: list[str | None] = []

    async def Push(self, request_iterator: Any, context: Any) -> None:
        async for frame in request_iterator:
            await context.write(pb.Feedback(level0=pb.Level0(seq=frame.batch.first_seq)))

    async def Ack(self, request: pb.AckNotice, context: Any) -> pb.Empty:
        names = context.auth_context().get("x509_common_name") or [b""]
        self.callers.append(names[0].decode())
        if request.edge == "bad":
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "no")
        return pb.Empty()


async def serve(fabric: Fabric, name: str, address: str, servicer: Any) -> Any:
    network = fabric.network(name, f"{name}#1")
    server = network.server()
    pb_grpc.add_DataPlaneServicer_to_server(servicer, server)
    assert network.listen(server, address) == 1
    await server.start()
    return server


def test_unary_calls_status_codes_and_identity() -> None:
    async def main() -> None:
        fabric = Fabric(asyncio.get_running_loop(), random.Random(1))  # type: ignore[arg-type]
        echo = Echo()
        await serve(fabric, "b", "b:1", echo)
        stub = pb_grpc.DataPlaneStub(fabric.network("a", "a#1").channel("b:1", "b"))
        assert await stub.Ack(pb.AckNotice(edge="x"), timeout=1.0) == pb.Empty()
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.Ack(pb.AckNotice(edge="bad"))
        assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert echo.callers == ["a", "a"]
        nobody = pb_grpc.DataPlaneStub(fabric.network("a", "a#1").channel("c:1", "c"))
        with pytest.raises(grpc.aio.AioRpcError) as unreachable:
            await nobody.Ack(pb.AckNotice(edge="x"))
        assert unreachable.value.code() is grpc.StatusCode.UNAVAILABLE
        control = cpb_grpc.ControlStub(fabric.network("a", "a#1").channel("b:1", "b"))
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await control.Status(pb.Empty())
        assert missing.value.code() is grpc.StatusCode.UNIMPLEMENTED

    run(main())


def test_streams_flow_control_and_cut_links() -> None:
    async def main() -> None:
        fabric = Fabric(asyncio.get_running_loop(), random.Random(2))  # type: ignore[arg-type]
        await serve(fabric, "b", "b:1", Echo())
        stub = pb_grpc.DataPlaneStub(fabric.network("a", "a#1").channel("b:1", "b"))
        call = stub.Push()
        for seq in range(1, 4):
            await call.write(pb.Frame(batch=pb.Batch(first_seq=seq)))
        assert [(await call.read()).level0.seq for _ in range(3)] == [1, 2, 3]
        # Nobody reads the feedback: the server's writes stop at the window,
        # then its reads, then ours.
        written = 0

        async def flood() -> None:
            nonlocal written
            while True:
                await call.write(pb.Frame(batch=pb.Batch(first_seq=written)))
                written += 1

        flooding = asyncio.ensure_future(flood())
        await asyncio.sleep(1.0)
        assert WINDOW <= written <= 3 * WINDOW + 2
        fabric.cut_link("a", "b")
        with pytest.raises(grpc.aio.AioRpcError) as cut:
            await flooding
        assert cut.value.code() is grpc.StatusCode.UNAVAILABLE
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.Ack(pb.AckNotice(edge="x"))
        fabric.heal("a", "b")
        await stub.Ack(pb.AckNotice(edge="x"))

    run(main())


def test_a_stalled_link_holds_messages_until_healed_and_deadlines_expire() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        fabric = Fabric(loop, random.Random(3))  # type: ignore[arg-type]
        await serve(fabric, "b", "b:1", Echo())
        stub = pb_grpc.DataPlaneStub(fabric.network("a", "a#1").channel("b:1", "b"))
        call = stub.Push()
        await call.write(pb.Frame(batch=pb.Batch(first_seq=7)))
        assert (await call.read()).level0.seq == 7
        fabric.stall_link("a", "b")
        with pytest.raises(grpc.aio.AioRpcError) as late:
            await stub.Ack(pb.AckNotice(edge="x"), timeout=0.5)
        assert late.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        await call.write(pb.Frame(batch=pb.Batch(first_seq=8)))
        reading = asyncio.ensure_future(call.read())
        await asyncio.sleep(2.0)
        assert not reading.done()
        fabric.heal("a", "b")
        assert (await reading).level0.seq == 8
        assert loop.time() >= 2.5

    run(main())


class Pinger(cpb_grpc.ControlServicer):
    async def Heartbeat(self, request_iterator: Any, context: Any) -> AsyncIterator[cpb.Pong]:
        async for ping in request_iterator:
            yield cpb.Pong(n=ping.n)


def test_async_generator_servicers_and_killed_servers() -> None:
    async def main() -> None:
        fabric = Fabric(asyncio.get_running_loop(), random.Random(4))  # type: ignore[arg-type]
        network = fabric.network("b", "b#1")
        server = network.server()
        cpb_grpc.add_ControlServicer_to_server(Pinger(), server)
        network.listen(server, "b:1")
        await server.start()
        call = cpb_grpc.ControlStub(fabric.network("a", "a#1").channel("b:1", "b")).Heartbeat()
        await call.write(cpb.Ping(n=1))
        await call.write(cpb.Ping(n=2))
        got = []
        async for pong in call:
            got.append(pong.n)
            if len(got) == 2:
                break
        assert got == [1, 2]
        fabric.kill("b")
        with pytest.raises(grpc.aio.AioRpcError) as dead:
            await call.read()
        assert dead.value.code() is grpc.StatusCode.UNAVAILABLE
        assert not await fabric.network("a", "a#1").reachable("b:1")

    run(main())
