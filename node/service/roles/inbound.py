"""One input edge of a node, bridging the transport to whoever consumes it
(a stage replica or a sink).

Streams arrive from the producer's replicas: data from its primary, backups
to us as a secondary. Rows stamped with an epoch older than the producer
stage's current one are refused (fencing); a stream from a newer epoch
closes the older ones. A gap closes the stream with OUT_OF_RANGE, so the
producer reconnects and starts where we are (with a resync point if it no
longer has those rows).

A frame whose rows cannot be decoded, whose timestamps decrease or that
goes back below the edge's watermark is refused whole: the session logs it
(edge, sender), counts it in ``semiactive_frames_refused_total`` and closes
that stream with INVALID_ARGUMENT, which the sender reports and stops on.
Other streams, and the node, go on.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import grpc

from semiactive.ha.resync import ResyncPoint, StateSnapshot
from semiactive.ha.state_transfer import StateTransferError
from semiactive.ha.views import ViewTable
from semiactive.node.engine.elements import Element
from semiactive.node.engine.state_codec import StateFormatError
from semiactive.node.sections.codec import CodecError, RowCodec
from semiactive.node.sections.connections import elided_rows
from semiactive.node.sections.input import RowOrderError, SeqGapError
from semiactive.node.sections.partitions import owned_flags
from semiactive.node.sections.record_rows import RecordLayout
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.transport import InboundStream, Rejected
from semiactive.runtime.messages import chunk_from_pb, point_from_pb
from semiactive.topology import Edge
from semiactive.wire import dataplane_pb2 as pb

log = logging.getLogger(__name__)


class Receiver(Protocol):
    def next_seq(self, edge: str) -> int: ...

    def idle_from(self, edge: str) -> int | None:
        """Connection management: from which instant the rows of ``edge``
        may come elided (None: every row whole)."""
        ...

    def manages(self, edge: str) -> bool:
        """Whether ``edge`` may carry elided rows at all."""
        ...

    def layout(self, edge: str) -> RecordLayout | None:
        """How a columnar stage keeps the rows of ``edge`` (None: as rows)."""
        ...

    def receive(
        self,
        edge: str,
        first_seq: int,
        rows: Sequence[Element],
        watermark: int,
        eos: bool,
        count: int,
        entered: float = 0.0,
    ) -> int:
        """``entered``: when the batch's oldest row entered the system (0 unknown)."""
        ...

    def receive_point(self, edge: str, point: ResyncPoint) -> set[str]: ...

    def pressed(self, edge: str, from_seq: int, through_seq: int) -> None:
        """The producer of ``edge`` is pressed from ``from_seq`` on (0: no
        longer); capture once ``edge`` is processed through ``through_seq``."""
        ...

    async def received(self) -> None: ...


class InboundEdgeSession:
    def __init__(
        self,
        edge: Edge,
        views: ViewTable,
        receiver: Receiver,
        metrics: NodeMetrics,
        on_rewind: Callable[[set[str]], None],
        on_unacked: Callable[[], None] | None = None,
        ack_rows: int = 0,
    ) -> None:
        """``on_unacked``: called when ``ack_rows`` rows or more came in
        since the last Level-0 (the role acknowledges at once)."""
        self.edge = edge
        self.views = views
        self.receiver = receiver
        self.metrics = metrics
        self.on_rewind = on_rewind
        self.codec = RowCodec(edge.schema, edge.kind)
        self.streams: list[InboundStream] = []
        # A-SAS's S_time at this node: time to take rows in off the edge.
        self.received_rows = 0
        self.receive_s = 0.0
        self.on_unacked = on_unacked
        self.ack_rows = ack_rows
        self.level0 = 0  # the last Level-0 sent

    @property
    def next_seq(self) -> int:
        return self.receiver.next_seq(self.edge.id)

    def welcome(self, hello: pb.Hello) -> pb.Welcome:
        """Where the stream starts, and on a data stream whether rows may
        come elided (connection management)."""
        idle = self.receiver.idle_from(self.edge.id) if hello.channel == pb.DATA else None
        if idle is None:
            return pb.Welcome(next_seq=self.next_seq)
        return pb.Welcome(next_seq=self.next_seq, idle_from=idle)

    def send_interest(self, idle_from: int | None) -> None:
        """Tell the producer's data streams which rows may come elided."""
        message = pb.Feedback(
            interest=pb.Interest() if idle_from is None else pb.Interest(idle_from=idle_from)
        )
        for stream in self.streams:
            if stream.hello.channel == pb.DATA:
                stream.feedback.send(message)

    def check(self, hello: pb.Hello) -> None:
        if hello.layout != self.codec.fingerprint():
            raise Rejected(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"edge {hello.edge}: row layout {hello.layout!r} does not match {self.codec.fingerprint()!r}",
            )
        producer = self.edge.producer
        if self.views.stale(producer, hello.epoch):
            raise Rejected(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"fenced: stage {producer} is at epoch {self.views[producer].epoch}, not {hello.epoch}",
            )

    def attach(self, stream: InboundStream) -> None:
        producer = self.edge.producer
        if self.views.witness(producer, stream.hello.epoch, stream.hello.sender):
            self.fence_stale()
        self.streams.append(stream)

    def detach(self, stream: InboundStream) -> None:
        if stream in self.streams:
            self.streams.remove(stream)

    def fence_stale(self) -> None:
        """Close streams from replaced producer primaries."""
        producer = self.edge.producer
        for stream in self.streams:
            if self.views.stale(producer, stream.hello.epoch):
                stream.close(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"fenced: stage {producer} is at epoch {self.views[producer].epoch}",
                )

    def rewind(self) -> None:
        """Make every producer stream start again from our position."""
        for stream in self.streams:
            stream.close(grpc.StatusCode.ABORTED, f"rewind to seq {self.next_seq}")

    async def on_frame(self, frame: pb.Frame, stream: InboundStream) -> None:
        self.check(stream.hello)
        body = frame.WhichOneof("body")
        if body == "batch":
            started = time.perf_counter()
            batch = frame.batch
            next_seq = self.next_seq
            skip = next_seq - batch.first_seq
            rows: Sequence[Element]
            if batch.owned:
                rows = self._routed(batch, stream) if 0 <= skip < batch.count else []
            elif batch.elided_ts:
                rows = self._elided(batch, stream) if 0 <= skip < batch.count else []
            else:
                layout = self.receiver.layout(self.edge.id)
                decode: Callable[[bytes, int, int], Sequence[Element]]
                decode = self.codec.decode if layout is None else layout.view
                try:
                    rows = decode(batch.rows, batch.first_seq, batch.count) if 0 <= skip < batch.count else []
                except CodecError as exc:
                    raise self._refuse(stream, "undecodable", str(exc)) from None
                if self.edge.routing is not None and rows:
                    self._check_owned(rows, stream)
            if skip < 0 and batch.count:
                raise Rejected(
                    grpc.StatusCode.OUT_OF_RANGE,
                    f"edge {self.edge.id}: rows from seq {batch.first_seq}, want seq {next_seq}",
                )
            try:
                # A peer's number: only a finite positive time is one.
                entered = batch.entered_unix if 0 < batch.entered_unix < math.inf else 0.0
                new = self.receiver.receive(
                    self.edge.id,
                    batch.first_seq,
                    rows,
                    batch.watermark,
                    batch.end_of_stream,
                    batch.count,
                    entered,
                )
            except SeqGapError as exc:
                raise Rejected(grpc.StatusCode.OUT_OF_RANGE, str(exc)) from None
            except RowOrderError as exc:
                raise self._refuse(stream, exc.reason, str(exc)) from None
            if new:
                self.received_rows += new
                self.receive_s += time.perf_counter() - started
                through = batch.first_seq + batch.count - 1
                if self.on_unacked is not None and through - self.level0 >= self.ack_rows:
                    self.on_unacked()
            if batch.count > new:
                self.metrics.duplicates.labels(self.edge.id).inc(batch.count - new)
        elif body == "state":
            try:
                stream.states.add(chunk_from_pb(frame.state))
            except StateTransferError as exc:
                raise self._refuse(stream, "state", str(exc)) from None
        elif body == "resync":
            try:
                rewind = self.receiver.receive_point(self.edge.id, point_from_pb(frame.resync, stream.states))
            except (StateTransferError, StateFormatError) as exc:  # no such state, or not of this program
                raise self._refuse(stream, "state", str(exc)) from None
            rewind.discard(self.edge.id)
            if rewind:
                self.on_rewind(rewind)
        elif body == "pressure" and stream.hello.channel == pb.DATA:
            self.receiver.pressed(self.edge.id, frame.pressure.from_seq, frame.pressure.through_seq)
        else:
            raise Rejected(grpc.StatusCode.INVALID_ARGUMENT, f"unexpected {body} frame")
        await self.receiver.received()

    def _elided(self, batch: pb.Batch, stream: InboundStream) -> list[Element]:
        """Rows sent as timestamps only: accepted on a data stream of an
        edge this node manages the connection of, and nowhere else."""
        if stream.hello.channel != pb.DATA or not self.receiver.manages(self.edge.id):
            raise self._refuse(stream, "elided", "elided rows on an edge that did not ask for them")
        if len(batch.elided_ts) != batch.count or batch.rows:
            raise self._refuse(
                stream, "elided", f"{len(batch.elided_ts)} timestamps for {batch.count} elided rows"
            )
        return elided_rows(batch.first_seq, batch.elided_ts, len(self.edge.schema))

    def _routed(self, batch: pb.Batch, stream: InboundStream) -> list[Element]:
        """A partition's batch: its own rows whole, the others as
        timestamps (node/sections/partitions.py), back in seq order."""
        if self.edge.routing is None:
            raise self._refuse(stream, "partition", "partition-routed rows on an edge to no partition")
        try:
            owned = owned_flags(batch.owned, batch.count)
            mine = self.codec.decode(batch.rows, batch.first_seq, sum(owned))
        except (ValueError, CodecError) as exc:
            raise self._refuse(stream, "partition", str(exc)) from None
        if len(batch.elided_ts) != batch.count - len(mine):
            raise self._refuse(
                stream,
                "partition",
                f"{len(batch.elided_ts)} timestamps for {batch.count - len(mine)} elided rows",
            )
        others = elided_rows(batch.first_seq, batch.elided_ts, len(self.edge.schema))
        rows: list[Element] = []
        seq = batch.first_seq
        whole, elided = iter(mine), iter(others)
        for is_mine in owned:
            row = next(whole) if is_mine else next(elided)
            rows.append((row[0], seq, *row[2:]))
            seq += 1
        self._check_owned([r for r, is_mine in zip(rows, owned, strict=True) if is_mine], stream)
        return rows

    def _check_owned(self, rows: Sequence[Element], stream: InboundStream) -> None:
        """Whole rows on a partition's edge must be that partition's: a
        misrouted row would be computed twice or nowhere."""
        owned = self.edge.owned(rows)
        if owned is not None and not all(owned):
            seq = rows[owned.index(False)][1]
            raise self._refuse(stream, "partition", f"row seq {seq} is not partition {self.edge.consumer}'s")

    def _refuse(self, stream: InboundStream, reason: str, detail: str) -> Rejected:
        """A bad frame: logged, counted, and the stream's closing status."""
        sender = stream.hello.sender
        log.warning("refused a frame on edge %s from %s (%s): %s", self.edge.id, sender, reason, detail)
        self.metrics.frames_refused.labels(self.edge.id, reason).inc()
        return Rejected(grpc.StatusCode.INVALID_ARGUMENT, f"frame refused ({reason}): {detail}")

    def ack(
        self, seq: int, point: pb.ResyncPoint | None, epoch: int, state: StateSnapshot | None = None
    ) -> None:
        """Level-0 and Level-1 on the data streams (secondaries' backup
        streams carry no acknowledgements), each only if it changed since
        the stream last got one: a stage acks every few milliseconds, and
        the point of a large program is hundreds of counters. ``state``:
        the operator state ``point`` refers to, sent ahead of it once per
        stream."""
        level1 = None if point is None else pb.Level1(point=point, epoch=epoch)
        self.level0 = seq
        for stream in self.streams:
            if stream.hello.channel != pb.DATA:
                continue
            if seq != stream.level0_sent:
                stream.feedback.send(pb.Feedback(level0=pb.Level0(seq=seq)))
                stream.level0_sent = seq
            if state is not None and state.position != stream.state_sent:
                stream.feedback.send_state(state)
                stream.state_sent = state.position
            if level1 is not None and level1 != stream.level1_sent:
                stream.feedback.send(pb.Feedback(level1=level1))
                stream.level1_sent = level1
