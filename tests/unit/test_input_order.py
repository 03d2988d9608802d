"""Out-of-order timestamps are refused, never silently computed with: by the
engine (a batch must be sorted and after what it processed or queued), by
an edge's input (new rows sorted and above the watermark the edge already
received), and on the data plane, where the inbound session refuses the
frame, counts it, and closes only that stream with INVALID_ARGUMENT; the
same for a frame with a NULL in a column that cannot hold one."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import AsyncIterator

import grpc
import pytest

from semiactive.node.cql import compile_program, plan
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine, InputOrderError, LateInputError, UnsortedInputError
from semiactive.node.engine.heartbeat import HeartbeatEngine
from semiactive.node.sections.codec import INT_NULL, RowCodec
from semiactive.node.sections.input import NEVER, EdgeInput, RowOrderError
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.roles.sink import SinkRole
from semiactive.topology import Edge
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc
from tests.unit.sink_server import served_sink

PROGRAM = "REGISTER STREAM s (v integer)\nREGISTER QUERY total AS SELECT SUM(v) AS t FROM s [Range 1]"
SCHEMA = plan.Schema((plan.Column("v", plan.INTEGER),))
CODEC = RowCodec(SCHEMA, plan.Kind.STREAM)


def rows(*stamps: int, first_seq: int = 1) -> list[Element]:
    return [(ts, first_seq + i, 1, 10 * ts) for i, ts in enumerate(stamps)]


# ---- the engine ----------------------------------------------------------------------


def test_an_unsorted_batch_is_refused_whole() -> None:
    engine = Engine(compile_program(PROGRAM))
    with pytest.raises(
        UnsortedInputError, match=r"input s: timestamps decrease within a batch \(ts=1 after ts=3\)"
    ):
        engine.push("s", rows(2, 3, 1))
    assert not engine.scans["s"].pending
    engine.push("s", rows(1, 2, 3))
    sums = [(e[0], e[2], e[3]) for e in engine.advance(3)["total"]]
    assert sums == [(1, 1, 10), (2, -1, 10), (2, 1, 30), (3, -1, 30), (3, 1, 50)]


def test_a_batch_before_what_is_queued_is_refused() -> None:
    engine = Engine(compile_program(PROGRAM))
    engine.push("s", rows(5, 6))
    with pytest.raises(UnsortedInputError, match="tuple at ts=4 arrived after one at ts=6"):
        engine.push("s", rows(4))
    engine.push("s", rows(6, 7))


def test_late_and_unsorted_inputs_share_one_catchable_type() -> None:
    engine = Engine(compile_program(PROGRAM))
    engine.push("s", rows(1))
    engine.advance(2)
    with pytest.raises(LateInputError):
        engine.push("s", rows(2))
    assert issubclass(LateInputError, InputOrderError) and issubclass(UnsortedInputError, InputOrderError)


def test_the_heartbeat_engine_refuses_unsorted_batches_too() -> None:
    engine = HeartbeatEngine(compile_program(PROGRAM))
    with pytest.raises(UnsortedInputError):
        engine.push("s", rows(1, 3, 2))


# ---- an edge's input -----------------------------------------------------------------------


def test_decreasing_rows_are_refused_without_changing_the_edge() -> None:
    edge = EdgeInput("a->b", "s", 0, CODEC)
    edge.accept_rows(1, rows(1, 2), 2, False)
    with pytest.raises(RowOrderError, match=r"edge a->b: row at ts 3 comes after one at ts 4") as caught:
        edge.accept_rows(3, rows(4, 3, first_seq=3), 3, False)
    assert caught.value.reason == "ts_decreasing"
    assert (edge.next_seq, edge.watermark, len(edge.pending)) == (3, 2, 2)


def test_rows_at_or_below_the_watermark_are_refused() -> None:
    edge = EdgeInput("a->b", "s", 0, CODEC)
    edge.accept_rows(1, rows(1, 2), 5, False)
    with pytest.raises(RowOrderError, match="row at ts 5 is at or below the watermark 5") as caught:
        edge.accept_rows(3, rows(5, first_seq=3), 6, False)
    assert caught.value.reason == "ts_below_watermark"


def test_a_batch_before_the_previous_batch_is_refused() -> None:
    edge = EdgeInput("a->b", "s", 0, CODEC)
    edge.accept_rows(1, rows(4), 2, False)
    with pytest.raises(RowOrderError, match="row at ts 3 comes after one at ts 4"):
        edge.accept_rows(2, rows(3, first_seq=2), 3, False)


def test_duplicates_are_not_checked_and_a_restart_starts_afresh() -> None:
    edge = EdgeInput("a->b", "s", 0, CODEC)
    edge.accept_rows(1, rows(1, 2, 3), 3, False)
    assert edge.accept_rows(2, rows(2, 3, 4, first_seq=2), 4, False) == 1
    edge.restart(2)
    assert edge.last_ts == NEVER
    assert edge.accept_rows(2, rows(2, first_seq=2), 2, False) == 1


# ---- the data plane ---------------------------------------------------------------------


EDGE = Edge("up", "down", "s", SCHEMA, plan.Kind.STREAM, 0)


def batch(first_seq: int, stamps: list[int], watermark: int) -> pb.Frame:
    elements = rows(*stamps, first_seq=first_seq)
    data = pb.Batch(
        first_seq=first_seq, count=len(elements), rows=CODEC.encode(elements), watermark=watermark
    )
    return pb.Frame(batch=data)


def hello(sender: str) -> pb.Frame:
    return pb.Frame(
        hello=pb.Hello(edge=EDGE.id, sender=sender, epoch=0, channel=pb.DATA, layout=CODEC.fingerprint())
    )


async def read(call: grpc.aio.StreamStreamCall[pb.Frame, pb.Feedback]) -> pb.Feedback:
    """The next feedback, failing fast rather than hanging the test."""
    return await asyncio.wait_for(call.read(), timeout=10)  # type: ignore[return-value]


@pytest.fixture
async def served() -> AsyncIterator[tuple[pb_grpc.DataPlaneStub, SinkRole, NodeMetrics]]:
    async with served_sink(EDGE, CODEC) as (stub, _, sink, metrics):
        yield stub, sink, metrics


async def test_a_decreasing_frame_closes_its_stream_and_the_node_serves_on(
    served: tuple[pb_grpc.DataPlaneStub, SinkRole, NodeMetrics], caplog: pytest.LogCaptureFixture
) -> None:
    stub, sink, metrics = served
    bad = stub.Push()
    await bad.write(hello("node-bad"))
    assert (await read(bad)).welcome.next_seq == 1
    with caplog.at_level(logging.WARNING, logger="semiactive.node.service.roles.inbound"):
        await bad.write(batch(1, [5, 3], 5))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await read(bad)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "frame refused (ts_decreasing)" in (caught.value.details() or "")
    assert "edge up->down from node-bad (ts_decreasing)" in caplog.text
    labels = {"edge": EDGE.id, "reason": "ts_decreasing"}
    assert metrics.registry.get_sample_value("semiactive_frames_refused_total", labels) == 1
    assert sink.inputs.edges[0].next_seq == 1 and sink.delivered == 0

    good = stub.Push()
    await good.write(hello("node-good"))
    assert (await read(good)).welcome.next_seq == 1
    await good.write(batch(1, [3, 5], 5))
    await good.done_writing()
    assert await read(good) is grpc.aio.EOF
    assert await good.code() is grpc.StatusCode.OK
    assert sink.delivered == 2


async def test_a_null_where_the_plan_allows_none_closes_its_stream_and_the_node_serves_on(
    served: tuple[pb_grpc.DataPlaneStub, SinkRole, NodeMetrics],
) -> None:
    """``v`` of a source cannot be NULL, and a node's generated code does
    not guard it: a peer's NULL there is refused with the frame, not met
    later as a TypeError in a stage's generated comparison."""
    stub, sink, metrics = served
    bad = stub.Push()
    await bad.write(hello("node-bad"))
    await read(bad)
    rows = struct.pack("<qq", 1, 10) + struct.pack("<qq", 2, INT_NULL)
    await bad.write(pb.Frame(batch=pb.Batch(first_seq=1, count=2, rows=rows, watermark=2)))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await read(bad)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "column v cannot be NULL" in (caught.value.details() or "")
    labels = {"edge": EDGE.id, "reason": "undecodable"}
    assert metrics.registry.get_sample_value("semiactive_frames_refused_total", labels) == 1
    assert sink.inputs.edges[0].next_seq == 1 and sink.delivered == 0

    good = stub.Push()
    await good.write(hello("node-good"))
    await read(good)
    await good.write(batch(1, [1, 2], 2))
    await good.done_writing()
    assert await read(good) is grpc.aio.EOF
    assert sink.delivered == 2


async def test_a_frame_below_the_watermark_is_refused_too(
    served: tuple[pb_grpc.DataPlaneStub, SinkRole, NodeMetrics],
) -> None:
    stub, sink, metrics = served
    call = stub.Push()
    await call.write(hello("node-x"))
    await read(call)
    await call.write(batch(1, [3, 5], 6))
    await call.write(batch(3, [6], 7))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await read(call)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    labels = {"edge": EDGE.id, "reason": "ts_below_watermark"}
    assert metrics.registry.get_sample_value("semiactive_frames_refused_total", labels) == 1
    assert sink.delivered == 2


@pytest.mark.parametrize(
    ("frames", "detail"),
    [
        (
            [
                pb.Frame(
                    resync=pb.ResyncPoint(position=9, cut_position=5, edge_cut={EDGE.id: 5}, state_position=4)
                )
            ],
            "never sent",
        ),
        ([pb.Frame(state=pb.StateChunk(position=4, total=10, offset=3, data=b"xx"))], "does not continue"),
        ([pb.Frame(state=pb.StateChunk(position=4, total=1, offset=0, data=b"xx"))], "past the state"),
    ],
)
async def test_a_state_that_does_not_add_up_closes_its_stream(
    served: tuple[pb_grpc.DataPlaneStub, SinkRole, NodeMetrics], frames: list[pb.Frame], detail: str
) -> None:
    """Operator state chunks and the points that refer to them come from
    peers: one that is out of order, too long, or missing is refused like a
    bad batch (docs/ha.md, "Retention and state snapshots")."""
    stub, sink, metrics = served
    call = stub.Push()
    await call.write(hello("node-x"))
    await read(call)
    for frame in frames:
        await call.write(frame)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await read(call)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert detail in (caught.value.details() or "")
    labels = {"edge": EDGE.id, "reason": "state"}
    assert metrics.registry.get_sample_value("semiactive_frames_refused_total", labels) == 1
    assert sink.delivered == 0
