"""What the launcher learns of its processes without being told.

A real failure is never announced: a process is killed (a crash, the OOM
killer, ``kill -9`` from an operator's shell, the nemesis) or frozen
(SIGSTOP, a stalled VM). :class:`ProcessWatch` notices every exit and every
freeze the launcher did not cause itself, and records it as an event of the
launcher (``process_exited``, ``process_frozen``, ``process_resumed``), so
that the run's report treats it as a fault like an injected one. Freezes
are seen in ``/proc/PID/stat`` (state ``T``): a frozen process is alive to
``waitpid`` and only its state tells.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from semiactive.runtime.events import EventLog

# How often the launcher looks at its processes: an exit or freeze it
# observes happened at most this long before the observation.
OBSERVE_INTERVAL_S = 0.02


class Supervised(Protocol):
    """What the watch needs of one process of the run."""

    name: str
    stage: str | None
    expected_exit: bool
    frozen_by_launcher: bool

    @property
    def pid(self) -> int | None: ...

    def returncode(self) -> int | None:
        """The exit status once the process has ended (negative: killed by
        that signal), None while it runs."""


@dataclass(frozen=True)
class Exit:
    node: str
    stage: str | None
    pid: int
    t: float  # wall clock, when observed
    returncode: int

    def describe(self) -> str:
        if self.returncode < 0:
            with_what = f"killed by {signal.Signals(-self.returncode).name}"
        else:
            with_what = f"exit status {self.returncode}"
        return f"{self.node} (pid {self.pid}) died: {with_what}"


def process_state(pid: int) -> str | None:
    """The one-letter state of ``/proc/PID/stat`` (R, S, T, Z, ...)."""
    fields = _stat_fields(pid)
    return fields[0].decode() if fields else None


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, ``/proc/PID/stat``
    field 22): with the pid, it names one process, never a recycled one."""
    fields = _stat_fields(pid)
    return int(fields[19]) if len(fields) > 19 else None


EXEC_WAIT_S = 1.0


def command_line(pid: int) -> list[str] | None:
    """The arguments of live ``pid``, or None if it is gone or a zombie.

    A process in the middle of exec reads as an empty command line: its
    parent's ``Popen`` returns as soon as exec is past the point of no
    return, before the kernel has placed the new arguments (a loaded 2-core
    machine showed it for half of all fresh processes). So an empty one is
    read again for up to ``EXEC_WAIT_S``; a kernel thread stays empty.
    """
    deadline = time.monotonic() + EXEC_WAIT_S
    while True:
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        if process_state(pid) in (None, "Z"):
            return None
        if raw or time.monotonic() >= deadline:
            return [a.decode(errors="replace") for a in raw.split(b"\0")]
        time.sleep(0.005)


def is_launcher(pid: int, started: int | None) -> bool:
    """Whether ``pid`` is the live launcher of a run: the process that
    ``started`` then (the run records it: a campaign runs its runs
    in-process, so its command is not ``cluster up``), or, for a run that
    did not record it, one whose command is ``cluster up``."""
    if started is not None:
        return alive_since(pid, started)
    args = command_line(pid)
    return args is not None and "cluster" in args and "up" in args


def alive_since(pid: int, started: int | None) -> bool:
    """Whether ``pid`` is alive (not a zombie) and is the process that
    started at ``started`` (:func:`start_ticks`)."""
    return started is not None and process_state(pid) not in (None, "Z") and start_ticks(pid) == started


def _stat_fields(pid: int) -> list[bytes]:
    """``/proc/PID/stat`` from field 3 (the state) on; empty if it is gone."""
    # os.open/os.read, not pathlib: the launcher reads every process's stat
    # 50 times a second, and pathlib made each read 2.5 times as costly.
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return []
    try:
        stat = os.read(fd, 4096)
    except OSError:
        return []
    finally:
        os.close(fd)
    # The command name in parentheses may contain spaces: split after it.
    return stat.rsplit(b")", 1)[-1].split()


class ProcessWatch:
    def __init__(self, events: EventLog) -> None:
        self.events = events
        self.exits: list[Exit] = []
        self._seen_exit: set[int] = set()
        self._frozen: set[int] = set()

    def observe(self, processes: Iterable[Supervised]) -> list[Exit]:
        """Look at every process once; return the exits seen for the first time."""
        new: list[Exit] = []
        now = time.time()
        for p in processes:
            pid = p.pid
            if pid is None:
                continue
            code = p.returncode()
            if code is not None:
                self._frozen.discard(pid)
                if p.expected_exit or pid in self._seen_exit:
                    continue
                self._seen_exit.add(pid)
                seen = Exit(p.name, p.stage, pid, now, code)
                self.exits.append(seen)
                new.append(seen)
                self.events.emit("process_exited", target=p.name, stage=p.stage, pid=pid, returncode=code)
                continue
            if p.frozen_by_launcher:
                continue
            frozen = process_state(pid) in ("T", "t")
            if frozen and pid not in self._frozen:
                self._frozen.add(pid)
                self.events.emit("process_frozen", target=p.name, stage=p.stage, pid=pid)
            elif not frozen and pid in self._frozen:
                self._frozen.discard(pid)
                self.events.emit("process_resumed", target=p.name, stage=p.stage, pid=pid)
        return new

    def frozen(self, pid: int) -> bool:
        return pid in self._frozen
