"""The Prometheus expositions of a node and of the coordinator follow the
naming conventions (``promtool check metrics`` finds nothing), carry the
labels the dashboards select on, and are served over HTTP; the deployment's
scrape configuration is valid (``promtool check config``).

promtool is Debian's (``make prometheus`` installs it when root)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import subprocess
import urllib.error
import urllib.request

import pytest

from semiactive import config, topology
from semiactive.coordinator.control import Coordinator
from semiactive.coordinator.metrics import CoordinatorMetrics
from semiactive.node.service.metrics import NodeMetrics
from semiactive.runtime import clock
from semiactive.runtime.events import EventLog
from semiactive.runtime.metrics_endpoint import serve_metrics
from semiactive.wire import control_pb2 as cpb
from tests.processes import ROOT

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool not installed: `make prometheus` installs Debian's prometheus (as root)",
)


def promtool(*args: str, text: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], input=text, capture_output=True, timeout=30)


def primary_status() -> cpb.NodeStatus:
    """What the primary of select-2 reports: an input and an output edge,
    each counter non-zero."""
    st = cpb.NodeStatus(
        name="node-2", role="primary", stage="select-2", epoch=1, state="running", tuples_in=900
    )
    st.tuples_out, st.input_backlog, st.resyncs, st.operator_rows, st.operator_busy_s = 800, 12, 1, 900, 0.4
    st.outputs.add(
        edge="select-2->select-3",
        seq=800,
        acked=790,
        retained=40,
        watermark=12_500,
        batch_size=50,
        backup_batches=15,
        backup_rows=750,
        backup_bytes=33_000,
        data_rows=800,
        data_bytes=35_200,
        cuts=20,
    )
    st.inputs.add(edge="select-1->select-2", seq=900, received_rows=900, receive_s=0.05)
    return st


def node_exposition(status: cpb.NodeStatus) -> str:
    metrics = NodeMetrics(status.name, status.stage, status.role)
    metrics.follow(lambda: status)
    for record in (
        {"event": "failure_detected", "stage": status.stage, "primary": "node-x", "silent_ms": 310.0},
        {"event": "takeover", "stage": status.stage, "epoch": 1},
        {"event": "recovered", "stage": status.stage, "recovery_ms": 42.5},
        {"event": "fenced", "stage": status.stage, "reason": "test"},
        {"event": "reprotected", "stage": status.stage, "warmup_ms": 800.0},
        {"event": "resync", "stage": status.stage},
    ):
        metrics.observe_event(record)
    metrics.heartbeats_sent.labels(status.stage).inc(4)
    metrics.heartbeats_missed.labels(status.stage).inc()
    metrics.latency.observe(0.012)
    return metrics.exposition().decode()


def coordinator_exposition() -> str:
    topo = topology.resolve(config.load(ROOT / "examples" / "paper-chain-asas.yaml"))
    addresses = {name: f"127.0.0.1:{7000 + i}" for i, name in enumerate(topo.nodes)}
    now = clock.monotonic()  # what the scrape reads liveness against
    coordinator = Coordinator(topo, addresses, EventLog("coordinator", None), now=now)
    metrics = CoordinatorMetrics(coordinator)
    status = primary_status()  # node-4, having taken select-2 over from node-2
    status.name = "node-4"
    status.views.add(stage="select-2", epoch=1, version=1, primary="node-4")
    coordinator.on_report(status, addresses["node-4"], now=now)
    coordinator.events.emit("assigned", stage="select-2", secondary="node-5", version=2)
    return metrics.exposition().decode()


def samples(text: str) -> dict[str, list[str]]:
    """Sample name -> the label sets it is exposed with."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            match = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?", line)
            assert match is not None, line
            out.setdefault(match.group(1), []).append(match.group(2) or "")
    return out


@needs_promtool
@pytest.mark.parametrize("role", ["primary", "secondary", "source", "sink", "spare"])
def test_a_node_exposition_passes_promtool(role: str) -> None:
    status = primary_status()
    status.role = role
    if role == "spare":
        status.stage = ""
        del status.outputs[:]
        del status.inputs[:]
    text = node_exposition(status)
    checked = promtool("check", "metrics", text=text.encode())
    assert checked.returncode == 0 and not checked.stdout and not checked.stderr, checked


@needs_promtool
def test_the_coordinator_exposition_passes_promtool() -> None:
    checked = promtool("check", "metrics", text=coordinator_exposition().encode())
    assert checked.returncode == 0 and not checked.stdout and not checked.stderr, checked


def test_every_node_sample_names_its_node_and_the_snapshot_is_exposed() -> None:
    text = node_exposition(primary_status())
    exposed = samples(text)
    for name, label_sets in exposed.items():
        assert all('node="node-2"' in labels for labels in label_sets), name
    assert name_prefixes(exposed) <= {"semiactive", "process"}
    # The snapshot, read at scrape time, with the edge and channel labels.
    assert (
        'semiactive_edge_sent_bytes_total{channel="backup",edge="select-2->select-3",'
        'node="node-2",stage="select-2"} 33000.0' in text
    )
    assert (
        'semiactive_edge_ack_lag_rows{edge="select-2->select-3",node="node-2",stage="select-2"} 10.0' in text
    )
    assert 'semiactive_watermark_seconds{node="node-2",stage="select-2"} 12.5' in text
    # Events: one observation each, in seconds.
    assert 'semiactive_recovery_seconds_sum{node="node-2",stage="select-2"} 0.0425' in text
    assert 'semiactive_failure_detection_seconds_count{node="node-2",stage="select-2"} 1.0' in text
    assert 'semiactive_takeovers_total{node="node-2",stage="select-2"} 1.0' in text
    # Only a sink has a latency histogram; no *_created series.
    assert "semiactive_sink_latency_seconds_count" not in exposed
    assert not [name for name in exposed if name.endswith("_created")]


def test_counted_series_exist_at_zero_before_anything_happened() -> None:
    """So that ``increase`` sees the first failover, refusal or loss."""
    status = primary_status()
    status.role = "secondary"
    metrics = NodeMetrics("node-4", "select-2", "secondary")
    metrics.follow(lambda: status)
    text = metrics.exposition().decode()
    for line in (
        'semiactive_takeovers_total{node="node-4",stage="select-2"} 0.0',
        'semiactive_recovery_seconds_count{node="node-4",stage="select-2"} 0.0',
        'semiactive_heartbeats_missed_total{node="node-4",stage="select-2"} 0.0',
        'semiactive_rows_lost_total{edge="select-2->select-3",node="node-4"} 0.0',
        'semiactive_requests_refused_total{node="node-4",request="push"} 0.0',
        'semiactive_frames_refused_total{edge="select-1->select-2",node="node-4",reason="undecodable"} 0.0',
    ):
        assert line in text, line


def test_the_coordinator_exposes_stages_edges_and_nodes() -> None:
    text = coordinator_exposition()
    exposed = samples(text)
    assert name_prefixes(exposed) <= {"semiactive", "process"}
    assert (
        'semiactive_asas_bandwidth_limit_bytes_per_second{edge="select-1->select-2",stage="select-2"} 30000.0'
        in text
    )
    assert 'semiactive_asas_recovery_limit_seconds{edge="select-1->select-2",stage="select-2"} 0.08' in text
    assert 'semiactive_coordinator_failovers_total{stage="select-2"} 1.0' in text  # the reported epoch
    assert 'semiactive_coordinator_reprotections_total{node="coordinator",stage="select-2"} 1.0' in text
    assert 'semiactive_coordinator_node_liveness{liveness="up",node="node-4"} 1.0' in text
    assert "semiactive_coordinator_nodes_alive 1.0" in text
    assert "semiactive_coordinator_stage_info" in exposed


def name_prefixes(exposed: dict[str, list[str]]) -> set[str]:
    return {name.split("_", 1)[0] for name in exposed}


async def test_the_endpoint_serves_metrics_over_http() -> None:
    server = await serve_metrics("127.0.0.1", 0, lambda: b"semiactive_up 1\n")
    port = server.sockets[0].getsockname()[1]

    def get(path: str) -> tuple[int, str, bytes]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
                return response.status, response.headers["Content-Type"], response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers["Content-Type"], error.read()

    try:
        status, kind, body = await asyncio.to_thread(get, "/metrics")
        assert (status, body) == (
            200,
            b"semiactive_up 1\n",
        ) and kind == "text/plain; version=0.0.4; charset=utf-8"
        assert (await asyncio.to_thread(get, "/elsewhere"))[0] == 404
    finally:
        server.close()
        await server.wait_closed()


async def test_the_endpoint_survives_garbage_and_keeps_serving() -> None:
    """Any port is attacked: a request with no end of head (past the
    reader's limit), binary noise, a method other than GET, a client
    that leaves mid-request; the node's loop keeps serving scrapes."""
    server = await serve_metrics("127.0.0.1", 0, lambda: b"semiactive_up 1\n")
    port = server.sockets[0].getsockname()[1]

    async def send(data: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(data)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        if data.endswith(b"\r\n\r\n") or len(data) > 100_000:
            answer = await asyncio.wait_for(reader.read(), 5)
        else:
            answer = b""
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
        return answer

    try:
        assert await send(b"GET /" + b"a" * 200_000) == b""  # over the limit: closed, no answer
        assert (await send(bytes(range(256)) * 4 + b"\r\n\r\n")).startswith(b"HTTP/1.1 405")
        assert (await send(b"POST /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405")
        await send(b"GET /metr")  # and gone
        answer = await send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"semiactive_up 1\n")
    finally:
        server.close()
        await server.wait_closed()


@needs_promtool
def test_the_deployment_scrape_config_is_valid() -> None:
    checked = promtool("check", "config", str(ROOT / "deploy" / "prometheus.yml"))
    assert checked.returncode == 0, checked


def test_the_coordinator_exposes_network_usage_and_migrations() -> None:
    topo = topology.resolve(config.load(ROOT / "examples" / "replacement-chain.yaml"))
    addresses = {name: f"127.0.0.1:{7000 + i}" for i, name in enumerate(topo.nodes)}
    coordinator = Coordinator(topo, addresses, EventLog("coordinator", None), now=0.0)
    metrics = CoordinatorMetrics(coordinator)
    for t, sent in ((0.0, 0), (1.0, 16_000)):
        status = cpb.NodeStatus(name="quotes", role="source", stage="quotes")
        status.outputs.add(edge="quotes->join-1", data_bytes=sent)
        coordinator.on_report(status, addresses["quotes"], now=t)
    coordinator.events.emit("migration_aborted", stage="join-1", target="spare-east", reason="test")
    text = metrics.exposition().decode()
    # 16 kB/s from the east coast to the join on the west coast, 40 ms away
    assert "semiactive_coordinator_network_usage_bytes 640.0" in text
    assert 'semiactive_coordinator_edge_rate_bytes_per_second{edge="quotes->join-1"} 16000.0' in text
    assert 'semiactive_coordinator_edge_latency_seconds{edge="quotes->join-1"} 0.04' in text
    assert (
        'semiactive_coordinator_migrations_total{node="coordinator",outcome="aborted",stage="join-1"} 1.0'
        in text
    )
    assert (
        'semiactive_coordinator_migrations_total{node="coordinator",outcome="done",stage="sum-2"} 0.0' in text
    )
    if PROMTOOL is not None:
        checked = promtool("check", "metrics", text=text.encode())
        assert checked.returncode == 0 and not checked.stdout and not checked.stderr, checked
