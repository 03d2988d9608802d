"""``semiactive start`` and ``semiactive drain``: what ``cluster up``'s
launcher does at the start and at the end of a run, for a cluster whose
processes something else runs and restarts (containers).

Sources and sinks wait for a ``Start`` call carrying the common time 0 of
the stream's event time. ``start`` waits until every node of the config
answers the gRPC health check with ``SERVING``, then sends ``Start`` to
all of them as ``admin``, as the launcher does. ``drain`` stops the
sources (each ends its stream) and waits until every sink has received
its end of stream, so that the whole output can be checked.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc

from semiactive import config as config_mod
from semiactive import topology as topology_mod
from semiactive.runtime.health import SERVING, check
from semiactive.runtime.process import addresses_from
from semiactive.runtime.tls import ADMIN, Security, process_security
from semiactive.topology import NodeRole, Topology
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import control_pb2_grpc as cpb_grpc
from semiactive.wire import dataplane_pb2 as pb

START_DELAY_S = 0.5  # t0 this far ahead: every node hears Start before it
POLL_S = 0.5

Action = Callable[[Topology, dict[str, cpb_grpc.ControlStub]], Awaitable[int]]


def say(command: str, text: str) -> None:
    print(f"semiactive {command}: {text}", flush=True)


async def wait_serving(security: Security, addresses: dict[str, str], wait_s: float) -> list[str]:
    """Poll every node's health until all are SERVING; the ones that are
    not after ``wait_s`` seconds (empty: all serve)."""
    deadline = time.monotonic() + wait_s
    pending = dict(addresses)
    while pending:
        names = list(pending)
        answers = await asyncio.gather(
            *(check(security, pending[n], n, timeout=1.0) for n in names), return_exceptions=True
        )
        for name, answer in zip(names, answers, strict=True):
            if answer == SERVING:
                del pending[name]
        if not pending or time.monotonic() > deadline:
            break
        await asyncio.sleep(POLL_S)
    return sorted(pending)


async def _with_nodes(
    command: str, config: str, endpoints: Path | None, tls_dir: Path | None, wait_s: float, action: Action
) -> int:
    """Once every node of ``config`` serves, ``action`` on their Control stubs, as admin."""
    topology = topology_mod.resolve(config_mod.load(config))
    addresses = addresses_from(topology, endpoints)[0]
    addresses = {name: addresses[name] for name in topology.nodes}
    security = process_security(ADMIN, tls_dir, topology.config.insecure)
    say(command, f"waiting for {len(addresses)} nodes to serve ({', '.join(addresses)})")
    missing = await wait_serving(security, addresses, wait_s)
    if missing:
        say(command, f"not serving after {wait_s:g} s: {', '.join(missing)}")
        return 1
    channels = {n: security.channel(a, n) for n, a in addresses.items()}
    try:
        return await action(topology, {n: cpb_grpc.ControlStub(c) for n, c in channels.items()})
    except grpc.aio.AioRpcError as exc:
        say(command, f"{exc.code().name}: {exc.details()}")
        return 1
    finally:
        for channel in channels.values():
            await channel.close(None)


async def _start(topology: Topology, stubs: dict[str, cpb_grpc.ControlStub]) -> int:
    t0 = time.time() + START_DELAY_S
    await asyncio.gather(*(s.Start(cpb.StartRequest(t0_unix=t0), timeout=5) for s in stubs.values()))
    say("start", f"started {len(stubs)} nodes, t0 {t0:.3f}")
    return 0


def _drain(drain_s: float) -> Action:
    async def drain(topology: Topology, stubs: dict[str, cpb_grpc.ControlStub]) -> int:
        """Stop the sources; wait until every sink has its end of stream."""
        sources = [n for n, info in topology.nodes.items() if info.role is NodeRole.SOURCE]
        sinks = [n for n, info in topology.nodes.items() if info.role is NodeRole.SINK]
        await asyncio.gather(*(stubs[n].Stop(cpb.StopRequest(), timeout=5) for n in sources))
        say("drain", f"stopped the sources ({', '.join(sources)})")
        deadline = time.monotonic() + drain_s
        while True:
            statuses: list[cpb.NodeStatus] = await asyncio.gather(
                *(stubs[n].Status(pb.Empty(), timeout=2) for n in sinks)
            )
            if all(st.finished for st in statuses):
                rows = ", ".join(f"{st.name} {st.tuples_in:,} rows" for st in statuses)
                say("drain", f"drained: every sink received its end of stream ({rows})")
                return 0
            if time.monotonic() > deadline:
                waiting = [st.name for st in statuses if not st.finished]
                say("drain", f"not drained after {drain_s:g} s: {', '.join(waiting)}")
                return 1
            await asyncio.sleep(POLL_S)

    return drain


def run_start(config: str, *, endpoints: Path | None, tls_dir: Path | None, wait_s: float) -> int:
    """``semiactive start``."""
    return _run("start", _with_nodes("start", config, endpoints, tls_dir, wait_s, _start))


def run_drain(
    config: str, *, endpoints: Path | None, tls_dir: Path | None, wait_s: float, drain_s: float
) -> int:
    """``semiactive drain``."""
    return _run("drain", _with_nodes("drain", config, endpoints, tls_dir, wait_s, _drain(drain_s)))


def _run(command: str, work: Awaitable[int]) -> int:
    async def main() -> int:
        return await work

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        print(f"semiactive {command}: interrupted", file=sys.stderr)
        return 130
