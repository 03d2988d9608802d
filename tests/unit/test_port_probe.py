"""The coordinator's probe of a silent node (GrpcNetwork.reachable): only a
refused connection means dead; a listening port, a time-out and routing
errors (a partition) mean alive, or at least not known dead."""

from __future__ import annotations

import asyncio
import errno
import socket
from typing import Any

import pytest

from semiactive.runtime.network import insecure


def test_a_listening_port_is_alive_and_a_closed_one_dead() -> None:
    async def main() -> tuple[bool, bool]:
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        free = closed.getsockname()[1]
        closed.close()  # nothing listens there now
        network = insecure("coordinator")
        try:
            return await network.reachable(f"127.0.0.1:{port}"), await network.reachable(f"127.0.0.1:{free}")
        finally:
            server.close()
            await server.wait_closed()

    assert asyncio.run(main()) == (True, False)


@pytest.mark.parametrize(
    ("error", "alive"),
    [
        (OSError(errno.EHOSTUNREACH, "No route to host"), True),
        (OSError(errno.ENETUNREACH, "Network is unreachable"), True),
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), False),
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), False),
    ],
)
def test_routing_errors_are_no_proof_of_death(
    monkeypatch: pytest.MonkeyPatch, error: OSError, alive: bool
) -> None:
    # A partition cannot be made on loopback; tests/faults/test_partitions.py
    # makes real ones. Here only the classification of the kernel's answer.
    async def fails(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(asyncio, "open_connection", fails)
    assert asyncio.run(insecure("coordinator").reachable("127.0.0.9:7000")) is alive
