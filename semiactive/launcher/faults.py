"""Faults: ``NODE@SECONDS`` sends SIGKILL; ``NODE@SECONDS:DURATION`` sends
SIGSTOP and, DURATION seconds later, SIGCONT. Real signals to real
processes, sent either by the launcher itself (``cluster up --kill``, for
scripted experiments) or by the independent nemesis
(:mod:`semiactive.campaigns.nemesis`), which the launcher knows nothing of."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import re
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from semiactive.errors import UserError

if TYPE_CHECKING:
    from semiactive.launcher.cluster import Cluster
    from semiactive.topology import Topology


class FaultKind(enum.StrEnum):
    KILL = "kill"
    STOP = "stop"


@dataclass
class Fault:
    node: str
    at: float
    kind: FaultKind
    duration: float = 0.0
    injected_at: float | None = None  # wall clock

    def record(self) -> dict[str, object]:
        return {
            "node": self.node,
            "kind": self.kind.value,
            "at": self.at,
            "duration": self.duration,
            "injected_at": self.injected_at,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Fault:
        return cls(
            str(record["node"]), float(record["at"]), FaultKind(record["kind"]), float(record["duration"])
        )

    def spec(self) -> str:
        """As given on the command line: ``NODE@SECONDS[:DURATION]``."""
        return f"{self.node}@{self.at:g}" + (f":{self.duration:g}" if self.kind is FaultKind.STOP else "")

    def describe(self) -> str:
        return f"{self.kind} {self.spec()}"

    async def inject(self, cluster: Cluster) -> None:
        """Injected by the launcher: the exit or freeze it causes is expected,
        not a fault it observes."""
        p = cluster.processes[self.node]
        if p.popen is None or not p.alive:
            return
        self.injected_at = time.time()
        if self.kind is FaultKind.KILL:
            p.expected_exit = True
            os.kill(p.popen.pid, signal.SIGKILL)
            p.popen.wait()
        else:
            p.frozen_by_launcher = True
            os.kill(p.popen.pid, signal.SIGSTOP)
            loop = asyncio.get_running_loop()
            loop.call_later(self.duration, _resume, p.popen.pid, p)
        p.events.append({"fault": self.kind.value, "at": self.injected_at, "duration": self.duration})
        cluster.events.emit(
            "fault_injected",
            at=self.injected_at,
            target=self.node,
            kind=self.kind.value,
            duration_s=self.duration,
            injector="launcher",
        )


def _resume(pid: int, process: Any) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
    process.frozen_by_launcher = False


_KILL = re.compile(r"^(?P<node>[^@]+)@(?P<at>\d+(\.\d+)?)$")
_STOP = re.compile(r"^(?P<node>[^@]+)@(?P<at>\d+(\.\d+)?):(?P<dur>\d+(\.\d+)?)$")


def parse_fault_specs(kills: Sequence[str], stops: Sequence[str]) -> list[Fault]:
    """``--kill`` and ``--stop`` arguments, whatever the node names."""
    faults = []
    specs = [(k, _KILL, FaultKind.KILL) for k in kills] + [(s, _STOP, FaultKind.STOP) for s in stops]
    for spec, pattern, kind in specs:
        m = pattern.match(spec)
        if not m:
            form = "NODE@SECONDS" if kind is FaultKind.KILL else "NODE@SECONDS:DURATION"
            raise UserError(f"--{kind} {spec!r}: expected {form}")
        duration = float(m.group("dur")) if kind is FaultKind.STOP else 0.0
        faults.append(Fault(m.group("node"), float(m.group("at")), kind, duration))
    return faults


def parse_faults(kills: Sequence[str], stops: Sequence[str], topology: Topology) -> list[Fault]:
    """``--kill`` and ``--stop`` arguments naming nodes of ``topology``."""
    faults = parse_fault_specs(kills, stops)
    for fault in faults:
        if fault.node not in topology.nodes:
            raise UserError(
                f"--{fault.kind} {fault.spec()!r}: no node named {fault.node!r} "
                f"(nodes: {', '.join(topology.nodes)})"
            )
    return faults
