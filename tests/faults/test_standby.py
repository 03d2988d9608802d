"""A source and a sink with a standby (``ha: {secondary: ...}``), killed and
frozen from outside (the nemesis knows only cluster.json): the standby
takes over at the next epoch the moment the serving process dies, never
while it is only frozen, and the output holds every result exactly once
(the sink against the failure-free reference, the table row by row)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.faults.harness import AGGREGATE, assert_exact, events, protected_chain, run_with_nemesis
from tests.postgres_server import PostgresServer, postgres_server
from tests.processes import write_config

pytestmark = pytest.mark.slow

RANDOM = random.Random(20261129)


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    with postgres_server(tmp_path_factory.mktemp("pg")) as server:
        yield server


def _with_standbys(tmp: Path, *, table: tuple[PostgresServer, str] | None = None) -> Path:
    path = protected_chain(tmp, AGGREGATE)
    cfg = yaml.safe_load(path.read_text())
    cfg["sources"][0]["ha"] = {"secondary": "node-0b"}
    if table is not None:
        server, name = table
        cfg["sinks"][0].update(
            kind="postgres", postgres={"dsn": server.dsn, "table": name}, ha={"secondary": "sink-b"}
        )
    return write_config(path, cfg)


def _takeovers(run_dir: Path, stage: str) -> list[tuple[str, int]]:
    taken = [e for e in events(run_dir) if e["event"] == "takeover" and e["stage"] == stage]
    return [(e["node"], e["epoch"]) for e in taken]


def _fault(report: dict[str, Any], node: str) -> dict[str, Any]:
    return next(f for f in report["faults"] if f["node"] == node)


def test_a_source_s_serving_process_killed_twice_is_taken_over_each_time(tmp_path: Path) -> None:
    config_path = _with_standbys(tmp_path)
    run_dir = tmp_path / "run"
    first, second = RANDOM.uniform(1.0, 1.8), RANDOM.uniform(4.5, 5.0)
    result, report = run_with_nemesis(
        config_path, run_dir, "--kill", f"node-0@{first:.2f}", "--kill", f"node-0b@{second:.2f}", duration=6.5
    )
    assert result.returncode == 0, result.stderr
    # node-0b takes over at epoch 1; node-0, started again meanwhile as the
    # standby, from node-0b at epoch 2.
    assert _takeovers(run_dir, "node-0") == [("node-0b", 1), ("node-0", 2)], result.stderr
    assert _fault(report, "node-0")["detected_by"] == "node-0b"
    assert _fault(report, "node-0b")["detected_by"] == "node-0"
    assert assert_exact(config_path, run_dir, result.stderr) > 100


def test_a_frozen_source_is_not_replaced(tmp_path: Path) -> None:
    """The lock stays with a frozen process: a takeover now would make two
    processes write the same row log; the stream waits out the freeze."""
    config_path = _with_standbys(tmp_path)
    run_dir = tmp_path / "run"
    result, _ = run_with_nemesis(config_path, run_dir, "--stop", "node-0@1.5:2", duration=5.0)
    assert result.returncode == 0, result.stderr
    assert _takeovers(run_dir, "node-0") == [], result.stderr
    assert assert_exact(config_path, run_dir, result.stderr) > 100


def test_a_table_sink_s_serving_process_killed_is_taken_over(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    config_path = _with_standbys(tmp_path, table=(postgres, "standby_sink"))
    run_dir = tmp_path / "run"
    sink_at, source_at = RANDOM.uniform(1.0, 1.8), RANDOM.uniform(2.2, 3.0)
    faults = ("--kill", f"sink@{sink_at:.2f}", "--kill", f"node-0@{source_at:.2f}")
    result, report = run_with_nemesis(config_path, run_dir, *faults, duration=5.0)
    assert result.returncode == 0, result.stderr
    assert _takeovers(run_dir, "sink") == [("sink-b", 1)], result.stderr
    assert _takeovers(run_dir, "node-0") == [("node-0b", 1)], result.stderr
    assert _fault(report, "sink")["detected_by"] == "sink-b"
    assert assert_exact(config_path, run_dir, result.stderr) > 100
