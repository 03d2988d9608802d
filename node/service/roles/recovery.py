"""How long a takeover took to recover (Definition 2): from the failure's
detection (or a migration's handover) until the new primary has reproduced
the old primary's output, whose extent its consumers tell on connecting.
Reported as a ``recovered`` event (telemetry)."""

from __future__ import annotations

import asyncio

from semiactive.ha.replica import StageReplica
from semiactive.node.service.outbound import Outbound
from semiactive.runtime import clock
from semiactive.runtime.events import EventLog
from semiactive.topology import Stage

# How long to wait for every consumer to connect and tell its position.
TARGET_WAIT_S = 5.0


class RecoveryWatch:
    def __init__(self, stage: Stage, replica: StageReplica, outbound: Outbound, events: EventLog) -> None:
        self.stage = stage
        self.replica = replica
        self.outbound = outbound
        self.events = events
        self.detected_at: float | None = None
        self.target: int | None = None  # the old primary's output head; None: none awaited

    def begin(self) -> None:
        """The failure was detected, or the stage handed over, now."""
        self.detected_at = clock.wall()

    async def await_target(self) -> None:
        """The old primary's output: the furthest position the consumers
        tell on connecting (all of them, or as many as did in time)."""
        deadline = clock.monotonic() + TARGET_WAIT_S
        consumers = len(self.stage.outputs)
        while clock.monotonic() < deadline:
            positions = self.outbound.consumer_positions()
            if len(positions) >= consumers:
                break
            await asyncio.sleep(0.002)
        positions = self.outbound.consumer_positions()
        self.target = max(positions.values(), default=self.replica.log.head)
        self.check()

    def check(self) -> None:
        """Report the recovery once the target is reproduced (after each
        operator run)."""
        if self.target is None or self.detected_at is None:
            return
        if self.replica.warming_up or self.replica.log.head < self.target:
            return
        elapsed = clock.wall() - self.detected_at
        self.events.emit(
            "recovered",
            stage=self.stage.name,
            recovery_ms=round(elapsed * 1000, 1),
            target=self.target,
        )
        self.target = None
