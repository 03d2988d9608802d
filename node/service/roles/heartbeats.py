"""A secondary's failure detection (Algorithm 2 lines 1-2; the pure
:class:`~semiactive.ha.detector.FailureDetector`): heartbeats to its
stage's primary over one stream, and the decision that the primary failed
- a missed deadline, confirmed, or a broken stream that cannot be
re-established - on which the secondary takes over."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from semiactive.config import ClusterConfig
from semiactive.ha.detector import FailureDetector, becoming_primary, may_be_starting
from semiactive.ha.replica import Mode, StageReplica
from semiactive.ha.views import ViewTable
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.peers import Peers
from semiactive.runtime import clock
from semiactive.topology import Stage
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import dataplane_pb2 as pb


class HeartbeatMonitor:
    def __init__(
        self,
        node: str,
        stage: Stage,
        config: ClusterConfig,
        views: ViewTable,
        replica: StageReplica,
        peers: Peers,
        metrics: NodeMetrics,
        assigned: bool,
        witness: Callable[[str], bool | None],
        on_failure: Callable[[str, float], Awaitable[None]],
    ) -> None:
        """``assigned``: this secondary was assigned in a running cluster,
        so an unreachable primary is not still starting: dead, unless
        ``witness`` (whether the coordinator hears from a node; None: no
        answer) says it lives. ``on_failure(primary, silent_for)``: the
        takeover."""
        self.node = node
        self.stage = stage
        self.config = config
        self.views = views
        self.replica = replica
        self.peers = peers
        self.metrics = metrics
        self.assigned = assigned
        self.witness = witness
        self.on_failure = on_failure
        # Primaries that ever answered a ping, and since when each was
        # watched: a stream that breaks and is set up again must not make
        # a primary reached before look "never reached" (then "maybe still
        # starting") again.
        self.reached: set[str] = set()
        self.watched_since: dict[str, float] = {}

    async def run(self) -> None:
        """Watch whoever is the primary while this replica is a secondary;
        take over from one that failed."""
        cfg = self.config
        detector = FailureDetector(cfg.heartbeat_ms / 1000, cfg.timeout_ms / 1000)
        while self.replica.mode is Mode.SECONDARY:
            primary = self.views[self.stage.name].primary
            if primary == self.node:
                return
            detector.start(clock.monotonic())
            failed = await self._heartbeat(primary, detector)
            if not failed or self.replica.mode is not Mode.SECONDARY:
                continue
            if self.views[self.stage.name].primary != primary:
                continue  # someone else already took over
            await self.on_failure(primary, detector.silent_for(clock.monotonic()))
            return

    async def _heartbeat(self, primary: str, detector: FailureDetector) -> bool:
        """Ping ``primary`` until it fails (True) or stops being the primary
        (False)."""
        interval = detector.interval
        call = self.peers.control(primary).Heartbeat()
        since = self.watched_since.setdefault(primary, clock.monotonic())

        async def pongs() -> None:
            with contextlib.suppress(grpc.aio.AioRpcError):
                async for _ in call:
                    detector.on_pong(clock.monotonic())
                    self.reached.add(primary)

        reader = asyncio.create_task(pongs())
        n = 0
        try:
            while self.views[self.stage.name].primary == primary and self.replica.mode is Mode.SECONDARY:
                if reader.done():
                    # The stream broke: dead if it cannot be re-established
                    # now, or if the node there is no longer this stage's
                    # primary (restarted empty under its name).
                    starting = may_be_starting(
                        primary in self.reached,
                        self.assigned,
                        clock.monotonic() - since,
                        self.config.connect_timeout_ms / 1000,
                    )
                    unanswered = detector.last_pong is None  # on this stream
                    return await self._gone(primary, starting=starting, cut_off=unanswered and self.assigned)
                n += 1
                sent_at = clock.monotonic()
                with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                    await call.write(cpb.Ping(n=n, sender=self.node, stage=self.stage.name))
                self.metrics.heartbeats_sent.labels(self.stage.name).inc()
                deadline = clock.monotonic() + interval
                while clock.monotonic() < deadline:
                    if detector.expired(clock.monotonic()) and detector.last_pong is not None:
                        if await self._confirm(call, detector, n + 1):
                            return True
                        n += 1
                    if reader.done():
                        break
                    await asyncio.sleep(min(0.01, interval / 10))
                if detector.last_pong is None or detector.last_pong < sent_at:
                    self.metrics.heartbeats_missed.labels(self.stage.name).inc()
            return False
        finally:
            reader.cancel()
            call.cancel()

    async def _confirm(self, call: Any, detector: FailureDetector, n: int) -> bool:
        """Suspected: the deadline passed. Before declaring a failure, let
        pongs already received be read (this process may itself have been
        starved) and give one more ping a short grace."""
        await asyncio.sleep(0)
        if not detector.expired(clock.monotonic()):
            return False
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            await call.write(cpb.Ping(n=n, sender=self.node, stage=self.stage.name))
        grace = clock.monotonic() + detector.interval / 2
        while clock.monotonic() < grace:
            await asyncio.sleep(0.005)
            if not detector.expired(clock.monotonic()):
                return False
        return True

    async def _gone(self, primary: str, starting: bool, cut_off: bool = False) -> bool:
        """Whether ``primary`` no longer serves this stage: it does not
        answer (unless it may still be starting), or answers as something
        else.

        ``cut_off``: this replica was assigned to ``primary`` and never
        reached it. Then silence alone is no proof: if the coordinator still
        hears from the primary, it is alive and only cut off from here (a
        partition), and taking over would replace a healthy primary; a
        fenced old primary reassigned as its successor's secondary made the
        stage fail over back and forth for as long as the partition lasted.
        Wait for a pong, or for the witness to lose the primary too.

        A primary that answers as a secondary not yet switched to the view
        naming it (semiactive.ha.detector.becoming_primary) is alive too: wait."""
        try:
            status: cpb.NodeStatus = await self.peers.control(primary).Status(pb.Empty(), timeout=0.2)
        except grpc.aio.AioRpcError:
            if cut_off and self.witness(primary):
                await asyncio.sleep(self.config.heartbeat_ms / 1000)
                return False
            return not starting
        name, epoch = self.stage.name, self.views[self.stage.name].epoch
        held = next((v.primary for v in status.views if v.stage == name), "")
        if becoming_primary(primary, status.role, status.stage, status.epoch, held, name, epoch):
            await asyncio.sleep(self.config.heartbeat_ms / 1000)
            return False
        return status.role != "primary" or status.stage != self.stage.name
