"""The Kafka sink's topic against a real Kafka-protocol broker (Tansu): the
tail of the topic is the progress a restarted sink goes on from, a row is
never written twice, the start-up error."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from semiactive.config import KafkaSinkConfig
from semiactive.errors import UserError
from semiactive.node.cql import plan
from tests.kafka_broker import KafkaBroker, kafka_broker

SCHEMA = plan.Schema((plan.Column("id", plan.INTEGER), plan.Column("s", plan.char(8))))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    with kafka_broker(tmp_path_factory.mktemp("kafka")) as running:
        yield running


def _rows(first: int, last: int, sign: int = 1) -> list[tuple[object, ...]]:
    return [(seq * 10, seq, sign, seq, f"r{seq}") for seq in range(first, last + 1)]


def test_a_topic_sink_started_again_goes_on_after_what_is_stored(broker: KafkaBroker) -> None:
    from semiactive.node.connectors.kafka_sink import KafkaTopic, read_topic

    cfg = KafkaSinkConfig(bootstrap=broker.bootstrap, topic="goes_on")

    async def scenario() -> None:
        first = KafkaTopic(cfg, "run-a", SCHEMA, plan.Kind.STREAM)
        assert await first.open() == 0
        await first.write(_rows(1, 5))
        await first.write(_rows(6, 1500))  # batches of the producer: the tail is more than one message
        await first.close()
        again = KafkaTopic(cfg, "run-a", SCHEMA, plan.Kind.STREAM)
        assert await again.open() == 1500
        await again.write(_rows(1400, 1600))  # up to 1500 stored already: skipped
        await again.close()
        other = KafkaTopic(cfg, "run-b", SCHEMA, plan.Kind.STREAM)
        assert await other.open() == 0  # the tail is another run's
        await other.close()

    asyncio.run(scenario())
    records = read_topic(cfg, "run-a")
    assert [r["seq"] for r in records] == list(range(1, 1601))
    assert records[0] == {"seq": 1, "ts": 10, "id": 1, "s": "r1"}


def test_a_relation_keeps_its_signs(broker: KafkaBroker) -> None:
    from semiactive.node.connectors.kafka_sink import KafkaTopic, read_topic

    cfg = KafkaSinkConfig(bootstrap=broker.bootstrap, topic="signs")

    async def scenario() -> None:
        topic = KafkaTopic(cfg, "run", SCHEMA, plan.Kind.RELATION)
        await topic.open()
        await topic.write(_rows(1, 1) + _rows(2, 2, sign=-1))
        await topic.close()

    asyncio.run(scenario())
    assert [r["op"] for r in read_topic(cfg, "run")] == ["+", "-"]


def test_an_unreachable_broker_is_a_one_line_error() -> None:
    from semiactive.node.connectors.kafka_sink import KafkaTopic

    cfg = KafkaSinkConfig(bootstrap="127.0.0.1:9", topic="t", connect_timeout_s=0.5)
    with pytest.raises(UserError, match=r"Kafka at 127.0.0.1:9 did not answer within 0.5 s"):
        asyncio.run(KafkaTopic(cfg, "run", SCHEMA, plan.Kind.STREAM).open())
