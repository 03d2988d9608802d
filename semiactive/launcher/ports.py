"""Loopback ports for the processes of a cluster run.

A port asked of the kernel with ``bind(port 0)`` comes from the ephemeral
range, which is also where every outgoing connection on the machine takes
its local port. Between handing such a port to a node and the node binding
it, a gRPC client of another node can take it ("Address already in use",
seen about once in twenty chaos runs), and a dead node restarted on its old
ports races the same way. Ports below the ephemeral range are never used
for outgoing connections, so :class:`PortAllocator` picks random free ones
there, and never the same port twice in one launcher.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 20_000  # well clear of the registered service ports
FALLBACK_EPHEMERAL_LOW = 32_768  # Linux's default


def ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return FALLBACK_EPHEMERAL_LOW


def port_in_use(host: str, port: int) -> bool:
    """Whether a listener could not bind ``host:port`` now (with
    SO_REUSEADDR, as gRPC and the metrics server bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


class PortAllocator:
    def __init__(self, host: str = "127.0.0.1", seed: int | None = None) -> None:
        self.host = host
        self.given: set[int] = set()
        self._random = random.Random(seed)
        self._high = ephemeral_low()

    def take(self) -> int:
        """A port free now, below the ephemeral range when it has room,
        not given out before by this allocator."""
        if self._high - LOWEST >= 1_000:
            for _ in range(200):
                port = self._random.randrange(LOWEST, self._high)
                if port not in self.given and not port_in_use(self.host, port):
                    self.given.add(port)
                    return port
        while True:  # a machine whose ephemeral range starts low: ask the kernel
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((self.host, 0))
                port = int(s.getsockname()[1])
            if port not in self.given:
                self.given.add(port)
                return port
