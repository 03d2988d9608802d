"""Faults a run can inject: ``--kill NODE@SECONDS`` sends SIGKILL;
``--stop NODE@SECONDS:DURATION`` sends SIGSTOP and, DURATION seconds later,
SIGCONT. Real signals to real processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from semiactive.config import ConfigError
from semiactive.topology import Topology

if TYPE_CHECKING:
    from coordinator.launcher import Cluster


@dataclass
class Fault:
    node: str
    at: float
    kind: str  # kill, stop
    duration: float = 0.0
    injected_at: float | None = None  # wall clock

    def record(self) -> dict[str, object]:
        return {
            "node": self.node,
            "kind": self.kind,
            "at": self.at,
            "duration": self.duration,
            "injected_at": self.injected_at,
        }

    async def inject(self, cluster: Cluster) -> None:
        p = cluster.processes[self.node]
        if p.popen is None or not p.alive:
            return
        self.injected_at = time.time()
        if self.kind == "kill":
            p.expected_exit = True
            os.kill(p.popen.pid, signal.SIGKILL)
            p.popen.wait()
        else:
            os.kill(p.popen.pid, signal.SIGSTOP)
            loop = asyncio.get_running_loop()
            loop.call_later(self.duration, _resume, p.popen.pid)
        p.events.append({"fault": self.kind, "at": self.injected_at, "duration": self.duration})


def _resume(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


_KILL = re.compile(r"^(?P<node>[^@]+)@(?P<at>\d+(\.\d+)?)$")
_STOP = re.compile(r"^(?P<node>[^@]+)@(?P<at>\d+(\.\d+)?):(?P<dur>\d+(\.\d+)?)$")


def parse_faults(kills: list[str], stops: list[str], topology: Topology) -> list[Fault]:
    faults = []
    for spec, pattern, kind in [(k, _KILL, "kill") for k in kills] + [(s, _STOP, "stop") for s in stops]:
        m = pattern.match(spec)
        if not m:
            form = "NODE@SECONDS" if kind == "kill" else "NODE@SECONDS:DURATION"
            raise ConfigError(f"--{kind} {spec!r}: expected {form}")
        node = m.group("node")
        if node not in topology.nodes:
            raise ConfigError(
                f"--{kind} {spec!r}: no node named {node!r} (nodes: {', '.join(topology.nodes)})"
            )
        duration = float(m.group("dur")) if kind == "stop" else 0.0
        faults.append(Fault(node, float(m.group("at")), kind, duration))
    return faults
