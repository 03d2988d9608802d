"""A sink that writes a PostgreSQL table, killed from outside (the nemesis
knows only cluster.json) and with its database killed under it: the table
holds every result of the run exactly once, checked row by row against
the failure-free reference."""

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
from tests.postgres_server import PostgresServer, postgres_server
from tests.processes import write_config
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

RANDOM = random.Random(20261128)


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    with postgres_server(tmp_path_factory.mktemp("pg")) as server:
        yield server


def _table_chain(tmp: Path, server: PostgresServer, table: str) -> Path:
    path = protected_chain(tmp, AGGREGATE)
    cfg = yaml.safe_load(path.read_text())
    cfg["sinks"][0].update(kind="postgres", postgres={"dsn": server.dsn, "table": table})
    return write_config(path, cfg)


def test_the_table_sink_and_a_stage_primary_killed_from_outside_lose_and_repeat_nothing(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    config_path = _table_chain(tmp_path, postgres, "killed_sink")
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


def test_the_sink_killed_while_its_database_is_down_loses_and_repeats_nothing(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    """The database SIGKILLed at 1.5 s and back 5 s later; the sink SIGKILLed
    at 2.5 s, while a batch it received waits for its commit: the batch is
    still in its producer's log (a sink that acknowledged what it received,
    not what it committed, loses it here)."""
    config_path = _table_chain(tmp_path, postgres, "database_killed")
    run_dir = tmp_path / "run"
    down = threading.Event()

    def outage() -> None:
        # Timed from the sources' start (t0): starting the cluster takes seconds.
        t0 = wait_until(lambda: written_t0(run_dir), timeout=90, what="the run's t0")
        time.sleep(max(0.0, t0 + 1.5 - time.time()))
        postgres.kill()
        down.set()
        time.sleep(5.0)
        postgres.start()

    killer = threading.Thread(target=outage)
    killer.start()
    try:
        result, _ = run_with_nemesis(config_path, run_dir, "--kill", "sink@2.5", duration=8.0)
    finally:
        killer.join()
    assert down.is_set(), "the database was never killed: the run proves nothing"
    assert result.returncode == 0, result.stderr
    wanted = ("sink_unavailable", "sink_available", "restarted")
    seen = [e["event"] for e in events(run_dir) if e["event"] in wanted]
    # Down, then the sink killed (and started again) before it was back.
    assert seen[:2] == ["sink_unavailable", "restarted"], (seen, result.stderr)
    assert assert_exact(config_path, run_dir, result.stderr) > 100


def test_an_unreachable_database_at_start_up_is_a_one_line_error(tmp_path: Path) -> None:
    config_path = protected_chain(tmp_path, AGGREGATE)
    cfg = yaml.safe_load(config_path.read_text())
    # A port nothing listens on: bound and closed.
    dsn = "postgresql://semiactive@127.0.0.1:9/results"
    cfg["sinks"][0].update(kind="postgres", postgres={"dsn": dsn, "table": "t", "connect_timeout_s": 0.5})
    write_config(config_path, cfg)
    launcher = start_launcher(config_path, tmp_path / "run", duration=2.0)
    result = finish(launcher, tmp_path / "run")
    assert result.returncode != 0
    assert "sink: cannot reach PostgreSQL table t after 0.5 s" in result.stderr, result.stderr
