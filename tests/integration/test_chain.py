"""A real cluster: source -> 3 node processes -> sink over gRPC on loopback.

The sink must hold exactly what an independent reference, written here in
plain Python from the source's log, computes: no loss, no duplicate, same
order, same values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from semiactive import config as config_file
from semiactive import topology
from semiactive.oracle.verify import check_run, source_rows
from tests.processes import assert_no_processes, chain_config, read_jsonl, semiactive, write_config

pytestmark = pytest.mark.slow


def _run(
    tmp_path: Path, queries: list[str], duration: float = 3.0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    config = write_config(tmp_path / "chain.yaml", chain_config(queries))
    run_dir = tmp_path / "run"
    result = semiactive(
        "cluster", "up", str(config), "--duration", str(duration), "--run-dir", str(run_dir), "--quiet"
    )
    assert result.returncode == 0, result.stderr
    assert_no_processes(str(run_dir))
    source = read_jsonl(run_dir / "sources" / "node-0.jsonl")
    sink = read_jsonl(run_dir / "sink" / "sink.jsonl")
    assert len(source) > 1000
    return source, sink


def test_selection_chain_delivers_exactly_the_reference(tmp_path: Path) -> None:
    source, sink = _run(
        tmp_path,
        [
            "REGISTER QUERY s1 AS SELECT id, val, pad FROM s0 WHERE val >= 100",
            "REGISTER QUERY s2 AS SELECT id, val * 2 AS val FROM s1 WHERE val % 3 != 0",
            "REGISTER QUERY s3 AS SELECT id, val FROM s2 WHERE val < 1500",
        ],
    )
    expected: list[dict[str, Any]] = []
    for row in source:
        if row["val"] >= 100 and row["val"] % 3 != 0 and row["val"] * 2 < 1500:
            expected.append(
                {"seq": len(expected) + 1, "ts": row["ts"], "id": row["id"], "val": row["val"] * 2}
            )
    assert sink == expected


def test_a_source_without_a_row_log_is_checked_against_its_generator(tmp_path: Path) -> None:
    """``log: false`` (no row log, which costs a fast source half its CPU):
    the check makes the synthetic source's stream again from its seed and
    rate, the count its end.json gives. It equals the row log a logged run
    writes, and a sink missing a row fails the check."""
    queries = ["REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 100"]
    cfg = chain_config(queries, rate=2000)
    logged = write_config(tmp_path / "logged.yaml", cfg)
    cfg["sources"][0]["log"] = False
    unlogged = write_config(tmp_path / "unlogged.yaml", cfg)
    for path, run_dir in ((logged, tmp_path / "logged"), (unlogged, tmp_path / "unlogged")):
        result = semiactive(
            "cluster", "up", str(path), "--duration", "2", "--run-dir", str(run_dir), "--quiet"
        )
        assert result.returncode == 0, result.stderr
        assert_no_processes(str(run_dir))
    assert not (tmp_path / "unlogged" / "sources" / "node-0.jsonl").exists()
    topo = topology.resolve(config_file.load(unlogged))
    (check,) = check_run(topo, tmp_path / "unlogged")
    assert check.ok and check.delivered > 1000, check.describe()
    # The generator's stream is the logged one, row for row.
    source = topo.stages["node-0"]
    assert source.schema is not None
    made, _ = source_rows(tmp_path / "unlogged", "node-0", source.schema, source.source)
    log = (tmp_path / "logged" / "sources" / "node-0.jsonl").read_text().splitlines()
    wanted = [(r["ts"], r["seq"], 1, r["id"], r["val"], r["pad"]) for r in map(json.loads, log)]
    n = min(len(made), len(wanted))
    assert n > 3000 and made[:n] == wanted[:n]
    sink = tmp_path / "unlogged" / "sink" / "sink.jsonl"
    lines = sink.read_text().splitlines()
    sink.write_text("\n".join(lines[:500] + lines[501:]) + "\n")
    (check,) = check_run(topo, tmp_path / "unlogged")
    assert not check.ok


def test_windowed_aggregate_chain_delivers_exactly_the_reference(tmp_path: Path) -> None:
    source, sink = _run(
        tmp_path,
        [
            "REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 0",
            "REGISTER QUERY s2 AS ISTREAM(SELECT SUM(val) AS total FROM s1 [Rows 100 Slide 10])",
            "REGISTER QUERY s3 AS SELECT * FROM s2 WHERE total >= 0",
        ],
    )
    # One tuple per ms at 1000 tuples/s: every 10th tuple closes a slide; the
    # relation is the last 100 tuples; ISTREAM emits the sum when it changed.
    assert len({r["ts"] for r in source}) == len(source)
    expected: list[dict[str, Any]] = []
    last = None
    values = [r["val"] for r in source]
    for i, row in enumerate(source, start=1):
        if i % 10 == 0:
            total = sum(values[max(0, i - 100) : i])
            if total != last:
                expected.append({"seq": len(expected) + 1, "ts": row["ts"], "total": total})
            last = total
    assert sink == expected


def test_a_chain_outruns_its_ack_interval(tmp_path: Path) -> None:
    """A producer frees its log only as far as the Level-1 cut, which the
    acks move. With acks every minute and logs of 4,000 rows, a chain at
    20,000 tuples/s keeps its schedule only because a consumer acknowledges
    at once every eighth of a log it takes in (roles/acks.py unacked_rows)."""
    queries = [
        "REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 0",
        "REGISTER QUERY s2 AS SELECT id, val FROM s1 WHERE val >= 0",
    ]
    cfg = chain_config(queries, rate=20_000, ack_interval_ms=60_000, queue_rows=4_000)
    cfg["sources"][0]["log"] = True
    config = write_config(tmp_path / "chain.yaml", cfg)
    run_dir = tmp_path / "run"
    result = semiactive("cluster", "up", str(config), "--duration", "3", "--run-dir", str(run_dir), "--quiet")
    assert result.returncode == 0, result.stderr
    assert_no_processes(str(run_dir))
    end = json.loads((run_dir / "sources" / "node-0.end.json").read_text())
    assert end["lag_ms"] < 250, end
    source = read_jsonl(run_dir / "sources" / "node-0.jsonl")
    sink = read_jsonl(run_dir / "sink" / "sink.jsonl")
    assert len(source) >= 55_000
    assert sink == [
        {"seq": i, "ts": r["ts"], "id": r["id"], "val": r["val"]} for i, r in enumerate(source, start=1)
    ]
