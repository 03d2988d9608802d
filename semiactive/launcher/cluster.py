"""``semiactive cluster up``: every process of a config on this machine.

Allocates loopback ports, starts the coordinator (``semiactive
coordinator``, :mod:`semiactive.coordinator.service`) and one ``semiactive node``
process per node, with their logs in ``<run-dir>/logs``, waits until all
answer, starts the sources at a common t0, shows live throughput, injects
the faults asked for while the coordinator re-protects stages, restarts
dead processes (a dead node as an empty spare, the coordinator as itself),
and at the end stops the sources, lets in-flight tuples drain to the
sinks, and stops every process. Prints detection, recovery and
bandwidth figures (:mod:`semiactive.launcher.measurements`). Given a :class:`Network`
(:class:`semiactive.launcher.netlab.NetworkLab`), each node runs in its own network
namespace instead, on the address the network gives it.

The launcher is the process supervisor: any exit or freeze it did not cause
(:mod:`semiactive.launcher.supervision`) is a fault like an injected one: the
secondary takes over, the coordinator re-protects, the dead node is
restarted as a spare, and the run goes on. A death no replica covers stops
a stage for good (:mod:`semiactive.launcher.outcome`): the rest runs to the end,
the drain delivers what the surviving replicas hold, and the run reports
the stopped stage and what its consumers received, and exits 1. Ctrl-C
drains early; a second Ctrl-C kills at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import grpc

from semiactive import config as config_mod
from semiactive import topology as topology_mod
from semiactive.admin.certificates import identities, issue_cluster
from semiactive.errors import UserError
from semiactive.launcher import manifest
from semiactive.launcher.check import check_source_files
from semiactive.launcher.faults import Fault, parse_faults
from semiactive.launcher.measurements import RunReport, analyse
from semiactive.launcher.node_forker import ForkedProcess, NodeForker
from semiactive.launcher.outcome import Stopped, consumer_counts, stopped_stages, surviving_positions
from semiactive.launcher.ports import PortAllocator, port_in_use
from semiactive.launcher.supervision import OBSERVE_INTERVAL_S, ProcessWatch, start_ticks
from semiactive.oracle.verify import check_run
from semiactive.runtime.events import EventLog
from semiactive.runtime.launcher_env import launched_env
from semiactive.runtime.network import GRPC_OPTIONS
from semiactive.runtime.tls import ADMIN, Security
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import control_pb2_grpc as cpb_grpc
from semiactive.wire import coordinator_pb2_grpc as cdpb_grpc
from semiactive.wire import dataplane_pb2 as pb

# Processes that live but do not answer yet: 13 of them starting at once on
# 2 slow cores (about 1 s of imports each) took more than 20 s.
READY_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 30.0
QUIET_POLLS = 5  # 1 s of nothing moving ends a drain past a stopped stage
RESTART_DELAY_S = 0.5  # a replacement machine takes a moment (a node; a source or sink restarts at once)
DEFAULT_DURATION_S = 10.0  # a run whose sources never end by themselves
PLAIN_PROGRESS_S = 5.0  # progress lines when standard error is not a terminal
STARTUP_RESTARTS = 3  # a process killed again and again before t0 ends the run
START_ATTEMPTS = 5  # Start calls to a live node that does not answer (frozen, say)
STANDBY = "standby"  # a protected source's or sink's member that does not serve (yet)
COORDINATOR = "coordinator"


@dataclass
class Drain:
    """How the drain ended: ``complete`` when every sink received its end of
    stream; otherwise the stages that stopped, and what their consumers
    received from them (last seq per edge)."""

    complete: bool
    stopped: list[Stopped]
    received: dict[str, dict[str, int]]


class Network(Protocol):
    """Where the processes run when not all on loopback: the address each
    listens on, and the command prefix that starts it there."""

    def host(self, name: str) -> str: ...

    def command_prefix(self, name: str) -> list[str]: ...


@dataclass
class Process:
    name: str
    role: str
    stage: str | None
    port: int
    metrics_port: int
    host: str = "127.0.0.1"
    http_port: int = 0  # the coordinator's web page
    popen: subprocess.Popen[bytes] | ForkedProcess | None = None
    expected_exit: bool = False  # the launcher caused (or asked for) its exit
    frozen_by_launcher: bool = False
    restarts: int = 0
    abandoned: bool = False  # dead and not to be restarted (its programs changed, it exited by itself)
    launched_as: str = ""  # its role, or "spare" when restarted as one
    launched_at: float = 0.0  # monotonic
    # What it does now, as the coordinator last heard from this incarnation
    # (a secondary that took over is a primary); "" until then.
    serving_role: str = ""
    serving_stage: str | None = None
    events: list[dict[str, object]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def returncode(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None

    def role_now(self) -> str:
        if self.popen is not None and not self.alive:
            return "down"
        return self.serving_role or self.launched_as or self.role

    def stage_now(self) -> str | None:
        if self.serving_role:
            return self.serving_stage
        return None if self.launched_as == "spare" else self.stage


class Cluster:
    """The running processes of one config, and how to talk to them."""

    def __init__(
        self,
        config_path: str,
        run_dir: Path,
        network: Network | None = None,
        forker: NodeForker | None = None,
    ) -> None:
        """``forker``: the run's fork server, started already (the command
        line starts it before it imports the launcher); else one is started
        with the processes (none with a ``network``: nodes in namespaces
        start cold)."""
        self.config_path = config_path
        self.loaded = config_mod.load(config_path)
        self.topology = topology_mod.resolve(self.loaded)
        self.programs = topology_mod.programs_fingerprint(self.topology)
        self.check_files()
        self.run_dir = run_dir
        self.processes: dict[str, Process] = {}
        self.ports = PortAllocator()
        self.channels: dict[str, grpc.aio.Channel] = {}
        self.t0 = 0.0
        self.draining = False  # the sources were asked to stop
        self._restarts: set[asyncio.Task[None]] = set()  # sources started again, waiting for Start
        self.events = EventLog("launcher", run_dir)
        self.watch = ProcessWatch(self.events)
        self.reprotect = True
        self.died_at: dict[str, float] = {}
        self.network = network
        self.tls_dir: Path | None = None
        self.security = Security.insecure(ADMIN)
        # Started with the processes (spawn()): each process it forks skips
        # Python's start and its imports.
        self.forker = forker

    def check_files(self) -> None:
        """Read every file source's data once before anything starts
        (:func:`semiactive.launcher.check.check_source_files`, what
        ``cluster check`` does too); each one's replay length goes to
        :attr:`replay_s`."""
        self.replay_s = check_source_files(self.loaded, self.topology)

    def runs_until_files_end(self) -> bool:
        """Whether every source is a file: then a run may last as long as they."""
        return all(src.kind == "file" for src in self.topology.config.sources)

    async def sources_ended(self) -> bool:
        """Every source has emitted its end of stream (or died, and no one
        will emit the rest). A protected source's standby emits nothing: its
        member that serves counts."""
        ended: dict[str, bool] = {}
        for p in self.processes.values():
            if p.role != "source" or p.stage is None:
                continue
            if not p.alive:
                if self.restartable(p) and not p.abandoned:
                    return False  # it will be started again
                ended.setdefault(p.stage, True)
                continue
            st = await self.status(p.name, timeout=0.5)
            if st is not None and st.role == STANDBY:
                ended.setdefault(p.stage, True)
                continue
            ended[p.stage] = st is not None and st.finished
        return all(ended.values())

    # -- start --------------------------------------------------------------------------

    def host(self, name: str) -> str:
        return self.network.host(name) if self.network is not None else "127.0.0.1"

    def allocate(self) -> None:
        fixed = self.topology.config.endpoints
        for name, info in self.topology.nodes.items():
            if name in fixed and self.network is not None:
                raise self.loaded.error("a network lab places the nodes itself; drop endpoints", "endpoints")
            if name in fixed:
                ep = fixed[name]
                if not (ep.host == "localhost" or ep.host.startswith("127.")):
                    raise self.loaded.error(
                        f"cluster up runs on loopback only; {ep.host} is not", "endpoints", name
                    )
                for field_name, taken in (("port", ep.port), ("metrics_port", ep.metrics_port)):
                    if taken and port_in_use(ep.host, taken):
                        raise self.loaded.error(
                            f"port {taken} is already in use", "endpoints", name, field_name
                        )
                port, metrics = ep.port, ep.metrics_port or self.ports.take()
            else:
                port, metrics = self.ports.take(), self.ports.take()
            self.processes[name] = Process(name, info.role, info.stage, port, metrics, self.host(name))
        coordinator = Process(
            COORDINATOR, COORDINATOR, None, self.ports.take(), self.ports.take(), self.host(COORDINATOR)
        )
        coordinator.http_port = self.ports.take()
        self.processes[COORDINATOR] = coordinator

    def spawn(self) -> None:
        for sub in ("logs", "sink", "sources", "telemetry"):
            (self.run_dir / sub).mkdir(parents=True, exist_ok=True)
        if not self.topology.config.insecure:
            # Fresh credentials per run; the CA key is not kept, so nothing
            # outside this run's processes (and `status --run-dir`) gets in.
            self.tls_dir = self.run_dir / "tls"
            issue_cluster(self.tls_dir, self.topology.config.name, identities(self.topology))
            self.security = Security.load(self.tls_dir, ADMIN)
        endpoints = {
            p.name: {"host": p.host, "port": p.port, "metrics_port": p.metrics_port}
            for p in self.processes.values()
            if p.role != COORDINATOR
        }
        (self.run_dir / "endpoints.json").write_text(json.dumps(endpoints, indent=2))
        if self.network is None:
            self.forker = self.forker or NodeForker(str(self.config_path), self.run_dir)
            self.forker.start()
        for p in self.processes.values():
            self.start_process(p)
        self.write_cluster_json()

    @property
    def coordinator(self) -> Process:
        return self.processes[COORDINATOR]

    @property
    def nodes(self) -> list[Process]:
        return [p for p in self.processes.values() if p.role != COORDINATOR]

    def start_process(
        self, p: Process, spare: bool = False, resume: bool = False, during_run: bool = False
    ) -> bool:
        """Fork ``p`` from the fork server where it can, else start it cold.
        ``during_run``: a restart, which does not wait for the server's
        imports. Returns whether it was forked."""
        log = self.run_dir / "logs" / f"{p.name}.log"
        prefix = self.network.command_prefix(p.name) if self.network is not None else []
        common = ["--config", str(self.config_path), "--endpoints", str(self.run_dir / "endpoints.json")]
        common += ["--run-dir", str(self.run_dir)]
        if self.tls_dir is not None:
            common += ["--tls-dir", str(self.tls_dir)]
        if p.role == COORDINATOR:
            args = ["coordinator", *common, "--listen", p.address, "--metrics-port", str(p.metrics_port)]
            if p.http_port:
                args += ["--http", str(p.http_port)]
            if not self.reprotect:
                args.append("--no-reprotect")
        else:
            args = ["node", *common, "--name", p.name, "--coordinator", self.coordinator.address]
        if spare:
            args.append("--spare")
        if resume:
            args.append("--resume")
        popen: subprocess.Popen[bytes] | ForkedProcess | None = None
        if self.forker is not None and not prefix:
            popen = self.forker.spawn(args, log, wait_ready=not during_run)
        forked = popen is not None
        if popen is None:
            with log.open("ab") as out:
                # The process stops if this launcher dies (node/service/main.py): no orphans.
                popen = subprocess.Popen(
                    [*prefix, sys.executable, "-m", "semiactive", *args],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=launched_env(),
                    start_new_session=True,
                )
        p.popen = popen
        p.launched_as, p.launched_at = ("spare" if spare else p.role), time.monotonic()
        p.serving_role, p.serving_stage = "", None
        if p.name not in self.channels:
            self.channels[p.name] = self.security.channel(p.address, p.name, GRPC_OPTIONS)
        return forked

    def restart_as_spare(self, p: Process) -> None:
        """A replacement machine: the dead node's name and ports, no state
        (the coordinator restarts as itself and rebuilds from the reports)."""
        p.expected_exit = False
        p.restarts += 1
        forked = self.start_process(p, spare=p.role != COORDINATOR, during_run=True)
        self.write_cluster_json()
        role = "spare" if p.role != COORDINATOR else COORDINATOR
        self.events.emit("restarted", target=p.name, role=role, forked=forked)

    def restartable(self, p: Process) -> bool:
        """A source that generates the same rows in every incarnation, or a
        sink whose output survives it (a table): started again in its role,
        it goes on where its consumers or its output are."""
        stage = self.topology.stages.get(p.stage) if p.stage else None
        if stage is None or self.run_dir is None:
            return False
        if p.role == "source":
            return stage.source is not None and stage.source.restartable
        return p.role == "sink" and stage.sink is not None and stage.sink.durable

    async def _start_source_again(self, p: Process) -> None:
        """Give a source started again the run's t0 (its rows are due on
        the same schedule); stopped already if the run is draining."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while p.alive and time.monotonic() < deadline:
            try:
                await self.control(p.name).Start(cpb.StartRequest(t0_unix=self.t0), timeout=2)
                if self.draining:
                    await self.control(p.name).Stop(cpb.StopRequest(), timeout=2)
                return
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.02)  # a forked process serves within about 0.1 s

    def restart_in_role(self, p: Process) -> None:
        """Start ``p`` again as what it was configured as."""
        p.expected_exit = False
        p.restarts += 1
        forked = self.start_process(p, resume=p.role in ("source", "sink"), during_run=True)
        self.write_cluster_json()
        self.events.emit("restarted", target=p.name, role=p.role, forked=forked)

    def restart_dead(self) -> None:
        """The process supervisor's part: restart every dead process that
        can be, a node after a moment (not ingest sources, nor sinks that
        write files: nothing replicates them; nodes only when re-protection
        is on). A
        restartable source or sink killed by a signal is started again as
        itself; one that exits by itself (its database unreachable at
        start-up, a bad input file) is not."""
        now = time.monotonic()
        if self.forker is not None:
            self.forker.start()  # if it died: a restart meanwhile starts cold
        for p in self.processes.values():
            if p.alive or p.popen is None or p.abandoned:
                continue
            if p.role in ("source", "sink"):
                if not self.restartable(p):
                    continue
                status = p.returncode() or 0
                if status >= 0:
                    p.abandoned = True
                    self.events.emit("not_restarted", target=p.name, reason=f"exit status {status}")
                    print(f"{p.name} not restarted: it exited with status {status}", file=sys.stderr)
                    continue
            elif p.role != COORDINATOR and not self.reprotect:
                continue
            died = self.died_at.setdefault(p.name, now)
            # A source or sink comes back as itself, on its machine, as a
            # supervisor restarts a service: no replacement to wait for.
            delay = 0.0 if p.role in ("source", "sink") else RESTART_DELAY_S
            if now - died >= delay:
                del self.died_at[p.name]
                changed = self.programs_changed()
                if changed is not None:
                    # A replica compiled from other files would diverge
                    # from its stage's other replica: better one spare less.
                    p.abandoned = True
                    self.events.emit("not_restarted", target=p.name, reason=changed)
                    print(f"{p.name} not restarted: {changed}", file=sys.stderr)
                    continue
                if p.role in ("source", "sink"):
                    self.restart_in_role(p)
                    if p.role == "source" and self.t0:
                        task = asyncio.get_running_loop().create_task(self._start_source_again(p))
                        self._restarts.add(task)
                        task.add_done_callback(self._restarts.discard)
                else:
                    self.restart_as_spare(p)

    def programs_changed(self) -> str | None:
        """Why a process started now would not run the programs this run
        started with (the config or a query file changed, or no longer
        loads); None if it would."""
        try:
            now = topology_mod.programs_fingerprint(topology_mod.resolve(config_mod.load(self.config_path)))
        except (OSError, config_mod.ConfigError) as exc:
            return f"the config no longer loads ({exc})"
        if now != self.programs:
            return "the config or a query file changed since the run started"
        return None

    def write_cluster_json(self) -> None:
        doc = {
            "name": self.topology.config.name,
            "config": str(Path(self.config_path).resolve()),
            # The programs the run started with: `semiactive verify` refuses
            # to judge the run against files edited since.
            "programs": self.programs,
            "t0_unix": self.t0 or None,
            "launcher_pid": os.getpid(),
            # The launcher is `cluster up`, or a campaign running its runs
            # in-process: the nemesis knows it by its start, not its name.
            "launcher_started": start_ticks(os.getpid()),
            "processes": [
                {
                    "name": p.name,
                    "role": p.role_now(),
                    "stage": p.stage_now(),
                    "started_as": p.role,
                    "host": p.host,
                    "pid": p.popen.pid if p.popen else None,
                    # With the pid, names the process (a forked process's
                    # command line is the fork server's: it names no node).
                    "started": start_ticks(p.popen.pid) if p.popen else None,
                    "restarts": p.restarts,
                    "ports": {
                        "grpc": p.port,
                        **({"metrics": p.metrics_port} if p.metrics_port else {}),
                        **({"http": p.http_port} if p.http_port else {}),
                    },
                }
                for p in self.processes.values()
            ],
        }
        # Written whole and renamed: the nemesis reads it at any moment.
        tmp = self.run_dir / "cluster.json.tmp"
        tmp.write_text(json.dumps(doc, indent=2))
        tmp.replace(self.run_dir / "cluster.json")

    async def follow_roles(self) -> None:
        """Keep ``cluster.json`` saying what every process does now (the
        coordinator's view): after a failover its old primary is ``down``
        or a ``spare``, its secondary the ``primary``."""
        try:
            state = await cdpb_grpc.CoordinatorStub(self.channels[COORDINATOR]).ClusterState(
                pb.Empty(), timeout=0.5
            )
        except grpc.aio.AioRpcError:
            return  # restarting: the next look will do
        before = [(p.role_now(), p.serving_stage) for p in self.processes.values()]
        now = time.monotonic()
        for node in state.nodes:
            p = self.processes.get(node.name)
            # Only a report of this incarnation counts: a restarted node's
            # record says what its predecessor was until it reports.
            if p is not None and node.role and 0 <= node.last_report_s <= now - p.launched_at:
                p.serving_role, p.serving_stage = node.role, node.stage or None
        if before != [(p.role_now(), p.serving_stage) for p in self.processes.values()]:
            self.write_cluster_json()

    def control(self, name: str) -> cpb_grpc.ControlStub:
        return cpb_grpc.ControlStub(self.channels[name])

    async def status(self, name: str, timeout: float = 1.0) -> cpb.NodeStatus | None:
        try:
            status: cpb.NodeStatus = await self.control(name).Status(pb.Empty(), timeout=timeout)
            return status
        except grpc.aio.AioRpcError:
            return None

    def dead(self) -> list[Process]:
        return [p for p in self.processes.values() if not p.alive and not p.expected_exit]

    def log_tail(self, name: str, lines: int = 3) -> str:
        try:
            text = (self.run_dir / "logs" / f"{name}.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])

    async def ready(self, p: Process) -> bool:
        if p.role != COORDINATOR:
            return await self.status(p.name, timeout=0.5) is not None
        try:
            await cdpb_grpc.CoordinatorStub(self.channels[p.name]).ClusterState(pb.Empty(), timeout=0.5)
        except grpc.aio.AioRpcError:
            return False
        return True

    async def wait_ready(self) -> None:
        """Wait until every process answers.

        A process killed before the sources start (before t0) has handled
        no row, so the run goes on without losing or repeating any: it is
        started again at once, a replica of a protected stage as a spare
        (its stage fails over and is re-protected, as after t0), anything
        else in its own role. A process that ends by itself (a bad config,
        a port taken: an exit status, not a signal) ends the run, with the
        last lines of its log."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        pending = set(self.processes)
        while pending:
            for seen in self.watch.observe(self.processes.values()):
                p = self.processes[seen.node]
                if seen.returncode >= 0 or p.restarts >= STARTUP_RESTARTS:
                    raise RuntimeError(f"{seen.describe()} during start-up: {self.log_tail(p.name)}")
                restarted = self.restart_before_t0(p)
                print(f"{seen.describe()} during start-up; {restarted}", file=sys.stderr)
                if p.alive:
                    pending.add(p.name)
                    deadline = max(deadline, time.monotonic() + READY_TIMEOUT_S)
                else:
                    pending.discard(p.name)
            for name in list(pending):
                if await self.ready(self.processes[name]):
                    pending.discard(name)
            if time.monotonic() > deadline:
                raise RuntimeError(f"not ready after {READY_TIMEOUT_S:.0f} s: {', '.join(sorted(pending))}")
            if pending:
                await asyncio.sleep(0.05)

    def covered(self, p: Process) -> bool:
        """Whether failover covers ``p``'s death: a replica of a stage with
        a secondary, or a spare."""
        if p.role == "spare":
            return True
        stage = self.topology.stages.get(p.stage) if p.stage else None
        return p.role in ("primary", "secondary") and stage is not None and stage.secondary is not None

    def restart_before_t0(self, p: Process) -> str:
        """Start ``p`` again after its death before t0; say how."""
        if p.role == COORDINATOR:
            self.restart_as_spare(p)
            return "started again"
        if self.covered(p):
            if not self.reprotect:
                return "not started again (re-protection is off): its stage fails over"
            self.restart_as_spare(p)
            then = "its secondary takes over, " if p.role == "primary" else ""
            return f"started again as a spare: {then}the coordinator re-protects its stage"
        self.restart_in_role(p)
        return f"started again as {p.role} (no row had flowed)"

    async def start(self) -> None:
        """Give every node the common t0. A node that cannot be reached is
        asked again while it lives (Start is idempotent); one that died
        meanwhile is a fault of the run like any other."""
        self.t0 = time.time() + 0.2
        self.write_cluster_json()

        async def start(p: Process) -> None:
            for attempt in range(START_ATTEMPTS):
                try:
                    await self.control(p.name).Start(cpb.StartRequest(t0_unix=self.t0), timeout=2)
                    return
                except grpc.aio.AioRpcError:
                    if not p.alive or attempt == START_ATTEMPTS - 1:
                        return
                    await asyncio.sleep(0.1)

        await asyncio.gather(*(start(p) for p in self.nodes))

    # -- stop ---------------------------------------------------------------------------

    async def drain(self, timeout: float = DRAIN_TIMEOUT_S) -> Drain:
        """Stop the sources and wait until every sink has everything; or,
        where a stage has stopped for good, until every surviving replica
        has delivered what it holds and nothing moves any more. Dead
        processes are still restarted meanwhile."""
        self.draining = True
        for p in self.processes.values():
            if p.role == "source" and p.alive:
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await self.control(p.name).Stop(cpb.StopRequest(), timeout=2)
        deadline = time.monotonic() + timeout
        sinks: dict[str, list[Process]] = {}  # per sink stage: its processes (a standby's too)
        for p in self.processes.values():
            if p.role == "sink" and p.stage is not None:
                sinks.setdefault(p.stage, []).append(p)
        last: tuple[tuple[str, int, int], ...] | None = None
        quiet = 0
        stopped: list[Stopped] = []
        statuses: dict[str, cpb.NodeStatus | None] = {}
        served_at: dict[str, float] = {}
        started = time.monotonic()

        def unserved_for(stage: str) -> float:
            return time.monotonic() - served_at.get(stage, started)

        while time.monotonic() < deadline:
            self.watch.observe(self.processes.values())
            self.restart_dead()
            await self.follow_roles()
            alive = [p.name for p in self.nodes if p.alive]
            statuses = dict(zip(alive, await asyncio.gather(*(self.status(n) for n in alive)), strict=True))
            for st in statuses.values():
                if st is not None and st.role in ("primary", "source", "sink"):
                    served_at[st.stage] = time.monotonic()
            stopped = stopped_stages(self.topology, self.processes, unserved_for)
            finished = all(
                any((s := statuses.get(p.name)) is not None and s.finished for p in members)
                for members in sinks.values()
            )
            if not stopped and finished:
                return Drain(True, [], {})
            positions = surviving_positions(self.topology, statuses, stopped) if stopped else None
            quiet = quiet + 1 if positions is not None and positions == last else 0
            last = positions
            if quiet >= QUIET_POLLS:
                break
            await asyncio.sleep(0.2)
        received = {s.stage: consumer_counts(self.topology, statuses, s.stage) for s in stopped}
        return Drain(False, stopped, received)

    async def shutdown(self) -> None:
        for p in self.processes.values():
            p.expected_exit = True
            if p.role == COORDINATOR and p.popen is not None and p.alive:
                p.popen.terminate()
            elif p.alive:
                try:
                    await self.control(p.name).Stop(cpb.StopRequest(exit=True, now=True), timeout=1)
                except grpc.aio.AioRpcError:
                    # A node restarted just before the end may not listen
                    # yet (refused): SIGTERM is the same stop. The shutdown
                    # used to wait 5 s for it, then SIGKILL it.
                    if p.popen is not None:
                        p.popen.terminate()
        deadline = time.monotonic() + 5
        while any(p.alive for p in self.processes.values()) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        self.kill_all()
        for task in self._restarts:
            task.cancel()
        for channel in self.channels.values():
            await channel.close(None)

    def kill_all(self) -> None:
        if self.forker is not None:
            self.forker.close()
        for p in self.processes.values():
            if p.popen is None:
                continue
            if p.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.popen.pid, signal.SIGKILL)
                # A frozen process must be able to die.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.popen.pid, signal.SIGCONT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.popen.wait(timeout=5)


async def _progress(cluster: Cluster, duration: float | None, faults: list[Fault], show: bool) -> None:
    """Run for ``duration`` seconds (None: until every source has ended), injecting the launcher's own faults,
    watching for the ones nobody announced, keeping ``cluster.json``'s roles
    current, and showing progress: elapsed time and rows per second at each
    source and sink (rewritten in place every second on a terminal; a line
    every ``PLAIN_PROGRESS_S`` otherwise, so a log file gets lines)."""
    # Fault times and the duration count from t0, when the sources start
    # (a moment after the Start calls).
    started = time.monotonic() + max(0.0, cluster.t0 - time.time())
    terminal = sys.stderr.isatty()
    every = 1.0 if terminal else min(PLAIN_PROGRESS_S, max(1.0, (duration or PLAIN_PROGRESS_S * 5) / 5))
    counts: dict[str, int] = {}
    shown_at = 0.0
    pending = sorted(faults, key=lambda f: f.at)
    next_look = 0.0
    while True:
        elapsed = time.monotonic() - started
        while pending and pending[0].at <= elapsed:
            await pending.pop(0).inject(cluster)
        if duration is not None and elapsed >= duration:
            return
        for seen in cluster.watch.observe(cluster.processes.values()):
            sys.stderr.write(f"{chr(10) if terminal and show else ''}  t={time.time() - cluster.t0:5.1f}s  ")
            sys.stderr.write(f"{seen.describe()}\n")
        cluster.restart_dead()
        if elapsed >= next_look:
            next_look = elapsed + 1.0
            await cluster.follow_roles()
            if duration is None and await cluster.sources_ended():
                return
        if show and elapsed - shown_at >= every:
            rates = await _rates(cluster, counts, elapsed - shown_at)
            shown_at = elapsed
            line = f"  t={elapsed:5.1f}s  " + "  ".join(rates)
            sys.stderr.write(f"\r{line}   " if terminal else f"{line}\n")
            sys.stderr.flush()
        await asyncio.sleep(OBSERVE_INTERVAL_S)


async def _rates(cluster: Cluster, counts: dict[str, int], seconds: float) -> list[str]:
    """Rows per second at each live source and sink since the last call."""
    parts = []
    for p in cluster.processes.values():
        if p.role not in ("source", "sink") or not p.alive:
            continue
        st = await cluster.status(p.name, timeout=0.3)
        if st is None or st.role == STANDBY:
            continue
        count = st.tuples_out if p.role == "source" else st.tuples_in
        parts.append(f"{p.name} {(count - counts.get(p.name, 0)) / max(seconds, 1e-3):,.0f}/s")
        counts[p.name] = count
    return parts


async def run_cluster(
    config: str,
    *,
    duration: float | None,
    run_dir: Path,
    kills: Sequence[str] = (),
    stops: Sequence[str] = (),
    progress: bool = True,
    faults: list[Fault] | None = None,
    report_to: list[RunReport] | None = None,
    reprotect: bool = True,
    network: Network | None = None,
    forker: NodeForker | None = None,
) -> int:
    """Run a cluster for ``duration`` seconds of its sources (None: until
    the file sources end when every source is a file, else
    ``DEFAULT_DURATION_S``); ``faults`` adds programmatic faults to ``--kill`` and
    ``--stop``; the run's report is appended to ``report_to``. Without
    ``reprotect`` the coordinator neither assigns new secondaries nor
    replaces dead nodes (the paper's experiments). With a ``network`` the
    nodes run where it puts them; ``forker``: the run's fork server,
    started by the caller (:class:`Cluster`)."""
    if (run_dir / "cluster.json").exists():
        # Its files would mix with this run's (the sinks' output, the
        # telemetry, a manifest with another duration).
        raise UserError(f"{run_dir} holds a previous run (cluster.json): give another --run-dir or remove it")
    if duration is not None and not 0 < duration < float("inf"):
        raise UserError(f"--duration {duration:g}: give a number of seconds > 0")
    cluster = Cluster(config, run_dir, network, forker)
    if duration is None and not cluster.runs_until_files_end():
        duration = DEFAULT_DURATION_S
    for name, seconds in cluster.replay_s.items():
        if duration is not None and seconds > duration:
            print(
                f"{name}: its file holds {seconds:.1f} s of replay; --duration {duration:g} stops it "
                "there (without --duration, a run of file sources lasts until they end)",
                file=sys.stderr,
            )
    planned = parse_faults(kills, stops, cluster.topology) + list(faults or [])
    cluster.allocate()
    if not (run_dir / manifest.MANIFEST).exists():  # a campaign describes its runs itself
        params = {"duration_s": duration, "faults": [f.record() for f in planned], "reprotect": reprotect}
        manifest.write_run(run_dir, "cluster", config, params)
    print(f"run directory: {run_dir}", file=sys.stderr)
    for note in topology_mod.retention_notes(cluster.topology):
        print(note, file=sys.stderr)
    web = cluster.coordinator
    print(f"live page: http://{web.host}:{web.http_port}/", file=sys.stderr)
    loop = asyncio.get_running_loop()
    interrupted = asyncio.Event()

    def on_signal() -> None:
        """Ctrl-C or SIGTERM: drain and stop; a second one kills."""
        if interrupted.is_set():
            cluster.kill_all()
            os._exit(130)
        interrupted.set()
        print("\ninterrupted: draining (Ctrl-C again to kill)", file=sys.stderr)

    signals = (signal.SIGINT, signal.SIGTERM)
    before = {sig: signal.getsignal(sig) for sig in signals}
    for sig in signals:
        loop.add_signal_handler(sig, on_signal)
    code = 0
    drain: Drain | None = None
    cluster.reprotect = reprotect
    try:
        cluster.spawn()
        await cluster.wait_ready()
        await cluster.start()
        run = asyncio.create_task(_progress(cluster, duration, planned, progress))
        stop = asyncio.create_task(interrupted.wait())
        await asyncio.wait([run, stop], return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if run.done():
            run.result()
        else:
            run.cancel()
        if progress and sys.stderr.isatty():
            sys.stderr.write("\n")  # past the progress line
        drain = await cluster.drain()
        for s in drain.stopped:
            print(f"stage {s.stage} stopped: {s.reason}", file=sys.stderr)
        if not drain.complete and not drain.stopped:
            print("the run did not drain: sinks did not receive the end of stream in time", file=sys.stderr)
            for full in _full_logs(cluster.run_dir):
                print(
                    f"  {full['node']}: output log of {full['stage']} full ({full['retained']:,} rows"
                    f" = queue_rows): {', '.join(full['pinned_by'])} still need(s) rows from seq"
                    f" {full['needed_from']:,}"
                    " (state that keeps old input: raise queue_rows or bound its windows)",
                    file=sys.stderr,
                )
        code = 0 if drain.complete else 1
    except RuntimeError as exc:
        print(f"semiactive: {exc}", file=sys.stderr)
        code = 1
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
            signal.signal(sig, before[sig])  # asyncio would leave the default
        (run_dir / "telemetry").mkdir(parents=True, exist_ok=True)
        (run_dir / "telemetry" / "faults.json").write_text(json.dumps([f.record() for f in planned]))
        await cluster.shutdown()
    report = analyse(cluster.topology, run_dir)
    report.interrupted = interrupted.is_set()
    if drain is not None and drain.stopped:
        report.record_stopped(drain.stopped, drain.received, check_run(cluster.topology, run_dir))
    (run_dir / "telemetry" / "report.json").write_text(json.dumps(report.to_json(), indent=2))
    # The run's result on standard output (what a script keeps); progress
    # and diagnostics went to standard error.
    print(report.describe(), flush=True)
    if report_to is not None:
        report_to.append(report)
    return code


def _full_logs(run_dir: Path) -> list[dict[str, Any]]:
    """The ``log_full`` events of a run: why a run that did not drain stalled."""
    found = []
    for path in sorted((run_dir / "telemetry").glob("events-*.jsonl")):
        for line in path.read_text().splitlines():
            if '"log_full"' in line:
                with contextlib.suppress(ValueError):
                    found.append(json.loads(line))
    return found
