"""Acknowledgements on a data stream (node/service/roles/inbound.py): a stage
acknowledges every few milliseconds with a point of hundreds of counters, so
a stream gets Level-0 and Level-1 only when they changed, and a new stream
gets them afresh. Over real gRPC on loopback."""

from __future__ import annotations

import asyncio

import pytest

from semiactive.ha.resync import ResyncPoint, StateSnapshot
from semiactive.ha.state_transfer import CHUNK_BYTES, StateAssembler
from semiactive.runtime.messages import chunk_from_pb, point_to_pb
from tests.processes import bench_module
from tests.unit.sink_server import served_sink
from tests.unit.test_input_order import CODEC, EDGE, hello, read


async def test_an_unchanged_acknowledgement_is_not_sent_again_on_a_stream() -> None:
    async with served_sink(EDGE, CODEC) as (stub, session, _, _):
        first = stub.Push()
        await first.write(hello("node-up"))
        await read(first)  # welcome
        point = point_to_pb(ResyncPoint(10, 4, 3, {EDGE.id: 3}, ((), (2,)), 7))
        same = point_to_pb(ResyncPoint(10, 4, 3, {EDGE.id: 3}, ((), (2,)), 7))
        for seq, message, epoch in [(3, point, 0), (3, point, 0), (4, same, 0), (4, point, 1), (4, point, 1)]:
            session.ack(seq, message, epoch)
        got = [await read(first) for _ in range(4)]
        assert [f.WhichOneof("body") for f in got] == ["level0", "level1", "level0", "level1"]
        assert [got[0].level0.seq, got[2].level0.seq] == [3, 4]
        assert got[1].level1.point == point and [got[1].level1.epoch, got[3].level1.epoch] == [0, 1]
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(first.read(), timeout=0.3)  # nothing repeated

        second = stub.Push()
        await second.write(hello("node-up-again"))
        await read(second)
        session.ack(4, point, 1)
        got = [await read(second) for _ in range(2)]
        assert (got[0].level0.seq, got[1].level1.epoch) == (4, 1)


async def test_a_state_goes_ahead_of_its_point_in_chunks_once_per_stream() -> None:
    """The chunks are cut as the stream writes them (a Linear Road state of
    hundreds of MB, cut up front on three streams, stopped a node for
    seconds); the producer must still get them whole, in order, before the
    point, and only once."""
    data = bytearray(range(256)) * ((2 * CHUNK_BYTES + 1000) // 256)
    state = StateSnapshot(41, data)
    point = point_to_pb(ResyncPoint(45, 9, 42, {EDGE.id: 12}, ((), (2,)), 7))
    point.state_position = 41
    async with served_sink(EDGE, CODEC) as (stub, session, _, _):
        call = stub.Push()
        await call.write(hello("node-up"))
        await read(call)  # welcome
        session.ack(11, point, 0, state)
        session.ack(11, point, 0, state)  # nothing new
        got = [await read(call) for _ in range(5)]
        assert [f.WhichOneof("body") for f in got] == ["level0", "state", "state", "state", "level1"]
        assembler = StateAssembler()
        whole = [assembler.add(chunk_from_pb(f.state)) for f in got[1:4]]
        assert whole[:2] == [None, None] and whole[2] == state
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(call.read(), timeout=0.3)


async def test_the_state_feedback_benchmark_runs() -> None:
    """bench/state_feedback.py, small: every stream gets the point."""
    ack_s, stall_s, total_s = await bench_module("state_feedback").measure(9, 2)
    assert 0 <= ack_s <= total_s and 0 <= stall_s <= total_s
