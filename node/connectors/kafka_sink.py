"""A sink's Kafka topic: one message per row (docs/connectors.md).

Exactly once across a kill of the sink: it acknowledges upstream (Level-1)
only seqs the broker has acknowledged, so its producer's output log keeps
the rest. Every row goes to partition 0, keyed by the run, with headers
``semiactive-run`` and ``semiactive-seq``; the idempotent producer keeps
their order and drops its own retries, so what the topic holds of a batch
cut short is a prefix of it. A sink started again reads the tail of the
partition for the last message of its run and asks for the next seq. The
tail is read from the partition's end offset minus one until nothing more
comes (Tansu's end offset points at the start of its last batch, not past
it), so one run writes a topic at a time.

The payload is the row as a file sink writes it. The broker may go away
while the sink runs: the producer retries for as long as it takes (no
message timeout), the sink's input waits, and the outage is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from semiactive.config import KafkaSinkConfig
from semiactive.errors import UserError
from semiactive.node.connectors.jsonl import formatter
from semiactive.node.connectors.kafka import client_log, ensure_topic, reason
from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element

log = logging.getLogger(__name__)

RUN = "semiactive-run"
SEQ = "semiactive-seq"
TAIL_IDLE_S = 0.5  # reading a partition's tail: nothing more for this long is its end
FLUSH_WAIT_S = 2.0  # a write not acknowledged in this long is an outage (reported, waited out)


class KafkaTopic:
    """The topic one sink writes, for one run."""

    def __init__(
        self,
        config: KafkaSinkConfig,
        run: str,
        schema: plan.Schema,
        kind: plan.Kind,
        on_outage: Callable[[str | None], None] | None = None,
    ) -> None:
        self.config = config
        self.run = run
        self.committed = 0  # the highest seq the broker acknowledged for this run
        self._fmt = formatter(schema, kind)
        self._on_outage = on_outage
        self._producer: Producer | None = None
        self._failed: list[KafkaError] = []

    def describe(self) -> str:
        return f"Kafka topic {self.config.topic} (run {self.run!r})"

    async def prepare(self) -> None:
        """Create the topic and the producer now (a standby's: its
        connection and producer id are ready at the takeover); the tail is
        read at :meth:`open`, as the sink it replaces may still be writing."""
        with contextlib.suppress(KafkaException, UserError):
            await asyncio.to_thread(self._prepare)

    def _prepare(self) -> None:
        cfg = self.config
        ensure_topic(cfg.bootstrap, cfg.topic, cfg.connect_timeout_s, "the sink's topic")
        self._producer = self._new_producer()

    async def open(self) -> int:
        """Create the topic if absent (one partition) and return the
        highest seq it holds for this run."""
        return await asyncio.to_thread(self._open)

    def _open(self) -> int:
        if self._producer is None:
            self._prepare()
        self.committed = self._last_seq()
        return self.committed

    def _new_producer(self) -> Producer:
        cfg = self.config
        return Producer(
            {
                "bootstrap.servers": cfg.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 0,  # retried for as long as the broker is away
                "client.id": f"semiactive-sink-{self.run}",
            },
            logger=client_log,
        )

    def _last_seq(self) -> int:
        last = None
        for message in _tail(self.config, from_end=True):
            last = message
        if last is None:
            return 0
        headers = dict(last.headers() or [])
        if headers.get(RUN) != self.run.encode():
            return 0  # another run's: this one has written nothing yet
        seq = headers.get(SEQ)
        return int(seq) if isinstance(seq, bytes | str) else 0

    async def write(self, rows: Sequence[Element]) -> None:
        """Produce ``rows`` (seqs above :attr:`committed`, in order) and wait
        until the broker has acknowledged every one, however long it takes."""
        fresh = [r for r in rows if r[1] > self.committed]
        if not fresh:
            return
        producer = self._producer
        assert producer is not None
        await asyncio.to_thread(self._enqueue, producer, fresh)
        down = False
        while await asyncio.to_thread(producer.flush, FLUSH_WAIT_S) > 0:
            if not down:
                down = True
                why = f"Kafka at {self.config.bootstrap} has not acknowledged for {FLUSH_WAIT_S:g} s"
                log.warning("%s: %s; waiting", self.describe(), why)
                if self._on_outage is not None:
                    self._on_outage(why)
        if self._failed:
            raise UserError(f"{self.describe()}: a write was refused: {self._failed[0].str()}")
        if down and self._on_outage is not None:
            self._on_outage(None)
        self.committed = fresh[-1][1]

    def _enqueue(self, producer: Producer, rows: Sequence[Element]) -> None:
        cfg, fmt, run = self.config, self._fmt, self.run.encode()
        for row in rows:
            seq = row[1]
            value = fmt(seq, row)[:-1].encode()
            headers: list[tuple[str, str | bytes | None]] = [(RUN, run), (SEQ, str(seq).encode())]
            while True:
                try:
                    producer.produce(
                        cfg.topic, value, key=run, partition=0, headers=headers, on_delivery=self._delivered
                    )
                    break
                except BufferError:  # its queue is full: let the broker take some
                    producer.poll(0.1)

    def _delivered(self, error: KafkaError | None, _: Message) -> None:
        if error is not None:
            self._failed.append(error)

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await asyncio.to_thread(producer.flush, 5)


def _tail(config: KafkaSinkConfig, from_end: bool) -> list[Message]:
    """The messages of the topic's partition 0, from its end offset minus
    one (``from_end``) or its start, until nothing more comes."""
    consumer = Consumer(
        {
            "bootstrap.servers": config.bootstrap,
            "group.id": f"semiactive-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            # librdkafka pauses fetching for up to 1 s once its local queue
            # is full; a pause that long would read as the partition's end.
            "fetch.queue.backoff.ms": 10,
        },
        logger=client_log,
    )
    try:
        partition = TopicPartition(config.topic, 0)
        low, high = consumer.get_watermark_offsets(partition, timeout=config.connect_timeout_s)
        if high <= low:
            return []
        consumer.assign([TopicPartition(config.topic, 0, max(low, high - 1) if from_end else low)])
        out: list[Message] = []
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < TAIL_IDLE_S:
            got = [m for m in consumer.consume(1000, 0.1) if m.error() is None]
            if got:
                out += got
                quiet_since = time.monotonic()
        return out
    except KafkaException as exc:
        raise UserError(f"Kafka topic {config.topic}: {reason(exc)}") from None
    finally:
        consumer.close()


def read_topic(config: KafkaSinkConfig, run: str) -> list[dict[str, Any]]:
    """What the sink wrote for ``run``, in seq order, as the JSON Lines
    records a file sink writes (``semiactive verify`` compares either)."""
    records = []
    for message in _tail(config, from_end=False):
        if dict(message.headers() or []).get(RUN) == run.encode():
            value = message.value()
            records.append(json.loads(value if isinstance(value, bytes) else b"null"))
    return sorted(records, key=lambda r: r["seq"])
