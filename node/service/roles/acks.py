"""A primary's acknowledgements upstream (ha-protocol.md "Flows"): on each
input edge's data stream, Level-0 (received up to this seq) and the
Level-1 point (the cut below which the producer may drop rows); and the
same as a notice to the producer's secondary, which trims its output queue
by it. Sent every ``ack_interval_ms``, at once when a consumer's
acknowledgement arrives (Algorithm 1 lines 14-15), and at once when an
input edge has an eighth of ``queue_rows`` unacknowledged
(:func:`unacked_rows`).

A point may refer to an operator state: the producer's secondary is sent
that state first, a chunk per notice, once per state and secondary.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

import grpc

from semiactive.config import ClusterConfig
from semiactive.ha.replica import Mode, StageReplica
from semiactive.ha.resync import StateSnapshot
from semiactive.ha.routing import producer_secondary
from semiactive.ha.state_transfer import chunks
from semiactive.ha.views import ViewTable
from semiactive.node.service.outbound import Outbound
from semiactive.node.service.peers import Peers
from semiactive.node.service.roles.inbound import InboundEdgeSession
from semiactive.runtime import clock
from semiactive.runtime.messages import chunk_to_pb, point_to_pb
from semiactive.topology import Stage
from semiactive.wire import dataplane_pb2 as pb

ACK_SPACING_S = 0.01  # event-driven Level-1 acks are at least this far apart


def unacked_rows(config: ClusterConfig) -> int:
    """Rows an input edge takes in before its consumer acknowledges at once.

    A producer frees its output log only as far as the Level-1 cut, and the
    cut moves with the acks running up the chain from the sink. Every
    ``ack_interval_ms`` alone, a chain could never move more than
    ``queue_rows`` per interval and the acks' round trip (50,000 rows per
    250 ms and more: the paper chain stalled at 175,000 tuples/s with its
    processes a quarter idle). Acking every eighth of a log keeps each log at
    most a few eighths full at any rate.
    """
    return max(1, config.queue_rows // 8)


# (input edge, producer's secondary, producer stage's view version): keyed
# by the version so that a new secondary is sent the state again.
NoticeKey = tuple[str, str, int]


class AckSender:
    def __init__(
        self,
        node: str,
        stage: Stage,
        config: ClusterConfig,
        views: ViewTable,
        replica: StageReplica,
        outbound: Outbound,
        peers: Peers,
        session: Callable[[str], InboundEdgeSession | None],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        """``session``: the inbound session of an input edge, if open;
        ``spawn``: runs a fire-and-forget task."""
        self.node = node
        self.stage = stage
        self.config = config
        self.views = views
        self.replica = replica
        self.outbound = outbound
        self.peers = peers
        self.session = session
        self.spawn = spawn
        self._ack_soon: asyncio.TimerHandle | None = None
        self._last_acks = 0.0
        # Which state each producer's secondary has been sent, and the
        # ones being sent.
        self._notice_state: dict[NoticeKey, int] = {}
        self._notifying: set[NoticeKey] = set()

    async def run(self) -> None:
        """Every ``ack_interval_ms``: a primary acknowledges; a secondary
        only forgets what its next cut no longer needs."""
        interval = self.config.ack_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            if self.replica.mode is Mode.PRIMARY:
                self.send()
            elif self.replica.mode is Mode.SECONDARY:
                self.replica.forget_unneeded()

    def consumer_acknowledged(self) -> None:
        """Algorithm 1 lines 14-15: a consumer's Level-0 has arrived, so
        send Level-1 upstream now (at most every ``ACK_SPACING_S``)."""
        self.ack_soon()

    def ack_soon(self) -> None:
        """Acknowledge on every input edge now, at most every ``ACK_SPACING_S``."""
        if self.replica.mode is not Mode.PRIMARY or self._ack_soon is not None:
            return
        delay = max(0.0, self._last_acks + ACK_SPACING_S - clock.monotonic())
        self._ack_soon = asyncio.get_running_loop().call_later(delay, self._send_soon)

    def _send_soon(self) -> None:
        self._ack_soon = None
        if self.replica.mode is Mode.PRIMARY:
            self.send()

    def send(self) -> None:
        self._last_acks = clock.monotonic()
        pressed = self.replica.log.pressed
        level1 = self.replica.level1()
        if self.replica.log.pressed != pressed:
            self.outbound.wake()  # our consumers hold our producer's log: tell them
        # One message for every edge: a point holds a counter tuple per
        # operator (hundreds in a large program).
        point = None if level1 is None else point_to_pb(level1)
        state = None if level1 is None else level1.state
        epoch = self.views[self.stage.name].epoch
        for edge in self.stage.inputs:
            seq = self.replica.level0(edge.id)
            session = self.session(edge.id)
            if session is not None:
                session.ack(seq, point, epoch, state)
            secondary = producer_secondary(self.views, edge)
            if secondary is not None and secondary != self.node:
                notice = pb.AckNotice(edge=edge.id, sender=self.node, epoch=epoch, seq=seq)
                if point is not None:
                    notice.point.CopyFrom(point)
                key = (edge.id, secondary, self.views[edge.producer].version)
                if key in self._notifying:
                    continue  # a state is on its way there; the point follows it
                if state is not None and self._notice_state.get(key) != state.position:
                    self._notifying.add(key)
                    self.spawn(self._notify_state(key, notice, state))
                else:
                    self.spawn(self._notify(secondary, notice))

    async def _notify(self, node: str, notice: pb.AckNotice) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError):
            await self.peers.data(node).Ack(notice, timeout=1.0)

    async def _notify_state(self, key: NoticeKey, notice: pb.AckNotice, state: StateSnapshot) -> None:
        """The state a point refers to, a chunk per notice, then the point."""
        edge, node, _ = key
        try:
            stub = self.peers.data(node)
            for chunk in chunks(state):
                piece = pb.AckNotice(edge=edge, sender=self.node, epoch=notice.epoch, seq=notice.seq)
                piece.state.CopyFrom(chunk_to_pb(chunk))
                await stub.Ack(piece, timeout=10.0)
            await stub.Ack(notice, timeout=1.0)
            self._notice_state[key] = state.position
        except grpc.aio.AioRpcError:
            pass  # sent again at a later round
        finally:
            self._notifying.discard(key)
