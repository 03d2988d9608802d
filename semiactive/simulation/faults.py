"""Fault schedules for the simulation: what strikes whom, when.

Pure: a schedule is a list of :class:`Fault` drawn from a seed, so a seed
names a run and replays it. Kills, freezes and the coordinator's death hit
the processes the launcher supervises (replicas, spares, the
coordinator: sources and sinks are not replicated); link faults hit any
pair of processes, the coordinator included. A killed node is restarted
as an empty spare after a while, as the launcher does.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

from semiactive.topology import Topology

COORDINATOR = "coordinator"


class FaultKind(enum.Enum):
    KILL = "kill"  # SIGKILL
    RESTART = "restart"  # a dead node back as an empty spare (the coordinator as itself)
    FREEZE = "freeze"  # SIGSTOP
    THAW = "thaw"  # SIGCONT
    CUT = "cut"  # connections reset, new ones refused
    STALL = "stall"  # messages held
    SLOW = "slow"  # extra latency
    HEAL = "heal"  # the link is whole again


@dataclass(frozen=True)
class Fault:
    at_s: float
    kind: FaultKind
    target: str
    peer: str | None = None
    extra_s: float = 0.0  # SLOW's added latency

    def __str__(self) -> str:
        who = f"{self.target}<->{self.peer}" if self.peer else self.target
        extra = f" +{self.extra_s * 1000:.0f} ms" if self.kind is FaultKind.SLOW else ""
        return f"{self.at_s:.3f}s {self.kind.value} {who}{extra}"


def supervised(topology: Topology) -> list[str]:
    """Nodes whose death the cluster must survive: replicas and spares."""
    return [n.name for n in topology.nodes.values() if n.role in ("primary", "secondary", "spare")]


def random_schedule(topology: Topology, rng: random.Random, duration_s: float, faults: int) -> list[Fault]:
    """``faults`` episodes (a fault and its end) starting within the first
    ``duration_s`` seconds. Kills are of distinct nodes, one at a time with
    time to re-protect after each, so that a stage keeps a replica (two
    replicas dead at once lose a stage in any primary-backup scheme); a
    kill-pair kills one replica of a stage, restarts it, then kills the
    other, which only a re-protected stage survives."""
    nodes = supervised(topology)
    everyone = [*topology.nodes, COORDINATOR]
    out: list[Fault] = []
    busy_until = 0.0
    killed: set[str] = set()
    for _ in range(faults):
        at = round(rng.uniform(0.1, duration_s), 3)
        kind = rng.choice(["kill", "kill", "kill-pair", "freeze", "cut", "stall", "slow", "coordinator"])
        length = round(rng.uniform(0.05, 1.5), 3)
        if kind == "kill":
            candidates = [n for n in nodes if n not in killed]
            if not candidates:
                continue
            at = max(at, busy_until)
            victim = rng.choice(candidates)
            killed.add(victim)
            restart = round(at + rng.uniform(0.3, 1.5), 3)
            busy_until = restart + 1.5  # time for the coordinator to re-protect
            out += [Fault(at, FaultKind.KILL, victim), Fault(restart, FaultKind.RESTART, victim)]
        elif kind == "kill-pair":
            # One replica of a stage dies and comes back empty; once the
            # stage had time to be re-protected, the other one dies.
            pairs = [s.replicas for s in topology.stages.values() if len(s.replicas) == 2]
            pairs = [p for p in pairs if not killed & set(p)]
            if not pairs:
                continue
            first, second = rng.sample(rng.choice(pairs), 2)
            at = max(at, busy_until)
            restart = round(at + rng.uniform(0.1, 0.5), 3)
            again = round(restart + rng.uniform(0.4, 1.0), 3)
            killed |= {first, second}
            busy_until = again + 1.5
            out += [
                Fault(at, FaultKind.KILL, first),
                Fault(restart, FaultKind.RESTART, first),
                Fault(again, FaultKind.KILL, second),
                Fault(round(again + rng.uniform(0.3, 1.0), 3), FaultKind.RESTART, second),
            ]
        elif kind == "freeze":
            victim = rng.choice(nodes)
            out += [Fault(at, FaultKind.FREEZE, victim), Fault(at + length, FaultKind.THAW, victim)]
        elif kind == "coordinator":
            out += [
                Fault(at, FaultKind.KILL, COORDINATOR),
                Fault(at + length, FaultKind.RESTART, COORDINATOR),
            ]
        else:
            a, b = rng.sample(everyone, 2)
            if kind == "slow":
                extra = round(rng.uniform(0.005, 0.2), 3)
                out += [Fault(at, FaultKind.SLOW, a, b, extra), Fault(at + length, FaultKind.HEAL, a, b)]
            else:
                out += [Fault(at, FaultKind(kind), a, b), Fault(at + length, FaultKind.HEAL, a, b)]
    return sorted(out, key=lambda f: f.at_s)
