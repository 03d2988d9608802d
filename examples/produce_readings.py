"""Produce readings to a Kafka topic, as the example
examples/kafka-to-postgres.yaml reads them: one JSON object per message,
``{"ts": unix ms, "id": n, "val": n % 1000}``, spread over the
topic's partitions (created with ``--partitions`` if absent), ``--rate``
messages per second for ``--seconds``. Every ``--bad``-th message is not a
reading, to see the dead letters. SIGTERM or Ctrl-C ends it early: what
it produced is flushed and counted, as at the end (a container's stop).
Needs confluent-kafka (the `kafka` extra)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:59092")
    parser.add_argument("--topic", default="readings")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rate", type=int, default=1000, help="messages per second (default 1000)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--bad", type=int, default=0, help="every N-th message is not a reading (0: none)")
    args = parser.parse_args()
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    try:
        topics = admin.list_topics(timeout=5).topics
    except Exception as exc:  # the client's KafkaException
        print(f"produce_readings: Kafka at {args.bootstrap} did not answer: {exc}", file=sys.stderr)
        return 2
    if args.topic not in topics:
        admin.create_topics([NewTopic(args.topic, num_partitions=args.partitions, replication_factor=1)])[
            args.topic
        ].result(10)
        partitions = args.partitions
    else:
        partitions = len(topics[args.topic].partitions)
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5})
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    start = time.time()
    sent = 0
    while not stop.is_set() and (elapsed := time.time() - start) < args.seconds:
        due = int(elapsed * args.rate)
        while sent < due:
            sent += 1
            if args.bad and sent % args.bad == 0:
                value = b"not a reading"
            else:
                value = json.dumps({"ts": int(time.time() * 1000), "id": sent, "val": sent % 1000}).encode()
            producer.produce(args.topic, value, partition=sent % partitions)
        producer.poll(0)
        time.sleep(0.005)
    left = producer.flush(10)
    early = ", stopped early" if stop.is_set() else ""
    print(f"produced {sent - left} messages to {args.topic} ({partitions} partitions{early})", flush=True)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
