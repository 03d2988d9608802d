"""``semiactive nemesis RUN_DIR``: faults from outside the system under test.

Like Jepsen's nemesis, this is a process of its own that knows nothing but
what ``cluster.json`` says (each process's name, pid and ports, the
coordinator's among them, the run's start time t0, the launcher's pid). At each planned moment it reads the
file again (a node restarted by the launcher has a new pid), checks that
the pid still runs that node (``--name NODE`` in its command line, so that a
recycled pid is never hit; the launcher, which may be ``cluster up`` or a
campaign running its runs in-process, by the start time it recorded), and
sends the signal. The launcher and the
coordinator are told nothing: they learn of a fault only by observing it,
as they would of a crash, an OOM kill or a pulled cable.

Every fault it injects is appended to ``telemetry/nemesis.jsonl`` (wall
time, node, pid, kind), so that a run's report measures detection from the
moment the fault really happened. ``launcher`` is a target name too: it
SIGKILLs (or freezes) ``cluster up`` itself. A frozen process is always
resumed, even when the nemesis is interrupted.
"""

from __future__ import annotations

import contextlib
import difflib
import heapq
import itertools
import json
import os
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from semiactive.errors import UserError
from semiactive.launcher.faults import Fault, FaultKind, parse_fault_specs
from semiactive.launcher.supervision import alive_since, command_line, is_launcher
from semiactive.runtime.events import EventLog

LAUNCHER = "launcher"
COORDINATOR = "coordinator"
START_TIMEOUT_S = 60.0


class NemesisError(RuntimeError):
    """The run to inject into never started, or has ended."""


def read_cluster(run_dir: Path) -> dict[str, Any] | None:
    """The run's ``cluster.json``, or None while it is absent or being written."""
    try:
        doc = json.loads((run_dir / "cluster.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def pid_of(doc: dict[str, Any], node: str) -> int | None:
    if node == LAUNCHER:
        pid = doc.get("launcher_pid")
        return pid if isinstance(pid, int) else None
    for p in doc.get("processes", []):
        if p.get("name") == node and isinstance(p.get("pid"), int):
            return int(p["pid"])
    return None


def started_of(doc: dict[str, Any], node: str) -> int | None:
    """When the process ``cluster.json`` names ``node`` started (clock
    ticks since boot); None if not recorded."""
    if node == LAUNCHER:
        return launcher_started(doc)
    for p in doc.get("processes", []):
        started = p.get("started") if isinstance(p, dict) and p.get("name") == node else None
        if isinstance(started, int) and not isinstance(started, bool):
            return started
    return None


def launcher_started(doc: dict[str, Any]) -> int | None:
    started = doc.get("launcher_started")
    return started if isinstance(started, int) and not isinstance(started, bool) else None


def runs(pid: int, node: str, started: int | None = None) -> bool:
    """Whether ``pid`` is alive and is that node: the process that
    ``started`` then (:func:`started_of`), or, where the run did not record
    it, one whose command line names it. A pid recycled by the kernel for
    another program must not be signalled. (A process forked by the
    run's fork server has its command line, ``semiactive fork-server``:
    only its start names it.)"""
    if node == LAUNCHER or started is not None:
        return is_launcher(pid, started) if node == LAUNCHER else alive_since(pid, started)
    args = command_line(pid)
    if args is None:
        return False
    if node == COORDINATOR:
        return "coordinator" in args and "--listen" in args
    return any(a == "--name" and b == node for a, b in itertools.pairwise(args))


class Nemesis:
    """Injects ``faults`` into the run in ``run_dir`` at their times after t0."""

    def __init__(self, run_dir: Path, faults: Iterable[Fault]) -> None:
        self.run_dir = run_dir
        self.plan = sorted(faults, key=lambda f: f.at)
        self.history = run_dir / "telemetry" / "nemesis.jsonl"
        self.events = EventLog("nemesis", run_dir)
        self._resume: list[tuple[float, int, str]] = []  # (monotonic due, pid, node)
        self.t0 = 0.0  # known once the run has started

    def wait_for_start(self, timeout: float = START_TIMEOUT_S) -> float:
        """t0 of the run, once ``cluster up`` has started the sources. A run
        whose launcher is not there after ``timeout`` is refused; once it
        is, the wait lasts as long as the launcher lives (a large run loads
        its sources for minutes, and the launcher has its own deadlines).
        A target the run does not have is refused as soon as its
        ``cluster.json`` can be read; a run that has already ended, once
        its start is known."""
        deadline = time.monotonic() + timeout
        launcher: object = None
        checked = False
        while isinstance(launcher, int) or time.monotonic() < deadline:
            doc = read_cluster(self.run_dir)
            if doc is not None and not checked:
                self.check_targets(doc)
                checked = True
            if doc is not None and isinstance(doc.get("t0_unix"), int | float):
                pid = doc.get("launcher_pid")
                if isinstance(pid, int) and not runs(pid, LAUNCHER, launcher_started(doc)):
                    raise NemesisError(f"the run in {self.run_dir} has ended (its launcher is gone)")
                self.t0 = float(doc["t0_unix"])
                return self.t0
            launcher = doc.get("launcher_pid") if doc is not None else None
            if isinstance(launcher, int) and not runs(launcher, LAUNCHER, launcher_started(doc or {})):
                raise NemesisError(
                    f"the run in {self.run_dir} ended before it started (its launcher is gone)"
                )
            time.sleep(0.02)
        raise NemesisError(f"no run in {self.run_dir} after {timeout:.0f} s (cluster.json, launcher_pid)")

    def check_targets(self, doc: dict[str, Any]) -> None:
        """Every fault names a process of the run (or the launcher)."""
        names = [p.get("name") for p in doc.get("processes", []) if isinstance(p, dict)]
        known = [n for n in names if isinstance(n, str)] + [LAUNCHER]
        for fault in self.plan:
            if fault.node not in known:
                close = difflib.get_close_matches(fault.node, known, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise UserError(
                    f"{self.run_dir / 'cluster.json'}: no process {fault.node!r} in this run{hint}; "
                    f"its processes: {', '.join(known)}"
                )

    def run(self) -> int:
        """Inject the plan; 0 if every fault was injected, 1 if one was not
        (its target was not running then, or the run had ended), each said
        on standard error."""
        t0 = self.wait_for_start()
        self.history.parent.mkdir(parents=True, exist_ok=True)
        skipped = 0
        try:
            for fault in self.plan:
                self._sleep_until(t0 + fault.at)
                if not self.inject(fault):
                    skipped += 1
            while self._resume:
                self._sleep_until(None)
        finally:
            self.resume_all()
        return 1 if skipped else 0

    def inject(self, fault: Fault) -> bool:
        """Send ``fault``'s signal; False (said and recorded) if it could not be."""
        doc = read_cluster(self.run_dir) or {}
        pid = pid_of(doc, fault.node)
        record: dict[str, Any] = {"node": fault.node, "kind": fault.kind.value, "at": fault.at, "pid": pid}
        launcher = doc.get("launcher_pid")
        ended = isinstance(launcher, int) and not runs(launcher, LAUNCHER, launcher_started(doc))
        if ended and fault.node != LAUNCHER:
            return self._skip(fault, record, "the run has ended (its launcher is gone)")
        if pid is None or not runs(pid, fault.node, started_of(doc, fault.node)):
            return self._skip(fault, record, "not running")
        sig = signal.SIGKILL if fault.kind is FaultKind.KILL else signal.SIGSTOP
        # Stamped before the signal: taken after, it could fall behind the
        # failure's own detection when this process is descheduled.
        at = time.time()
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return self._skip(fault, record, "not running")
        self._write({**record, "t": at, "duration": fault.duration})
        print(f"t={at - self.t0:6.2f}s  {sig.name} {fault.node} (pid {pid})", flush=True)
        self.events.emit(
            "fault_injected",
            at=at,
            target=fault.node,
            kind=fault.kind.value,
            duration_s=fault.duration,
            injector="nemesis",
        )
        if fault.kind is FaultKind.STOP:
            heapq.heappush(self._resume, (time.monotonic() + fault.duration, pid, fault.node))
        return True

    def _skip(self, fault: Fault, record: dict[str, Any], why: str) -> bool:
        self._write({**record, "t": time.time(), "skipped": why})
        print(f"semiactive nemesis: {fault.describe()} not injected: {why}", file=sys.stderr, flush=True)
        return False

    def _sleep_until(self, wall: float | None) -> None:
        """Sleep until wall-clock ``wall`` (None: the next resume), sending
        the SIGCONTs that fall due meanwhile."""
        while True:
            now = time.monotonic()
            while self._resume and self._resume[0][0] <= now:
                _, pid, node = heapq.heappop(self._resume)
                self._cont(pid, node)
            if wall is None:
                if not self._resume:
                    return
                wait = self._resume[0][0] - now
            else:
                wait = wall - time.time()
                if wait <= 0:
                    return
                if self._resume:
                    wait = min(wait, self._resume[0][0] - now)
            time.sleep(max(0.0, min(wait, 0.05)))

    def _cont(self, pid: int, node: str) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
            self._write({"node": node, "kind": "resume", "pid": pid, "t": time.time()})

    def resume_all(self) -> None:
        """Never leave a process frozen behind."""
        while self._resume:
            _, pid, node = heapq.heappop(self._resume)
            self._cont(pid, node)

    def _write(self, record: dict[str, Any]) -> None:
        with self.history.open("a") as handle:
            handle.write(json.dumps(record) + "\n")


def read_history(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "telemetry" / "nemesis.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            out.append(json.loads(line))
    return out


def run_nemesis(run_dir: Path, *, kills: list[str], stops: list[str], plan_file: Path | None) -> int:
    faults = parse_fault_specs(kills, stops)
    if plan_file is not None:
        faults += load_plan(plan_file)
    if not faults:
        raise UserError("nothing to inject: give --kill, --stop or --plan")
    nemesis = Nemesis(run_dir, faults)

    def interrupted(signum: int, frame: object) -> None:
        nemesis.resume_all()
        sys.exit(130)

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    return nemesis.run()


def write_plan(path: Path, faults: Iterable[Fault]) -> None:
    path.write_text(json.dumps([f.record() for f in faults]))


def load_plan(path: Path) -> list[Fault]:
    try:
        records = json.loads(path.read_text())
        return [Fault.from_record(r) for r in records]
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{path}: not a fault plan ({exc})") from None
