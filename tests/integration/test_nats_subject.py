"""The NATS sink's subject against a real JetStream server (file storage):
the messages stored are the progress a restarted sink goes on from; a row
is never stored twice, even when published twice; a server killed and
started again is waited for and keeps what it stored."""

from __future__ import annotations

import asyncio
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from semiactive.config import NatsSinkConfig
from semiactive.errors import UserError
from semiactive.node.connectors.nats import NatsSubject, NatsUnavailable, read_subject, subject_matches
from semiactive.node.cql import plan
from tests.nats_server import NatsServer, nats_server

SCHEMA = plan.Schema((plan.Column("id", plan.INTEGER), plan.Column("s", plan.char(8))))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with nats_server(tmp_path_factory.mktemp("nats")) as running:
        yield running


def _rows(first: int, last: int) -> list[tuple[object, ...]]:
    return [(seq * 10, seq, 1, seq, f"r{seq}") for seq in range(first, last + 1)]


def _config(server: NatsServer, name: str) -> NatsSinkConfig:
    return NatsSinkConfig(url=server.url, stream=name.upper(), subject=f"results.{name}")


def test_a_sink_started_again_goes_on_after_what_is_stored(server: NatsServer) -> None:
    cfg = _config(server, "goes_on")

    async def scenario() -> None:
        first = NatsSubject(cfg, "run-a", SCHEMA, plan.Kind.STREAM)
        assert await first.open() == 0
        await first.write(_rows(1, 5))
        await first.close()
        again = NatsSubject(cfg, "run-a", SCHEMA, plan.Kind.STREAM)
        assert await again.open() == 5
        await again.write(_rows(3, 8))  # 3..5 are there already: skipped
        await again.close()
        other_run = NatsSubject(cfg, "run-b", SCHEMA, plan.Kind.STREAM)
        assert await other_run.open() == 0  # the subject's last message is run-a's
        await other_run.close()

    asyncio.run(scenario())
    records = read_subject(cfg, "run-a")
    assert [r["seq"] for r in records] == list(range(1, 9))
    assert records[0] == {"seq": 1, "ts": 10, "id": 1, "s": "r1"}


def test_a_row_published_twice_is_stored_once(server: NatsServer) -> None:
    """A batch published again after its answer was lost: the stream drops
    the messages it has (their Msg-Id), though the sink thinks it has none."""
    cfg = _config(server, "twice")

    async def scenario() -> None:
        subject = NatsSubject(cfg, "run", SCHEMA, plan.Kind.STREAM)
        await subject.open()
        await subject.write(_rows(1, 4))
        subject.committed = 0  # as if the acknowledgements had been lost
        await subject.write(_rows(1, 6))
        await subject.close()

    asyncio.run(scenario())
    assert [r["seq"] for r in read_subject(cfg, "run")] == list(range(1, 7))


def test_a_relation_keeps_its_signs(server: NatsServer) -> None:
    cfg = _config(server, "changes")

    async def scenario() -> None:
        subject = NatsSubject(cfg, "run", SCHEMA, plan.Kind.RELATION)
        await subject.open()
        await subject.write([(10, 1, 1, 7, "a"), (20, 2, -1, 7, "a")])
        await subject.close()

    asyncio.run(scenario())
    assert [(r["op"], r["id"]) for r in read_subject(cfg, "run")] == [("+", 7), ("-", 7)]


def test_a_write_waits_for_a_killed_server_and_nothing_is_lost(server: NatsServer) -> None:
    cfg = _config(server, "waits")
    outages: list[str | None] = []

    async def scenario() -> None:
        subject = NatsSubject(cfg, "run", SCHEMA, plan.Kind.STREAM, on_outage=outages.append)
        await subject.open()
        await subject.write(_rows(1, 100))
        server.kill()
        restart = threading.Timer(1.5, server.start)
        restart.start()
        try:
            started = time.monotonic()
            await subject.write(_rows(101, 200))
            assert time.monotonic() - started > 1.0  # it waited for the server
        finally:
            restart.join()
        await subject.close()

    asyncio.run(scenario())
    assert [r["seq"] for r in read_subject(cfg, "run")] == list(range(1, 201))
    assert len(outages) == 2 and outages[0] and outages[1] is None


def test_an_unreachable_server_at_start_up_is_one_error(tmp_path: Path) -> None:
    cfg = NatsSinkConfig(url="nats://127.0.0.1:9", stream="S", subject="s", connect_timeout_s=0.3)

    async def scenario() -> None:
        error = "cannot reach NATS stream S at nats://127.0.0.1:9 after 0.3 s"
        with pytest.raises(NatsUnavailable, match=re.escape(error)):
            await NatsSubject(cfg, "run", SCHEMA, plan.Kind.STREAM).open()

    asyncio.run(scenario())


def test_a_stream_that_does_not_take_the_subject_is_named(server: NatsServer) -> None:
    asyncio.run(_open(_config(server, "owner")))
    other = NatsSinkConfig(url=server.url, stream="OWNER", subject="elsewhere.x")
    with pytest.raises(UserError, match=re.escape("NATS stream OWNER does not take subject elsewhere.x")):
        asyncio.run(_open(other))


async def _open(cfg: NatsSinkConfig) -> None:
    subject = NatsSubject(cfg, "run", SCHEMA, plan.Kind.STREAM)
    try:
        await subject.open()
    finally:
        await subject.close()


@pytest.mark.parametrize(
    ("pattern", "subject", "takes"),
    [
        ("a.b", "a.b", True),
        ("a.*", "a.b", True),
        ("a.*", "a.b.c", False),
        ("a.>", "a.b.c", True),
        ("a.>", "a", False),
        ("a.b", "a.c", False),
        (">", "x", True),
    ],
)
def test_subject_wildcards(pattern: str, subject: str, takes: bool) -> None:
    assert subject_matches(pattern, subject) is takes


def test_a_write_in_flight_when_the_server_dies_is_an_outage_at_once(server: NatsServer) -> None:
    """The server frozen while a write waits for its acks, then killed:
    nats-py closes the connection but leaves the acks waiting out their
    5-s timeout. The write now gives them up when the connection closes,
    reports the outage at once, and stores every row once the server is
    back."""
    cfg = _config(server, "inflight")
    outages: list[tuple[float, str | None]] = []

    async def scenario() -> None:
        subject = NatsSubject(
            cfg, "run", SCHEMA, plan.Kind.STREAM, on_outage=lambda e: outages.append((time.monotonic(), e))
        )
        await subject.open()
        await subject.write(_rows(1, 50))
        assert server.process is not None
        server.process.send_signal(signal.SIGSTOP)
        write = asyncio.create_task(subject.write(_rows(51, 100)))
        await asyncio.sleep(0.3)
        assert not write.done() and not outages
        killed = time.monotonic()
        server.kill()
        while not outages and time.monotonic() - killed < 3.0:
            await asyncio.sleep(0.02)
        assert outages and outages[0][0] - killed < 1.0 and outages[0][1], outages
        server.start()
        await asyncio.wait_for(write, 20)
        await subject.close()

    asyncio.run(scenario())
    assert [r["seq"] for r in read_subject(cfg, "run")] == list(range(1, 101))
    assert [e is None for _, e in outages] == [False, True]
