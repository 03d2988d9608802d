"""Forged messages against a live cluster under mutual TLS (semiactive/runtime/tls.py,
semiactive/runtime/authorization.py): each attack of the hardening review is refused,
and the run still delivers exactly the reference.

The attacker holds a valid certificate of the cluster (node-3's, a real
member gone rogue) or none at all; the decisions of semiactive/runtime/authorization.py
are also checked table-driven, without sockets."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import grpc
import pytest

from semiactive import config, topology
from semiactive.admin.certificates import issue_cluster
from semiactive.ha.views import StageView, ViewTable
from semiactive.oracle.verify import check_run
from semiactive.runtime import authorization
from semiactive.runtime.tls import Security
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import control_pb2_grpc as cpb_grpc
from semiactive.wire import coordinator_pb2 as cdpb
from semiactive.wire import coordinator_pb2_grpc as cdpb_grpc
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc
from tests.faults.harness import AGGREGATE, finish, protected_chain, start_launcher
from tests.processes import wait_for_sink
from tests.waiting import wait_until, wait_until_async

pytestmark = pytest.mark.slow

# -- the decisions, without sockets -------------------------------------------------------------

VIEWS = ViewTable(
    [StageView("stage-1", 0, 0, "node-1", "sec-1"), StageView("stage-2", 3, 5, "node-2", "sec-2")]
)


@pytest.mark.parametrize(
    ("caller", "sender", "stage", "epoch", "allowed"),
    [
        (None, "anyone", "stage-1", 99, True),  # insecure: nobody is authenticated
        ("node-1", "node-1", "stage-1", 0, True),
        ("sec-1", "sec-1", "stage-1", 1, True),  # its secondary, taking over
        ("node-3", "node-1", "stage-1", 0, False),  # sends as someone else
        ("node-3", "node-3", "stage-1", 0, False),  # no replica of stage-1
        ("node-1", "node-1", "stage-1", 2**64 - 1, False),  # epoch jump
        ("node-1", "node-1", "no-such-stage", 0, False),
    ],
)
def test_who_may_send_as_a_stage(
    caller: str | None, sender: str, stage: str, epoch: int, allowed: bool
) -> None:
    assert (authorization.may_send_as(caller, VIEWS, sender, stage, epoch) is None) is allowed


@pytest.mark.parametrize(
    ("caller", "view", "allowed"),
    [
        ("coordinator", StageView("stage-2", 9, 9, "spare-1", None), True),
        ("admin", StageView("stage-2", 4, 6, "sec-2", None), True),
        ("sec-2", StageView("stage-2", 4, 6, "sec-2", None), True),  # announces its takeover
        ("sec-2", StageView("stage-2", 2**63, 6, "sec-2", None), False),  # epoch jump
        ("sec-2", StageView("stage-2", 4, 6, "node-3", None), False),  # names another primary
        ("node-3", StageView("stage-2", 4, 6, "node-3", None), False),  # no replica of stage-2
    ],
)
def test_who_may_change_a_view(caller: str, view: StageView, allowed: bool) -> None:
    assert (authorization.may_change_view(caller, VIEWS, view) is None) is allowed


def test_control_acks_reports_and_ingest() -> None:
    assert authorization.may_control("admin", "stop") is None
    assert authorization.may_control("coordinator", "stop") is None
    assert authorization.may_control("node-1", "stop") is not None
    assert authorization.may_acknowledge("node-2", VIEWS, "node-2", "stage-2") is None
    assert authorization.may_acknowledge("node-3", VIEWS, "node-2", "stage-2") is not None
    assert authorization.may_acknowledge("node-3", VIEWS, "node-3", "stage-2") is not None
    assert authorization.may_report("node-2", "node-2") is None
    assert authorization.may_report("node-2", "node-3") is not None
    assert authorization.may_ingest("ingest-orders") is None
    assert authorization.may_ingest("node-1") is not None


# -- against a live cluster ------------------------------------------------------------------


def _processes(run_dir: Path) -> dict[str, dict[str, Any]]:
    return wait_until(
        lambda: _listed(run_dir),
        what="cluster.json and the certificates",
        timeout=60,
        interval=0.1,
        ignoring=(OSError, ValueError),
    )


def _listed(run_dir: Path) -> dict[str, dict[str, Any]] | None:
    doc = json.loads((run_dir / "cluster.json").read_text())
    return {p["name"]: p for p in doc["processes"]} if (run_dir / "tls" / "node-3.pem").exists() else None


def _address(processes: dict[str, dict[str, Any]], name: str) -> str:
    return f"127.0.0.1:{processes[name]['ports']['grpc']}"


async def _refused(call: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    code: grpc.StatusCode = err.value.code()
    return code


async def _until_up(security: Security, address: str, name: str) -> None:
    async with security.channel(address, name) as channel:

        async def answer() -> object:
            if name == "coordinator":
                return await cdpb_grpc.CoordinatorStub(channel).ClusterState(pb.Empty(), timeout=1)
            return await cpb_grpc.ControlStub(channel).Status(pb.Empty(), timeout=1)

        await wait_until_async(
            answer,
            until=lambda _: True,  # any answer
            what=f"{name} to answer",
            timeout=30,
            interval=0.1,
            ignoring=grpc.aio.AioRpcError,
        )


async def _attacks(run_dir: Path, tmp: Path) -> None:
    processes = _processes(run_dir)
    tls = run_dir / "tls"
    rogue = Security.load(tls, "node-3")
    node2, sec1, coordinator = (_address(processes, n) for n in ("node-2", "sec-1", "coordinator"))
    await _until_up(rogue, node2, "node-2")
    await _until_up(rogue, sec1, "sec-1")
    await _until_up(rogue, coordinator, "coordinator")

    # No certificate at all, or one from another CA: no connection.
    async with Security.insecure("x").channel(node2, "node-2") as channel:
        call = cpb_grpc.ControlStub(channel).Stop(cpb.StopRequest(exit=True, now=True), timeout=3)
        assert await _refused(call) is grpc.StatusCode.UNAVAILABLE
    issue_cluster(tmp / "other-ca", "other", ["admin"])
    async with Security.load(tmp / "other-ca", "admin").channel(node2, "node-2") as channel:
        call = cpb_grpc.ControlStub(channel).Stop(cpb.StopRequest(exit=True, now=True), timeout=3)
        assert await _refused(call) is grpc.StatusCode.UNAVAILABLE

    async with rogue.channel(node2, "node-2") as channel:
        control = cpb_grpc.ControlStub(channel)
        # Stop a node.
        call = control.Stop(cpb.StopRequest(exit=True, now=True), timeout=3)
        assert await _refused(call) is grpc.StatusCode.PERMISSION_DENIED
        # Make itself stage-2's primary, at an epoch no real takeover reaches.
        view = cpb.StageView(stage="stage-2", epoch=2**63, version=2**63, primary="node-3")
        assert await _refused(control.UpdateView(view, timeout=3)) is grpc.StatusCode.PERMISSION_DENIED
        # Push rows into stage-2 as its producer, with epoch 2^64-1.
        push = pb_grpc.DataPlaneStub(channel).Push()
        hello = pb.Hello(edge="stage-1->stage-2", sender="node-1", epoch=2**64 - 1, channel=pb.DATA)
        await push.write(pb.Frame(hello=hello))
        assert await _refused(push.read()) is grpc.StatusCode.PERMISSION_DENIED
    async with rogue.channel(sec1, "sec-1") as channel:
        # Trim stage-1's secondary's queue with a notice in stage-2's name,
        # and one whose edge has no "->".
        data = pb_grpc.DataPlaneStub(channel)
        notice = pb.AckNotice(edge="stage-1->stage-2", sender="node-2", epoch=0, seq=10**9)
        assert await _refused(data.Ack(notice, timeout=3)) is grpc.StatusCode.PERMISSION_DENIED
        notice = pb.AckNotice(edge="garbage", sender="node-3", epoch=0, seq=10**9)
        assert await _refused(data.Ack(notice, timeout=3)) is grpc.StatusCode.PERMISSION_DENIED
    async with rogue.channel(coordinator, "coordinator") as channel:
        # Report as node-2, holding a view that makes node-3 its primary.
        forged = cpb.NodeStatus(name="node-2", role="primary", stage="stage-2")
        forged.views.add(stage="stage-2", epoch=2**63, version=1, primary="node-3")
        call = cdpb_grpc.CoordinatorStub(channel).Report(cdpb.NodeReport(status=forged), timeout=3)
        assert await _refused(call) is grpc.StatusCode.PERMISSION_DENIED


def test_forged_messages_are_refused_and_the_run_is_exact(tmp_path: Path) -> None:
    config_path = protected_chain(tmp_path, AGGREGATE)
    run_dir = tmp_path / "run"
    # The run outlasts the attacks by far and is ended by an interrupt once
    # they are done: under CI load the rejected handshakes alone took 10 s,
    # and a node already gone answers UNAVAILABLE, not PERMISSION_DENIED.
    launcher = start_launcher(config_path, run_dir, duration=120)
    try:
        asyncio.run(_attacks(run_dir, tmp_path))
        # The attacks can be over before the sources' first row: a run that
        # ends then delivers nothing and proves nothing.
        wait_for_sink(run_dir)
        launcher.send_signal(signal.SIGINT)  # drains: the run must still be exact
    finally:
        result = finish(launcher, run_dir)
    assert result.returncode == 0, result.stderr
    for check in check_run(topology.resolve(config.load(config_path)), run_dir):
        assert check.ok and check.delivered > 0, check.describe()
    refused = [
        json.loads(line)
        for path in (run_dir / "telemetry").glob("events-*.jsonl")
        for line in path.read_text().splitlines()
        if '"refused"' in line
    ]
    assert {(e["node"], e["request"]) for e in refused} >= {
        ("node-2", "stop"),
        ("node-2", "view"),
        ("node-2", "push"),
        ("sec-1", "ack"),
    }
    assert all(e["caller"] == "node-3" for e in refused)


def test_insecure_true_runs_without_tls_and_says_so(tmp_path: Path) -> None:
    config_path = protected_chain(tmp_path, AGGREGATE)
    config_path.write_text("insecure: true\n" + config_path.read_text())
    run_dir = tmp_path / "run"
    result = finish(start_launcher(config_path, run_dir, duration=2), run_dir)
    assert result.returncode == 0, result.stderr
    assert not (run_dir / "tls").exists()
    assert "insecure: true: no TLS, no authentication" in (run_dir / "logs" / "node-2.log").read_text()
