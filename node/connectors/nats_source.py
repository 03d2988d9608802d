"""NATS JetStream: the stream a ``kind: nats`` source reads (nats-py).

The source's one "partition" is the stream; a message's position is its
stream sequence. It reads through its durable pull consumer (``durable``),
which it creates at the position it needs on every connection (an earlier
one of that name is replaced), with acknowledgement policy *all*: acking a
message acknowledges every one before it, so the consumer's acknowledgement
floor is the source's commit, moved to what every consumer's Level-1 cut
has passed. A first start of a run reads after that floor; a restarted
reader reads from its checkpoint. A message delivered twice (after a
reconnection) is dropped by its sequence.

Rejected messages are published to the dead-letter subject with
``Nats-Msg-Id`` = stream and sequence (published again by a restarted
reader, the stream drops it) and headers ``reason``, ``detail``,
``source``. The server going away is an outage: reads return nothing while
the source reconnects with backoff, and go on where they were.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from typing import Any

from semiactive.config import NatsSourceConfig
from semiactive.errors import UserError
from semiactive.node.connectors.broker_feed import BrokerMessage
from semiactive.node.connectors.nats import (
    ERRORS,
    require_client,
    subject_matches,
    unless_closed,
    unreachable,
)
from semiactive.node.connectors.nats import connect as connect_once
from semiactive.node.connectors.retrying import RETRY_MAX_S, connect_within, first_line

try:
    import nats
    import nats.errors
    import nats.js.errors
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType
except ImportError:  # pragma: no cover - the extra is part of every test install
    nats = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 5.0
ACK_WAIT_S = 3600.0  # the source acknowledges at its freed point, not per message


class NatsReader:
    def __init__(self, config: NatsSourceConfig, source: str) -> None:
        require_client("source")
        self.config = config
        self.source = source
        self.outage: str | None = None
        self._nc: Any = None
        self._js: Any = None
        self._closed = asyncio.Event()  # set when the connection closes
        self._sub: Any = None
        self._next = 1  # the next stream sequence the source needs
        self._acked = 0  # the consumer's acknowledgement floor as this reader moved it
        self._unacked: OrderedDict[int, Any] = OrderedDict()  # seq -> message, to acknowledge later
        self._pending_commit: int | None = None
        self._retry_at = 0.0
        self._delay = 0.0
        self._publishing = 0  # dead letters being published now

    async def open(self) -> dict[int, int]:
        cfg = self.config
        unavailable = unreachable(cfg.stream, cfg.url, cfg.connect_timeout_s)
        await connect_within(self._connect, self._disconnect, ERRORS, cfg.connect_timeout_s, unavailable)
        try:
            info = await self._js.stream_info(cfg.stream)
        except nats.js.errors.NotFoundError:
            await self._disconnect()
            raise UserError(f"NATS stream {cfg.stream} does not exist at {cfg.url}") from None
        dead = cfg.dead_letters
        if subject_matches(cfg.subject, dead):
            raise UserError(f"the dead-letter subject {dead} is one the source reads ({cfg.subject})")
        await self._dead_letter_stream(dead)
        try:
            floor = (await self._js.consumer_info(cfg.stream, cfg.durable)).ack_floor.stream_seq
            start = floor + 1
        except nats.js.errors.NotFoundError:
            state = info.state
            start = state.first_seq if cfg.start == "earliest" else state.last_seq + 1
        return {0: max(1, start)}

    async def _dead_letter_stream(self, subject: str) -> None:
        try:
            await self._js.find_stream_name_by_subject(subject)
        except nats.js.errors.NotFoundError:
            name = f"{self.config.stream}_DEAD"
            await self._js.add_stream(name=name, subjects=[subject], storage=StorageType.FILE)

    async def _connect(self) -> None:
        self._closed = asyncio.Event()
        self._nc = await connect_once(self.config.url, self._closed)
        self._js = self._nc.jetstream(timeout=REQUEST_TIMEOUT_S)

    async def _disconnect(self) -> None:
        nc, self._nc, self._js, self._sub = self._nc, None, None, None
        if nc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), 2)

    async def assign(self, positions: dict[int, int]) -> None:
        self._next = positions[0]
        self._acked = self._next - 1

    async def _subscribe(self) -> None:
        """The durable consumer, made again at the oldest message not yet
        acknowledged (so its floor stays the commit); what the source
        already read is dropped as it comes again."""
        cfg = self.config
        if self._js is None:
            await self._connect()
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await unless_closed(self._js.delete_consumer(cfg.stream, cfg.durable), self._closed)
        self._unacked.clear()
        consumer = ConsumerConfig(
            durable_name=cfg.durable,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self._acked + 1,
            ack_policy=AckPolicy.ALL,
            ack_wait=ACK_WAIT_S,
            max_ack_pending=-1,
            filter_subject=cfg.subject,
        )
        await unless_closed(self._js.add_consumer(cfg.stream, consumer), self._closed)
        self._sub = await self._js.pull_subscribe_bind(durable=cfg.durable, stream=cfg.stream)

    async def read(self, most: int, timeout_s: float) -> list[BrokerMessage]:
        try:
            if self._sub is None:
                if time.monotonic() < self._retry_at:
                    await asyncio.sleep(min(timeout_s, self._retry_at - time.monotonic()))
                    return []
                await self._subscribe()
            await self._ack()
            try:
                messages = await self._sub.fetch(most, timeout=timeout_s)
            except nats.errors.TimeoutError:
                messages = []
        except ERRORS as exc:
            await self._away(exc)
            return []
        self.outage = None
        self._delay = 0.0
        out = []
        for m in messages:
            meta = m.metadata
            seq = meta.sequence.stream
            if seq > self._acked:
                self._unacked[seq] = m
            if seq < self._next:
                continue
            self._next = seq + 1
            out.append(BrokerMessage(0, seq, m.data, meta.timestamp.timestamp() if meta.timestamp else 0.0))
        return out

    async def _away(self, exc: BaseException) -> None:
        if self.outage is None:
            log.warning(
                "%s: NATS stream %s: %s; reconnecting", self.source, self.config.stream, first_line(exc)
            )
        self.outage = first_line(exc)
        await self._disconnect()
        self._delay = min(max(self._delay * 2, 0.05), RETRY_MAX_S)
        self._retry_at = time.monotonic() + self._delay

    async def caught_up(self, partitions: set[int]) -> bool:
        """Whether the consumer has delivered every message of its subject
        the stream holds now."""
        if not partitions:
            return True
        try:
            if self._sub is None:
                return False
            info = await self._sub.consumer_info()
        except ERRORS:
            return False
        return bool(info.num_pending == 0)

    def commit(self, positions: dict[int, int]) -> None:
        self._pending_commit = positions[0]

    async def _ack(self) -> None:
        """Acknowledge the newest message read before the pending commit
        (with policy *all*, every one before it too)."""
        until, self._pending_commit = self._pending_commit, None
        if until is None:
            return
        last = None
        while self._unacked and next(iter(self._unacked)) < until:
            _, last = self._unacked.popitem(last=False)
        if last is not None:
            await last.ack()
            self._acked = last.metadata.sequence.stream

    async def commit_now(self, positions: dict[int, int]) -> None:
        self.commit(positions)
        try:
            await self._ack()
        except ERRORS as exc:
            log.warning("%s: cannot acknowledge the end of the stream: %s", self.source, first_line(exc))

    async def dead_letter(self, message: BrokerMessage, reason: str, detail: str) -> None:
        headers = {
            "Nats-Msg-Id": f"{self.config.stream}:{message.position}",
            "reason": reason,
            "detail": detail[:500],
            "source": self.source,
        }
        self._publishing += 1
        try:
            # Until it is stored, however long the server is away (the
            # source's reads wait meanwhile: the same outage): the message
            # is acknowledged with the rows after it, and a dead letter lost
            # here would be gone for good. Msg-Id makes a retry harmless.
            while True:
                try:
                    if self._js is None:
                        await self._connect()
                    publish = self._js.publish(self.config.dead_letters, message.value, headers=headers)
                    await unless_closed(publish, self._closed)
                    return
                except ERRORS as exc:
                    await self._away(exc)
                    await asyncio.sleep(self._delay)
        finally:
            self._publishing -= 1

    async def settle(self) -> bool:
        return self._publishing == 0  # one being published now may be after the checkpoint

    async def close(self) -> None:
        with contextlib.suppress(*ERRORS):
            await self._ack()
        await self._disconnect()
