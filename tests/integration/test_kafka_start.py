"""A Kafka source whose broker does not answer, or has no such topic, is a
one-line error naming the source at start-up (the node exits 2), never a
hang; a run of a real broker's topic delivers every good message."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.kafka_broker import KafkaBroker, kafka_broker, reading
from tests.processes import chain_config, semiactive, write_config

QUERY = ["REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 0"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    with kafka_broker(tmp_path_factory.mktemp("kafka")) as running:
        yield running


def _config(tmp: Path, bootstrap: str, topic: str) -> Path:
    cfg = chain_config(QUERY)
    source = cfg["sources"][0]
    for key in ("rate", "seed", "tuple_bytes"):
        source.pop(key)
    kafka = {"bootstrap": bootstrap, "topic": topic, "group": "g", "connect_timeout_s": 1}
    source.update(kind="kafka", kafka=kafka)
    return write_config(tmp / "kafka.yaml", cfg)


def test_an_unreachable_broker_is_a_one_line_error(tmp_path: Path) -> None:
    result = semiactive(
        "cluster", "up", str(_config(tmp_path, "127.0.0.1:9", "t")), "--run-dir", str(tmp_path / "run")
    )
    assert result.returncode != 0
    assert "source node-0: Kafka at 127.0.0.1:9 did not answer within 1 s" in result.stderr, result.stderr


def test_a_topic_that_does_not_exist_is_a_one_line_error(tmp_path: Path, broker: KafkaBroker) -> None:
    result = semiactive(
        "cluster",
        "up",
        str(_config(tmp_path, broker.bootstrap, "absent")),
        "--run-dir",
        str(tmp_path / "run"),
    )
    assert result.returncode != 0
    assert "source node-0: Kafka topic 'absent' does not exist" in result.stderr, result.stderr


def test_the_messages_of_a_topic_are_the_stream(tmp_path: Path, broker: KafkaBroker) -> None:
    """Produced before the run: read from the start, merged over three
    partitions in ts order (out of order within 50 ms per partition)."""
    from confluent_kafka import Producer

    broker.create_topic("ordered", 3)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3000):
        ts = i - (i * 7919 % 50)  # up to 49 ms early
        producer.produce("ordered", reading(ts, i, i), partition=i % 3)
    assert producer.flush(10) == 0
    config_path = _config(tmp_path, broker.bootstrap, "ordered")
    cfg = yaml.safe_load(config_path.read_text())
    cfg["sources"][0]["max_delay_ms"] = 50
    write_config(config_path, cfg)
    run_dir = tmp_path / "run"
    result = semiactive("cluster", "up", str(config_path), "--duration", "3", "--run-dir", str(run_dir))
    assert result.returncode == 0, result.stderr
    lines = (run_dir / "sink" / "sink.jsonl").read_text().splitlines()
    rows = [yaml.safe_load(line) for line in lines]
    assert sorted(r["id"] for r in rows) == list(range(3000))
    assert [r["ts"] for r in rows] == sorted(r["ts"] for r in rows)
