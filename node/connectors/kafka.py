"""Kafka: the broker a ``kind: kafka`` source reads (confluent-kafka).

The source reads every partition of its topic itself (``assign``, no
consumer-group rebalancing: one reader owns the topic), from positions its
:class:`~semiactive.node.connectors.event_time_merge.MergeCheckpoint` gives.
It commits to its group the positions below which the cluster needs
nothing (what every consumer's Level-1 cut has passed), so the group's lag
shows what the cluster still holds, and a first start of a later run goes
on from there.

Correctness never rests on the broker's transactions or end offsets (the
Kafka-protocol broker of the tests, Tansu, gets both wrong): rows are
numbered by the source's own merge, and a stop reads until a read finds
nothing more.

Rejected messages go to the dead-letter topic (``<topic>.dead`` unless
configured), keyed ``topic:partition:offset``, with headers ``reason``,
``detail`` and ``source``; a checkpoint is kept only once the dead letters
before it are stored. A reader started again may send a dead letter a
second time (same key).

The client blocks: its calls run in a worker thread, one at a time
(producing a dead letter only queues it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from semiactive.config import KafkaSourceConfig
from semiactive.errors import UserError
from semiactive.node.connectors.broker_feed import BrokerMessage

log = logging.getLogger(__name__)
client_log = logging.getLogger("semiactive.kafka.client")

PROBE_INTERVAL_S = 1.0  # while the broker is away, how often it is asked again
SETTLE_WAIT_S = 1.0  # how long a checkpoint waits for its dead letters to be stored


class KafkaUnavailable(UserError):
    """The broker cannot be reached, or the topic is not there."""


class KafkaReader:
    def __init__(self, config: KafkaSourceConfig, source: str) -> None:
        self.config = config
        self.source = source
        self.outage: str | None = None  # why the broker is away, while it is
        self._pending_commit: dict[int, int] | None = None
        self._probe_at = 0.0
        self._closed = False
        self._read_to: dict[int, int] = {}  # per partition, the next offset to read (negative: symbolic)
        common: dict[str, Any] = {
            "bootstrap.servers": config.bootstrap,
            "logger": client_log,
            "error_cb": self._error,
            "client.id": f"semiactive-{source}",
        }
        self._consumer = Consumer(
            {
                **common,
                "group.id": config.group,
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "auto.offset.reset": config.start,
                "fetch.wait.max.ms": 50,
            }
        )
        self._producer: Producer | None = None
        self._common = common

    async def open(self) -> dict[int, int]:
        return await asyncio.to_thread(self._open)

    def _open(self) -> dict[int, int]:
        """Check that the broker answers and the topic exists; create the
        dead-letter topic if absent. Return, per partition, where a first
        start reads: the group's committed offset, else the configured start."""
        timeout = self.config.connect_timeout_s
        topic = self.config.topic
        try:
            meta = self._consumer.list_topics(topic, timeout=timeout)
        except KafkaException as exc:
            raise KafkaUnavailable(
                f"Kafka at {self.config.bootstrap} did not answer within {timeout:g} s ({reason(exc)})"
            ) from None
        found = meta.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            raise KafkaUnavailable(f"Kafka topic {topic!r} does not exist at {self.config.bootstrap}")
        partitions = sorted(found.partitions)
        ensure_topic(self.config.bootstrap, self.config.dead_letters, timeout, "the dead-letter topic")
        try:
            committed = self._consumer.committed(
                [TopicPartition(topic, p) for p in partitions], timeout=timeout
            )
        except KafkaException as exc:
            raise KafkaUnavailable(f"Kafka group {self.config.group!r}: {reason(exc)}") from None
        symbolic = OFFSET_BEGINNING if self.config.start == "earliest" else OFFSET_END
        self._producer = Producer({**self._common, "enable.idempotence": True, "linger.ms": 20})
        return {tp.partition: tp.offset if tp.offset >= 0 else symbolic for tp in committed}

    async def assign(self, positions: dict[int, int]) -> None:
        self._read_to = {p: pos for p, pos in positions.items()}
        self._consumer.assign([TopicPartition(self.config.topic, p, pos) for p, pos in positions.items()])

    async def read(self, most: int, timeout_s: float) -> list[BrokerMessage]:
        return await asyncio.to_thread(self._read, most, timeout_s)

    def _read(self, most: int, timeout_s: float) -> list[BrokerMessage]:
        self._commit()
        try:
            messages = self._consumer.consume(most, timeout_s)
        except KafkaException as exc:
            self._error(exc.args[0])
            return []
        out = []
        for m in messages:
            error = m.error()
            if error is not None:
                self._error(error)
                continue
            message = _message(m)
            self._read_to[message.partition] = message.position + 1
            out.append(message)
        if out:
            self.outage = None
        elif self.outage is not None and time.monotonic() >= self._probe_at:
            self._probe_at = time.monotonic() + PROBE_INTERVAL_S
            try:
                self._consumer.list_topics(self.config.topic, timeout=PROBE_INTERVAL_S)
                self.outage = None
            except KafkaException:
                pass
        return out

    async def commit_now(self, positions: dict[int, int]) -> None:
        await asyncio.to_thread(self._commit_now, positions)

    def _commit_now(self, positions: dict[int, int]) -> None:
        offsets = [TopicPartition(self.config.topic, p, pos) for p, pos in positions.items() if pos >= 0]
        if offsets:
            try:
                self._consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                log.warning("%s: cannot commit the end of the stream: %s", self.source, reason(exc))

    async def caught_up(self, partitions: set[int]) -> bool:
        return await asyncio.to_thread(self._caught_up, partitions)

    def _caught_up(self, partitions: set[int]) -> bool:
        """Whether every one of ``partitions`` was read to its end offset
        as the broker gives it now. Tansu's is the start of its last batch
        (a lower bound): the caller also waits for a read that finds nothing."""
        for p in partitions:
            try:
                low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(self.config.topic, p), timeout=PROBE_INTERVAL_S, cached=False
                )
            except KafkaException:
                return False
            if high > low and self._read_to.get(p, -1) < high:
                return False
        return True

    def commit(self, positions: dict[int, int]) -> None:
        """Commit ``positions`` at the next read (from the reading thread)."""
        self._pending_commit = positions

    def _commit(self) -> None:
        positions, self._pending_commit = self._pending_commit, None
        offsets = [
            TopicPartition(self.config.topic, p, pos) for p, pos in (positions or {}).items() if pos >= 0
        ]
        if offsets:
            try:
                self._consumer.commit(offsets=offsets, asynchronous=True)
            except KafkaException as exc:  # the next freed point commits again
                log.debug("%s: commit failed: %s", self.source, reason(exc))

    async def dead_letter(self, record: BrokerMessage, reason: str, detail: str) -> None:
        assert self._producer is not None
        key = f"{self.config.topic}:{record.partition}:{record.position}"
        headers: dict[str, str | bytes | None] = {
            "reason": reason,
            "detail": detail[:500],
            "source": self.source,
        }
        while True:
            try:
                self._producer.produce(self.config.dead_letters, value=record.value, key=key, headers=headers)
                break
            except BufferError:  # its queue is full: the broker is slow or away
                self._producer.poll(0.1)
        self._producer.poll(0)

    async def settle(self) -> bool:
        if self._producer is None or len(self._producer) == 0:
            return True
        return await asyncio.to_thread(self._producer.flush, SETTLE_WAIT_S) == 0

    async def close(self) -> None:
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._producer is not None:
            left = self._producer.flush(5)
            if left:
                log.warning("%s: %d dead letters not delivered", self.source, left)
        self._commit()
        self._consumer.close()

    def _error(self, error: KafkaError) -> None:
        """Errors of the client, from its own threads or a read. The client
        reconnects by itself; a transport error marks an outage until a
        read brings records or the broker answers."""
        if error.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT, KafkaError._TIMED_OUT):
            if self.outage is None:
                self._probe_at = time.monotonic() + PROBE_INTERVAL_S
            self.outage = error.str()
        elif error.fatal():
            self.outage = error.str()
            log.error("%s: Kafka: %s", self.source, error.str())
        else:
            log.debug("%s: Kafka: %s", self.source, error.str())


def ensure_topic(bootstrap: str, name: str, timeout: float, what: str) -> None:
    """Create topic ``name`` with one partition if it is absent."""
    admin = AdminClient({"bootstrap.servers": bootstrap}, logger=client_log)
    try:
        topics = admin.list_topics(timeout=timeout).topics
    except KafkaException as exc:
        raise KafkaUnavailable(
            f"Kafka at {bootstrap} did not answer within {timeout:g} s ({reason(exc)})"
        ) from None
    try:
        if name in topics:
            return
        future = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name]
        future.result(timeout)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise KafkaUnavailable(f"cannot create {what} {name!r}: {reason(exc)}") from None


def _message(m: Message) -> BrokerMessage:
    kind, ms = m.timestamp()
    value = m.value()
    return BrokerMessage(
        m.partition() or 0,
        m.offset() or 0,
        value if isinstance(value, bytes) else b"",
        ms / 1000 if kind != 0 and ms > 0 else 0.0,  # 0: TIMESTAMP_NOT_AVAILABLE
    )


def reason(exc: KafkaException) -> str:
    arg = exc.args[0] if exc.args else exc
    return arg.str() if isinstance(arg, KafkaError) else str(arg)
