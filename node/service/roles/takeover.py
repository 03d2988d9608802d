"""A secondary becoming its stage's primary (Algorithm 2 lines 12-20, with
fencing): on a detected failure, a new view with epoch + 1, broadcast to
every node; or handed the stage by the coordinator (a migration). The
output queue becomes the log the consumers are fed from; the producers,
seeing the view, send to us from our position."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

import grpc

from semiactive.ha.replica import Mode, StageReplica
from semiactive.ha.views import StageView, ViewTable
from semiactive.node.service.outbound import Outbound
from semiactive.node.service.peers import Peers
from semiactive.node.service.roles.recovery import RecoveryWatch
from semiactive.runtime.events import EventLog
from semiactive.runtime.messages import view_to_pb
from semiactive.topology import Stage


class TakeoverDriver:
    def __init__(
        self,
        node: str,
        stage: Stage,
        views: ViewTable,
        replica: StageReplica,
        outbound: Outbound,
        peers: Peers,
        events: EventLog,
        recovery: RecoveryWatch,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        wake: asyncio.Event,
    ) -> None:
        """``spawn``: runs a fire-and-forget task; ``wake``: the operator
        loop's."""
        self.node = node
        self.stage = stage
        self.views = views
        self.replica = replica
        self.outbound = outbound
        self.peers = peers
        self.events = events
        self.recovery = recovery
        self.spawn = spawn
        self.wake = wake

    async def take_over(self, old_primary: str, silent_for: float) -> None:
        """``old_primary`` failed: become the primary at epoch + 1 and tell
        everybody."""
        self.recovery.begin()
        view = self.views[self.stage.name].promoted(self.node)
        self.views.apply(view)
        self.events.emit(
            "failure_detected",
            stage=self.stage.name,
            primary=old_primary,
            silent_ms=round(silent_for * 1000, 1),
        )
        await self.become_primary(view, reason="failure")

    async def become_primary(self, view: StageView, reason: str) -> None:
        """Serve the stage as ``view``'s primary: after a detected failure, or
        handed the stage by a migration (the view already applied)."""
        if self.replica.mode is not Mode.SECONDARY:
            return
        if reason != "failure":
            self.recovery.begin()
        self.replica.promote()
        self.events.emit(
            "takeover",
            stage=self.stage.name,
            epoch=view.epoch,
            warming_up=self.replica.warming_up,
            reason=reason,
        )
        self.outbound.reconcile()
        # Watch for the recovery target before telling the other nodes: a
        # frozen peer holds its UpdateView until the RPC times out, which
        # must not count as recovery time.
        self.spawn(self.recovery.await_target())
        await self.broadcast(view)
        self.wake.set()

    async def broadcast(self, view: StageView) -> None:
        await announce_view(self.peers, self.node, view)


async def announce_view(peers: Peers, sender: str, view: StageView) -> None:
    """Tell every other node of ``view`` (``sender``'s takeover); a node
    that does not answer within a second learns it from the coordinator."""
    message = view_to_pb(view)

    async def tell(node: str) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError):
            await peers.control(node).UpdateView(message, timeout=1.0)

    await asyncio.gather(*(tell(n) for n in peers.addresses if n != sender))
