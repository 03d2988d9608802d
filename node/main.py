"""Entry point of ``semiactive node``: configuration in, daemon running."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from node.network import GrpcNetwork
from node.tls import process_security
from semiactive import config as config_mod
from semiactive import topology as topology_mod
from semiactive.config import ConfigError

# Set by ``cluster up`` for the nodes it starts: the launcher's pid. Such a
# node ends the run when its launcher is gone (killed without cleaning up),
# instead of running on as an orphan holding ports: sources stop, every
# primary delivers what it holds and its end of stream, sinks close their
# output, and each process exits (secondaries and spares at once). Nothing a
# surviving replica held is lost, but failures during that drain are not
# covered: no coordinator re-protects and no process is restarted.
LAUNCHER_PID_ENV = "SEMIACTIVE_LAUNCHER_PID"
LAUNCHER_CHECK_S = 0.5

# A directory: the node runs under cProfile and writes NAME.prof there when
# it exits (``python -m pstats DIR/NAME.prof``). For finding where a node's
# time goes in a real cluster run; it costs about a third of the speed.
PROFILE_ENV = "SEMIACTIVE_PROFILE"


# The cyclic collector's thresholds in a node: a young collection every
# 100,000 allocations instead of 700. The engine allocates and frees rows by
# the million, by reference counting, and with Python's default a third of
# a Linear Road replica's CPU went to young collections (perf; docs/ha.md).
# What it costs: garbage in cycles lives a little longer.
COLLECTOR_THRESHOLDS = (100_000, 50, 100)


async def until_launcher_gone(pid: int) -> None:
    """Return once the process was orphaned: its parent, the launcher, is gone."""
    while os.getppid() == pid:
        await asyncio.sleep(LAUNCHER_CHECK_S)


def addresses_from(
    topology: topology_mod.Topology, endpoints_file: Path | None
) -> tuple[dict[str, str], dict[str, int]]:
    """``host:port`` per node and metrics ports, from an endpoints file
    (written by ``cluster up``) or the config's ``endpoints``."""
    raw: dict[str, dict[str, object]] = {}
    if endpoints_file is not None:
        try:
            raw = json.loads(endpoints_file.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read endpoints: {exc}", str(endpoints_file)) from None
    else:
        raw = {name: ep.model_dump() for name, ep in topology.config.endpoints.items()}
    addresses: dict[str, str] = {}
    metrics: dict[str, int] = {}
    for name, ep in raw.items():
        addresses[name] = f"{ep.get('host', '127.0.0.1')}:{ep['port']}"
        if ep.get("metrics_port"):
            metrics[name] = int(ep["metrics_port"])  # type: ignore[call-overload]
    missing = [n for n in topology.nodes if n not in addresses]
    if missing:
        where = str(endpoints_file) if endpoints_file else topology.path
        raise ConfigError(
            f"no endpoint (host, port) for node(s) {', '.join(missing)}", where, None, "endpoints"
        )
    return addresses, metrics


def run_node(
    config: str,
    name: str,
    endpoints: Path | None,
    run_dir: Path | None,
    start_now: bool,
    level: str,
    spare: bool = False,
    coordinator: str | None = None,
    tls_dir: Path | None = None,
) -> int:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    loaded = config_mod.load(config)
    topology = topology_mod.resolve(loaded)
    addresses, metrics = addresses_from(topology, endpoints)
    security = process_security(name, tls_dir, topology.config.insecure)

    from node.daemon import NodeDaemon, StartupError
    from node.transport import PeerUnreachable

    try:
        daemon = NodeDaemon(
            topology,
            name,
            addresses,
            metrics_port=metrics.get(name),
            run_dir=run_dir,
            start_now=start_now,
            spare=spare,
            coordinator=coordinator,
            network=GrpcNetwork(security),
        )
    except StartupError as exc:
        raise ConfigError(str(exc), config) from None

    async def watch_launcher(pid: int) -> None:
        await until_launcher_gone(pid)
        logging.getLogger(__name__).warning("the launcher (pid %d) is gone: draining, then stopping", pid)
        daemon.stop(True, False)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, daemon.stop, True, True)
        launcher = os.environ.get(LAUNCHER_PID_ENV, "")
        watchdog = asyncio.create_task(watch_launcher(int(launcher))) if launcher.isdigit() else None
        try:
            return await daemon.serve()
        finally:
            if watchdog is not None:
                watchdog.cancel()

    gc.set_threshold(*COLLECTOR_THRESHOLDS)
    try:
        import uvloop

        profile_dir = os.environ.get(PROFILE_ENV)
        if profile_dir:
            return _profiled(lambda: uvloop.run(main()), Path(profile_dir) / f"{name}.prof")
        return uvloop.run(main())
    except StartupError as exc:
        print(f"semiactive node {name}: {exc}", file=sys.stderr)
        return 2
    except PeerUnreachable as exc:
        print(f"semiactive node {name}: {exc}", file=sys.stderr)
        return 1


def _profiled(run: Callable[[], int], path: Path) -> int:
    import cProfile

    profile = cProfile.Profile()
    try:
        return profile.runcall(run)
    finally:
        path.parent.mkdir(parents=True, exist_ok=True)
        profile.dump_stats(path)
