"""Pressure (docs/ha.md, "Pressure"): a producer whose output log is held by
a consumer's cut tells that consumer, which captures its state out of turn;
a replica pressed from upstream passes it on to the consumers that hold its
own cut. Without it a chain of cuts that move only at captures stops for
good once the first log is full (tests/faults/test_simulation.py runs it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from semiactive.ha.output_log import OutputLog
from semiactive.ha.replica import capture_now
from semiactive.ha.resync import ResyncPoint, StateBytes, StateSnapshot
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine
from semiactive.wire import dataplane_pb2 as pb
from tests.unit.ha_harness import build_topology, replica, source_rows
from tests.unit.sink_server import served_sink, until_next_seq

UNBOUNDED_SUM = "ISTREAM(SELECT val % 4 AS k, SUM(val) AS s FROM s0 [Range Unbounded] GROUP BY val % 4)"


def _rows(n: int) -> list[Element]:
    return [(i, i, 1, i) for i in range(1, n + 1)]


def _point(edge: str, cut: int, state: StateSnapshot | None = None) -> ResyncPoint:
    return ResyncPoint(cut - 1, 0, cut, {edge: cut}, state=state)


def test_a_log_presses_the_consumer_holding_half_of_it_not_one_merely_behind() -> None:
    log = OutputLog(capacity=100)
    for edge in ("holds", "behind", "quiet"):
        log.add_edge(edge)
    log.append(_rows(80), 80)
    log.acknowledge("holds", 80, _point("holds", 30))  # holds 51 rows it has
    log.acknowledge("behind", 20, _point("behind", 20))  # received 20: holds 1
    assert log.pressure("holds") == 30
    assert log.pressure("behind") == 0
    assert log.pressure("quiet") == 0  # nothing received, nothing to capture
    log.acknowledge("holds", 80, _point("holds", 32))
    assert log.pressure("holds") == 0  # 49 rows: below half
    # Pressed from upstream, the log presses whichever cut is the oldest.
    log.pressed = True
    assert log.pressure("behind") == 0  # "quiet" holds the oldest row, and has nothing to capture
    log.acknowledge("quiet", 50, _point("quiet", 40))
    assert not log.pressed  # the cut that held the log moved: the replica looks again
    log.pressed = True
    assert log.pressure("behind") == 20 and log.pressure("holds") == 0 and log.pressure("quiet") == 0


def test_a_cut_waiting_for_the_backup_stream_moves_once_it_is_written() -> None:
    """A state cut waits for the rows its consumer's secondary has not been
    sent; with the producer stalled no later acknowledgement comes, so the
    backup stream's progress must move it."""
    log = OutputLog(capacity=100)
    log.add_edge("e", batch_size=10)
    log.append(_rows(25), 25)
    assert len(log.take_backup("e")[1]) == 20  # two batches shipped, 21..25 wait for the third
    log.append(_rows(30)[25:], 30)
    log.acknowledge("e", 30, _point("e", 31, StateSnapshot(30, b"s")), backup_sent=20)
    assert log.edges["e"].cut == 21  # 21..30 forced onto the backup stream, not yet written
    assert log.backup_written("e", 28) and log.edges["e"].cut == 29  # as far as written
    assert log.backup_written("e", 30)
    assert log.edges["e"].cut == 31 and log.retained == 0
    assert not log.backup_written("e", 30)


def test_a_pressed_replica_captures_at_once_even_without_new_input(tmp_path: Path) -> None:
    topo = build_topology(tmp_path, [f"REGISTER QUERY s1 AS {UNBOUNDED_SUM}"])
    stage = topo.stages["stage-1"]
    edge, out = stage.inputs[0].id, stage.outputs[0].id
    rows = source_rows(400, 3, per_ts=1)
    rep = replica(stage, snapshot_rows=10_000)

    def take(part: list[Element]) -> None:
        for row in part:
            rep.receive(edge, row[1], [row], row[0], False)
            rep.run()

    def cut() -> int:
        rep.acknowledged(out, rep.log.head, _point(out, rep.log.head + 1))
        point = rep.level1()
        assert point is not None
        return point.cut_position

    take(rows[:300])
    assert rep.captured is None and cut() == 1  # [Range Unbounded]: the first row, for good
    rep.press(edge, 1)
    rep.run()  # nothing new to read (the producer is stopped): the capture comes anyway
    assert rep.captured is not None and rep.captured.position == 300 and cut() == 301
    rep.press(edge, 1)  # the same pressure again: already answered
    take(rows[300:320])
    assert rep.captured.position == 300
    rep.press(edge, 301)  # still pressed after our cut moved: once more
    rep.run()
    assert rep.captured.position == 320 and cut() == 321
    rep.press(edge, 0)
    rep.press(edge, 301)  # on again at the seq already answered (a producer's flap): nothing due
    take(rows[320:330])
    assert rep.captured.position == 320
    rep.press(edge, 0)
    take(rows[330:400])
    assert rep.captured.position == 320 and not rep.pressure


def test_a_pressed_replica_captures_once_it_has_processed_the_producers_seq(tmp_path: Path) -> None:
    """The frame says through which seq: a capture before it would leave
    the producer's cut short of its newest state, and the producer would
    press again at the new cut (up to 5 captures per pressure on the
    3-hour Linear Road run). One capture, there."""
    topo = build_topology(tmp_path, [f"REGISTER QUERY s1 AS {UNBOUNDED_SUM}"])
    stage = topo.stages["stage-1"]
    edge = stage.inputs[0].id
    rows = source_rows(400, 3, per_ts=1)
    rep = replica(stage, snapshot_rows=10_000)
    for row in rows[:300]:
        rep.receive(edge, row[1], [row], row[0], False)
        rep.run()
    rep.press(edge, 1, through_seq=350)
    for row in rows[300:360]:
        rep.receive(edge, row[1], [row], row[0], False)
        rep.run()
    assert rep.captures == 1 and rep.captured is not None and rep.captured.position == 350
    # Processed past it already: at once, even with no new input.
    rep.press(edge, 351, through_seq=355)
    rep.run()
    assert rep.captures == 2 and rep.captured.position == 360
    # Asked through a seq the state already covers: nothing to capture.
    rep.press(edge, 361, through_seq=358)
    rep.run()
    assert rep.captures == 2


def test_a_pressed_producer_presses_its_consumers_through_its_newest_state(tmp_path: Path) -> None:
    """A stateful replica pressed by its producer first takes its own
    capture, then presses the consumers that hold its cut through the
    output seq of that capture: pressing them before would make them
    capture for its older state, then again for the new one. Once they
    are past it, its own capture (still being taken) holds the cut, and
    pressing them again would only make them capture for nothing."""
    topo = build_topology(tmp_path, [f"REGISTER QUERY s1 AS {UNBOUNDED_SUM}"])
    stage = topo.stages["stage-1"]
    edge, out = stage.inputs[0].id, stage.outputs[0].id
    rows = source_rows(300, 3, per_ts=1)
    taking: list[Callable[[], None]] = []  # captures taken, not yet reported

    def slow_capture(engine: Engine, done: Callable[[StateBytes | BaseException], None]) -> None:
        capture_now(engine, lambda result: taking.append(lambda: done(result)))

    def finish_captures() -> None:
        while taking:
            taking.pop(0)()

    rep = replica(stage, snapshot_rows=200, capacity=400, capture=slow_capture)
    heads = []
    for row in rows:
        rep.receive(edge, row[1], [row], row[0], False)
        rep.run()
        finish_captures()
        heads.append(rep.log.head)
    assert rep.captures == 1 and rep.captured is not None and rep.captured.position == 200
    rep.acknowledged(out, rep.log.head, _point(out, 101))
    rep.press(edge, 1, through_seq=10**9)  # its own capture waits for rows it may never get
    rep.level1()
    assert rep.log.pressed and rep.log.relief_seq == heads[199]  # so it presses now, through its state
    rep.press(edge, 0)
    rep.level1()
    assert not rep.log.pressed
    rep.press(edge, 2)
    rep.level1()
    assert not rep.log.pressed  # its own capture first
    rep.run()  # no new input: the capture comes anyway
    assert rep.captures == 2 and rep.capturing is not None
    rep.level1()
    assert rep.log.pressed and rep.log.pressure(out) == 101
    assert rep.log.relief_seq == rep.log.head  # the output seq of the state after row 300
    rep.acknowledged(out, rep.log.head, _point(out, rep.log.relief_seq + 1))
    point = rep.level1()
    assert point is not None and point.cut_position == 201  # the new state is still being taken
    assert not rep.log.pressed and rep.log.pressure(out) == 0  # yet the consumer is past it
    finish_captures()
    point = rep.level1()
    assert point is not None and point.cut_position == 301  # one consumer capture moved it all the way
    assert not rep.log.pressed and rep.log.relief_seq == 0


def test_pressure_passes_on_to_the_consumers_that_hold_the_cut(tmp_path: Path) -> None:
    """A stateless stage pressed by its producer: its own cut is where its
    consumer's cut lets it be. Consumers a quarter of a log behind are
    pressed in turn; once they catch up, no longer."""
    topo = build_topology(tmp_path, ["REGISTER QUERY s1 AS SELECT id, val FROM s0"])
    stage = topo.stages["stage-1"]
    edge, out = stage.inputs[0].id, stage.outputs[0].id
    rows = source_rows(200, 3, per_ts=1)
    rep = replica(stage, capacity=200)
    for row in rows:
        rep.receive(edge, row[1], [row], row[0], False)
        rep.run()
    rep.acknowledged(out, 200, _point(out, 101))
    rep.press(edge, 80)
    rep.level1()
    assert rep.log.pressed  # 100 of 200 rows held by the consumer's cut
    assert rep.log.pressure(out) == 101
    rep.acknowledged(out, 200, _point(out, 121))
    # Its cut moved: not pressed at the new one before the replica looks
    # again (else one pressure would cost it two captures).
    assert not rep.log.pressed and rep.log.pressure(out) == 0
    rep.level1()
    assert rep.log.pressed and rep.log.pressure(out) == 121  # still 80 rows behind
    rep.acknowledged(out, 200, _point(out, 170))
    rep.level1()
    assert not rep.log.pressed  # 30 rows: what any consumer lags by
    rep.acknowledged(out, 200, _point(out, 120))  # an older point changes nothing
    rep.press(edge, 0)
    assert not rep.log.pressed and rep.log.pressure(out) == 0


async def test_a_pressure_frame_is_taken_only_on_a_data_stream_whatever_its_value() -> None:
    """Over gRPC: a Pressure frame on a backup stream is refused (nothing
    there may press anyone); on a data stream any from_seq and through_seq,
    the largest included, only ask for a capture, and the stream goes on."""
    from tests.unit.test_partition_routing import CODEC, _partition_edge, _rows

    async with served_sink(_partition_edge(), CODEC) as (stub, _, sink, _metrics):
        for channel, frame in (
            (pb.BACKUP, pb.Frame(pressure=pb.Pressure(from_seq=7))),
            (pb.DATA, pb.Frame(pressure=pb.Pressure(from_seq=2**64 - 1, through_seq=2**64 - 1))),
        ):
            call = stub.Push()
            hello = pb.Hello(edge="up->down.p0", sender="up", channel=channel, layout=CODEC.fingerprint())
            await call.write(pb.Frame(hello=hello))
            await asyncio.wait_for(call.read(), 10)
            await call.write(frame)
            if channel == pb.BACKUP:
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await asyncio.wait_for(call.read(), 10)
                assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
                assert "unexpected pressure frame" in (caught.value.details() or "")
                continue
            rows = _rows([0, 0, 0])  # partition 0's, whole
            await call.write(
                pb.Frame(batch=pb.Batch(first_seq=1, count=3, rows=CODEC.encode(rows), watermark=3))
            )
            await until_next_seq(sink, 4)
            await call.done_writing()
