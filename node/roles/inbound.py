"""One accepted input stream, bridging the transport to the input section."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc

from node.metrics import NodeMetrics
from node.sections.input import EdgeInput, SeqGapError
from node.transport import FeedbackChannel, Rejected
from semiactive.wire import dataplane_pb2 as pb


class InboundEdgeSession:
    """Feeds an :class:`EdgeInput` from Push streams (one at a time in normal
    operation; a reconnecting producer may briefly overlap, which the seq
    dedup absorbs) and sends Level-0 acknowledgements back."""

    def __init__(
        self,
        edge: EdgeInput,
        metrics: NodeMetrics,
        on_rows: Callable[[], Awaitable[None]],
    ) -> None:
        self.edge = edge
        self.metrics = metrics
        self.on_rows = on_rows
        self.feedback: list[FeedbackChannel] = []
        self.acked = 0

    @property
    def next_seq(self) -> int:
        return self.edge.next_seq

    def attach(self, feedback: FeedbackChannel) -> None:
        self.feedback.append(feedback)

    def detach(self, feedback: FeedbackChannel) -> None:
        if feedback in self.feedback:
            self.feedback.remove(feedback)

    async def on_frame(self, frame: pb.Frame) -> None:
        if frame.WhichOneof("body") != "batch":
            raise Rejected(grpc.StatusCode.INVALID_ARGUMENT, f"unexpected {frame.WhichOneof('body')} frame")
        batch = frame.batch
        before = self.edge.duplicates
        try:
            new = self.edge.accept(
                batch.first_seq, batch.count, batch.rows, batch.watermark, batch.end_of_stream
            )
        except SeqGapError as exc:
            raise Rejected(grpc.StatusCode.FAILED_PRECONDITION, str(exc)) from None
        if new:
            self.metrics.tuples_in.labels(self.edge.edge).inc(new)
        if self.edge.duplicates > before:
            self.metrics.duplicates.labels(self.edge.edge).inc(self.edge.duplicates - before)
        if batch.end_of_stream:
            self.ack()
        await self.on_rows()

    def ack(self) -> None:
        """Send Level-0 (everything up to the last seq received)."""
        seq = self.edge.last_seq
        if seq == self.acked and not self.edge.end_of_stream:
            return
        self.acked = seq
        message = pb.Feedback(level0=pb.Level0(seq=seq))
        for channel in self.feedback:
            channel.send(message)
