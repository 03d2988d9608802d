"""``semiactive coordinator``: the control plane as a process of its own.

The gRPC shell around :class:`semiactive.coordinator.control.Coordinator`: nodes push
their reports (``Report``), answered with the views they lack;
``semiactive status`` reads ``ClusterState``. Every report interval the
service probes the ports of nodes that stopped reporting (refused: the
process is dead; open: alive but silent) and lets the coordinator decide.

It is never on the data path: rows, acknowledgements, heartbeats and
takeovers go between the nodes. Killed, it only delays re-protection; the
process supervisor (the launcher, or a container runtime) restarts it, and
it rebuilds its state from the next round of reports.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable
from pathlib import Path

import grpc

from semiactive import config as config_mod
from semiactive import topology as topology_mod
from semiactive.config import ConfigError
from semiactive.coordinator.control import REPORT_INTERVAL_S, Coordinator
from semiactive.coordinator.live_view import LiveView
from semiactive.coordinator.metrics import CoordinatorMetrics
from semiactive.coordinator.web_server import WebServer
from semiactive.runtime import authorization, clock
from semiactive.runtime.events import EventLog
from semiactive.runtime.health import Health
from semiactive.runtime.launcher_env import LAUNCHER_PID_ENV
from semiactive.runtime.messages import view_to_pb
from semiactive.runtime.metrics_endpoint import serve_metrics
from semiactive.runtime.network import GrpcNetwork, Network
from semiactive.runtime.process import addresses_from, tune_collector, until_launcher_gone
from semiactive.runtime.tls import COORDINATOR, caller, process_security
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import control_pb2_grpc as cpb_grpc
from semiactive.wire import coordinator_pb2 as cdpb
from semiactive.wire import coordinator_pb2_grpc as cdpb_grpc
from semiactive.wire import dataplane_pb2 as pb

log = logging.getLogger(__name__)


class CoordinatorServicer(cdpb_grpc.CoordinatorServicer):
    def __init__(self, coordinator: Coordinator, network: Network) -> None:
        self.coordinator = coordinator
        self.network = network

    async def Report(
        self, request: cdpb.NodeReport, context: grpc.aio.ServicerContext[object, object]
    ) -> cdpb.ReportReply:
        refusal = authorization.may_report(caller(context), request.status.name)
        if refusal is not None:
            log.warning("report refused: %s", refusal)
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal)
        problem = self.coordinator.check(request.status)
        if problem is not None:
            log.warning("report refused: %s", problem)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        now = clock.monotonic()
        views = self.coordinator.on_report(request.status, request.address, now)
        return cdpb.ReportReply(
            views=[view_to_pb(v) for v in views],
            batch_sizes=self.coordinator.batch_sizes_for(request.status),
            alive=self.coordinator.alive(now),
        )

    async def ClusterState(self, request: pb.Empty, context: object) -> cdpb.ClusterStatus:
        return self.coordinator.cluster_state(clock.monotonic())

    async def Migrate(
        self, request: cdpb.MigrateRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> cdpb.MigrateReply:
        refusal = authorization.may_control(caller(context), "migrate")
        if refusal is not None:
            log.warning("migration refused: %s", refusal)
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal)
        problem = self.coordinator.migrations.request(request.stage, request.target, clock.monotonic())
        if problem is not None:
            return cdpb.MigrateReply(accepted=False, message=problem)
        await push_views(self.coordinator, self.network)
        return cdpb.MigrateReply(accepted=True)


async def push_views(coordinator: Coordinator, network: Network) -> None:
    """Send the views a migration issued to their nodes now, rather than
    with the next report's reply: the handover's pause is this long."""
    outbox, coordinator.migrations.outbox = coordinator.migrations.outbox, []

    async def push(node: str, message: cpb.StageView) -> None:
        record = coordinator.nodes.get(node)
        if record is None or not record.address:
            return
        try:
            async with network.channel(record.address, node) as channel:
                await cpb_grpc.ControlStub(channel).UpdateView(message, timeout=1.0)
        except grpc.aio.AioRpcError as exc:  # the next report's reply carries it anyway
            log.info("pushing a view to %s: %s", node, exc.code().name)

    await asyncio.gather(*(push(node, view_to_pb(view)) for node, view in outbox))


async def control_loop(coordinator: Coordinator, network: Network) -> None:
    while True:
        await asyncio.sleep(REPORT_INTERVAL_S)
        now = clock.monotonic()
        silent = coordinator.to_probe(now)
        answers = await asyncio.gather(*(network.reachable(coordinator.nodes[n].address) for n in silent))
        for node, answer in zip(silent, answers, strict=True):
            coordinator.probed(node, answer)
        try:
            coordinator.step(clock.monotonic())
        except Exception as exc:  # keep coordinating; say what went wrong
            log.exception("coordinator step failed")
            coordinator.events.emit("coordinator_error", error=repr(exc))
        if coordinator.migrations.outbox:
            await push_views(coordinator, network)


async def tuning_loop(coordinator: Coordinator) -> None:
    """A-SAS: every tuning interval, the tuners that are due decide."""
    interval = coordinator.tuning.interval_s
    if not interval:
        return
    while True:
        await asyncio.sleep(interval)
        try:
            coordinator.tune(clock.monotonic())
        except Exception as exc:  # keep tuning the other edges; say what went wrong
            log.exception("batch-size tuning failed")
            coordinator.events.emit("coordinator_error", error=repr(exc))


def known_addresses(topology: topology_mod.Topology, endpoints: Path | None) -> dict[str, str]:
    """Where each node listens, for probing the silent ones: from the
    endpoints file or the config; a node not listed there is known by the
    address it reports."""
    if endpoints is not None:
        return addresses_from(topology, endpoints)[0]
    listed = topology.config.endpoints
    return {name: f"{ep.host}:{ep.port}" for name, ep in listed.items() if name in topology.nodes}


async def run_service(
    coordinator: Coordinator,
    network: Network,
    listen: str,
    until: Awaitable[object],
    metrics_port: int | None = None,
    http_port: int | None = None,
) -> None:
    """Serve ``coordinator`` at ``listen`` (and its Prometheus metrics on
    ``metrics_port``, same host) and run its loops until ``until``
    completes (or a loop fails, which raises)."""
    server = network.server()
    cdpb_grpc.add_CoordinatorServicer_to_server(CoordinatorServicer(coordinator, network), server)
    health = Health(server)
    if not network.listen(server, listen):
        raise ConfigError(f"--listen {listen}: cannot listen there (is the port in use?)")
    metrics_server = None
    if metrics_port:
        try:
            metrics = CoordinatorMetrics(coordinator)
            metrics_server = await serve_metrics(listen.rsplit(":", 1)[0], metrics_port, metrics.exposition)
        except OSError as exc:
            raise ConfigError(
                f"--metrics-port {metrics_port}: cannot listen there ({exc.strerror})"
            ) from None
    web, web_server = None, None
    if http_port:
        web = WebServer(LiveView(coordinator))
        try:
            web_server = await web.serve(listen.rsplit(":", 1)[0], http_port)
        except OSError as exc:
            raise ConfigError(f"--http {http_port}: cannot listen there ({exc.strerror})") from None
    await server.start()
    coordinator.events.emit("coordinator_started", listen=listen, reprotect=coordinator.reprotect)
    try:
        async with asyncio.TaskGroup() as group:
            loops = [group.create_task(control_loop(coordinator, network))]
            if coordinator.tuning.edges:
                loops.append(group.create_task(tuning_loop(coordinator)))
            if web is not None:
                loops.append(group.create_task(web.sample()))
            await until
            for task in loops:
                task.cancel()
        coordinator.migrations.abandon("the coordinator stopped")
    finally:
        if metrics_server is not None:
            metrics_server.close()
        if web_server is not None:
            web_server.close()
        await health.shutting_down()
        await server.stop(0.5)


async def serve(
    config: str,
    listen: str,
    endpoints: Path | None,
    run_dir: Path | None,
    reprotect: bool = True,
    tls_dir: Path | None = None,
    metrics_port: int | None = None,
    http_port: int | None = None,
) -> int:
    topology = topology_mod.resolve(config_mod.load(config))
    network = GrpcNetwork(process_security(COORDINATOR, tls_dir, topology.config.insecure))
    addresses = known_addresses(topology, endpoints)
    events = EventLog("coordinator", run_dir)
    coordinator = Coordinator(topology, addresses, events, clock.monotonic(), reprotect=reprotect)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    waits: list[asyncio.Task[object]] = [asyncio.create_task(stop.wait())]
    launcher = os.environ.get(LAUNCHER_PID_ENV, "")
    if launcher.isdigit():
        waits.append(asyncio.create_task(_watch_launcher(int(launcher))))
    log.info("coordinator of %s listening on %s", topology.config.name, listen)
    try:
        await run_service(
            coordinator,
            network,
            listen,
            asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED),
            metrics_port,
            http_port,
        )
    finally:
        for task in waits:
            task.cancel()
    return 0


async def _watch_launcher(pid: int) -> None:
    """Started by ``cluster up``: end with it (no orphan holding its port)."""
    await until_launcher_gone(pid)
    log.warning("the launcher (pid %d) is gone: stopping", pid)


def run_coordinator(
    config: str,
    *,
    listen: str,
    endpoints: Path | None,
    run_dir: Path | None,
    reprotect: bool,
    log_level: str,
    tls_dir: Path | None = None,
    metrics_port: int | None = None,
    http_port: int | None = None,
) -> int:
    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format="%(asctime)s coordinator %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    import uvloop

    tune_collector()
    return uvloop.run(serve(config, listen, endpoints, run_dir, reprotect, tls_dir, metrics_port, http_port))
