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
import contextlib
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
        """Stop the sources; wait until every sink stage has its end of
        stream. A protected sink's member that serves counts (its standby
        never receives one); a member that does not answer is skipped."""
        sources = [n for n, info in topology.nodes.items() if info.role is NodeRole.SOURCE]
        stages: dict[str, list[str]] = {}
        for n, info in topology.nodes.items():
            if info.role is NodeRole.SINK and info.stage is not None:
                stages.setdefault(info.stage, []).append(n)
        await asyncio.gather(*(_stop(stubs[n]) for n in sources))
        say("drain", f"stopped the sources ({', '.join(sources)})")
        deadline = time.monotonic() + drain_s
        while True:
            finished = {}
            for stage, members in stages.items():
                statuses = await asyncio.gather(*(_status(stubs[n]) for n in members))
                finished[stage] = [
                    st for st in statuses if st is not None and st.role == "sink" and st.finished
                ]
            if all(finished.values()):
                rows = ", ".join(f"{done[0].name} {done[0].tuples_in:,} rows" for done in finished.values())
                say("drain", f"drained: every sink received its end of stream ({rows})")
                return 0
            if time.monotonic() > deadline:
                waiting = [stage for stage, done in finished.items() if not done]
                say("drain", f"not drained after {drain_s:g} s: {', '.join(waiting)}")
                return 1
            await asyncio.sleep(POLL_S)

    return drain


async def _stop(stub: cpb_grpc.ControlStub) -> None:
    """Stop a source's process; one that is gone has nothing to stop (its
    standby, stopped too, ends the stream when it serves)."""
    with contextlib.suppress(grpc.aio.AioRpcError):
        await stub.Stop(cpb.StopRequest(), timeout=5)


async def _status(stub: cpb_grpc.ControlStub) -> cpb.NodeStatus | None:
    try:
        status: cpb.NodeStatus = await stub.Status(pb.Empty(), timeout=2)
    except grpc.aio.AioRpcError:
        return None
    return status


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
