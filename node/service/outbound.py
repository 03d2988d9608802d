"""The network side of an output section: one sender per consumer replica
the current views say this stage feeds (ha-protocol.md "Flows").

For each output edge: a data sender to the consumer's primary and, when the
consumer is protected by AS or SAS, a backup sender to its secondary that
ships only what the log has released for backup (batches of B rows). When a
view changes, :meth:`Outbound.reconcile` retargets. Acknowledgements coming
back update the log: Level-0 positions, Level-1 points (which free rows and
are forwarded ahead of rows from their cut).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from semiactive.ha.output_log import OutputLog
from semiactive.ha.routing import backup_target, data_target
from semiactive.ha.state_transfer import StateTransferError
from semiactive.ha.views import ViewTable
from semiactive.node.sections.codec import RowCodec
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.transport import EdgeSender, RefusalHandler
from semiactive.runtime.events import EventLog
from semiactive.runtime.messages import chunk_from_pb, point_from_pb
from semiactive.runtime.network import Network
from semiactive.topology import Stage, Topology
from semiactive.wire import dataplane_pb2 as pb

log = logging.getLogger(__name__)

CHANNELS = {pb.DATA: "data", pb.BACKUP: "backup"}
# A full output log waits for acknowledgements; this long is a stall worth saying.
STALL_REPORT_S = 2.0


class Outbound:
    def __init__(
        self,
        node: str,
        stage: Stage,
        topology: Topology,
        addresses: Mapping[str, str],
        log_: OutputLog,
        views: ViewTable,
        metrics: NodeMetrics,
        epoch: Callable[[], int],
        on_refused: RefusalHandler,
        on_acknowledged: Callable[[], None] | None = None,
        network: Network | None = None,
        events: EventLog | None = None,
    ) -> None:
        assert stage.schema is not None
        self.node = node
        self.stage = stage
        self.topology = topology
        self.addresses = addresses
        self.log = log_
        self.views = views
        self.metrics = metrics
        self.epoch = epoch
        self.on_refused = on_refused
        self.on_acknowledged = on_acknowledged
        self.network = network
        self.events = events
        self.codec = RowCodec(stage.schema, stage.kind)
        self.senders: dict[tuple[str, int], EdgeSender] = {}
        self.tasks: dict[tuple[str, int], asyncio.Task[None]] = {}
        self.room = asyncio.Event()
        self.room.set()
        # What ends the node (exit 1): a sender's PeerUnreachable, a failed task of the role.
        self.failures: asyncio.Queue[BaseException] = asyncio.Queue()
        self._lost_through: dict[tuple[str, str], int] = {}  # (edge, target): last seq reported lost
        self.bytes_sent: dict[tuple[str, str], int] = {}  # (edge, channel name) -> bytes, all senders ever
        self.rows_sent: dict[tuple[str, str], int] = {}  # (edge, channel name) -> rows, all senders ever
        self.backup_max_delay = topology.config.backup_max_delay_ms / 1000
        self._backup_due: dict[str, asyncio.TimerHandle] = {}  # edge -> when its partial batch goes

    def reconcile(self, starting: bool = False) -> None:
        """Start, stop or retarget senders to match the current views.
        ``starting``: the node's first senders, at start-up, where a peer
        never reached is a configuration error that stops the node; later
        ones retry instead (docs/configuration.md, ``connect_timeout_ms``)."""
        cfg = self.topology.config
        for edge in self.stage.outputs:
            wanted = {
                pb.DATA: data_target(self.views, edge),
                pb.BACKUP: backup_target(self.topology, self.views, edge),
            }
            for channel, target in wanted.items():
                key = (edge.id, channel)
                current = self.senders.get(key)
                if current is not None and current.target == target and not current.refused:
                    continue
                if current is not None:
                    current.stop()
                    del self.senders[key]
                if target is None:
                    continue
                cursors = self.log.edges[edge.id]
                limit = (lambda: self.log.head) if channel == pb.DATA else (lambda c=cursors: c.backed_up)
                sender = EdgeSender(
                    sender=self.node,
                    edge=edge.id,
                    target=target,
                    address=self.addresses[target],
                    log=self.log,
                    codec=self.codec,
                    channel=channel,
                    epoch=self.epoch,
                    on_feedback=self._on_feedback,
                    on_refused=self.on_refused,
                    on_lost=self._lost,
                    limit=limit,
                    count_bytes=self._counter(edge.id, CHANNELS[channel]),
                    batch_rows=cfg.batch_rows,
                    linger=cfg.linger_ms / 1000,
                    busy_linger=cfg.busy_linger_ms / 1000,
                    connect_timeout=cfg.connect_timeout_ms / 1000,
                    unreachable_is_fatal=starting,
                    network=self.network,
                    delay_s=self.topology.latency_s(self.node, target)
                    if cfg.network is not None and cfg.network.delay
                    else 0.0,
                    owned=edge.owned if edge.routing is not None else None,
                    on_sent=self._backup_written if channel == pb.BACKUP else None,
                )
                self.senders[key] = sender
                task = asyncio.create_task(sender.run(), name=f"send {edge.id} {CHANNELS[channel]}")
                task.add_done_callback(self._task_done)
                self.tasks[key] = task

    def _counter(self, edge: str, channel: str) -> Callable[[int, int], None]:
        key = (edge, channel)
        self.bytes_sent.setdefault(key, 0)
        self.rows_sent.setdefault(key, 0)

        def count(size: int, rows: int) -> None:
            self.bytes_sent[key] += size
            self.rows_sent[key] += rows

        return count

    def _backup_written(self, sender: EdgeSender) -> None:
        """A Level-1 cut waiting for the backup stream goes on now: with the
        stream stalled (a full log), no later acknowledgement would move it."""
        if self.log.backup_written(sender.edge, sender.sent):
            if not self.log.full:
                self.room.set()
            self.wake()

    def _lost(self, sender: EdgeSender, first: int, last: int) -> None:
        """Rows a receiver needed were freed: never expected; a loss every
        campaign and verification counts (event ``rows_lost``), once: the
        receiver refuses the rows after the gap and its stream comes back
        asking for the same seqs again and again."""
        key = (sender.edge, sender.target)
        first = max(first, self._lost_through.get(key, 0) + 1)
        if first > last:
            return
        self._lost_through[key] = last
        log.error(
            "%s: %s wants seq %d but the log starts at %d; rows were lost",
            sender.edge,
            sender.target,
            first,
            last + 1,
        )
        self.metrics.rows_lost.labels(sender.edge).inc(last - first + 1)
        if self.events is not None:
            self.events.emit("rows_lost", edge=sender.edge, target=sender.target, first=first, last=last)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.failures.put_nowait(task.exception())  # type: ignore[arg-type]

    def _on_feedback(self, sender: EdgeSender, feedback: pb.Feedback) -> None:
        body = feedback.WhichOneof("body")
        if sender.channel != pb.DATA:
            return  # secondaries do not acknowledge
        if body == "level0":
            self.log.acknowledge(sender.edge, feedback.level0.seq)
        elif body == "state":
            try:
                sender.states.add(chunk_from_pb(feedback.state))
            except StateTransferError as exc:
                log.warning("%s: a state chunk from %s refused: %s", sender.edge, sender.target, exc)
        elif body == "level1":
            consumer = sender.edge.split("->", 1)[1]
            if self.views.stale(consumer, feedback.level1.epoch):
                return  # a replaced consumer primary
            try:
                point = point_from_pb(feedback.level1.point, sender.states)
            except StateTransferError as exc:
                # Rows before its cut stay: without the state, nothing could
                # rebuild the consumer from them.
                log.warning("%s: a Level-1 point from %s not applied: %s", sender.edge, sender.target, exc)
                return
            backup = self.senders.get((sender.edge, pb.BACKUP))
            written = backup.sent if backup is not None and backup.connected.is_set() else None
            self.log.acknowledge(sender.edge, sender.acked, point, backup_sent=written)
        if not self.log.full:
            self.room.set()
        if self.on_acknowledged is not None:
            self.on_acknowledged()

    def appended(self) -> None:
        """New rows or time in the log: ship backups due, wake senders."""
        for edge in self.log.edges:
            self.log.take_backup(edge)
            if (
                self.backup_max_delay
                and self.log.unsent(edge)
                and edge not in self._backup_due
                and (edge, pb.BACKUP) in self.senders
            ):
                self._backup_due[edge] = asyncio.get_running_loop().call_later(
                    self.backup_max_delay, self._ship_partial_backup, edge
                )
        if self.log.full:
            self.room.clear()
        self.wake()

    def _ship_partial_backup(self, edge: str) -> None:
        """``backup_max_delay_ms`` after rows were left unshipped: ship what
        is unshipped now, a batch short of B (rows that came later go with
        them early, at most one such batch per delay)."""
        del self._backup_due[edge]
        if self.log.unsent(edge):
            self.log.take_backup(edge, force=True)
            self.wake()

    def wake(self) -> None:
        """Let every sender look at the log again (rows, time, pressure)."""
        for sender in self.senders.values():
            sender.wake.set()

    async def wait_room(self) -> None:
        """Wait while the log is full. A log full for ``STALL_REPORT_S`` is
        said once (a warning and the event ``log_full``): usually a consumer
        whose state keeps old input forever, so its Level-1 cut never moves
        and nothing can be freed."""
        reported = False
        while self.log.full:
            self.room.clear()
            try:
                await asyncio.wait_for(self.room.wait(), None if reported else STALL_REPORT_S)
            except TimeoutError:
                reported = True
                self._report_full()

    def _report_full(self) -> None:
        log_ = self.log
        oldest = log_.needed_from()
        pinned = sorted(e for e, c in log_.edges.items() if (c.cut if c.point is not None else 1) == oldest)
        log.warning(
            "%s: output log full (%d rows, queue_rows %d) for %.0f s: %s still need(s) rows from seq %d "
            "(the oldest input the consumer's state holds); raise queue_rows or bound its windows",
            self.stage.name,
            log_.retained,
            log_.capacity,
            STALL_REPORT_S,
            ", ".join(pinned),
            oldest,
        )
        if self.events is not None:
            self.events.emit(
                "log_full",
                stage=self.stage.name,
                retained=log_.retained,
                capacity=log_.capacity,
                pinned_by=pinned,
                needed_from=oldest,
            )

    def consumer_positions(self) -> dict[str, int]:
        """Per output edge, what the consumer's primary asked for when the
        data stream connected, minus one: the old primary's delivered
        position after a takeover."""
        return {
            edge: s.welcome_seq - 1
            for (edge, channel), s in self.senders.items()
            if channel == pb.DATA and s.welcome_seq is not None
        }

    @property
    def done(self) -> bool:
        data = [s for (_, channel), s in self.senders.items() if channel == pb.DATA]
        return self.log.end_of_stream and all(s.done for s in data)

    def bytes_by_channel(self) -> dict[str, int]:
        out = {"data": 0, "backup": 0}
        for (_, channel), size in self.bytes_sent.items():
            out[channel] += size
        return out

    def stop(self) -> None:
        for due in self._backup_due.values():
            due.cancel()
        self._backup_due.clear()
        for sender in self.senders.values():
            sender.stop()
        for task in self.tasks.values():
            task.cancel()
