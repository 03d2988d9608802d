"""A whole cluster in one process, deterministically: the real code.

:func:`simulate` runs every node of a topology as a real
:class:`~semiactive.node.service.daemon.NodeDaemon` and the coordinator as the real
:class:`~semiactive.coordinator.control.Coordinator` behind its real gRPC servicer,
all on a :class:`~semiactive.simulation.virtual_loop.VirtualLoop` over a
:class:`~semiactive.simulation.memory_network.Fabric`, and strikes them with a
fault schedule. What differs from ``cluster up`` is only what the seams
replace: sockets, clocks and processes. A seed fixes the latencies and
hence the interleaving; the same seed and schedule replay the same run.

The run's sink output is then checked against the reference exactly as a
real run's is (:func:`semiactive.oracle.verify.check_run`: nothing lost, nothing
twice, in order), and the run fails as well on a hang (the sink never
finishes), a node exiting with an error, an exception escaping a gRPC
handler, a ``rows_lost`` or ``coordinator_error`` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import json
import logging
import random
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from semiactive.coordinator.control import Coordinator
from semiactive.coordinator.service import run_service
from semiactive.node.service.daemon import NodeDaemon
from semiactive.oracle.verify import SinkCheck, check_run
from semiactive.runtime import clock
from semiactive.runtime.events import EventLog
from semiactive.simulation.faults import COORDINATOR, Fault, FaultKind
from semiactive.simulation.memory_network import Fabric
from semiactive.simulation.virtual_loop import Stalled, VirtualLoop
from semiactive.topology import Topology

FINISH_LIMIT_S = 30.0  # virtual seconds after the source's end for the sink to finish
EXIT_LIMIT_S = 15.0  # for every live node to exit once asked
FAILURE_EVENTS = ("rows_lost", "coordinator_error")


@dataclass
class Outcome:
    seed: int
    faults: list[Fault]
    checks: list[SinkCheck] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    virtual_s: float = 0.0
    delivered: int = 0
    messages: int = 0
    trace: str = ""  # digest of every delivery: equal for a replay

    @property
    def ok(self) -> bool:
        return not self.problems and all(c.ok for c in self.checks)

    def summary(self) -> str:
        lines = [f"seed {self.seed}: {'ok' if self.ok else 'FAILED'} ({self.virtual_s:.2f} virtual s)"]
        lines += [f"  fault {f}" for f in self.faults]
        lines += [f"  problem: {p}" for p in self.problems]
        for check in self.checks:
            if not check.ok:
                lines.append(f"  {check.describe()}")
        return "\n".join(lines)


class _Cluster:
    def __init__(self, loop: VirtualLoop, topology: Topology, fabric: Fabric, run_dir: Path) -> None:
        self.loop = loop
        self.topology = topology
        self.fabric = fabric
        self.run_dir = run_dir
        self.addresses = {name: f"{name}.sim:1" for name in topology.nodes}
        self.coordinator_address = "coordinator.sim:1"
        self.incarnations: dict[str, int] = {}
        self.process: dict[str, str] = {}  # name -> current process
        self.daemons: dict[str, NodeDaemon] = {}
        self.tasks: dict[str, asyncio.Task[int]] = {}
        self.dead: set[str] = set()
        self.stop_coordinator = asyncio.Event()
        self.problems: list[str] = []

    def _new_process(self, name: str) -> str:
        self.incarnations[name] = self.incarnations.get(name, 0) + 1
        process = f"{name}#{self.incarnations[name]}"
        self.process[name] = process
        return process

    def start_node(self, name: str, spare: bool = False) -> None:
        process = self._new_process(name)
        daemon = NodeDaemon(
            self.topology,
            name,
            self.addresses,
            run_dir=self.run_dir,
            spare=spare,
            coordinator=self.coordinator_address,
            network=self.fabric.network(name, process),
            capture_in_child=False,  # every simulated process shares this process and its loop
        )
        self.daemons[name] = daemon
        self.tasks[name] = self.loop.spawn(process, daemon.serve())

    def start_coordinator(self) -> None:
        process = self._new_process(COORDINATOR)
        events = EventLog(COORDINATOR, self.run_dir)
        coordinator = Coordinator(self.topology, dict(self.addresses), events, clock.monotonic())
        network = self.fabric.network(COORDINATOR, process)
        self.stop_coordinator = asyncio.Event()
        until = self.stop_coordinator.wait()
        self.tasks[COORDINATOR] = self.loop.spawn(
            process, run_service(coordinator, network, self.coordinator_address, until)
        )

    def apply(self, fault: Fault) -> None:
        kind, target, peer = fault.kind, fault.target, fault.peer
        if kind is FaultKind.KILL:
            self.loop.kill(self.process[target])
            self.fabric.kill(target)
            self.dead.add(target)
        elif kind is FaultKind.RESTART:
            self.dead.discard(target)
            if target == COORDINATOR:
                self.start_coordinator()
            else:
                self.start_node(target, spare=True)
        elif kind is FaultKind.FREEZE:
            self.loop.freeze(self.process[target])
        elif kind is FaultKind.THAW:
            self.loop.thaw(self.process[target])
        else:
            assert peer is not None
            if kind is FaultKind.CUT:
                self.fabric.cut_link(target, peer)
            elif kind is FaultKind.STALL:
                self.fabric.stall_link(target, peer)
            elif kind is FaultKind.SLOW:
                self.fabric.slow[frozenset((target, peer))] = fault.extra_s
            else:
                self.fabric.heal(target, peer)

    def live_nodes(self) -> list[str]:
        return [n for n in self.daemons if n not in self.dead]


async def _run(cluster: _Cluster, faults: Sequence[Fault], duration_s: float) -> None:
    topology, loop = cluster.topology, cluster.loop
    cluster.start_coordinator()
    for name, info in topology.nodes.items():
        cluster.start_node(name, spare=info.role == "spare")
    await asyncio.sleep(0.05)
    t0 = clock.wall() + 0.05
    for daemon in cluster.daemons.values():
        daemon.start(t0)
    started = loop.time()
    for fault in faults:
        delay = max(0.0, started + fault.at_s - loop.time())
        loop.call_as(None, delay, functools.partial(cluster.apply, fault))
    sources = [n for n, info in topology.nodes.items() if info.role == "source"]
    sinks = [n for n, info in topology.nodes.items() if info.role == "sink"]
    await asyncio.sleep(duration_s)
    for name in sources:
        cluster.daemons[name].stop(False, False)  # end of stream
    last_fault = max((f.at_s for f in faults), default=0.0)
    deadline = started + max(duration_s, last_fault) + FINISH_LIMIT_S
    while not all(cluster.daemons[s].finished for s in sinks):
        if loop.time() > deadline:
            cluster.problems.append(
                f"hang: the sinks did not finish within {FINISH_LIMIT_S:.0f} s of the end"
            )
            break
        await asyncio.sleep(0.05)
    # Heal everything still broken, then ask every live process to exit.
    for fault in faults:
        if fault.kind in (FaultKind.CUT, FaultKind.STALL, FaultKind.SLOW):
            cluster.fabric.heal(fault.target, fault.peer or "")
        if fault.kind is FaultKind.FREEZE:
            loop.thaw(cluster.process[fault.target])
    for name in cluster.live_nodes():
        cluster.daemons[name].stop(True, True)
    cluster.stop_coordinator.set()
    live = [cluster.tasks[n] for n in [*cluster.live_nodes(), COORDINATOR] if n not in cluster.dead]
    done, pending = await asyncio.wait(live, timeout=EXIT_LIMIT_S)
    if pending:
        cluster.problems.append(f"{len(pending)} processes did not exit when asked")
    for name in cluster.live_nodes():
        task = cluster.tasks[name]
        if task in done and (task.cancelled() or task.exception() is not None or task.result() != 0):
            what = (
                "cancelled"
                if task.cancelled()
                else repr(task.exception())
                if task.exception()
                else task.result()
            )
            cluster.problems.append(f"{name} exited with {what}")


def simulate(
    topology: Topology,
    seed: int,
    faults: Sequence[Fault],
    *,
    duration_s: float = 2.0,
    latency_s: tuple[float, float] = (0.0001, 0.001),
    keep_dir: Path | None = None,
) -> Outcome:
    """One run of ``topology`` under ``faults``, seeded by ``seed``."""
    hook = sys.unraisablehook
    sys.unraisablehook = _dead_coroutines_ignored(hook)
    try:
        with warnings.catch_warnings():
            # Work a killed or frozen process never started, collected.
            warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
            return _simulate(topology, seed, faults, duration_s, latency_s, keep_dir)
    finally:
        sys.unraisablehook = hook


def _dead_coroutines_ignored(
    hook: Callable[[sys.UnraisableHookArgs], object],
) -> Callable[[sys.UnraisableHookArgs], object]:
    """A killed process's coroutines die pending; collected, those with
    ``finally`` blocks complain that they could not run them. That is what
    a kill means: not worth a warning."""

    def filtered(unraisable: sys.UnraisableHookArgs) -> object:
        value = unraisable.exc_value
        if isinstance(value, RuntimeError) and "ignored GeneratorExit" in str(value):
            return None
        return hook(unraisable)

    return filtered


def _simulate(
    topology: Topology,
    seed: int,
    faults: Sequence[Fault],
    duration_s: float,
    latency_s: tuple[float, float],
    keep_dir: Path | None,
) -> Outcome:
    outcome = Outcome(seed, list(faults))
    run_dir = Path(tempfile.mkdtemp(prefix=f"semiactive-sim-{seed}-")) if keep_dir is None else keep_dir
    loop = VirtualLoop()
    loop.set_exception_handler(lambda loop, context: None)  # dead processes' tasks die pending
    fabric = Fabric(loop, random.Random(seed), latency_s)
    cluster = _Cluster(loop, topology, fabric, run_dir)
    try:
        with _quiet():
            loop.run_until_complete(_run(cluster, faults, duration_s))
    except Stalled as exc:
        outcome.problems.append(f"hang: {exc}")
    finally:
        outcome.virtual_s = loop.time()
        _close(loop)
    outcome.problems += cluster.problems
    outcome.problems += [f"exception in a gRPC handler: {e}" for e in fabric.handler_errors]
    outcome.messages, outcome.trace = fabric.messages, fabric.trace
    del cluster, fabric, loop
    _collect()
    try:
        outcome.problems += _failure_events(run_dir)
        outcome.checks = check_run(topology, run_dir)
        outcome.delivered = sum(c.delivered for c in outcome.checks)
    finally:
        if keep_dir is None:
            shutil.rmtree(run_dir, ignore_errors=True)
    return outcome


def _failure_events(run_dir: Path) -> list[str]:
    out = []
    for path in sorted((run_dir / "telemetry").glob("events-*.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event.get("event") in FAILURE_EVENTS:
                out.append(f"{event['node']}: {event['event']} {event}")
    return out


def _close(loop: VirtualLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()
    with contextlib.suppress(Exception):
        loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    loop.tasks.clear()
    loop.ready.parked.clear()


def _collect() -> None:
    """Collect the killed processes' coroutines now, while their complaints
    are filtered."""
    gc.collect()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The nodes log every failover; thousands of runs would drown the
    report. Errors still show."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)
