"""The coordinator as its own process (coordinator/service.py): killed mid-run
it loses nothing and failovers still happen; restarted by the launcher, it
rebuilds its state from the nodes' reports and ``semiactive status`` is
right again. A live coordinator refuses garbage and keeps serving."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from semiactive import config, topology
from semiactive.launcher.ports import PortAllocator
from semiactive.oracle.verify import check_run
from semiactive.runtime.tls import Security
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import coordinator_pb2 as cdpb
from semiactive.wire import coordinator_pb2_grpc as cdpb_grpc
from semiactive.wire import dataplane_pb2 as pb
from tests.faults.harness import AGGREGATE, events, finish, protected_chain, start_launcher
from tests.processes import ROOT, assert_no_processes, issue_tls, semiactive
from tests.waiting import wait_until, wait_until_async

pytestmark = pytest.mark.slow


def _status(run_dir: Path) -> dict[str, Any] | None:
    result = semiactive("status", "--run-dir", str(run_dir), "--json", timeout=30)
    return json.loads(result.stdout) if result.returncode == 0 else None


def _stage(state: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in state["stages"] if s["stage"] == name)


def test_the_coordinator_killed_mid_run_loses_nothing_and_is_rebuilt_from_the_reports(tmp_path: Path) -> None:
    config_path = protected_chain(tmp_path, AGGREGATE)
    run_dir = tmp_path / "run"
    # Ended by SIGINT once stage-2 is protected again (seconds on a loaded machine).
    launcher = start_launcher(config_path, run_dir, duration=120)
    try:
        # The coordinator dies, and stage-2's primary 100 ms later: the
        # takeover must not need the coordinator.
        nemesis = semiactive("nemesis", str(run_dir), "--kill", "coordinator@1.5", "--kill", "node-2@1.6")
        assert nemesis.returncode == 0, nemesis.stderr
        # The launcher restarts the coordinator; from the nodes' reports it
        # learns the takeover and re-protects stage-2 with a spare.
        state = wait_until(
            lambda: _status(run_dir),
            until=lambda state: state is not None and _stage(state, "stage-2").get("protected"),
            what="stage-2 protected again in `semiactive status`",
            timeout=30,
            interval=0.3,
        )
        assert state is not None
        stage2 = _stage(state, "stage-2")
        assert (stage2["primary"], stage2["epoch"], stage2["protected"]) == ("sec-2", 1, True), stage2
        assert stage2["secondary"] in ("spare-1", "spare-2", "node-2")
        assert state["uptime_s"] < 15  # the restarted one
        time.sleep(1.0)  # rows through the new pair
    finally:
        launcher.send_signal(signal.SIGINT)  # drains: the run must still be exact
        result = finish(launcher, run_dir)
    assert result.returncode == 0, result.stderr
    for check in check_run(topology.resolve(config.load(config_path)), run_dir):
        assert check.ok, check.describe() + "\n" + result.stderr
    ran = events(run_dir)
    assert any(e["event"] == "takeover" and e["node"] == "sec-2" for e in ran)
    assert [e["event"] for e in ran if e["node"] == "coordinator"].count("coordinator_started") == 2
    report = json.loads((run_dir / "telemetry" / "report.json").read_text())
    kill = next(f for f in report["faults"] if f["node"] == "node-2")
    assert kill["detection_ms"] is not None and kill["recovery_ms"] is not None


def test_a_live_coordinator_refuses_garbage_and_keeps_serving(tmp_path: Path) -> None:
    config_path = protected_chain(tmp_path, AGGREGATE)
    address = f"127.0.0.1:{PortAllocator().take()}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "semiactive",
            "coordinator",
            "--config",
            str(config_path),
            "--listen",
            address,
            "--tls-dir",
            str(issue_tls(config_path, tmp_path / "tls")),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        asyncio.run(_garbage(address, tmp_path / "tls"))
        tls = ("--tls-dir", str(tmp_path / "tls"))
        text = semiactive("status", "--coordinator", address, *tls, timeout=30)
        assert text.returncode == 0, text.stderr
        assert "stage-2" in text.stdout and "node-2" in text.stdout
        # node-2 reported once (below), as primary of stage-2.
        state = json.loads(semiactive("status", "--coordinator", address, "--json", *tls, timeout=30).stdout)
        node2 = next(n for n in state["nodes"] if n["name"] == "node-2")
        assert node2["role"] == "primary"
        assert _stage(state, "stage-2")["epoch"] == 0  # the forged epoch was ignored
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert_no_processes(address)
    down = semiactive("status", "--coordinator", address, *tls, timeout=30)
    assert down.returncode == 1 and "UNAVAILABLE" in down.stderr


async def _garbage(address: str, tls: Path) -> None:
    """Garbage from a holder of node-2's certificate (TLS refuses anyone else)."""
    async with Security.load(tls, "node-2").channel(address, "coordinator") as channel:
        stub = cdpb_grpc.CoordinatorStub(channel)
        await wait_until_async(
            lambda: stub.ClusterState(pb.Empty(), timeout=1),
            until=lambda _: True,  # any answer: it listens
            what="the coordinator to answer",
            timeout=20,
            interval=0.1,
            ignoring=grpc.aio.AioRpcError,
        )
        for status, code in (
            (cpb.NodeStatus(), grpc.StatusCode.PERMISSION_DENIED),  # not as itself
            (
                cpb.NodeStatus(name="node-3", role="primary", stage="stage-3"),
                grpc.StatusCode.PERMISSION_DENIED,
            ),
            (
                cpb.NodeStatus(name="node-2", role="primary", stage="no-such-stage"),
                grpc.StatusCode.INVALID_ARGUMENT,
            ),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.Report(cdpb.NodeReport(status=status), timeout=2)
            assert refused.value.code() is code
        # Bytes that are no protobuf at all.
        raw = channel.unary_unary("/semiactive.wire.Coordinator/Report")
        with pytest.raises(grpc.aio.AioRpcError):
            await raw(b"\xff\xff\xff\xff garbage", timeout=2)
        # A view naming an unknown node, with a huge epoch: ignored.
        forged = cpb.NodeStatus(name="node-2", role="primary", stage="stage-2")
        forged.views.add(stage="stage-2", epoch=2**63, version=1, primary="intruder")
        reply = await stub.Report(cdpb.NodeReport(status=forged, address="127.0.0.1:1"), timeout=2)
        assert all(v.primary != "intruder" for v in reply.views)
