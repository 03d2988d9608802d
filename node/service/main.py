"""Entry point of ``semiactive node``: configuration in, daemon running."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from semiactive import config as config_mod
from semiactive import topology as topology_mod
from semiactive.config import ConfigError
from semiactive.runtime.launcher_env import LAUNCHER_PID_ENV
from semiactive.runtime.network import GrpcNetwork
from semiactive.runtime.process import addresses_from, tune_collector, until_launcher_gone
from semiactive.runtime.tls import process_security

# A directory: the node runs under cProfile and writes NAME.prof there when
# it exits (``python -m pstats DIR/NAME.prof``). For finding where a node's
# time goes in a real cluster run; it costs about a third of the speed.
PROFILE_ENV = "SEMIACTIVE_PROFILE"


def run_node(
    config: str,
    *,
    name: str,
    endpoints: Path | None,
    run_dir: Path | None,
    start_now: bool,
    log_level: str,
    spare: bool = False,
    resume: bool = False,
    coordinator: str | None = None,
    tls_dir: Path | None = None,
) -> int:
    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    loaded = config_mod.load(config)
    topology = topology_mod.resolve(loaded)
    addresses, metrics = addresses_from(topology, endpoints)
    security = process_security(name, tls_dir, topology.config.insecure)

    from semiactive.node.service.daemon import NodeDaemon, StartupError
    from semiactive.node.service.transport import PeerUnreachable

    try:
        daemon = NodeDaemon(
            topology,
            name,
            addresses,
            metrics_port=metrics.get(name),
            run_dir=run_dir,
            start_now=start_now,
            spare=spare,
            resume=resume,
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

    tune_collector()
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
