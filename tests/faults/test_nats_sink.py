"""A sink that publishes to a NATS JetStream subject, killed from outside
(the nemesis knows only cluster.json), and the NATS server killed and
started again under it (file storage): the subject holds every result of
the run exactly once, checked row by row against the failure-free
reference."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

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
from tests.processes import write_config
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

RANDOM = random.Random(20261130)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with nats_server(tmp_path_factory.mktemp("nats")) as running:
        yield running


def _nats_chain(tmp: Path, server: NatsServer, name: str) -> Path:
    path = protected_chain(tmp, AGGREGATE)
    cfg = yaml.safe_load(path.read_text())
    nats = {"url": server.url, "stream": name.upper(), "subject": f"results.{name}"}
    cfg["sinks"][0].update(kind="nats", nats=nats)
    return write_config(path, cfg)


def test_the_nats_sink_and_a_stage_primary_killed_from_outside_lose_and_repeat_nothing(
    tmp_path: Path, server: NatsServer
) -> None:
    config_path = _nats_chain(tmp_path, server, "killed_sink")
    run_dir = tmp_path / "run"
    sink_at, stage_at = RANDOM.uniform(1.0, 1.8), RANDOM.uniform(2.2, 3.0)
    result, _ = run_with_nemesis(
        config_path,
        run_dir,
        "--kill",
        f"sink@{sink_at:.2f}",
        "--kill",
        f"node-2@{stage_at:.2f}",
        duration=4.5,
    )
    assert result.returncode == 0, result.stderr
    restarted = [e for e in events(run_dir) if e["event"] == "restarted" and e.get("target") == "sink"]
    assert restarted and restarted[0]["role"] == "sink", result.stderr
    assert assert_exact(config_path, run_dir, result.stderr) > 100


def test_the_nats_server_killed_and_started_again_mid_run_loses_and_repeats_nothing(
    tmp_path: Path, server: NatsServer
) -> None:
    """The server SIGKILLed at 1.5 s and back 3 s later on the same store;
    the sink waits (its producer keeps what is not stored), then catches up."""
    config_path = _nats_chain(tmp_path, server, "server_killed")
    run_dir = tmp_path / "run"
    down = threading.Event()

    def outage() -> None:
        t0 = wait_until(lambda: written_t0(run_dir), timeout=90, what="the run's t0")
        time.sleep(max(0.0, t0 + 1.5 - time.time()))
        server.kill()
        down.set()
        time.sleep(3.0)
        server.start()

    killer = threading.Thread(target=outage)
    killer.start()
    launcher = start_launcher(config_path, run_dir, duration=6.0)
    try:
        result = finish(launcher, run_dir)
    finally:
        killer.join()
    assert down.is_set(), "the server was never killed: the run proves nothing"
    assert result.returncode == 0, result.stderr
    seen = [e["event"] for e in events(run_dir) if e["event"] in ("sink_unavailable", "sink_available")]
    assert seen[:2] == ["sink_unavailable", "sink_available"], (seen, result.stderr)
    assert assert_exact(config_path, run_dir, result.stderr) > 100
