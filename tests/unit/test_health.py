"""The gRPC health service (semiactive/runtime/health.py) over real gRPC with mutual TLS,
in this process: SERVING while a node or the coordinator serves,
NOT_SERVING once it shuts down; a checker needs a certificate of the
cluster's CA (any identity), and ``semiactive health`` exits 0 only on
SERVING."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from semiactive import config, topology
from semiactive.admin.certificates import issue_cluster
from semiactive.coordinator.control import Coordinator
from semiactive.coordinator.service import run_service
from semiactive.launcher.ports import PortAllocator
from semiactive.node.service.daemon import NodeDaemon
from semiactive.runtime.events import EventLog
from semiactive.runtime.health import Health, check, health_main, peer_of
from semiactive.runtime.network import GrpcNetwork
from semiactive.runtime.tls import ADMIN, COORDINATOR, Security
from tests.waiting import wait_until_async

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "paper-chain-ha.yaml"


@pytest.fixture
def tls(tmp_path: Path) -> Path:
    issue_cluster(tmp_path, "health", ["node-a", "node-3", COORDINATOR, ADMIN])
    return tmp_path


async def first_statuses(watch: AsyncIterator[health_pb2.HealthCheckResponse], n: int) -> list[str]:
    out: list[str] = []
    async for reply in watch:
        out.append(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))
        if len(out) == n:
            break
    return out


async def test_serving_then_not_serving(tls: Path) -> None:
    server = GrpcNetwork(Security.load(tls, "node-a")).server()
    health = Health(server)
    port = server.add_secure_port(
        "127.0.0.1:0",
        grpc.ssl_server_credentials(
            [((tls / "node-a.key").read_bytes(), (tls / "node-a.pem").read_bytes())],
            root_certificates=(tls / "ca.pem").read_bytes(),
            require_client_auth=True,
        ),
    )
    await server.start()
    address = f"127.0.0.1:{port}"
    try:
        assert await check(Security.load(tls, ADMIN), address, "node-a") == "SERVING"
        assert await check(Security.load(tls, "node-a"), address, "node-a") == "SERVING"  # itself
        with pytest.raises(grpc.aio.AioRpcError) as refused:  # no certificate: no handshake
            await check(Security.insecure(ADMIN), address, "node-a", timeout=1.0)
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
        with pytest.raises(grpc.aio.AioRpcError):  # a server must carry the name asked for
            await check(Security.load(tls, ADMIN), address, "node-3", timeout=1.0)
        assert (
            await asyncio.to_thread(
                health_main, address, tls_dir=tls, peer="node-a", identity=ADMIN, timeout=2.0
            )
            == 0
        )
        await health.shutting_down()
        assert await check(Security.load(tls, ADMIN), address, "node-a") == "NOT_SERVING"
        assert (
            await asyncio.to_thread(
                health_main, address, tls_dir=tls, peer="node-a", identity=ADMIN, timeout=2.0
            )
            == 1
        )
    finally:
        await server.stop(None)
    assert (
        await asyncio.to_thread(health_main, address, tls_dir=tls, peer="node-a", identity=ADMIN, timeout=1.0)
        == 1
    )  # gone


def test_peer_is_the_host_part() -> None:
    assert peer_of("node-2:7000") == "node-2"
    assert peer_of("[::1]:7000") == "::1"
    assert peer_of("coordinator") == "coordinator"


async def watch(
    security: Security, address: str, peer: str
) -> AsyncGenerator[health_pb2.HealthCheckResponse]:
    async with security.channel(address, peer) as channel:
        stream = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""))
        async for reply in stream:
            yield reply


async def serving_then_not(address: str, peer: str, tls: Path, stop: asyncio.Future[object]) -> list[str]:
    """Watch ``peer``'s health from SERVING until it shuts down (``stop``)."""
    await wait_until_async(
        lambda: check(Security.load(tls, ADMIN), address, peer, timeout=0.5),
        until=lambda status: status == "SERVING",
        what=f"{peer} to serve",
        timeout=10,
        ignoring=grpc.aio.AioRpcError,
    )
    stream = watch(Security.load(tls, ADMIN), address, peer)
    seen = [await first_statuses(stream, 1)]
    stop.set_result(None)
    seen.append(await first_statuses(stream, 1))
    await stream.aclose()
    return [s for statuses in seen for s in statuses]


async def test_a_node_daemon_serves_health(tls: Path) -> None:
    topo = topology.resolve(config.load(CONFIG))
    address = f"127.0.0.1:{PortAllocator().take()}"
    addresses = {name: address if name == "node-3" else "127.0.0.1:1" for name in topo.nodes}
    node = NodeDaemon(
        topo, "node-3", addresses, spare=True, network=GrpcNetwork(Security.load(tls, "node-3"))
    )
    serving = asyncio.create_task(node.serve())
    stop: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    stop.add_done_callback(lambda _: node.stop(True, True))
    assert await serving_then_not(address, "node-3", tls, stop) == ["SERVING", "NOT_SERVING"]
    assert await serving == 0


async def test_the_coordinator_serves_health(tls: Path) -> None:
    topo = topology.resolve(config.load(CONFIG))
    address = f"127.0.0.1:{PortAllocator().take()}"
    network = GrpcNetwork(Security.load(tls, COORDINATOR))
    coordinator = Coordinator(topo, {}, EventLog(COORDINATOR, None), 0.0)
    stop: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    service = asyncio.create_task(run_service(coordinator, network, address, stop))
    assert await serving_then_not(address, COORDINATOR, tls, stop) == ["SERVING", "NOT_SERVING"]
    await service
