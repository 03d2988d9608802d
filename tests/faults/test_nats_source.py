"""NATS -> protected chain -> NATS on a real server (JetStream on file
storage): the source, the sink and a stage primary killed from outside (the
nemesis knows only cluster.json) at random moments, and the server itself
SIGKILLed and started again mid-run. Every good message the test published
is one row of the source, once (its row log against what was published);
the sink's subject equals the failure-free reference; bad messages are dead
letters with their reason."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.faults.harness import (
    AGGREGATE,
    assert_exact,
    events,
    finish,
    protected_chain,
    run_with_nemesis,
    start_launcher,
    written_t0,
)
from tests.nats_server import NatsServer, nats_server
from tests.processes import semiactive, write_config
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

RANDOM = random.Random(20261201)
BAD = [
    (b"not json", "malformed"),
    (b'{"ts": 5, "val": 1}', "missing"),
    (b'{"ts": 5, "id": "x", "val": 1}', "type"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with nats_server(tmp_path_factory.mktemp("nats")) as running:
        yield running


class Publisher:
    """Readings (up to 1,000/s: each publish waits for its ack) on ``<prefix>.a`` / ``<prefix>.b`` with ts =
    unix ms, from the run's t0 for ``until`` s; each with ``Nats-Msg-Id`` =
    its id, so one published again after the server came back is stored
    once. The bad messages of :data:`BAD` and late rows among them."""

    def __init__(self, server: NatsServer, stream: str, prefix: str, run_dir: Path, until: float) -> None:
        self.good: list[int] = []
        self.bad = 0
        self.error: BaseException | None = None
        self._args = (server, stream, prefix, run_dir, until)
        self.thread = threading.Thread(target=lambda: asyncio.run(self._guarded()))
        self.thread.start()

    async def _guarded(self) -> None:
        try:
            await self._publish()
        except BaseException as exc:  # reported by the test
            self.error = exc

    async def _publish(self) -> None:
        import nats

        server, _, prefix, run_dir, until = self._args
        nc = await nats.connect(server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
        js = nc.jetstream(timeout=2)
        t0 = await asyncio.to_thread(
            lambda: wait_until(lambda: written_t0(run_dir), timeout=90, what="the run's t0")
        )
        bad = list(BAD)
        next_id = 0
        while time.time() < t0 + until:
            batch: list[tuple[str, bytes, str]] = []
            ts = int(time.time() * 1000)
            for _ in range(10):
                subject = f"{prefix}.{'ab'[next_id % 2]}"
                batch.append(
                    (
                        subject,
                        json.dumps({"ts": ts, "id": next_id, "val": next_id % 1000}).encode(),
                        str(next_id),
                    )
                )
                self.good.append(next_id)
                next_id += 1
            if next_id % 300 == 0:
                payload = (
                    bad.pop(0)[0] if bad else json.dumps({"ts": ts - 60_000, "id": -1, "val": 0}).encode()
                )
                batch.append((f"{prefix}.a", payload, f"bad-{next_id}"))
                self.bad += 1
            await self._send(js, batch)
            await asyncio.sleep(0.01)
        await nc.close()

    @staticmethod
    async def _send(js: Any, batch: list[tuple[str, bytes, str]]) -> None:
        """Until the server has stored every one (it may be down a while)."""
        for _ in range(600):
            try:
                for subject, payload, msg_id in batch:
                    await js.publish(subject, payload, headers={"Nats-Msg-Id": msg_id})
                return
            except Exception:  # the server away: publish again, deduplicated by Msg-Id
                await asyncio.sleep(0.05)
        raise TimeoutError("the server did not come back")


def _create_stream(server: NatsServer, stream: str, subjects: list[str]) -> None:
    import nats
    from nats.js.api import StorageType

    async def create() -> None:
        nc = await nats.connect(server.url)
        await nc.jetstream().add_stream(name=stream, subjects=subjects, storage=StorageType.FILE)
        await nc.close()

    asyncio.run(create())


def _chain(tmp: Path, server: NatsServer, name: str) -> Path:
    """The protected chain from ``in_<name>.>`` of stream ``IN_<NAME>``
    (created here) to ``out_<name>.rows``."""
    _create_stream(server, f"IN_{name.upper()}", [f"in_{name}.>"])
    path = protected_chain(tmp, AGGREGATE)
    cfg = yaml.safe_load(path.read_text())
    source = cfg["sources"][0]
    for key in ("rate", "seed"):
        source.pop(key)
    nats = {
        "url": server.url,
        "stream": f"IN_{name.upper()}",
        "subject": f"in_{name}.>",
        "durable": f"d_{name}",
    }
    source.update(kind="nats", nats=nats)
    out = {"url": server.url, "stream": f"OUT_{name.upper()}", "subject": f"out_{name}.rows"}
    cfg["sinks"][0].update(kind="nats", nats=out)
    return write_config(path, cfg)


def _dead_letters(server: NatsServer, subject: str) -> dict[str, str]:
    """Msg-Id -> reason of the messages on the dead-letter subject."""
    import nats

    async def read() -> dict[str, str]:
        nc = await nats.connect(server.url)
        try:
            js = nc.jetstream(timeout=5)
            stream = await js.find_stream_name_by_subject(subject)
            out: dict[str, str] = {}
            seq = 1
            while True:
                try:
                    msg = await js.get_msg(stream, seq=seq, subject=subject, next=True)
                except nats.js.errors.NotFoundError:
                    return out
                headers = msg.headers or {}
                out[headers["Nats-Msg-Id"]] = headers["reason"]
                seq = (msg.seq or seq) + 1
        finally:
            await nc.close()

    return asyncio.run(read())


def _check_source(run_dir: Path, publisher: Publisher) -> None:
    assert publisher.error is None, publisher.error
    lines = (run_dir / "sources" / "node-0.jsonl").read_text().splitlines()
    ids = [json.loads(line)["id"] for line in lines]
    duplicated = [i for i, n in Counter(ids).items() if n > 1]
    assert not duplicated, f"rows twice: {duplicated[:10]}"
    missing = sorted(set(publisher.good) - set(ids))
    assert not missing, f"{len(missing)} rows lost: {missing[:10]}"
    # Rows through the whole run, kills included: the publisher waits for
    # each ack, and on a loaded machine sent 940-970 rows in its 4.5 s.
    assert -1 not in ids and len(ids) > 500


def test_nats_to_nats_with_the_source_sink_and_a_stage_killed_loses_and_repeats_nothing(
    tmp_path: Path, server: NatsServer
) -> None:
    config_path = _chain(tmp_path, server, "killed")
    run_dir = tmp_path / "run"
    publisher = Publisher(server, "IN_KILLED", "in_killed", run_dir, until=4.5)
    source, sink, stage = RANDOM.uniform(0.8, 1.6), RANDOM.uniform(2.4, 3.2), RANDOM.uniform(1.6, 2.4)
    faults = ("--kill", f"node-0@{source:.2f}", "--kill", f"sink@{sink:.2f}", "--kill", f"node-2@{stage:.2f}")
    try:
        result, _ = run_with_nemesis(config_path, run_dir, *faults, duration=5.0)
    finally:
        publisher.thread.join()
    assert result.returncode == 0, result.stderr
    restarted = {e.get("target") for e in events(run_dir) if e["event"] == "restarted"}
    assert {"node-0", "sink"} <= restarted, result.stderr
    _check_source(run_dir, publisher)
    assert assert_exact(config_path, run_dir, result.stderr) > 20
    letters = _dead_letters(server, "d_killed.dead")
    assert len(letters) == publisher.bad
    assert Counter(letters.values()) >= Counter(reason for _, reason in BAD) and "late" in letters.values()


def test_the_nats_server_killed_under_a_source_and_a_sink_loses_and_repeats_nothing(
    tmp_path: Path, server: NatsServer
) -> None:
    """SIGKILLed at 1.5 s and back 3 s later on its store: the source reads
    on where it was, the sink publishes what waited; both report it."""
    config_path = _chain(tmp_path, server, "server")
    run_dir = tmp_path / "run"
    down = threading.Event()
    shown: list[str] = []

    def outage() -> None:
        t0 = wait_until(lambda: written_t0(run_dir), timeout=90, what="the run's t0")
        time.sleep(max(0.0, t0 + 1.5 - time.time()))
        server.kill()
        down.set()
        time.sleep(1.0)
        # What an operator sees meanwhile: the nodes whose server is away.
        state = semiactive("status", "--run-dir", str(run_dir), "--json", timeout=10)
        shown.extend(n["name"] for n in json.loads(state.stdout)["nodes"] if n["outage"])
        time.sleep(max(0.0, t0 + 4.5 - time.time()))
        server.start()

    killer = threading.Thread(target=outage)
    launcher = start_launcher(config_path, run_dir, duration=7.0)
    publisher = Publisher(server, "IN_SERVER", "in_server", run_dir, until=6.0)
    killer.start()
    try:
        result = finish(launcher, run_dir)
    finally:
        killer.join()
        publisher.thread.join()
    assert down.is_set(), "the server was never killed: the run proves nothing"
    assert result.returncode == 0, result.stderr
    seen = {e["event"] for e in events(run_dir)}
    assert {"source_unavailable", "source_available", "sink_unavailable", "sink_available"} <= seen, seen
    assert "node-0" in shown, shown  # `semiactive status` named the source's outage
    _check_source(run_dir, publisher)
    assert assert_exact(config_path, run_dir, result.stderr) > 20
