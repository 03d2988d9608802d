"""The receiving end of a stage replica: what its inbound edge sessions
(node/service/roles/inbound.py) hand over - rows, resync points, a
producer's pressure - taken into the replica's input section, and the flow
control that holds the sessions while the input backlog is full."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from semiactive.config import ClusterConfig
from semiactive.ha.replica import Mode, StageReplica
from semiactive.ha.resync import ResyncPoint
from semiactive.node.engine.elements import Element
from semiactive.node.sections.record_rows import RecordLayout
from semiactive.node.service.outbound import Outbound
from semiactive.node.service.roles.connection_manager import ConnectionManager
from semiactive.runtime.events import EventLog
from semiactive.topology import Stage

log = logging.getLogger(__name__)


class ReplicaReceiver:
    """A :class:`~semiactive.node.service.roles.inbound.Receiver`."""

    def __init__(
        self,
        stage: Stage,
        config: ClusterConfig,
        replica: StageReplica,
        connections: ConnectionManager,
        outbound: Outbound,
        events: EventLog,
        wake: asyncio.Event,
    ) -> None:
        """``wake``: the operator loop's, set when there is something to
        run."""
        self.stage = stage
        self.config = config
        self.replica = replica
        self.connections = connections
        self.outbound = outbound
        self.events = events
        self.wake = wake
        # Cleared while the input backlog is over queue_rows; set by the
        # operator loop after each run.
        self.input_room = asyncio.Event()
        self.input_room.set()

    def next_seq(self, edge: str) -> int:
        return self.replica.inputs.by_name[edge].next_seq

    def receive(
        self,
        edge: str,
        first_seq: int,
        rows: Sequence[Element],
        watermark: int,
        eos: bool,
        count: int,
        entered: float = 0.0,
    ) -> int:
        if self.replica.mode is Mode.FENCED:
            return 0
        edge_input = self.replica.inputs.by_name[edge]
        before = edge_input.next_seq
        new = edge_input.accept_rows(first_seq, rows, watermark, eos, count, entered)
        if self.connections.active and new and rows:
            fresh = rows[before - first_seq :] if before > first_seq else rows
            self.connections.arrived(edge, fresh)
        return new

    def idle_from(self, edge: str) -> int | None:
        return self.connections.table.idle_from(edge)

    def manages(self, edge: str) -> bool:
        return self.connections.table.manages(edge)

    def layout(self, edge: str) -> RecordLayout | None:
        return None if self.manages(edge) else self.replica.inputs.by_name[edge].layout

    def receive_point(self, edge: str, point: ResyncPoint) -> set[str]:
        if not self.replica.receive_point(edge, point):
            return set()
        self.events.emit(
            "resync",
            stage=self.stage.name,
            position=point.position,
            cut=point.cut_position,
            state=point.state is not None,
        )
        rewind, self.replica.rewind = self.replica.rewind, set()
        self.wake.set()
        return rewind

    def pressed(self, edge: str, from_seq: int, through_seq: int) -> None:
        if from_seq and edge not in self.replica.pressure:
            log.debug("%s: the producer of %s is pressed from seq %d", self.stage.name, edge, from_seq)
            self.events.emit(
                "pressed", stage=self.stage.name, edge=edge, from_seq=from_seq, through_seq=through_seq
            )
        self.replica.press(edge, from_seq, through_seq)
        self.wake.set()
        self.outbound.wake()

    async def received(self) -> None:
        self.wake.set()
        limit = self.config.queue_rows
        while self.replica.inputs.backlog > limit:
            self.input_room.clear()
            await self.input_room.wait()
