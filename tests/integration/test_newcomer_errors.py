"""What a newcomer gets wrong, at the command line: one located line and
the documented exit status (2: bad input; 1: the thing asked for cannot be
done now), never a traceback or silence."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.processes import chain_config, semiactive, write_config

SELECT = ["REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 0"]


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def test_the_nemesis_names_a_process_the_run_does_not_have(tmp_path: Path) -> None:
    doc = {
        "t0_unix": None,
        "launcher_pid": os.getpid(),
        "processes": [{"name": "node-2", "pid": os.getpid()}],
    }
    (tmp_path / "cluster.json").write_text(json.dumps(doc))
    result = semiactive("nemesis", str(tmp_path), "--kill", "node2@4")
    assert result.returncode == 2
    assert "no process 'node2' in this run (did you mean node-2?)" in _one_line(result.stderr)


@pytest.mark.parametrize(
    ("data", "said"),
    [(None, "No such file"), ("ts,val\n0,1\n5,lots\n", "in.csv:3: column val: 'lots' is not integer")],
    ids=["missing", "bad-row"],
)
def test_cluster_check_refuses_what_cluster_up_refuses(tmp_path: Path, data: str | None, said: str) -> None:
    cfg = chain_config(SELECT)
    path = tmp_path / "in.csv"
    if data is not None:
        path.write_text(data)
    cfg["sources"][0] = {
        "name": "node-0",
        "stream": "s0",
        "kind": "file",
        "path": str(path),
        "schema": {"val": "integer"},
    }
    config = write_config(tmp_path / "c.yaml", cfg)
    result = semiactive("cluster", "check", str(config))
    assert result.returncode == 2
    line = _one_line(result.stderr)
    assert str(config) in line and "sources[0].path" in line and said in line, line


def test_an_unknown_config_field_is_named_with_the_one_meant(tmp_path: Path) -> None:
    cfg = chain_config(SELECT)
    cfg["sources"][0]["streem"] = cfg["sources"][0].pop("stream")
    result = semiactive("cluster", "check", str(write_config(tmp_path / "c.yaml", cfg)))
    assert result.returncode == 2
    assert "unknown field 'streem' (did you mean 'stream'?)" in _one_line(result.stderr)


def test_sql_that_cql_lacks_is_named(tmp_path: Path) -> None:
    program = tmp_path / "q.cql"
    program.write_text(
        "REGISTER STREAM S (id integer, val integer);\nREGISTER QUERY q AS SELECT * FROM S ORDER BY val;\n"
    )
    result = semiactive("query", "check", str(program))
    assert result.returncode == 2
    assert (
        f"{program}:2:" in (line := _one_line(result.stderr)) and "`ORDER BY` is not supported in CQL" in line
    )


def test_status_without_a_coordinator_says_so_in_a_line(tmp_path: Path) -> None:
    result = semiactive("status", "--coordinator", "127.0.0.1:9")
    assert result.returncode == 1
    assert _one_line(result.stderr).startswith("semiactive status: no coordinator answers at 127.0.0.1:9")


def test_a_duration_of_zero_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.yaml", chain_config(SELECT))
    result = semiactive("cluster", "up", str(config), "--duration", "0", "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 2
    assert "--duration 0: give a number of seconds > 0" in _one_line(result.stderr)
    assert not (tmp_path / "run").exists()
