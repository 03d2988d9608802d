"""Bad input gets one clear error, no hang, and no process left behind."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from semiactive.runtime.tls import Security
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import control_pb2_grpc as cpb_grpc
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc
from tests.processes import ROOT, assert_no_processes, chain_config, issue_tls, semiactive, write_config
from tests.waiting import wait_until_async

pytestmark = pytest.mark.slow

SELECT = ["REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 0"]


def _up(tmp_path: Path, config: Path) -> subprocess.CompletedProcess[str]:
    run_dir = tmp_path / "run"
    result = semiactive(
        "cluster", "up", str(config), "--duration", "1", "--run-dir", str(run_dir), "--quiet", timeout=60
    )
    assert_no_processes(str(run_dir))
    return result


def test_malformed_yaml(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("name: x\nsources:\n  - name: node-0\n    stream: [unclosed\n")
    result = _up(tmp_path, config)
    assert result.returncode == 2
    assert f"{config}:" in result.stderr and "malformed YAML" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unknown_field_is_named_with_its_line(tmp_path: Path) -> None:
    cfg = chain_config(SELECT)
    cfg["stages"][0]["qurey"] = "oops"
    config = write_config(tmp_path / "c.yaml", cfg)
    result = _up(tmp_path, config)
    assert result.returncode == 2
    line = next(i for i, text in enumerate(config.read_text().splitlines(), start=1) if "qurey" in text)
    assert f"{config}:{line}: stages[0].qurey: unknown field 'qurey'" in result.stderr


def test_bad_value_is_named(tmp_path: Path) -> None:
    cfg = chain_config(SELECT)
    cfg["sources"][0]["rate"] = [{"at_s": 0, "tuples_per_s": -5}]
    result = _up(tmp_path, write_config(tmp_path / "c.yaml", cfg))
    assert result.returncode == 2
    assert "sources[0].rate[0].tuples_per_s" in result.stderr and "greater than 0" in result.stderr


def test_unknown_stream_points_at_the_query(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "sources:\n"
        "  - {name: node-0, stream: s0}\n"
        "stages:\n"
        "  - name: stage-1\n"
        "    node: node-1\n"
        "    query: |\n"
        "      REGISTER QUERY s1 AS\n"
        "        SELECT * FROM nowhere WHERE val >= 0\n"
        "sinks:\n"
        "  - {name: sink, input: s1}\n"
    )
    result = _up(tmp_path, config)
    assert result.returncode == 2
    assert "unknown stream" in result.stderr and "'nowhere'" in result.stderr
    line = next(i for i, text in enumerate(config.read_text().splitlines(), start=1) if "nowhere" in text)
    assert f"{config}:{line}:" in result.stderr
    assert "query line 2, column 17" in result.stderr


def test_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg = chain_config(SELECT)
        cfg["endpoints"] = {"node-1": {"host": "127.0.0.1", "port": port}}
        result = _up(tmp_path, write_config(tmp_path / "c.yaml", cfg))
    assert result.returncode == 2
    assert f"port {port} is already in use" in result.stderr and "endpoints.node-1" in result.stderr


def test_metrics_port_in_use(tmp_path: Path) -> None:
    """Found before anything starts, like a gRPC port (it used to end the
    run with exit 1 once the node failed to bind it)."""
    with socket.socket() as taken, socket.socket() as free:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        free.bind(("127.0.0.1", 0))
        port, grpc_port = taken.getsockname()[1], free.getsockname()[1]
        free.close()
        cfg = chain_config(SELECT)
        cfg["endpoints"] = {"node-1": {"host": "127.0.0.1", "port": grpc_port, "metrics_port": port}}
        result = _up(tmp_path, write_config(tmp_path / "c.yaml", cfg))
    assert result.returncode == 2, result.stderr
    assert f"port {port} is already in use" in result.stderr
    assert "endpoints.node-1.metrics_port" in result.stderr


def test_peer_unreachable_at_start(tmp_path: Path) -> None:
    cfg = chain_config(SELECT, connect_timeout_ms=800)
    config = write_config(tmp_path / "c.yaml", cfg)
    ports = {}
    for name in ("node-0", "node-1", "sink"):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports[name] = s.getsockname()[1]
    endpoints = tmp_path / "endpoints.json"
    endpoints.write_text(json.dumps({n: {"host": "127.0.0.1", "port": p} for n, p in ports.items()}))
    started = time.monotonic()
    # node-1 starts alone: its downstream, the sink, never comes up.
    tls = issue_tls(config, tmp_path / "tls")
    result = semiactive(
        "node",
        "--config",
        str(config),
        "--name",
        "node-1",
        "--endpoints",
        str(endpoints),
        "--tls-dir",
        str(tls),
        timeout=30,
    )
    assert result.returncode == 1
    assert f"cannot reach sink at 127.0.0.1:{ports['sink']}" in result.stderr
    assert time.monotonic() - started < 15
    assert_no_processes(str(config))


def test_garbage_on_the_data_port_is_refused_and_the_node_lives_on(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.yaml", chain_config(SELECT))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoints = tmp_path / "endpoints.json"
    endpoints.write_text(
        json.dumps({n: {"host": "127.0.0.1", "port": port} for n in ("node-0", "node-1", "sink")})
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "semiactive",
            "node",
            "--config",
            str(config),
            "--name",
            "sink",
            "--endpoints",
            str(endpoints),
            "--run-dir",
            str(tmp_path / "run"),
            "--tls-dir",
            str(issue_tls(config, tmp_path / "tls")),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        asyncio.run(_garbage(port, tmp_path / "tls"))
        assert proc.poll() is None, "the node died"
    finally:
        proc.kill()
        proc.wait()
    assert_no_processes(str(config))


async def _garbage(port: int, tls: Path) -> None:
    """Garbage from a peer holding a valid certificate: node-1's, the sink's
    real producer (the worst case: TLS itself refuses everyone else)."""
    address = f"127.0.0.1:{port}"
    async with Security.load(tls, "node-1").channel(address, "sink") as channel:
        control = cpb_grpc.ControlStub(channel)
        await wait_until_async(
            lambda: control.Status(pb.Empty(), timeout=1),
            until=lambda _: True,  # any answer
            what="the node to come up",
            timeout=20,
            interval=0.1,
            ignoring=grpc.aio.AioRpcError,
        )
        # 1. Raw bytes that are not HTTP/2 at all.
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"\x00\xffGARBAGE" * 100)
        await writer.drain()
        writer.close()
        # 2. A well-formed stream whose first frame is not a hello.
        data = pb_grpc.DataPlaneStub(channel)
        call = data.Push()
        await call.write(pb.Frame(batch=pb.Batch(first_seq=1, count=1, rows=b"x")))
        refusal = await _refusal(call)
        assert refusal.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "hello" in (refusal.details() or "")
        # 3. A hello for an edge this node does not have.
        call = data.Push()
        await call.write(pb.Frame(hello=pb.Hello(edge="nope->sink", sender="x", channel=pb.DATA)))
        refusal = await _refusal(call)
        assert refusal.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "no input edge" in (refusal.details() or "")
        # 4. The right edge, the right layout, rows of the wrong size.
        status = await control.Status(pb.Empty(), timeout=2)
        edge = status.inputs[0].edge
        call = data.Push()
        layout = "stream:<qqq20s:id,val,pad"  # the s1 edge's row layout
        await call.write(pb.Frame(hello=pb.Hello(edge=edge, sender="node-1", channel=pb.DATA, layout=layout)))
        welcome = await call.read()
        assert welcome.welcome.next_seq == 1
        await call.write(pb.Frame(batch=pb.Batch(first_seq=1, count=3, rows=b"\x01" * 17, watermark=5)))
        refusal = await _refusal(call)
        assert refusal.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "does not hold 3 rows" in (refusal.details() or "")
        # The node still answers.
        status = await control.Status(pb.Empty(), timeout=2)
        assert status.name == "sink"
        # A data-plane peer may not stop it; only admin (and the coordinator) may.
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await control.Stop(cpb.StopRequest(exit=True, now=True), timeout=2)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    async with Security.load(tls, "admin").channel(address, "sink") as channel:
        await cpb_grpc.ControlStub(channel).Stop(cpb.StopRequest(exit=True, now=True), timeout=2)


async def _refusal(call: grpc.aio.StreamStreamCall[pb.Frame, pb.Feedback]) -> grpc.aio.AioRpcError:
    """The error a Push ends with. Feedback sent before it is passed over:
    the node acks (Level-0, Level-1) on its own clock, so a busy machine
    may put an ack between the welcome and the refusal."""
    for _ in range(100):
        try:
            feedback = await asyncio.wait_for(call.read(), timeout=10)
        except grpc.aio.AioRpcError as err:
            return err
        assert feedback is not grpc.aio.EOF, "the stream ended without an error"
        assert feedback.WhichOneof("body") in ("level0", "level1", "state", "interest"), feedback
    raise AssertionError("no refusal after 100 feedback messages")
