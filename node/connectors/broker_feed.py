"""A broker source's messages as rows numbered the same in every
incarnation: decoding (:mod:`.message_rows`), the event-time merge of the
partitions (:mod:`.event_time_merge`) and the checkpoints a reader started
again goes on from. Pure: the source role reads the broker and feeds this.

A checkpoint is kept after each batch of rows; once the source's output
log has freed through seq F (no consumer will ask for it again), the newest
checkpoint at or before F is what a restarted reader needs
(:meth:`BrokerFeed.checkpoint_through`), and its positions are what the
broker may be told is done.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from semiactive.node.connectors.event_time_merge import EventTimeMerge, MergeCheckpoint
from semiactive.node.connectors.message_rows import MessageDecoder, Rejected
from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element

CHECKPOINTS_KEPT = 4096  # older ones are dropped first: a later freed point picks a later one


@dataclass(frozen=True)
class BrokerMessage:
    partition: int
    position: int  # Kafka offset, NATS stream sequence
    value: bytes
    produced: float = 0.0  # unix seconds the producer stamped; 0 if unknown


class BrokerReader(Protocol):
    """A broker source's connection (Kafka, NATS): where the merge's
    positions come from and go back to."""

    outage: str | None  # why the broker is away, while it is

    async def open(self) -> dict[int, int]:
        """Connect (bounded: a UserError naming what); per partition, where
        a first start reads."""
        ...

    async def assign(self, positions: dict[int, int]) -> None: ...

    async def read(self, most: int, timeout_s: float) -> list[BrokerMessage]:
        """Up to ``most`` messages in each partition's order (none while
        the broker is away), waiting at most ``timeout_s`` for the first."""
        ...

    async def caught_up(self, partitions: set[int]) -> bool:
        """Whether ``partitions`` were read to the end the broker has now."""
        ...

    def commit(self, positions: dict[int, int]) -> None:
        """Tell the broker, at the next read, that what is before these
        positions is done."""
        ...

    async def commit_now(self, positions: dict[int, int]) -> None: ...

    async def dead_letter(self, message: BrokerMessage, reason: str, detail: str) -> None: ...

    async def settle(self) -> bool:
        """Whether every dead letter sent so far is stored (waiting a
        moment for it): a checkpoint past a rejected message may be kept
        only then, or a kill would lose its dead letter."""
        ...

    async def close(self) -> None: ...


@dataclass
class Taken:
    """What one batch of messages gave."""

    rows: list[Element] = field(default_factory=list)
    entered: float = 0.0  # when the first row entered the system (unix s)
    rejected: list[tuple[BrokerMessage, Rejected]] = field(default_factory=list)


class BrokerFeed:
    def __init__(
        self, schema: plan.Schema, format: Literal["json", "csv"], max_delay_ms: int, start: MergeCheckpoint
    ) -> None:
        self.decoder = MessageDecoder(schema, format)
        self.merge = EventTimeMerge(start, max_delay_ms)
        self.seq = start.seq
        self._checkpoints: deque[MergeCheckpoint] = deque([start], maxlen=CHECKPOINTS_KEPT)
        self._given = start.seq

    @property
    def watermark(self) -> int:
        return self.merge.watermark

    def positions(self) -> dict[int, int]:
        """Where to read each partition from now."""
        return {p: self.merge.position(p) for p in self.merge.partitions}

    def take(self, messages: Iterable[BrokerMessage], now: float) -> Taken:
        """``now``: the arrival time, for messages without a producer's stamp."""
        taken = Taken()
        merge = self.merge
        for m in messages:
            try:
                ts, values = self.decoder.decode(m.value)
            except Rejected as why:
                merge.passed(m.partition, m.position)
                taken.rejected.append((m, why))
                continue
            if not merge.push(m.partition, m.position, ts, (m.produced or now, values)):
                highest = merge.highest(m.partition)
                late = f"ts {ts} is more than {merge.delay} ms before its partition's highest, {highest}"
                taken.rejected.append((m, Rejected("late", late)))
        self._rows(merge.ready(), taken)
        return taken

    def end(self) -> Taken:
        """The rows still held (the stream ends)."""
        taken = Taken()
        self._rows(self.merge.flush(), taken)
        return taken

    def _rows(self, ready: list[tuple[tuple[int, int, int], tuple[Any, ...]]], taken: Taken) -> None:
        if not ready:
            return
        seq = self.seq
        rows = taken.rows
        for (ts, _, _), (_, values) in ready:
            seq += 1
            rows.append((ts, seq, 1, *values))
        taken.entered = min(entered for _, (entered, _) in ready)
        self.seq = seq
        self._checkpoints.append(self.merge.checkpoint(seq))

    def checkpoint_through(self, freed: int) -> MergeCheckpoint | None:
        """The newest checkpoint at or before seq ``freed`` if it is newer
        than the one given last time (older ones are dropped); else None."""
        kept = self._checkpoints
        while len(kept) > 1 and kept[1].seq <= freed:
            kept.popleft()
        if kept[0].seq <= freed and kept[0].seq > self._given:
            self._given = kept[0].seq
            return kept[0]
        return None
