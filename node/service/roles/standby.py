"""A member of a protected source or sink (``ha: {secondary: ...}``)
before it serves.

Both members start as this role; whoever holds the serving lock
(:mod:`~semiactive.node.service.roles.serving_lock`) becomes the source or
sink, the other waits. The configured primary takes the lock first (the
configured secondary, on its first start, waits until it has seen it
serve). A member that takes the lock from a dead holder serves at the next
epoch: it announces the view naming itself primary (and the other member
secondary), goes on from the progress the holder left (a source: its freed
point, a sink: what its table or stream holds), and its consumers or
producer, seeing the view, fence the old one and reconnect to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from semiactive.ha.views import StageView, ViewTable
from semiactive.node.service.roles.serving_lock import ServingLock
from semiactive.topology import Stage
from semiactive.wire import control_pb2 as cpb

SERVED_POLL_S = 0.05


class StandbyRole:
    def __init__(self, node: str, stage: Stage, lock: ServingLock, resume: bool) -> None:
        """``resume``: this process was started again (a member that died):
        it never serves at epoch 0 as a first start would."""
        assert stage.secondary is not None
        self.node = node
        self.stage = stage
        self.lock = lock
        self.resume = resume
        self.t0: float | None = None  # the run's start, if Start came
        self.stopped = False  # a Stop came: the stream ends once it serves
        self.unnoticed_s = 0.0  # how long the lock may have been free before it was taken

    @property
    def other(self) -> str:
        """The stage's other member."""
        assert self.stage.secondary is not None
        return self.stage.secondary if self.node == self.stage.primary else self.stage.primary

    @property
    def first_start(self) -> bool:
        """The configured primary's first start: it serves at epoch 0."""
        return self.node == self.stage.primary and not self.resume

    async def until_primary_served(self, status: Callable[[str], Awaitable[cpb.NodeStatus | None]]) -> None:
        """The configured secondary's first start: wait until the configured
        primary has served, so that the lock goes to the primary first (an
        epoch file left in a reused run directory proves nothing)."""
        if self.node != self.stage.secondary or self.resume:
            return
        while True:
            st = await status(self.stage.primary)
            if st is not None and st.stage == self.stage.name and st.role in ("source", "sink"):
                return
            await asyncio.sleep(SERVED_POLL_S)

    async def take(self, views: ViewTable) -> StageView | None:
        """Hold the lock; return the view this member serves under (None:
        the configured primary's first start, epoch 0 as configured)."""
        self.unnoticed_s = await self.lock.take()
        if self.first_start:
            self.lock.record(0)
            return None
        last = self.lock.last_epoch()
        current = views[self.stage.name]
        epoch = max(current.epoch, -1 if last is None else last) + 1
        self.lock.record(epoch)
        return StageView(self.stage.name, epoch, current.version + 1, self.node, self.other)
