"""A peer that does not answer: fatal for a node's first senders (an
address wrong at start-up), not for one made later (a new primary busy
restoring a state, which the views settle). A Linear Road source exited
when its new consumer spent more than ``connect_timeout`` restoring."""

from __future__ import annotations

import asyncio
import random

import pytest

from semiactive.ha.output_log import OutputLog
from semiactive.launcher.ports import PortAllocator
from semiactive.node.cql import plan
from semiactive.node.sections.codec import RowCodec
from semiactive.node.service.transport import EdgeSender, PeerUnreachable
from semiactive.runtime.network import Network
from semiactive.simulation.memory_network import Fabric
from semiactive.simulation.virtual_loop import VirtualLoop
from semiactive.wire import dataplane_pb2 as pb
from tests.waiting import on_virtual_clock

SCHEMA = plan.Schema((plan.Column("v", plan.INTEGER),))


def sender(fatal: bool, network: Network | None = None) -> EdgeSender:
    log = OutputLog()
    log.add_edge("up->down")
    return EdgeSender(
        sender="up-1",
        edge="up->down",
        target="down",
        address=f"127.0.0.1:{PortAllocator().take()}",  # nothing listens there
        log=log,
        codec=RowCodec(SCHEMA, plan.Kind.STREAM),
        channel=pb.DATA,
        epoch=lambda: 0,
        on_feedback=lambda s, f: None,
        connect_timeout=0.3,
        unreachable_is_fatal=fatal,
        network=network,
    )


async def test_a_first_sender_gives_up_on_a_peer_never_reached() -> None:
    """Over real gRPC: a closed port is what it gives up on."""
    with pytest.raises(PeerUnreachable, match="cannot reach down"):
        await asyncio.wait_for(sender(fatal=True).run(), timeout=20)


@on_virtual_clock
async def test_a_later_sender_keeps_trying() -> None:
    """On the simulation's network and clock: a minute passes at once."""
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualLoop)
    later = sender(fatal=False, network=Fabric(loop, random.Random(1)).network("up-1", "up-1#1"))
    task = asyncio.create_task(later.run())
    try:
        await asyncio.sleep(60)  # two hundred connect timeouts
        assert not task.done()
        assert later.last_error is not None and "UNAVAILABLE" in later.last_error
    finally:
        later.stop()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
