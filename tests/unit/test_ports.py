"""Ports for a cluster run: free, distinct, and out of the kernel's
ephemeral range where outgoing connections could take them first."""

from __future__ import annotations

import socket

from semiactive.launcher.ports import LOWEST, PortAllocator, ephemeral_low, port_in_use


def test_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    ports = PortAllocator(seed=1)
    taken = [ports.take() for _ in range(64)]
    assert len(set(taken)) == len(taken)
    assert all(not port_in_use("127.0.0.1", p) for p in taken)
    if ephemeral_low() - LOWEST >= 1_000:
        assert all(LOWEST <= p < ephemeral_low() for p in taken)


def test_a_port_in_use_is_never_given() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", PortAllocator(seed=2).take()))
        listener.listen()
        busy = listener.getsockname()[1]
        assert port_in_use("127.0.0.1", busy)
        # The same seed proposes ``busy`` first; the allocator must skip it.
        assert PortAllocator(seed=2).take() != busy
