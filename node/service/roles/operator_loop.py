"""The operator loop of a stage replica: runs the pure
:class:`~semiactive.ha.replica.StageReplica` whenever rows or time arrive,
and hands on what a run produced (output to the senders, idle candidates
to connection management, room to the paused inputs, events).

A full output log pauses a primary's loop (``Outbound.wait_room``); an
input backlog pauses the reading of inputs (the receiver's ``input_room``).
"""

from __future__ import annotations

import asyncio

from semiactive.ha.replica import Mode, StageReplica
from semiactive.node.sections.mqo import MqoSection
from semiactive.node.service.outbound import Outbound
from semiactive.node.service.roles.connection_manager import ConnectionManager
from semiactive.node.service.roles.recovery import RecoveryWatch
from semiactive.node.service.roles.reprotection import ReprotectionWatch
from semiactive.runtime import clock
from semiactive.runtime.events import EventLog
from semiactive.topology import Stage


class OperatorLoop:
    def __init__(
        self,
        stage: Stage,
        replica: StageReplica,
        outbound: Outbound,
        connections: ConnectionManager,
        events: EventLog,
        reprotection: ReprotectionWatch,
        recovery: RecoveryWatch,
        wake: asyncio.Event,
        input_room: asyncio.Event,
    ) -> None:
        """``wake``: set by whoever brings something to run; ``input_room``:
        set after each run, which took rows off the input backlog."""
        self.stage = stage
        self.replica = replica
        self.outbound = outbound
        self.connections = connections
        self.events = events
        self.reprotection = reprotection
        self.recovery = recovery
        self.wake = wake
        self.input_room = input_room

    async def run(self) -> None:
        replica = self.replica
        while True:
            await self.wake.wait()
            self.wake.clear()
            if replica.mode is Mode.FENCED:
                return
            if replica.mode is Mode.PRIMARY:
                await self.outbound.wait_room()
            head = replica.log.head
            watermark = replica.log.watermark
            started = clock.monotonic()
            replica.run()
            if replica.more:
                self.wake.set()  # the rest after the event loop had its turn
                if replica.mode is Mode.SECONDARY and replica.warming_up:
                    # Rebuilding a secondary is off the live path: at most
                    # half of a core, the rest for the primaries that share
                    # the machine (a full-speed rebuild made them late).
                    await asyncio.sleep(clock.monotonic() - started)
            if self.connections.active and replica.mode is Mode.PRIMARY and not replica.warming_up:
                self.connections.disconnect_idle()
            self.input_room.set()
            self._report_registrations()
            self.reprotection.check()
            moved = (
                replica.log.head != head or replica.log.watermark != watermark or replica.log.end_of_stream
            )
            if moved and replica.mode is Mode.PRIMARY:
                self.outbound.appended()
            self.recovery.check()
            await asyncio.sleep(0)

    def _report_registrations(self) -> None:
        """An MQO stage's registrations, accepted or refused, as events (the
        only answer ``semiactive query add`` gets from the stage)."""
        operator = self.replica.operator
        if not isinstance(operator, MqoSection) or not operator.engine.judged:
            return
        for instant, op, name, reason in operator.engine.judged:
            self.events.emit(
                "mqo_registration",
                stage=self.stage.name,
                instant=instant,
                op=op,
                query=name,
                accepted=not reason,
                reason=reason,
            )
        operator.engine.judged.clear()
