"""The NATS source's reader against a real server (Debian's nats-server,
JetStream on file storage): where a first start reads (after the durable
consumer's acknowledgements, else from ``start``), what a commit leaves
acknowledged, a reconnection that reads on where it was, the start-up
errors."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from semiactive.config import NatsSourceConfig
from semiactive.errors import UserError
from semiactive.node.connectors.nats_source import NatsReader
from tests.nats_server import NatsServer, nats_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with nats_server(tmp_path_factory.mktemp("nats")) as running:
        yield running


async def _stream(server: NatsServer, name: str, subjects: list[str], count: int) -> None:
    """Stream ``NAME`` with ``count`` messages on its first subject."""
    import nats
    from nats.js.api import StorageType

    nc = await nats.connect(server.url)
    js = nc.jetstream()
    await js.add_stream(name=name.upper(), subjects=subjects, storage=StorageType.FILE)
    for i in range(count):
        await js.publish(subjects[0].replace(">", "x"), str(i).encode())
    await nc.close()


def _config(server: NatsServer, name: str, **extra: Any) -> NatsSourceConfig:
    return NatsSourceConfig(
        url=server.url,
        stream=name.upper(),
        subject=f"{name}.>",
        durable=f"d_{name}",
        connect_timeout_s=2,
        **extra,
    )


async def _read_all(reader: NatsReader, count: int) -> list[int]:
    positions: list[int] = []
    for _ in range(100):
        positions += [m.position for m in await reader.read(1000, 0.1)]
        if len(positions) >= count:
            break
    return positions


def test_a_first_start_reads_after_what_the_durable_consumer_acknowledged(server: NatsServer) -> None:
    async def scenario() -> None:
        await _stream(server, "acked", ["acked.>"], 10)
        first = NatsReader(_config(server, "acked"), "src")
        assert await first.open() == {0: 1}
        await first.assign({0: 1})
        assert await _read_all(first, 10) == list(range(1, 11))
        await first.commit_now({0: 7})  # 1..6 done
        await first.close()
        again = NatsReader(_config(server, "acked"), "src")
        assert await again.open() == {0: 7}
        await again.close()
        latest = NatsReader(_config(server, "acked", start="latest"), "src")
        assert await latest.open() == {0: 7}  # the durable's floor wins over start
        await latest.close()

    asyncio.run(scenario())


def test_start_latest_without_a_durable_consumer_reads_only_new_messages(server: NatsServer) -> None:
    async def scenario() -> None:
        await _stream(server, "late", ["late.>"], 5)
        reader = NatsReader(_config(server, "late", start="latest"), "src")
        assert await reader.open() == {0: 6}
        await reader.close()

    asyncio.run(scenario())


def test_a_reader_that_loses_the_server_reads_on_where_it_was(server: NatsServer) -> None:
    async def scenario() -> None:
        await _stream(server, "again", ["again.>"], 20)
        reader = NatsReader(_config(server, "again"), "src")
        await reader.assign(await reader.open())
        got = [m.position for m in await reader.read(8, 1.0)]
        assert got == list(range(1, 9))
        reader.commit({0: 4})
        got += [m.position for m in await reader.read(1, 0.1)]  # the commit goes with a read
        server.kill()
        assert await reader.read(100, 0.2) == []
        assert reader.outage is not None
        server.start()
        rest: list[int] = []
        for _ in range(200):
            rest += [m.position for m in await reader.read(100, 0.1)]
            if rest and rest[-1] == 20:
                break
        assert got + [p for p in rest if p not in got] == list(range(1, 21))
        assert rest[0] == got[-1] + 1 and reader.outage is None  # nothing read twice
        await reader.close()

    asyncio.run(scenario())


def test_a_stream_that_does_not_exist_is_a_one_line_error(server: NatsServer) -> None:
    async def scenario() -> None:
        reader = NatsReader(_config(server, "absent"), "src")
        with pytest.raises(UserError, match=r"NATS stream ABSENT does not exist"):
            await reader.open()

    asyncio.run(scenario())


def test_an_unreachable_server_is_a_one_line_error(server: NatsServer) -> None:
    async def scenario() -> None:
        cfg = NatsSourceConfig(
            url="nats://127.0.0.1:9", stream="S", subject="s.>", durable="d", connect_timeout_s=0.5
        )
        with pytest.raises(UserError, match=r"cannot reach NATS stream S at nats://127.0.0.1:9 after 0.5 s"):
            await NatsReader(cfg, "src").open()

    asyncio.run(scenario())


def test_a_dead_letter_subject_the_source_reads_is_refused(server: NatsServer) -> None:
    async def scenario() -> None:
        await _stream(server, "loop", ["loop.>"], 0)
        reader = NatsReader(_config(server, "loop", dead_subject="loop.dead"), "src")
        with pytest.raises(UserError, match=r"the dead-letter subject loop.dead is one the source reads"):
            await reader.open()
        await reader.close()

    asyncio.run(scenario())


def test_dead_letters_are_published_once_per_message(server: NatsServer, tmp_path: Path) -> None:
    from semiactive.node.connectors.broker_feed import BrokerMessage

    async def scenario() -> None:
        import nats

        await _stream(server, "dl", ["dl.>"], 0)
        reader = NatsReader(_config(server, "dl"), "src")
        await reader.assign(await reader.open())
        bad = BrokerMessage(0, 42, b"oops")
        await reader.dead_letter(bad, "malformed", "not JSON")
        await reader.dead_letter(bad, "malformed", "not JSON")  # a restarted reader's
        await reader.close()
        nc = await nats.connect(server.url)
        info = await nc.jetstream().stream_info("DL_DEAD")
        msg = await nc.jetstream().get_last_msg("DL_DEAD", "d_dl.dead")
        await nc.close()
        assert info.state.messages == 1
        assert msg.data == b"oops" and msg.headers is not None and msg.headers["reason"] == "malformed"

    asyncio.run(scenario())


def test_a_dead_letter_waits_out_a_server_that_is_away(server: NatsServer) -> None:
    """Published once the server is back: the message is acknowledged with
    the rows after it, so a dead letter dropped here would be lost."""
    from semiactive.node.connectors.broker_feed import BrokerMessage

    async def scenario() -> None:

        await _stream(server, "dlaway", ["dlaway.>"], 0)
        reader = NatsReader(_config(server, "dlaway"), "src")
        await reader.assign(await reader.open())
        server.kill()
        letter = asyncio.create_task(reader.dead_letter(BrokerMessage(0, 7, b"bad"), "malformed", "not JSON"))
        await asyncio.sleep(0.5)
        assert not letter.done()
        msg = await _stored_when_back(server, reader, letter, "dlaway")
        assert msg.data == b"bad"

    asyncio.run(scenario())


def test_a_dead_letter_in_flight_when_the_server_dies_is_an_outage_at_once(server: NatsServer) -> None:
    """The server frozen while a dead letter's publish waits for its reply,
    then killed: nats-py closes the connection but leaves the request
    waiting out its 5-s timeout, in which the source neither read nor
    showed an outage. The reader now gives it up when the connection
    closes, and the letter is stored once the server is back."""
    from semiactive.node.connectors.broker_feed import BrokerMessage

    async def scenario() -> None:

        await _stream(server, "dlgone", ["dlgone.>"], 0)
        reader = NatsReader(_config(server, "dlgone"), "src")
        await reader.assign(await reader.open())
        assert server.process is not None
        server.process.send_signal(signal.SIGSTOP)
        letter = asyncio.create_task(reader.dead_letter(BrokerMessage(0, 9, b"bad"), "malformed", "not JSON"))
        await asyncio.sleep(0.3)
        assert reader.outage is None and not letter.done()
        killed = time.monotonic()
        server.kill()
        while reader.outage is None and time.monotonic() - killed < 3.0:
            await asyncio.sleep(0.02)
        assert reader.outage is not None and time.monotonic() - killed < 1.0, reader.outage
        msg = await _stored_when_back(server, reader, letter, "dlgone")
        assert msg.data == b"bad" and msg.headers is not None and msg.headers["reason"] == "malformed"

    asyncio.run(scenario())


async def _stored_when_back(
    server: NatsServer, reader: NatsReader, letter: asyncio.Task[None], name: str
) -> Any:
    """The server started again: the dead letter ``letter`` is published,
    and the last message of the stream ``name``'s dead letters is read."""
    import nats

    server.start()
    await asyncio.wait_for(letter, 20)
    await reader.close()
    nc = await nats.connect(server.url)
    msg = await nc.jetstream().get_last_msg(f"{name.upper()}_DEAD", f"d_{name}.dead")
    await nc.close()
    return msg
