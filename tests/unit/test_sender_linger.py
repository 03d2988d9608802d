"""``linger_ms`` over real gRPC (node/service/transport.py): a partial batch
leaves at least ``linger`` after the sender's previous frame, so rows that
come close together share a frame, and a row after a quiet spell is not
held back. After a frame of ``BUSY_FRAME_ROWS`` rows or more the gap is
``busy_linger``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from semiactive.ha.output_log import OutputLog
from semiactive.node.cql import plan
from semiactive.node.service.roles.sink import SinkRole
from semiactive.node.service.transport import BUSY_FRAME_ROWS
from semiactive.topology import Edge
from tests.grpc_sink import sender_to, sink_server

SCHEMA = plan.Schema((plan.Column("id", plan.INTEGER),))
EDGE = Edge("up", "down", "s", SCHEMA, plan.Kind.STREAM, 0)
LINGER_S = 2.0


@pytest.fixture
async def sink() -> AsyncIterator[tuple[SinkRole, int]]:
    async with sink_server(EDGE) as served:
        yield served


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
    sender = sender_to(EDGE, port, log, linger=linger_s)
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


async def test_after_a_full_frame_the_sender_lingers_longer(sink: tuple[SinkRole, int]) -> None:
    """No linger for a lone row, ``busy_linger`` after a frame of
    ``BUSY_FRAME_ROWS`` rows; once a small frame went, no linger again."""
    role, port = sink
    log = OutputLog()
    log.add_edge(EDGE.id)
    sender = sender_to(EDGE, port, log, linger=0.0, busy_linger=LINGER_S)
    task = asyncio.create_task(sender.run())
    ts = 0

    async def append(count: int) -> float:
        nonlocal ts
        log.append([(ts + i, ts + i, 1, i) for i in range(1, count + 1)], ts + count)
        ts += count
        sender.wake.set()
        return await _delivered(role, ts)

    try:
        await asyncio.wait_for(sender.connected.wait(), timeout=30)
        started = time.monotonic()
        await append(BUSY_FRAME_ROWS)  # goes at once, and makes the sender busy
        busy_at = time.monotonic()
        after_busy = await append(1)
        quiet_at = time.monotonic()
        after_quiet = await append(1)
    finally:
        sender.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert busy_at - started < LINGER_S / 2
    assert after_busy - busy_at >= LINGER_S * 0.9, "a row after a full frame waits busy_linger"
    assert after_quiet - quiet_at < LINGER_S / 2, "a row after a small frame goes at once"
    assert sender.frames_sent == 3
