"""The standard gRPC health service (``grpc.health.v1.Health``) on a
node's or the coordinator's server, and the client that container health
checks run (``semiactive health HOST:PORT``).

The server answers ``SERVING`` for the whole process (service ``""``)
once it listens, and ``NOT_SERVING`` from the moment it starts shutting
down. It sits behind the same mutual TLS as every other service: a
checker needs a certificate of the cluster's CA, but any identity will
do (no authorization rule names the health service), so a container
checks itself with its own certificate and needs no operator key.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from semiactive.runtime.tls import Security, TlsError

OVERALL = ""  # the whole server, as grpc.health.v1 names it
SERVING = "SERVING"


class Health:
    """The health service of one server: ``SERVING`` until :meth:`shutting_down`."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self.servicer = HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, server)

    async def shutting_down(self) -> None:
        """``NOT_SERVING`` for good: load balancers and checks stop sending here."""
        await self.servicer.enter_graceful_shutdown()


async def check(security: Security, address: str, peer: str, timeout: float = 2.0) -> str:
    """The serving status of the server named ``peer`` at ``address``
    (``SERVING``, ``NOT_SERVING``, ...), asked as ``security``'s identity;
    an unreachable or refusing server raises :class:`grpc.aio.AioRpcError`."""
    channel = security.channel(address, peer)
    try:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=OVERALL), timeout=timeout)
        name: str = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        return name
    finally:
        await channel.close(None)


def peer_of(address: str) -> str:
    """The name a server is expected to carry: its address's host part
    (containers reach each other by service name, which is the node name)."""
    host = address.rpartition(":")[0] or address
    return host.strip("[]")


def health_main(
    address: str, *, tls_dir: Path | None, peer: str | None, identity: str | None, timeout: float
) -> int:
    """``semiactive health``: exit 0 when ``address`` is SERVING, 1 when it
    answers otherwise or not at all; one line on stdout either way."""
    peer = peer or peer_of(address)
    if tls_dir is None:
        security = Security.insecure(identity or peer)
    else:
        try:
            security = Security.load(tls_dir, identity or peer)
        except TlsError as exc:
            print(f"{address}: {exc}", file=sys.stderr)
            return 1
    try:
        status = asyncio.run(check(security, address, peer, timeout))
    except grpc.aio.AioRpcError as exc:
        print(f"{address}: {exc.code().name}: {exc.details()}")
        return 1
    print(f"{address}: {status}")
    return 0 if status == SERVING else 1
