"""What every process of a cluster does at start-up beside its own work:
find its peers (the endpoints file ``cluster up`` writes, or the config's
``endpoints``) and watch its launcher."""

from __future__ import annotations

import asyncio
import gc
import json
import os
from pathlib import Path

from semiactive import topology as topology_mod
from semiactive.config import ConfigError

# The cyclic collector's thresholds in a node and the coordinator: a young
# collection every 100,000 allocations instead of 700. The engine allocates
# and frees rows by the million, by reference counting, and with Python's
# default a third of a Linear Road replica's CPU went to young collections
# (perf; docs/ha.md). The coordinator, with the defaults, spent 22% of a
# core collecting during a 1,000 tuples/s chain (py-spy: 98% of its samples
# in gc_collect_main), 4% with these. What it costs: garbage in cycles
# lives a little longer.
COLLECTOR_THRESHOLDS = (100_000, 50, 100)


def tune_collector() -> None:
    gc.set_threshold(*COLLECTOR_THRESHOLDS)


LAUNCHER_CHECK_S = 0.5


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
