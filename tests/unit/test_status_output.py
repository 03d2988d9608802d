"""``semiactive status``'s output a script reads, and what it says when no
coordinator answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from semiactive.admin.status import describe, plain, unreachable
from semiactive.wire import coordinator_pb2 as cdpb


def test_the_json_has_proto_field_names_and_numbers_for_64_bit_integers() -> None:
    state = cdpb.ClusterStatus(name="c", uptime_s=2.5)
    stage = state.stages.add(stage="select-2", primary="node-4", epoch=3, version=7)
    stage.tuning.add(edge="a->b", batch_size=100)
    state.nodes.add(name="node-2", role="spare", last_report_s=-1.0)
    out = json.loads(json.dumps(plain(state)))
    assert out["uptime_s"] == 2.5 and "uptimeS" not in out
    (s,) = out["stages"]
    assert (s["epoch"], s["version"], s["secondary"], s["protected"]) == (3, 7, "", False)
    assert s["tuning"][0]["batch_size"] == 100
    assert out["nodes"][0]["last_report_s"] == -1.0


def test_a_node_whose_broker_or_database_is_away_says_so() -> None:
    state = cdpb.ClusterStatus(name="c")
    state.nodes.add(name="src", role="source", liveness="up", outage="Kafka at h:1 has not answered")
    state.nodes.add(name="out", role="sink", liveness="up")
    lines = describe(state).splitlines()
    assert lines[-2].endswith("OUTAGE: Kafka at h:1 has not answered")
    assert "OUTAGE" not in lines[-1]
    assert plain(state)["nodes"][1]["outage"] == ""


def test_a_source_or_sink_with_a_standby_is_listed_with_its_members() -> None:
    state = cdpb.ClusterStatus(name="c")
    state.stages.add(stage="src", role="source", mode="none", primary="src-b", secondary="src", epoch=1)
    state.stages.add(stage="out", role="sink", mode="none", primary="out", secondary="out-b", protected=True)
    state.stages.add(stage="plain", role="source", mode="none", primary="plain")
    lines = describe(state).splitlines()
    src = next(line for line in lines if line.startswith("src "))
    assert src.split()[1:5] == ["none", "src-b", "src", "1"] and src.endswith("source: STANDBY DOWN")
    assert next(line for line in lines if line.startswith("out ")).endswith("sink: standby up")
    assert not any(line.startswith("plain ") for line in lines)


def _refused() -> grpc.aio.AioRpcError:
    empty = grpc.aio.Metadata()
    return grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, empty, empty, "refused\nmore")


@pytest.fixture
def gone_pid() -> int:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    return gone.pid


def test_no_coordinator_says_why_by_the_state_of_the_run(tmp_path: Path, gone_pid: int) -> None:
    doc: dict[str, object] = {"t0_unix": None, "launcher_pid": os.getpid(), "processes": []}
    (tmp_path / "cluster.json").write_text(json.dumps(doc))
    assert "is starting" in unreachable("127.0.0.1:1", tmp_path, _refused())
    (tmp_path / "cluster.json").write_text(json.dumps({**doc, "t0_unix": time.time()}))
    assert "does not answer: UNAVAILABLE: refused" in unreachable("127.0.0.1:1", tmp_path, _refused())
    (tmp_path / "cluster.json").write_text(json.dumps({**doc, "launcher_pid": gone_pid}))
    assert "has ended" in unreachable("127.0.0.1:1", tmp_path, _refused())
    said = unreachable("127.0.0.1:1", None, _refused())
    assert (
        said.startswith("no coordinator answers at 127.0.0.1:1 (UNAVAILABLE: refused)")
        and "--run-dir" in said
    )
