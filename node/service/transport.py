"""gRPC shells of the data plane: the thin I/O layer around the sections.

:class:`DataPlaneServer` accepts Push streams from upstream replicas and
hands each frame to the inbound edge the node registered for it;
:class:`EdgeSender` keeps one Push stream to one downstream replica and feeds
it from an :class:`~semiactive.ha.output_log.OutputLog`. Neither knows what the rows
mean: validation and protocol decisions live in the node's roles.

Flow control is HTTP/2's: a receiver that stops reading (its input queue is
full) stops the sender's writes, whose output log then fills, which pauses
that node's operator section, and so on up to the source.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import math
import operator
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import grpc
from google.protobuf.message import DecodeError

from semiactive.ha.output_log import OutputLog
from semiactive.ha.resync import ResyncPoint, StateSnapshot
from semiactive.ha.state_transfer import StateAssembler, chunks
from semiactive.node.engine.elements import Element
from semiactive.node.sections.codec import CodecError, RowCodec
from semiactive.node.sections.connections import elided_stamps
from semiactive.node.sections.partitions import owned_bitmap
from semiactive.runtime import clock
from semiactive.runtime.messages import chunk_to_pb, point_to_pb
from semiactive.runtime.network import Network, insecure
from semiactive.runtime.tls import caller
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

_TS = operator.itemgetter(0)


class Rejected(Exception):
    """An inbound stream the node refuses, with the status to close it with."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class FeedbackChannel:
    """The send side of one inbound stream's feedback (acks), serialised
    through a queue because only one write may be pending on a stream."""

    def __init__(self, context: grpc.aio.ServicerContext[pb.Frame, pb.Feedback]) -> None:
        self._context = context
        self._queue: asyncio.Queue[pb.Feedback | StateSnapshot | None] = asyncio.Queue()
        self._task = asyncio.create_task(self._drain())
        self.closed = False

    def send(self, feedback: pb.Feedback) -> None:
        if not self.closed:
            self._queue.put_nowait(feedback)

    def send_state(self, state: StateSnapshot) -> None:
        """A state, as chunks cut one at a time as they are written: a
        state of hundreds of MB cut up front would stop the event loop
        for the copies and be held whole a second time, per stream."""
        if not self.closed:
            self._queue.put_nowait(state)

    async def _drain(self) -> None:
        while True:
            item = await self._queue.get()
            if item is None:
                return
            try:
                if isinstance(item, StateSnapshot):
                    for chunk in chunks(item):
                        await self._context.write(pb.Feedback(state=chunk_to_pb(chunk)))
                else:
                    await self._context.write(item)
            except Exception:  # the stream is gone; the reader notices too
                self.closed = True
                return

    async def close(self) -> None:
        """Stop after the write under way (at most a second more)."""
        self.closed = True
        self._queue.put_nowait(None)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self._task), CLOSE_WAIT_S)
        if not self._task.done():
            self._task.cancel()


CLOSE_WAIT_S = 1.0
# A frame of this many rows or more marks its sender busy: the next frame
# leaves ``busy_linger`` after it. At 2 ms an edge gets busy at about
# 128,000 rows/s; at 10 ms it stays so down to about 26,000.
BUSY_FRAME_ROWS = 256


async def _end(
    context: grpc.aio.ServicerContext[pb.Frame, pb.Feedback],
    feedback: FeedbackChannel,
    code: grpc.StatusCode,
    message: str,
) -> None:
    """Close a Push stream with ``code``. The feedback writer stops first:
    gRPC refuses to send a status while a message write is pending
    (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS), and the stream would then never
    end for its sender, which waits on it forever."""
    await feedback.close()
    await context.abort(code, message)


class InboundStream:
    """One accepted Push stream: its hello, its feedback writer, and a way
    for the node to close it from elsewhere (a newer epoch fences it; a
    resync asks its producer to start again from the receiver's position)."""

    def __init__(self, hello: pb.Hello, feedback: FeedbackChannel) -> None:
        self.hello = hello
        self.feedback = feedback
        # The acknowledgements last sent on this stream: an unchanged one is
        # not sent again (acks are cumulative; a new stream starts afresh).
        self.level0_sent = -1
        self.level1_sent: pb.Level1 | None = None
        self.state_sent: int | None = None  # position of the operator state sent ahead of Level-1
        self.states = StateAssembler()  # states the producer sends ahead of a resync point
        self.closing: asyncio.Future[tuple[grpc.StatusCode, str]] = asyncio.get_running_loop().create_future()

    def close(self, code: grpc.StatusCode, message: str) -> None:
        if not self.closing.done():
            self.closing.set_result((code, message))


class InboundEdge(Protocol):
    """What a role provides for each accepted Push stream."""

    @property
    def next_seq(self) -> int: ...

    def welcome(self, hello: pb.Hello) -> pb.Welcome: ...

    async def on_frame(self, frame: pb.Frame, stream: InboundStream) -> None: ...

    def attach(self, stream: InboundStream) -> None: ...

    def detach(self, stream: InboundStream) -> None: ...


# Both get the caller's verified name (None on an insecure cluster).
Acceptor = Callable[[pb.Hello, str | None], "InboundEdge"]
AckHandler = Callable[[pb.AckNotice, str | None], Awaitable[None]]


class DataPlaneServer(pb_grpc.DataPlaneServicer):
    def __init__(self, accept: Acceptor, on_ack: AckHandler | None = None) -> None:
        self._accept = accept
        self._on_ack = on_ack

    async def Push(
        self, request_iterator: object, context: grpc.aio.ServicerContext[pb.Frame, pb.Feedback]
    ) -> None:
        try:
            first = await context.read()
        except DecodeError:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "undecodable frame")
        if first is grpc.aio.EOF:
            return
        if first.WhichOneof("body") != "hello":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first frame of a Push must be a hello")
        hello = first.hello
        try:
            edge = self._accept(hello, caller(context))
        except Rejected as exc:
            log.info("refused %s from %s: %s", hello.edge, hello.sender, exc.message)
            await context.abort(exc.code, exc.message)
        feedback = FeedbackChannel(context)
        stream = InboundStream(hello, feedback)
        feedback.send(pb.Feedback(welcome=edge.welcome(hello)))
        edge.attach(stream)
        try:
            while True:
                read = asyncio.ensure_future(context.read())
                await asyncio.wait([read, stream.closing], return_when=asyncio.FIRST_COMPLETED)
                if stream.closing.done():
                    read.cancel()
                    code, message = stream.closing.result()
                    await _end(context, feedback, code, message)
                frame = read.result()
                if frame is grpc.aio.EOF:
                    return
                await edge.on_frame(frame, stream)
        except Rejected as exc:
            await _end(context, feedback, exc.code, exc.message)
        except CodecError as exc:
            log.warning("bad frame on %s from %s: %s", hello.edge, hello.sender, exc)
            await _end(context, feedback, grpc.StatusCode.INVALID_ARGUMENT, f"bad frame: {exc}")
        except DecodeError:
            # Bytes no frame parses from: refused without a traceback in the
            # log (a member could otherwise flood it).
            await _end(context, feedback, grpc.StatusCode.INVALID_ARGUMENT, "undecodable frame")
        finally:
            edge.detach(stream)
            await feedback.close()

    async def Ack(
        self, request: pb.AckNotice, context: grpc.aio.ServicerContext[pb.AckNotice, pb.Empty]
    ) -> pb.Empty:
        if self._on_ack is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "this node takes no acks")
        else:
            try:
                await self._on_ack(request, caller(context))
            except Rejected as exc:
                await context.abort(exc.code, exc.message)
        return pb.Empty()


FeedbackHandler = Callable[["EdgeSender", pb.Feedback], None]
RefusalHandler = Callable[["EdgeSender", str], None]
# (sender, first, last): seqs a receiver needed that the log no longer had.
LossHandler = Callable[["EdgeSender", int, int], None]


class PeerUnreachable(RuntimeError):
    pass


class EdgeSender:
    """Streams the rows of one output log to one downstream replica.

    On connecting, the receiver says which seq it wants (Welcome); the log
    says where to start (:meth:`~semiactive.ha.output_log.OutputLog.start_for`): there,
    or at its cut after a resync point when it no longer has those rows. The
    same happens mid-stream when a Level-1 cut passes what was sent (SAS
    dropping unsent backup rows). Rows go in batches of at most
    ``batch_rows`` up to ``limit()`` (the log head for data, the shipped
    backup position for backups), with watermark-only batches when time
    advances without rows.

    A refusal for a stale epoch (FAILED_PRECONDITION) stops the sender and
    is reported (this node was replaced); OUT_OF_RANGE or ABORTED from the
    receiver (a gap, a rewind) makes it reconnect at once. A peer never
    reached within ``connect_timeout`` raises :class:`PeerUnreachable` if
    ``unreachable_is_fatal`` (a node's first senders: an address wrong at
    start-up); a sender made later, to a new primary or after a takeover,
    retries for as long as it exists (the peer is busy or dead, which the
    views settle).
    """

    def __init__(
        self,
        *,
        sender: str,
        edge: str,
        target: str,
        address: str,
        log: OutputLog,
        codec: RowCodec,
        channel: pb.Channel,
        epoch: Callable[[], int],
        on_feedback: FeedbackHandler,
        on_refused: RefusalHandler | None = None,
        on_lost: LossHandler | None = None,
        limit: Callable[[], int] | None = None,
        count_bytes: Callable[[int, int], None] | None = None,
        batch_rows: int = 1024,
        linger: float = 0.0,
        busy_linger: float | None = None,
        connect_timeout: float = 10.0,
        unreachable_is_fatal: bool = True,
        network: Network | None = None,
        delay_s: float = 0.0,
        owned: Callable[[Sequence[Element], int], list[bool] | None] | None = None,
        on_sent: Callable[[EdgeSender], None] | None = None,
    ) -> None:
        self.sender = sender
        self.on_sent = on_sent  # after rows were written
        # A partition's edge: which rows it owns (the others go elided).
        self.owned = owned
        self.network = network or insecure(sender)
        self.edge = edge
        self.target = target
        self.address = address
        self.log = log
        self.codec = codec
        self.channel = channel
        self.epoch = epoch
        self.on_feedback = on_feedback
        self.on_refused = on_refused
        self.on_lost = on_lost
        self.limit = limit or (lambda: log.head)
        self.count_bytes = count_bytes
        self.batch_rows = batch_rows
        self.linger = linger
        # While frames are full the sender lingers longer (BUSY_FRAME_ROWS).
        self.busy_linger = linger if busy_linger is None else busy_linger
        self.last_frame_rows = 0
        self.connect_timeout = connect_timeout
        self.unreachable_is_fatal = unreachable_is_fatal
        self.wake = asyncio.Event()
        self.sent = 0  # last seq written on the current stream
        self.acked = 0  # last seq the receiver acknowledged (Level-0)
        self.welcome_seq: int | None = None  # what the receiver first asked for
        self.sent_watermark = -(2**62)
        self.sent_eos = False
        self.sent_pressure = 0  # the last Pressure.from_seq written on the current stream
        self.connected = asyncio.Event()
        self.ever_connected = False
        self.bytes_sent = 0
        self.rows_sent = 0
        self.frames_sent = 0
        self.last_frame_at = -math.inf  # clock.monotonic() of the last rows or watermark written
        self.points_sent = 0
        # Operator states: those the consumer sent ahead of its Level-1
        # points (read by the output section), and the position of the last
        # one written on the current stream (each stream gets it once).
        self.states = StateAssembler()
        self.state_sent: int | None = None
        self.last_error = ""
        self._stopped = False
        self.refused = False
        # Seed 004: the one-way latency between the two nodes' sites. Frames
        # and the feedback coming back wait this long, pipelined (a delay
        # line, not a pause per frame), so throughput is kept.
        self.delay_s = delay_s
        self._line: asyncio.Queue[tuple[float, pb.Frame]] = asyncio.Queue()
        # Seed 004's connection management: rows at or after this instant
        # go as timestamps only, until the consumer wants them whole again.
        self.idle_from: int | None = None
        self.rows_elided = 0

    @property
    def done(self) -> bool:
        """Everything, end of stream included, is delivered and acknowledged."""
        return self.log.end_of_stream and self.sent_eos and self.acked >= self.log.head

    def stop(self) -> None:
        self._stopped = True
        self.wake.set()

    async def run(self) -> None:
        started = clock.monotonic()
        backoff = 0.02
        while not self._stopped:
            try:
                await self._session()
                backoff = 0.02
            except (grpc.aio.UsageError, asyncio.InvalidStateError) as exc:
                # A write on a stream the peer already closed: a lost connection.
                self.connected.clear()
                self.last_error = str(exc)
            except grpc.aio.AioRpcError as exc:
                self.connected.clear()
                code = exc.code()
                self.last_error = f"{code.name}: {exc.details()}"
                if code is grpc.StatusCode.FAILED_PRECONDITION:
                    self.refused = True
                    log.warning("%s refused by %s: %s", self.edge, self.target, exc.details())
                    if self.on_refused is not None:
                        self.on_refused(self, exc.details() or "")
                    return
                if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED):
                    log.error("%s -> %s: %s", self.edge, self.target, self.last_error)
                    return
                if code in (grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.ABORTED):
                    log.info("%s -> %s: %s; reconnecting", self.edge, self.target, exc.details())
                    continue
                if (
                    self.unreachable_is_fatal
                    and not self.ever_connected
                    and clock.monotonic() - started > self.connect_timeout
                ):
                    raise PeerUnreachable(
                        f"cannot reach {self.target} at {self.address} after {self.connect_timeout:.1f} s "
                        f"({self.last_error})"
                    ) from None
                log.debug("%s -> %s: %s; retrying", self.edge, self.target, self.last_error)
            if self._stopped:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 0.5)

    async def _session(self) -> None:
        async with self.network.channel(self.address, self.target) as channel:
            call = pb_grpc.DataPlaneStub(channel).Push()
            self._line = asyncio.Queue()  # what a broken stream had in flight is lost, as on a wire
            writer = asyncio.create_task(self._delay_line(call)) if self.delay_s > 0 else None
            try:
                await self._stream(call)
            finally:
                if writer is not None:
                    writer.cancel()
                    with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                        await writer

    async def _stream(self, call: grpc.aio.StreamStreamCall[pb.Frame, pb.Feedback]) -> None:
        hello = pb.Hello(
            edge=self.edge,
            sender=self.sender,
            epoch=self.epoch(),
            channel=self.channel,
            layout=self.codec.fingerprint(),
        )
        await call.write(pb.Frame(hello=hello))
        welcome = await call.read()
        await asyncio.sleep(2 * self.delay_s)  # the handshake's round trip
        if welcome is grpc.aio.EOF:
            await call  # raises the status
            return
        wanted = welcome.welcome.next_seq
        has_idle = self.channel == pb.DATA and welcome.welcome.HasField("idle_from")
        self.idle_from = welcome.welcome.idle_from if has_idle else None
        if self.welcome_seq is None:
            self.welcome_seq = wanted
        point, start = self.log.start_for(self.edge, wanted)
        self.state_sent = None
        self.states = StateAssembler()
        if point is not None:
            await self._write_point(call, point)
        self.sent = start - 1
        self.acked = max(self.acked, wanted - 1)
        self.sent_eos = False
        self.sent_watermark = -(2**62)
        self.sent_pressure = 0
        self.ever_connected = True
        self.connected.set()
        reader = asyncio.create_task(self._read(call))
        try:
            await self._send(call, reader)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await reader
            self.connected.clear()

    async def _read(self, call: grpc.aio.StreamStreamCall[pb.Frame, pb.Feedback]) -> None:
        while True:
            feedback = await call.read()
            if feedback is grpc.aio.EOF:
                await call  # raises the closing status if it is an error
                return
            if self.delay_s > 0:
                asyncio.get_running_loop().call_later(self.delay_s, self._feedback, feedback)
            else:
                self._feedback(feedback)

    def _feedback(self, feedback: pb.Feedback) -> None:
        body = feedback.WhichOneof("body")
        if body == "level0":
            self.acked = max(self.acked, feedback.level0.seq)
        elif body == "interest" and self.channel == pb.DATA:
            interest = feedback.interest
            self.idle_from = interest.idle_from if interest.HasField("idle_from") else None
        self.on_feedback(self, feedback)
        self.wake.set()

    async def _write(self, call: grpc.aio.StreamStreamCall[pb.Frame, pb.Feedback], frame: pb.Frame) -> None:
        if self.delay_s > 0:
            self._line.put_nowait((clock.monotonic() + self.delay_s, frame))
        else:
            await call.write(frame)

    async def _delay_line(self, call: grpc.aio.StreamStreamCall[pb.Frame, pb.Feedback]) -> None:
        """Write each frame once its latency has passed, in order."""
        while True:
            due, frame = await self._line.get()
            wait = due - clock.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            await call.write(frame)

    async def _write_point(
        self, call: grpc.aio.StreamStreamCall[pb.Frame, pb.Feedback], point: ResyncPoint
    ) -> None:
        if point.state is not None and point.state.position != self.state_sent:
            for chunk in chunks(point.state):
                piece = pb.Frame(state=chunk_to_pb(chunk))
                await self._write(call, piece)
                self._count(piece.ByteSize())
            self.state_sent = point.state.position
        frame = pb.Frame(resync=point_to_pb(point))
        await self._write(call, frame)
        self.points_sent += 1
        self._count(frame.ByteSize())

    async def _send(
        self, call: grpc.aio.StreamStreamCall[pb.Frame, pb.Feedback], reader: asyncio.Task[None]
    ) -> None:
        log_ = self.log
        cursors = log_.edges[self.edge]
        lingered = False
        while not self._stopped:
            if reader.done():
                reader.result()  # surface the stream's error
                return
            if self.sent + 1 < cursors.cut and cursors.point is not None:
                # A Level-1 cut passed rows never sent on this stream: the
                # receiver rebuilds from the cut.
                await self._write_point(call, cursors.point)
                self.sent = cursors.cut - 1
            if self.sent < log_.first - 1:
                if self.on_lost is not None:
                    self.on_lost(self, self.sent + 1, log_.first - 1)
                else:
                    log.error(
                        "%s: %s wants seq %d but the log starts at %d; rows were lost",
                        self.edge,
                        self.target,
                        self.sent + 1,
                        log_.first,
                    )
                self.sent = log_.first - 1
            pressure = log_.pressure(self.edge) if self.channel == pb.DATA else 0
            if pressure != self.sent_pressure:
                through = log_.relief_seq if pressure else 0
                await self._write(
                    call, pb.Frame(pressure=pb.Pressure(from_seq=pressure, through_seq=through))
                )
                self.sent_pressure = pressure
            limit = self.limit()
            available = limit - self.sent
            small = 0 < available < self.batch_rows
            gap = self.busy_linger if self.last_frame_rows >= BUSY_FRAME_ROWS else self.linger
            if small and gap > 0 and not log_.end_of_stream and not lingered:
                # A partial batch leaves at least ``gap`` after the previous
                # frame (a frame costs hundreds of microseconds of gRPC at
                # each end, whatever it holds); a row after a quiet spell
                # goes at once. Then check again from the top: a Level-1
                # cut may have freed rows meanwhile (reading them now would
                # label the log's first rows with older seqs).
                wait = self.last_frame_at + gap - clock.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                    lingered = True
                    continue
            lingered = False
            if available > 0:
                last = self.sent + min(available, self.batch_rows)
                rows = log_.get(self.sent + 1, last)
                elide = False
                idle = self.idle_from
                if idle is not None and rows[-1][0] >= idle:
                    whole = bisect.bisect_left(rows, idle, key=_TS)
                    if whole > 0:  # the rows before the idle instant go whole, first
                        rows = rows[:whole]
                        last = self.sent + whole
                    else:
                        elide = True
                mask = self.owned(rows, self.sent + 1) if self.owned is not None and not elide else None
                if last < log_.head:
                    watermark = min(log_.watermark, log_.get(last + 1, last + 1)[0][0] - 1)
                else:
                    watermark = log_.watermark
                eos = last >= log_.head and log_.end_of_stream
                entered = log_.entered.oldest(self.sent + 1, last)
                await self._write_batch(call, self.sent + 1, rows, watermark, eos, elide, mask, entered)
                self.sent = last
                if self.on_sent is not None:
                    self.on_sent(self)
                continue
            watermark = log_.watermark if limit >= log_.head else self.sent_watermark
            eos = log_.end_of_stream and limit >= log_.head
            if watermark > self.sent_watermark or (eos and not self.sent_eos):
                await self._write_batch(call, self.sent + 1, [], watermark, eos)
                continue
            self.wake.clear()
            waiter = asyncio.create_task(self.wake.wait())
            await asyncio.wait([waiter, reader], return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()

    def _count(self, size: int, rows: int = 0) -> None:
        self.bytes_sent += size
        if self.count_bytes is not None:
            self.count_bytes(size, rows)

    async def _write_batch(
        self,
        call: grpc.aio.StreamStreamCall[pb.Frame, pb.Feedback],
        first: int,
        rows: Sequence[tuple[object, ...]],
        watermark: int,
        eos: bool,
        elide: bool = False,
        owned: list[bool] | None = None,
        entered: float = 0.0,
    ) -> None:
        if owned is not None and not all(owned):
            mine = [r for r, keep in zip(rows, owned, strict=True) if keep]
            batch = pb.Batch(
                first_seq=first,
                count=len(rows),
                rows=self.codec.encode(mine) if mine else b"",
                elided_ts=elided_stamps([r for r, keep in zip(rows, owned, strict=True) if not keep]),
                owned=owned_bitmap(owned),
                watermark=watermark,
                end_of_stream=eos,
                entered_unix=entered,
            )
            self.rows_elided += len(rows) - len(mine)
        elif elide:
            batch = pb.Batch(
                first_seq=first,
                count=len(rows),
                elided_ts=elided_stamps(rows),
                watermark=watermark,
                end_of_stream=eos,
            )
            self.rows_elided += len(rows)
        else:
            blob = self.codec.encode(rows) if rows else b""
            batch = pb.Batch(
                first_seq=first,
                count=len(rows),
                rows=blob,
                watermark=watermark,
                end_of_stream=eos,
                entered_unix=entered,
            )
        frame = pb.Frame(batch=batch)
        await self._write(call, frame)
        self.sent_watermark = watermark
        self.sent_eos = eos
        self._count(frame.ByteSize(), len(rows))
        self.rows_sent += len(rows)
        self.frames_sent += 1
        self.last_frame_rows = len(rows)
        self.last_frame_at = clock.monotonic()
