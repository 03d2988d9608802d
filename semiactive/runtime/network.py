"""Where a process's gRPC channels and servers come from.

Node code never calls ``grpc.aio.server`` or ``grpc.aio.*_channel`` itself:
it asks its :class:`Network`. :class:`GrpcNetwork` is the real one (sockets,
mutual TLS from :class:`~semiactive.runtime.tls.Security`); the deterministic simulation
(``semiactive.simulation``) passes an in-memory one, so that the same daemons,
senders, roles and coordinator run there over links it controls, like
httpx's ``MockTransport``. The seam is the gRPC API itself: generated stubs
and servicers work unchanged over either.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Protocol

import grpc

from semiactive.runtime.tls import Security

GRPC_OPTIONS: list[tuple[str, object]] = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # Servers accept the clients' keepalive pings (the default policy
    # answers a ping every 10 s with GOAWAY "too_many_pings").
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    # A channel to a node that died retries at most every 250 ms: with the
    # default exponential backoff (1 s, 1.6 s, 2.6 s, ...) its replacement
    # looked unreachable for seconds after it was listening, and a stage
    # waiting for it as secondary stayed unprotected meanwhile.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 250),
]

PROBE_TIMEOUT_S = 0.2


class Network(Protocol):
    """One process's view of the network, as the process named ``name``."""

    @property
    def name(self) -> str: ...

    def channel(self, address: str, peer: str) -> grpc.aio.Channel:
        """A channel to the process named ``peer`` listening at ``address``."""
        ...

    def server(self) -> grpc.aio.Server: ...

    def listen(self, server: grpc.aio.Server, address: str) -> int:
        """Bind ``server`` to ``address``; 0 when it cannot be bound."""
        ...

    async def reachable(self, address: str) -> bool:
        """Whether a process listens at ``address`` (a port probe)."""
        ...


class GrpcNetwork:
    """The real network: gRPC over TCP, mutual TLS unless insecure."""

    def __init__(self, security: Security) -> None:
        self.security = security

    @property
    def name(self) -> str:
        return self.security.name

    def channel(self, address: str, peer: str) -> grpc.aio.Channel:
        return self.security.channel(address, peer, GRPC_OPTIONS)

    def server(self) -> grpc.aio.Server:
        return grpc.aio.server(options=GRPC_OPTIONS)

    def listen(self, server: grpc.aio.Server, address: str) -> int:
        try:
            return self.security.add_port(server, address)
        except RuntimeError:
            return 0

    async def reachable(self, address: str) -> bool:
        """Only a refused connection (or an address that cannot be one)
        means no process listens there. Anything else is taken for alive: a
        time-out (a frozen process's kernel still accepts; a slow network),
        and "no route to host" or "network unreachable" (a partition, or a
        peer whose ARP entry expired behind one), which say nothing of the
        process and must not make a live node look dead."""
        host, _, port = address.rpartition(":")
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), PROBE_TIMEOUT_S)
        except TimeoutError:
            return True
        except (ConnectionRefusedError, ValueError, socket.gaierror):
            return False
        except OSError:
            return True
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True


def insecure(name: str) -> GrpcNetwork:
    """The real network without TLS (tests, and ``insecure: true``)."""
    return GrpcNetwork(Security.insecure(name))
