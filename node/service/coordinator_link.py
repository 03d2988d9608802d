"""A node's link to the coordinator: every report interval it pushes the
node's status (its first report registers it) and adopts the views and
the A-SAS batch sizes the coordinator answers with.

Never on the data path: a coordinator that is down, restarting or slow
only delays re-protection; the node keeps serving and keeps reporting.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

import grpc

from semiactive.runtime.network import Network, insecure
from semiactive.runtime.tls import COORDINATOR
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import coordinator_pb2 as cdpb
from semiactive.wire import coordinator_pb2_grpc as cdpb_grpc

log = logging.getLogger(__name__)

REPORT_TIMEOUT_S = 0.5


class CoordinatorLink:
    def __init__(
        self,
        coordinator: str,
        own_address: str,
        status: Callable[[], cpb.NodeStatus],
        apply_view: Callable[[cpb.StageView], bool],
        interval: Callable[[], float],
        apply_batch_sizes: Callable[[Mapping[str, int]], None] = lambda sizes: None,
        network: Network | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.own_address = own_address
        self.status = status
        self.apply_view = apply_view
        self.interval = interval
        self.apply_batch_sizes = apply_batch_sizes
        self.network = network or insecure("")
        self.reports = 0
        self.failures = 0
        # Who the coordinator heard from lately, from its last answer; None
        # while it does not answer (then it witnesses nothing).
        self.alive: frozenset[str] | None = None

    async def run(self) -> None:
        async with self.network.channel(self.coordinator, COORDINATOR) as channel:
            stub = cdpb_grpc.CoordinatorStub(channel)
            reachable = True
            while True:
                try:
                    reply = await stub.Report(
                        cdpb.NodeReport(status=self.status(), address=self.own_address),
                        timeout=REPORT_TIMEOUT_S,
                    )
                except grpc.aio.AioRpcError as exc:
                    self.failures += 1
                    self.alive = None
                    if reachable:
                        log.warning("coordinator %s unreachable: %s", self.coordinator, exc.code().name)
                    reachable = False
                else:
                    if not reachable:
                        log.info("coordinator %s reachable again", self.coordinator)
                    reachable = True
                    self.reports += 1
                    self.alive = frozenset(reply.alive)
                    for view in reply.views:
                        try:
                            self.apply_view(view)
                        except (ValueError, KeyError) as exc:  # a view of no stage we know
                            log.error("view from the coordinator refused: %s", exc)
                    if reply.batch_sizes:
                        self.apply_batch_sizes(reply.batch_sizes)
                await asyncio.sleep(self.interval())
