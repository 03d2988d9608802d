"""Telemetry records (docs/telemetry.md): what a node's status flattens
into, the files a process appends, the manifests of runs and campaigns;
and that the documented schema is the one written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from semiactive.config import ConfigError
from semiactive.launcher.manifest import Campaign, parse_tags, write_run
from semiactive.runtime import telemetry
from semiactive.runtime.events import EventLog
from semiactive.wire import control_pb2 as cpb

DOC = Path(__file__).resolve().parents[2] / "docs" / "telemetry.md"


def _status() -> cpb.NodeStatus:
    st = cpb.NodeStatus(name="node-2", role="primary", stage="sum-2", epoch=3, state="running")
    st.tuples_in, st.tuples_out, st.input_backlog, st.resyncs = 900, 450, 12, 1
    st.operator_rows, st.operator_busy_s = 880, 0.25
    st.outputs.add(
        edge="sum-2->sink",
        seq=450,
        acked=400,
        retained=70,
        batch_size=100,
        data_rows=440,
        data_bytes=44_000,
        backup_rows=300,
        backup_bytes=30_500,
        backup_batches=3,
    )
    st.inputs.add(edge="select-1->sum-2", seq=900, received_rows=905)
    return st


def test_a_status_flattens_into_one_node_record_and_one_record_per_edge() -> None:
    records = telemetry.sample(_status(), t=100.5, since=90.0)
    (node,) = records["nodes"]
    assert node["input_backlog_rows"] == 12 and node["output_log_rows"] == 70
    assert (node["t"], node["since"], node["epoch"], node["tuples_out"]) == (100.5, 90.0, 3, 450)
    out, inbound = records["edges"]
    assert (out["direction"], out["edge"], out["ack_lag_rows"], out["retained_rows"]) == (
        "out",
        "sum-2->sink",
        50,
        70,
    )
    assert (out["data_bytes"], out["backup_bytes"], out["backup_batches"], out["batch_size"]) == (
        44_000,
        30_500,
        3,
        100,
    )
    assert (inbound["direction"], inbound["seq"], inbound["received_rows"], inbound["data_bytes"]) == (
        "in",
        900,
        905,
        0,
    )
    assert {r["role"] for r in records["edges"]} == {"primary"}


def test_a_sinks_sample_carries_its_latency_counters() -> None:
    st = cpb.NodeStatus(name="sink", role="sink", stage="sink", latency_rows=500, latency_sum_s=12.5)
    (node,) = telemetry.sample(st, t=1.0, since=0.0)["nodes"]
    assert (node["latency_rows"], node["latency_sum_s"]) == (500, 12.5)
    (other,) = telemetry.sample(_status(), t=1.0, since=0.0)["nodes"]
    assert (other["latency_rows"], other["latency_sum_s"]) == (0, 0.0)


def _documented_fields(heading: str) -> set[str]:
    """Field names in the first column of the table under ``heading``."""
    section = DOC.read_text().split(heading, 1)[1].split("\n## ", 1)[0]
    fields: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            fields |= set(re.findall(r"`([a-z_0-9]+)`", line.split("|")[1]))
    return fields


def test_the_documented_edge_and_node_fields_are_the_written_ones() -> None:
    records = telemetry.sample(_status(), t=1.0, since=0.0)
    assert _documented_fields("## `edges-<process>.jsonl`") == set(records["edges"][0])
    assert set(records["edges"][0]) == set(records["edges"][1])
    node_section = DOC.read_text().split("## `nodes-<process>.jsonl`", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"`([a-z_0-9]+)`", node_section)) - {"running", "warming-up", "spare"} == set(
        records["nodes"][0]
    )


def test_a_process_appends_each_kind_to_its_own_file_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    log = EventLog("node-7", tmp_path)
    seen: list[str] = []
    log.observers.append(lambda record: seen.append(record["event"]))
    log.emit("fault_injected", at=12.5, target="node-2", kind="kill")
    log.append("edges", [{"t": 1.0, "edge": "a->b"}, {"t": 2.0, "edge": "a->b"}])
    log.close()
    (event,) = telemetry.read_jsonl(tmp_path / "telemetry" / "events-node-7.jsonl")
    assert (event["t"], event["node"], event["event"], event["target"]) == (
        12.5,
        "node-7",
        "fault_injected",
        "node-2",
    )
    assert seen == ["fault_injected"]
    path = tmp_path / "telemetry" / "edges-node-7.jsonl"
    with path.open("a") as handle:
        handle.write('{"t": 3.0, "ed')  # a kill mid-write
    assert [r["t"] for r in telemetry.read_jsonl(path)] == [1.0, 2.0]
    EventLog("node-8", None).append("edges", [{"t": 1.0}])  # no run directory: nothing, no error


def test_a_campaign_lists_its_runs_and_every_run_carries_the_tags(tmp_path: Path) -> None:
    campaign = Campaign(tmp_path / "sweep-1", "sweep", {"repeat": 2}, {"operator": "aggregate"})
    first = json.loads((tmp_path / "sweep-1" / "manifest.json").read_text())
    assert (first["kind"], first["runs"], first["params"]) == (
        "sweep",
        [],
        {"repeat": 2, "operator": "aggregate"},
    )
    campaign.add(tmp_path / "sweep-1" / "run-sas100-0", "c.yaml", {"mode": "sas", "batch_size": 100})
    manifest = json.loads((tmp_path / "sweep-1" / "manifest.json").read_text())
    assert manifest["runs"] == ["run-sas100-0"]
    run = json.loads((tmp_path / "sweep-1" / "run-sas100-0" / "manifest.json").read_text())
    assert run["campaign"] == "sweep-1" and run["kind"] == "sweep" and run["config"] == "c.yaml"
    assert run["params"] == {"operator": "aggregate", "mode": "sas", "batch_size": 100}
    write_run(tmp_path / "alone", "cluster", "x.yaml", {"duration_s": 3})
    assert json.loads((tmp_path / "alone" / "manifest.json").read_text())["campaign"] is None


def test_tags_are_key_value_pairs() -> None:
    assert parse_tags(["operator=aggregate", "note=a=b"]) == {"operator": "aggregate", "note": "a=b"}
    for bad in ("operator", "=x", "two words=x"):
        with pytest.raises(ConfigError, match="--tag"):
            parse_tags([bad])
