"""The coordinator's web page server (coordinator/web_server.py) on a
loopback port: the page, one JSON snapshot, the event stream; and what an
attacker sends (no end of head, noise, other methods, more streams than
allowed) never stops it. The snapshot comes from a coordinator fed
reports in memory (coordinator/live_view.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json

from semiactive import config, topology
from semiactive.coordinator import web_server
from semiactive.coordinator.control import Coordinator
from semiactive.coordinator.live_view import LiveView
from semiactive.coordinator.web_server import WebServer
from semiactive.ha.views import StageView
from semiactive.runtime.events import EventLog
from semiactive.runtime.messages import view_to_pb
from semiactive.wire import control_pb2 as cpb
from tests.processes import ROOT
from tests.waiting import wait_until_async


def live_view() -> tuple[Coordinator, LiveView]:
    topo = topology.resolve(config.load(ROOT / "examples" / "replacement-chain.yaml"))
    addresses = {name: f"127.0.0.1:{7000 + i}" for i, name in enumerate(topo.nodes)}
    coordinator = Coordinator(topo, addresses, EventLog("coordinator", None), now=0.0)
    for t, sent in ((0.0, 0), (1.0, 20_000)):
        status = cpb.NodeStatus(name="quotes", role="source", stage="quotes")
        status.outputs.add(edge="quotes->join-1", data_bytes=sent)
        coordinator.on_report(status, addresses["quotes"], now=t)
    return coordinator, LiveView(coordinator)


async def request(port: int, data: bytes, read: bool = True) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    with contextlib.suppress(ConnectionError):
        await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5) if read else b""
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
    return answer


def test_the_snapshot_prices_the_placement_and_routes_the_links() -> None:
    coordinator, view = live_view()
    view.sample(100.0)
    state = view.snapshot(1.0)
    assert state["cluster"] == "replacement-chain"
    assert state["usage_bytes"] == 20_000 * 0.040  # quotes (east) -> join-1 (west)
    assert state["usage_history"] == [[100.0, 800.0]]
    links = {(lk["a"], lk["b"]): lk["rate_bytes_per_s"] for lk in state["network"]["links"]}
    assert links == {("east", "hub"): 20_000, ("hub", "west"): 20_000}
    assert {s["name"]: s["pos"] for s in state["network"]["sites"]}["east"] == (-74.0, 40.7)
    sites = {n["name"]: n["site"] for n in state["nodes"]}
    assert sites["node-1"] == "west" and sites["quotes"] == "east"
    coordinator.events.emit("migrated", stage="join-1", target="spare-east")
    coordinator.events.emit("registered", target="x")  # not a control event: not shown
    assert [e["event"] for e in view.snapshot(1.0)["events"]] == ["migrated"]
    # An epoch that went up without a migration handing it over is a failover.
    from semiactive.ha.views import StageView

    coordinator.views["sum-2"] = StageView("sum-2", 0, 0, "node-3", "node-4")
    view.sample(101.0)
    assert view.snapshot(1.0)["events"][-1]["event"] == "migrated"
    coordinator.views["sum-2"] = StageView("sum-2", 1, 1, "node-4", None)
    view.sample(102.0)
    assert view.snapshot(1.0)["events"][-1]["event"] == "failover"


async def test_the_server_answers_and_survives_garbage(monkeypatch: object) -> None:
    _, view = live_view()
    web = WebServer(view)
    server = await web.serve("127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        page = await request(port, b"GET / HTTP/1.1\r\n\r\n")
        assert page.startswith(b"HTTP/1.1 200") and b"EventSource" in page
        state = await request(port, b"GET /state HTTP/1.1\r\n\r\n")
        assert json.loads(state.split(b"\r\n\r\n", 1)[1])["cluster"] == "replacement-chain"
        assert (await request(port, b"HEAD /state HTTP/1.1\r\n\r\n")).endswith(b"\r\n\r\n")
        assert (await request(port, b"POST /state HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405")
        assert (await request(port, b"GET /etc/passwd HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
        assert (await request(port, bytes(range(256)) * 4 + b"\r\n\r\n")).startswith(b"HTTP/1.1 405")
        assert await request(port, b"GET /" + b"a" * 200_000) == b""  # no end of head: closed
        await request(port, b"GET /sta", read=False)  # and gone
        # A stream: the first snapshot arrives at once.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /events HTTP/1.1\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert b"text/event-stream" in head
        first = await asyncio.wait_for(reader.readuntil(b"\n\n"), 5)
        assert first.startswith(b"event: state\ndata: {")
        # More streams than allowed: refused, the open one keeps flowing.
        web_server.MAX_STREAMS = 1
        assert (await request(port, b"GET /events HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 503")
        assert (await asyncio.wait_for(reader.readuntil(b"\n\n"), 5)).startswith(b"event: state")
        writer.close()
        await wait_until_async(
            lambda: web.streams,
            until=lambda streams: streams == 0,
            what="the server to notice the reader left",
            timeout=5,
        )
    finally:
        web_server.MAX_STREAMS = 16
        server.close()
        await server.wait_closed()


def test_the_snapshot_says_which_sources_an_assign_stage_reads_now() -> None:
    topo = topology.resolve(config.load(ROOT / "examples" / "person-tracking.yaml"))
    addresses = {name: f"127.0.0.1:{7000 + i}" for i, name in enumerate(topo.nodes)}
    coordinator = Coordinator(topo, addresses, EventLog("coordinator", None), now=0.0)
    status = cpb.NodeStatus(name="node-1", role="primary", stage="follow-alice")
    status.views.append(view_to_pb(StageView("follow-alice", 0, 0, "node-1", "node-2")))
    status.inputs.add(edge="tracker->follow-alice")
    for camera in ("ny", "atl", "hou", "la"):
        status.inputs.add(edge=f"camera-{camera}->follow-alice", connected=camera == "atl")
    coordinator.on_report(status, addresses["node-1"], now=0.5)
    [stage] = [s for s in LiveView(coordinator).snapshot(0.5)["stages"] if s["stage"] == "follow-alice"]
    assert stage["inputs"] == ["tracker", "camera-ny", "camera-atl", "camera-hou", "camera-la"]
    assert stage["idle"] == ["camera-ny", "camera-hou", "camera-la"]


def test_a_cluster_without_a_network_gets_edge_rates_and_sink_latency() -> None:
    topo = topology.resolve(config.load(ROOT / "examples" / "paper-chain-ha.yaml"))
    addresses = {name: f"127.0.0.1:{7000 + i}" for i, name in enumerate(topo.nodes)}
    coordinator = Coordinator(topo, addresses, EventLog("coordinator", None), now=0.0)
    view = LiveView(coordinator)

    def report(name: str, role: str, stage: str, t: float, rows: int = 0, latency: float = 0.0) -> None:
        status = cpb.NodeStatus(name=name, role=role, stage=stage, latency_rows=rows, latency_sum_s=latency)
        for e in topo.edges:
            if e.producer == stage:
                status.outputs.add(edge=e.id, data_rows=rows, data_bytes=50 * rows, backup_rows=rows // 2)
        coordinator.on_report(status, addresses[name], now=t)

    # The page samples the last reports every half second.
    for t, rows in ((0.0, 0), (0.5, 400), (1.0, 1000)):
        report("node-0", "source", "node-0", t, rows)
        report("node-2", "primary", "select-2", t, rows)
        report("sink", "sink", "sink", t, rows, latency=rows * 0.05)
        view.sample(99.0 + t, now=t)
    state = view.snapshot(1.0)
    assert "network" not in state and "usage_bytes" not in state
    edges = {e["edge"]: e for e in state["edges"]}
    assert set(edges) == {e.id for e in topo.edges}
    first = edges["node-0->select-1"]
    assert (first["from"], first["to"], first["rows_per_s"], first["bytes_per_s"]) == (
        "node-0",
        "node-1",
        1000,
        50_000,
    )
    assert first["backup_rows_per_s"] == 500 and edges["select-1->select-2"]["rows_per_s"] == 0
    history = state["rates_history"]
    assert history["t"] == [99.0, 99.5, 100.0]
    assert history["rows_per_s"]["node-0->select-1"] == [0.0, 800.0, 1000.0]
    assert history["latency_ms"] == {"sink": [None, 50.0, 50.0]}
    # node-2 killed: its last report stops counting; the source restarted: counters anew.
    report("node-0", "source", "node-0", 2.0, 100)
    view.sample(101.0, now=2.0)
    report("node-0", "source", "node-0", 2.5, 600)
    view.sample(101.5, now=2.6)
    edges = {e["edge"]: e for e in view.snapshot(2.6)["edges"]}
    assert edges["select-2->select-3"]["rows_per_s"] == 0
    assert edges["node-0->select-1"]["rows_per_s"] == 1000
    assert view.snapshot(2.6)["rates_history"]["latency_ms"] == {"sink": [None, 50.0, 50.0, None, None]}
