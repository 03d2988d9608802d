"""A Kafka source (a real Kafka-protocol broker, Tansu) under the protected
chain, its process killed from outside (the nemesis knows only
cluster.json) at random moments, a stage primary too: every good message
the test produced becomes exactly one row (the source's row log against
what was produced), the sink equals the failure-free reference, and every
kind of bad message lands in the dead letters with its reason while the
run goes on."""

from __future__ import annotations

import contextlib
import json
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.faults.harness import (
    AGGREGATE,
    assert_exact,
    events,
    protected_chain,
    run_with_nemesis,
    written_t0,
)
from tests.kafka_broker import KafkaBroker, kafka_broker, reading
from tests.processes import write_config
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

RANDOM = random.Random(20261128)
PARTITIONS = 2
# One of each kind of bad message, with the reason it must get.
BAD = [
    (b"\xff\xfe", "malformed"),
    (b"not json", "malformed"),
    (b"[1, 2]", "malformed"),
    (b'{"ts": 5, "val": 1}', "missing"),
    (b'{"id": 1, "val": 1}', "missing"),
    (b'{"ts": "soon", "id": 1, "val": 1}', "type"),
    (b'{"ts": 5, "id": "one", "val": 1}', "type"),
    (b'{"ts": 5, "id": 1, "val": 1.5}', "type"),
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    with kafka_broker(tmp_path_factory.mktemp("kafka")) as running:
        yield running


class Producer:
    """Readings at ~``rate``/s over both partitions, with ts = ms since the
    run's t0 (non-decreasing in each partition), from t0 to ``until`` s;
    the bad messages of :data:`BAD` and one late row spread among them."""

    def __init__(self, broker: KafkaBroker, topic: str, run_dir: Path, rate: int, until: float) -> None:
        self.good: list[int] = []
        self.bad = 0
        self._args = (broker, topic, run_dir, rate, until)
        self.thread = threading.Thread(target=self._run)
        self.error: BaseException | None = None
        self.thread.start()

    def _run(self) -> None:
        try:
            self._produce()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def _produce(self) -> None:
        from confluent_kafka import Producer as KafkaProducer

        broker, topic, run_dir, rate, until = self._args
        producer = KafkaProducer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        t0 = wait_until(lambda: written_t0(run_dir), timeout=90, what="the run's t0")
        bad = list(BAD)
        next_id = 0
        while (now := time.time()) < t0 + until:
            ts = max(0, int((now - t0) * 1000))
            for _ in range(max(1, rate // 100)):
                partition = next_id % PARTITIONS
                producer.produce(topic, reading(ts, next_id, next_id % 1000), partition=partition)
                self.good.append(next_id)
                next_id += 1
            if next_id % 300 < rate // 100 and (bad or ts > 1000):
                payload = bad.pop(0)[0] if bad else reading(ts - 900, -1, 0)  # late by 900 ms
                producer.produce(topic, payload, partition=RANDOM.randrange(PARTITIONS))
                self.bad += 1
            producer.poll(0)
            time.sleep(0.01)
        assert producer.flush(10) == 0


def _kafka_chain(tmp: Path, broker: KafkaBroker, topic: str, sink_topic: str | None = None) -> Path:
    """The protected chain from ``topic`` (created here) to a file, or to
    ``sink_topic``."""
    broker.create_topic(topic, PARTITIONS)
    path = protected_chain(tmp, AGGREGATE)
    cfg = yaml.safe_load(path.read_text())
    source = cfg["sources"][0]
    source.pop("rate")
    source.pop("seed")
    source.update(kind="kafka", kafka={"bootstrap": broker.bootstrap, "topic": topic, "group": f"g-{topic}"})
    if sink_topic is not None:
        cfg["sinks"][0].update(kind="kafka", kafka={"bootstrap": broker.bootstrap, "topic": sink_topic})
    return write_config(path, cfg)


def _run(
    config_path: Path, run_dir: Path, broker: KafkaBroker, topic: str, faults: tuple[str, ...]
) -> tuple[subprocess.CompletedProcess[str], Producer]:
    """A 5-s run with ``faults`` from the nemesis while a producer fills
    ``topic`` at 1,000 rows/s from t0 to 4.5 s; it must exit 0."""
    producer = Producer(broker, topic, run_dir, rate=1000, until=4.5)
    try:
        result, _ = run_with_nemesis(config_path, run_dir, *faults, duration=5.0)
    finally:
        producer.thread.join()
    assert result.returncode == 0, result.stderr
    return result, producer


def _source_rows_once(run_dir: Path, producer: Producer) -> None:
    """Each good message produced is one row of the source, once."""
    assert producer.error is None, producer.error
    ids = [json.loads(line)["id"] for line in (run_dir / "sources" / "node-0.jsonl").read_text().splitlines()]
    duplicated = [i for i, n in Counter(ids).items() if n > 1]
    assert not duplicated, f"rows twice: {duplicated[:10]}"
    missing = sorted(set(producer.good) - set(ids))
    assert not missing, f"{len(missing)} rows lost: {missing[:10]}"
    assert len(ids) > 2500 and -1 not in ids


def test_a_kafka_source_killed_from_outside_loses_and_repeats_nothing(
    tmp_path: Path, broker: KafkaBroker
) -> None:
    config_path = _kafka_chain(tmp_path, broker, "readings_killed")
    run_dir = tmp_path / "run"
    first, second, stage = RANDOM.uniform(0.8, 1.6), RANDOM.uniform(2.6, 3.4), RANDOM.uniform(1.8, 2.4)
    faults = (
        "--kill",
        f"node-0@{first:.2f}",
        "--kill",
        f"node-0@{second:.2f}",
        "--kill",
        f"node-2@{stage:.2f}",
    )
    result, producer = _run(config_path, run_dir, broker, "readings_killed", faults)
    restarted = [e for e in events(run_dir) if e["event"] == "restarted" and e.get("target") == "node-0"]
    assert len(restarted) == 2, result.stderr
    _source_rows_once(run_dir, producer)
    assert assert_exact(config_path, run_dir, result.stderr) > 20

    # Every bad message is a dead letter with its reason (a restarted
    # reader may send one again: same key).
    letters = broker.read_all("readings_killed.dead", 1, count=producer.bad, timeout=20)
    reasons = {m[2]: m[4]["reason"].decode() for m in letters}
    assert len(reasons) == producer.bad, (len(reasons), producer.bad)
    assert Counter(reasons.values()) >= Counter(reason for _, reason in BAD)
    assert "late" in reasons.values()
    assert all(m[4]["source"] == b"node-0" for m in letters)


def test_kafka_to_kafka_with_the_source_sink_and_a_stage_killed_loses_and_repeats_nothing(
    tmp_path: Path, broker: KafkaBroker
) -> None:
    config_path = _kafka_chain(tmp_path, broker, "in_killed", sink_topic="out_killed")
    run_dir = tmp_path / "run"
    source, sink, stage = RANDOM.uniform(0.8, 1.6), RANDOM.uniform(2.4, 3.2), RANDOM.uniform(1.6, 2.4)
    faults = ("--kill", f"node-0@{source:.2f}", "--kill", f"sink@{sink:.2f}", "--kill", f"node-2@{stage:.2f}")
    result, producer = _run(config_path, run_dir, broker, "in_killed", faults)
    restarted = {e.get("target") for e in events(run_dir) if e["event"] == "restarted"}
    assert {"node-0", "sink"} <= restarted, result.stderr
    _source_rows_once(run_dir, producer)
    assert assert_exact(config_path, run_dir, result.stderr) > 20  # the topic read back


def test_a_kafka_source_killed_during_the_drain_reads_as_far_as_the_one_it_replaces(
    tmp_path: Path, broker: KafkaBroker
) -> None:
    """A backlog produced before the run, the stop after 1.5 s, the source
    killed while it still reads it, and the broker frozen (SIGSTOP) for
    1.5 s as soon as the new source serves: the new source, told to stop at
    once, must read to the end of each partition, not end the stream at
    its first empty read (which once left the table with rows the
    reference did not have)."""
    from confluent_kafka import Producer as KafkaProducer

    config_path = _kafka_chain(tmp_path, broker, "backlog")
    producer = KafkaProducer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    count = 40_000
    for i in range(count):
        producer.produce("backlog", reading(i // 4, i, i % 1000), partition=i % PARTITIONS)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    run_dir = tmp_path / "run"
    frozen = threading.Event()

    def freeze_when_the_new_source_serves() -> None:
        log = run_dir / "logs" / "node-0.log"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if log.read_text().count("listening on") >= 2:
                    broker.process.send_signal(signal.SIGSTOP)
                    frozen.set()
                    time.sleep(1.5)
                    broker.process.send_signal(signal.SIGCONT)
                    return
            time.sleep(0.01)

    freezer = threading.Thread(target=freeze_when_the_new_source_serves)
    freezer.start()
    try:
        result, _ = run_with_nemesis(config_path, run_dir, "--kill", "node-0@2.0", duration=1.5)
    finally:
        freezer.join()
        broker.process.send_signal(signal.SIGCONT)
    assert frozen.is_set(), "the broker was never frozen: the run proves nothing"
    assert result.returncode == 0, result.stderr
    ids = [json.loads(line)["id"] for line in (run_dir / "sources" / "node-0.jsonl").read_text().splitlines()]
    assert sorted(ids) == list(range(count)), (len(ids), len(set(ids)))
    assert assert_exact(config_path, run_dir, result.stderr) > 3000
