"""Cached gRPC channels to the other nodes, for unary calls (acknowledgement
notices, view broadcasts, heartbeats)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

import grpc

from semiactive.runtime.network import Network, insecure
from semiactive.wire import control_pb2_grpc as cpb_grpc
from semiactive.wire import dataplane_pb2_grpc as pb_grpc


class Peers:
    def __init__(self, addresses: Mapping[str, str], network: Network | None = None) -> None:
        self.addresses = addresses
        self.network = network or insecure("")
        self._channels: dict[str, grpc.aio.Channel] = {}

    def channel(self, node: str) -> grpc.aio.Channel:
        channel = self._channels.get(node)
        if channel is None:
            channel = self.network.channel(self.addresses[node], node)
            self._channels[node] = channel
        return channel

    async def connect(self, skip: str) -> None:
        """Open a channel to every node but ``skip`` and wait until each is
        connected, retrying while a node is not up yet (a standby's, so
        that its takeover needs no handshake)."""

        async def ready(node: str) -> None:
            with contextlib.suppress(grpc.aio.AioRpcError, grpc.aio.UsageError):
                await self.channel(node).channel_ready()

        await asyncio.gather(*(ready(n) for n in self.addresses if n != skip))

    def data(self, node: str) -> pb_grpc.DataPlaneStub:
        return pb_grpc.DataPlaneStub(self.channel(node))

    def control(self, node: str) -> cpb_grpc.ControlStub:
        return cpb_grpc.ControlStub(self.channel(node))

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close(None)
        self._channels.clear()
