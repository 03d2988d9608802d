"""How a run ends when a failure could not be covered.

A death that no replica can cover stops a stage for good: a source or a
sink that writes a file (nothing replicates them; a sink that writes a
table is started again and goes on), an unprotected stage (``ha: none``), or a
protected stage left with no replica for longer than a rebuild takes. The
rest of the cluster runs on to the end; at the drain, the run cannot wait
for an end of stream that will never come, so it waits instead until every
surviving replica has delivered what it holds (each output edge into a
surviving consumer acknowledged up to its head) and nothing moves any more.

Pure functions over what the launcher knows (processes, statuses).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from semiactive.topology import Topology
from semiactive.wire import control_pb2 as cpb

# A protected stage with no primary for this long is taken for stopped: a
# takeover takes tens of milliseconds, a rebuild on a restarted node a few
# seconds on a loaded machine.
UNSERVED_LIMIT_S = 6.0


class ProcessState(Protocol):
    name: str
    role: str  # as configured: source, primary, secondary, sink, spare
    stage: str | None
    restarts: int
    abandoned: bool  # dead, and the launcher will not start it again

    @property
    def alive(self) -> bool: ...


@dataclass(frozen=True)
class Stopped:
    stage: str
    reason: str


def stopped_stages(
    topology: Topology, processes: Mapping[str, ProcessState], unserved_for: Callable[[str], float]
) -> list[Stopped]:
    """Every stage no live process can serve again. ``unserved_for(stage)``
    is how long (seconds) no live primary of it has been seen."""
    out = []
    for stage in topology.stages.values():
        node = processes.get(stage.primary)
        if stage.role in ("source", "sink"):
            restarted = (stage.sink is not None and stage.sink.durable) or (
                stage.source is not None and stage.source.restartable
            )
            if node is not None and not node.alive and (node.abandoned or not restarted):
                out.append(Stopped(stage.name, f"its {stage.role} process {stage.primary} died"))
            continue
        protected = stage.config is not None and stage.config.ha.mode != "none" and stage.secondary
        if not protected:
            if node is not None and (not node.alive or node.restarts > 0):
                out.append(Stopped(stage.name, f"unprotected (ha: none) and its node {stage.primary} died"))
        elif unserved_for(stage.name) >= UNSERVED_LIMIT_S:
            out.append(
                Stopped(stage.name, f"no replica left: no primary for {unserved_for(stage.name):.1f} s")
            )
    return out


def surviving_positions(
    topology: Topology, statuses: Mapping[str, cpb.NodeStatus | None], stopped: list[Stopped]
) -> tuple[tuple[str, int, int], ...] | None:
    """Per output edge of every live producer (into a consumer that has not
    stopped): (edge, head, acknowledged); and per live consumer input, what
    it received. None while some surviving producer still holds rows its
    consumer has not acknowledged."""
    gone = {s.stage for s in stopped}
    consumer_of = {e.id: e.consumer for e in topology.edges}
    positions = []
    for name, status in sorted(statuses.items()):
        if status is None:
            continue
        # A secondary's log is trimmed by acknowledgements it only hears of.
        for out in status.outputs if status.role in ("source", "primary") else ():
            if consumer_of.get(out.edge) in gone:
                continue
            if out.acked < out.seq:
                return None
            positions.append((out.edge, out.seq, out.acked))
        positions += [(f"{name}<-{i.edge}", i.seq, i.seq) for i in status.inputs]
    return tuple(positions)


def consumer_counts(
    topology: Topology, statuses: Mapping[str, cpb.NodeStatus | None], stage: str
) -> dict[str, int]:
    """What each live consumer of ``stage`` says it received from it (last seq)."""
    edges = {e.id for e in topology.stages[stage].outputs}
    counts: dict[str, int] = {}
    for status in statuses.values():
        if status is None:
            continue
        for i in status.inputs:
            if i.edge in edges:
                counts[i.edge] = max(counts.get(i.edge, 0), i.seq)
    return counts
