"""The HA protocol over an in-memory transport.

A cluster of simulated nodes, each with the real pure parts (sources' and
replicas' output logs, :class:`~ha.replica.StageReplica`, views), exchanges
messages over per-link FIFO queues. A seeded scheduler picks, step by step,
one enabled action: a source emits, a stream sends a batch, a link delivers
its next message, a replica runs, a node sends acknowledgements, a fault
strikes, a secondary detects its primary's failure and takes over, a spare
is assigned. Every interleaving the seed produces must deliver to the sinks
exactly the failure-free output: tests drive it with many seeds (and
hypothesis).

The routing rules are :mod:`ha.routing`'s, the same the node daemon uses;
what the simulation replaces is only sockets, clocks and processes.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ha.output_log import OutputLog
from ha.replica import Mode, StageReplica
from ha.resync import ResyncPoint
from ha.routing import backup_target, consumer_batch_sizes, data_target, initial_views, producer_secondary
from ha.views import StageView, ViewTable
from node.codec import RowCodec
from node.engine.elements import Element
from node.sections.input import EdgeInput, SeqGapError
from semiactive.topology import Edge, Stage, Topology

DATA, BACKUP = "data", "backup"


@dataclass
class Message:
    kind: str  # batch, point, feedback, notice, view
    sender: str
    edge: str = ""
    channel: str = DATA
    epoch: int = 0
    first_seq: int = 0
    rows: list[Element] = field(default_factory=list)
    watermark: int = 0
    eos: bool = False
    seq: int = 0
    point: ResyncPoint | None = None
    view: StageView | None = None


@dataclass
class Stream:
    """A sender's open stream: where it is and to whom."""

    target: str
    sent: int


class SimNode:
    def __init__(self, name: str, views: ViewTable) -> None:
        self.name = name
        self.views = views
        self.alive = True
        self.frozen = False
        self.stage: Stage | None = None
        self.replica: StageReplica | None = None
        self.source_log: OutputLog | None = None
        self.source_rows: deque[Element] = deque()
        self.source_end = 0
        self.sink_input: EdgeInput | None = None
        self.sink_rows: dict[int, Element] = {}
        self.streams: dict[tuple[str, str], Stream] = {}

    @property
    def active(self) -> bool:
        return self.alive and not self.frozen

    @property
    def log(self) -> OutputLog | None:
        if self.source_log is not None:
            return self.source_log
        return self.replica.log if self.replica is not None else None


class Simulation:
    def __init__(
        self,
        topology: Topology,
        sources: dict[str, tuple[list[Element], int]],
        seed: int,
        spares: list[str] | None = None,
        batch_rows: int = 7,
    ) -> None:
        self.topology = topology
        self.rng = random.Random(seed)
        self.batch_rows = batch_rows
        self.links: dict[tuple[str, str], deque[Message]] = {}
        self.nodes: dict[str, SimNode] = {}
        self.errors: list[str] = []
        self.shipped: dict[tuple[str, str], int] = {}  # rows sent per (edge, channel)
        self.events: list[tuple[int, str]] = []
        self.step_no = 0
        self.spares = list(spares or [])
        names = list(topology.nodes) + [s for s in self.spares if s not in topology.nodes]
        for name in names:
            node = SimNode(name, initial_views(topology))
            self.nodes[name] = node
            info = topology.nodes.get(name)
            if info is None or info.stage is None:
                continue
            stage = topology.stages[info.stage]
            node.stage = stage
            if stage.role == "source":
                rows, end = sources[stage.name]
                node.source_rows = deque(rows)
                node.source_end = end
                node.source_log = OutputLog()
                for edge_id, size in consumer_batch_sizes(topology, stage).items():
                    node.source_log.add_edge(edge_id, size)
            elif stage.role == "sink":
                e = stage.inputs[0]
                node.sink_input = EdgeInput(e.id, e.stream, e.index, RowCodec(e.schema, e.kind))
            else:
                mode = Mode.PRIMARY if info.role == "primary" else Mode.SECONDARY
                node.replica = StageReplica(name, stage, mode, consumer_batch_sizes(topology, stage))

    # -- helpers ------------------------------------------------------------------------

    def _send(self, sender: str, target: str, message: Message) -> None:
        if self.nodes[target].alive:
            self.links.setdefault((sender, target), deque()).append(message)

    def _log(self, text: str) -> None:
        self.events.append((self.step_no, text))

    def _edges_out(self, node: SimNode) -> list[Edge]:
        return node.stage.outputs if node.stage is not None else []

    def _serving(self, node: SimNode) -> bool:
        """Does this node serve its stage as primary (per its own view)?"""
        return node.stage is not None and node.views[node.stage.name].primary == node.name

    # -- actions --------------------------------------------------------------------------

    def _enabled(self) -> list[tuple[Any, ...]]:
        acts: list[tuple[Any, ...]] = []
        for node in self.nodes.values():
            if not node.active:
                continue
            if node.source_rows or (node.source_log is not None and not node.source_log.end_of_stream):
                acts.append(("emit", node.name))
            if node.log is not None and self._serving(node):
                for edge in self._edges_out(node):
                    acts.append(("send", node.name, edge.id, DATA))
                    if backup_target(self.topology, node.views, edge):
                        acts.append(("send", node.name, edge.id, BACKUP))
            if node.replica is not None:
                acts.append(("run", node.name))
            if node.replica is not None or node.sink_input is not None:
                acts.append(("ack", node.name))
        for (src, dst), queue in self.links.items():
            if queue and self.nodes[dst].active:
                acts.append(("deliver", src, dst))
        return acts

    def step(self) -> bool:
        acts = self._enabled()
        if not acts:
            return False
        self.step_no += 1
        act = self.rng.choice(acts)
        getattr(self, "_do_" + act[0])(*act[1:])
        return True

    def _do_emit(self, name: str) -> None:
        node = self.nodes[name]
        log = node.source_log
        assert log is not None
        if not node.source_rows:
            log.finish(node.source_end)
            return
        count = self.rng.randint(1, 9)
        rows = [node.source_rows.popleft() for _ in range(min(count, len(node.source_rows)))]
        watermark = node.source_rows[0][0] - 1 if node.source_rows else node.source_end
        log.append(rows, watermark)
        for edge in log.edges:
            log.take_backup(edge)

    def _do_send(self, name: str, edge_id: str, channel: str) -> None:
        node = self.nodes[name]
        log = node.log
        assert log is not None and node.stage is not None
        edge = next(e for e in node.stage.outputs if e.id == edge_id)
        target = (
            data_target(node.views, edge)
            if channel == DATA
            else backup_target(self.topology, node.views, edge)
        )
        if target is None:
            return
        stream = node.streams.get((edge_id, channel))
        if stream is None or stream.target != target:
            receiver = self.nodes[target]
            if not receiver.active:
                return
            next_seq = self._next_seq(receiver, edge_id)
            if next_seq is None:
                return
            point, start = log.start_for(edge_id, next_seq)
            stream = node.streams[(edge_id, channel)] = Stream(target, start - 1)
            if point is not None:
                self._send(name, target, self._msg("point", node, edge_id, channel, point=point))
        cursors = log.edges[edge_id]
        if stream.sent + 1 < cursors.cut and cursors.point is not None:
            # Rows were released before this stream carried them (SAS saving):
            # the receiver rebuilds from the cut.
            self._send(name, stream.target, self._msg("point", node, edge_id, channel, point=cursors.point))
            stream.sent = cursors.cut - 1
        limit = log.head if channel == DATA else cursors.backed_up
        last = min(limit, stream.sent + self.rng.randint(1, self.batch_rows))
        rows = log.get(stream.sent + 1, last) if last > stream.sent else []
        if last > stream.sent and len(rows) != last - stream.sent:
            self.errors.append(f"{name}: log lost rows {stream.sent + 1}..{last} of {edge_id}")
            return
        done = last >= log.head
        watermark = log.watermark if done else min(log.watermark, log.get(last + 1, last + 1)[0][0] - 1)
        eos = done and log.end_of_stream and last >= limit
        # On the wire a row's lineage at the receiver is its seq on the edge.
        first = stream.sent + 1
        rows = [(r[0], first + i, *r[2:]) for i, r in enumerate(rows)]
        message = self._msg("batch", node, edge_id, channel, first_seq=first, rows=rows)
        message.watermark, message.eos = watermark, eos
        self._send(name, stream.target, message)
        key = (edge_id, channel)
        self.shipped[key] = self.shipped.get(key, 0) + len(rows)
        stream.sent = max(stream.sent, last)

    def _msg(self, kind: str, node: SimNode, edge: str, channel: str, **kw: Any) -> Message:
        assert node.stage is not None
        return Message(kind, node.name, edge, channel, node.views[node.stage.name].epoch, **kw)

    def _next_seq(self, receiver: SimNode, edge_id: str) -> int | None:
        if receiver.replica is not None and edge_id in receiver.replica.inputs.by_name:
            return receiver.replica.inputs.by_name[edge_id].next_seq
        if receiver.sink_input is not None and receiver.sink_input.edge == edge_id:
            return receiver.sink_input.next_seq
        return None

    def _do_run(self, name: str) -> None:
        replica = self.nodes[name].replica
        if replica is not None:
            replica.run()

    def _do_ack(self, name: str) -> None:
        node = self.nodes[name]
        assert node.stage is not None
        if node.replica is not None and node.replica.mode is Mode.PRIMARY and self._serving(node):
            point = node.replica.level1()
            for edge in node.stage.inputs:
                seq = node.replica.level0(edge.id)
                self._ack(node, edge, seq, point)
        elif node.sink_input is not None:
            seq = node.sink_input.last_seq
            point = ResyncPoint(seq, 0, seq + 1, {node.sink_input.edge: seq + 1})
            self._ack(node, node.stage.inputs[0], seq, point)

    def _ack(self, node: SimNode, edge: Edge, seq: int, point: ResyncPoint | None) -> None:
        assert node.stage is not None
        epoch = node.views[node.stage.name].epoch
        producer = node.views[edge.producer].primary
        self._send(
            node.name, producer, Message("feedback", node.name, edge.id, epoch=epoch, seq=seq, point=point)
        )
        secondary = producer_secondary(node.views, edge)
        if secondary is not None:
            notice = Message("notice", node.name, edge.id, epoch=epoch, seq=seq, point=point)
            self._send(node.name, secondary, notice)

    def _do_deliver(self, src: str, dst: str) -> None:
        message = self.links[(src, dst)].popleft()
        node = self.nodes[dst]
        handler = getattr(self, "_on_" + message.kind)
        handler(node, message)

    def _producer_stage(self, edge_id: str) -> str:
        return edge_id.split("->")[0]

    def _on_batch(self, node: SimNode, m: Message) -> None:
        if node.views.stale(self._producer_stage(m.edge), m.epoch):
            return  # fenced: a replaced primary's rows
        try:
            if node.replica is not None and m.edge in node.replica.inputs.by_name:
                node.replica.receive(m.edge, m.first_seq, m.rows, m.watermark, m.eos)
            elif node.sink_input is not None and node.sink_input.edge == m.edge:
                node.sink_input.accept_rows(m.first_seq, m.rows, m.watermark, m.eos)
                for row in list(node.sink_input.pending):
                    seq = row[1]
                    if seq in node.sink_rows:
                        self.errors.append(f"{node.name}: seq {seq} delivered twice")
                    node.sink_rows[seq] = row
                node.sink_input.pending.clear()
        except SeqGapError as exc:
            # The stream skipped rows: the receiver drops the stream; the
            # sender reopens from the receiver's position.
            self._log(f"{node.name}: {exc}")
            sender = self.nodes[m.sender]
            sender.streams.pop((m.edge, m.channel), None)

    def _on_point(self, node: SimNode, m: Message) -> None:
        if node.views.stale(self._producer_stage(m.edge), m.epoch):
            return
        replica = node.replica
        if replica is None or m.point is None or m.edge not in replica.inputs.by_name:
            return
        if replica.receive_point(m.edge, m.point):
            self._log(f"{node.name} resynchronised at position {m.point.position}")
            # Producers of the other input edges start again from the cut.
            for edge_id in replica.rewind:
                for other in self.nodes.values():
                    for key in [k for k in other.streams if k[0] == edge_id]:
                        del other.streams[key]
            replica.rewind = set()

    def _on_feedback(self, node: SimNode, m: Message) -> None:
        if node.views.stale(m.edge.split("->")[1], m.epoch):
            return  # from a replaced consumer primary
        log = node.log
        if log is not None and m.edge in log.edges:
            log.acknowledge(m.edge, m.seq, m.point)

    _on_notice = _on_feedback

    def _on_view(self, node: SimNode, m: Message) -> None:
        assert m.view is not None
        self._apply_view(node, m.view)

    def _apply_view(self, node: SimNode, view: StageView) -> None:
        if not node.views.apply(view):
            return
        mine = node.stage is not None and node.stage.name == view.stage
        if mine and node.replica is not None and view.role_of(node.name) == "none":
            node.replica.fence()
            self._log(f"{node.name} fenced (stage {view.stage} epoch {view.epoch})")
        if view.secondary == node.name and node.replica is None and node.stage is None:
            stage = self.topology.stages[view.stage]
            node.stage = stage
            node.replica = StageReplica(
                node.name, stage, Mode.SECONDARY, consumer_batch_sizes(self.topology, stage)
            )
            self._log(f"{node.name} becomes the secondary of {stage.name}")

    def broadcast(self, sender: str, view: StageView) -> None:
        for name, node in self.nodes.items():
            if name == sender:
                continue
            if node.alive:
                self._send(sender, name, Message("view", sender, view=view))

    # -- faults, detection, re-protection -----------------------------------------------

    def kill(self, name: str) -> None:
        node = self.nodes[name]
        node.alive = False
        for key in [k for k in self.links if name in k]:
            del self.links[key]
        self._log(f"kill {name}")

    def freeze(self, name: str) -> None:
        self.nodes[name].frozen = True
        self._log(f"freeze {name}")

    def thaw(self, name: str) -> None:
        self.nodes[name].frozen = False
        self._log(f"thaw {name}")

    def detect(self) -> list[str]:
        """Secondaries whose primary is dead or frozen take over."""
        done = []
        for node in self.nodes.values():
            if not node.active or node.replica is None or node.replica.mode is not Mode.SECONDARY:
                continue
            assert node.stage is not None
            view = node.views[node.stage.name]
            if view.secondary != node.name:
                continue
            primary = self.nodes[view.primary]
            if primary.active:
                continue
            new = view.promoted(node.name)
            node.views.apply(new)
            node.replica.promote()
            node.streams.clear()
            self.broadcast(node.name, new)
            self._log(f"{node.name} takes over {node.stage.name} at epoch {new.epoch}")
            done.append(node.name)
        return done

    def reprotect(self) -> list[str]:
        """Assign free spares as secondaries of unprotected protected stages."""
        assigned = []
        for stage in self.topology.stages.values():
            if stage.role != "stage" or stage.config is None or stage.config.ha.mode == "none":
                continue
            primary = self.nodes[self._truth(stage.name).primary]
            view = primary.views[stage.name]
            if view.secondary is not None and self.nodes[view.secondary].alive:
                continue
            spare = next(
                (s for s in self.spares if self.nodes[s].alive and self.nodes[s].stage is None), None
            )
            if spare is None or not primary.alive:
                continue
            new = view.with_secondary(spare)
            self._apply_view(self.nodes[spare], new)
            primary.views.apply(new)
            self.broadcast(primary.name, new)
            assigned.append(spare)
        return assigned

    def _truth(self, stage: str) -> StageView:
        """The newest view of a stage any live node holds."""
        views = [n.views[stage] for n in self.nodes.values() if n.alive]
        return max(views, key=lambda v: (v.epoch, v.version))

    def run(self, max_steps: int = 200_000, faults: list[tuple[int, str, str]] | None = None) -> None:
        """Run until nothing is left to do. ``faults``: (step, action, node)
        with action kill, freeze or thaw."""
        plan = sorted(faults or [])
        while self.step_no < max_steps:
            while plan and plan[0][0] <= self.step_no:
                _, action, name = plan.pop(0)
                getattr(self, action)(name)
            if self.rng.random() < 0.02:
                self.detect()
                self.reprotect()
            if not self.step() and not plan:
                if self.detect() or self.reprotect():
                    continue
                break
            if self.finished() and not plan:
                break

    def finished(self) -> bool:
        sinks = [n for n in self.nodes.values() if n.sink_input is not None]
        return all(n.sink_input is not None and n.sink_input.end_of_stream for n in sinks)

    def sink_output(self, sink: str) -> list[Element]:
        rows = self.nodes[sink].sink_rows
        return [rows[s] for s in sorted(rows)]
