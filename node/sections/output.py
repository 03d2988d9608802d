"""The output section (seed 002, 3.1): the stage's output log and one
:class:`~node.transport.EdgeSender` per downstream replica it feeds.

Without HA a consumer's Level-0 acknowledgement releases rows from the log;
the log keeps everything unacknowledged, so a consumer that reconnects gets
the rows it missed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from ha.output_log import OutputLog
from node.codec import RowCodec
from node.engine.elements import Element
from node.metrics import NodeMetrics
from node.transport import EdgeSender
from semiactive.config import ClusterConfig
from semiactive.topology import Stage, Topology
from semiactive.wire import dataplane_pb2 as pb


class OutputSection:
    def __init__(
        self,
        node: str,
        stage: Stage,
        topology: Topology,
        addresses: Mapping[str, str],
        metrics: NodeMetrics,
    ) -> None:
        cfg: ClusterConfig = topology.config
        assert stage.schema is not None
        self.node = node
        self.metrics = metrics
        self.codec = RowCodec(stage.schema, stage.kind)
        self.log = OutputLog(capacity=cfg.queue_rows)
        self.epoch = 0
        self.room = asyncio.Event()
        self.room.set()
        self.senders: list[EdgeSender] = []
        for edge in stage.outputs:
            consumer = topology.stages[edge.consumer]
            self.log.add_edge(edge.id)
            self.senders.append(
                EdgeSender(
                    sender=node,
                    edge=edge.id,
                    target=consumer.primary,
                    address=addresses[consumer.primary],
                    log=self.log,
                    codec=self.codec,
                    channel=pb.DATA,
                    epoch=lambda: self.epoch,
                    on_feedback=self._on_feedback,
                    batch_rows=cfg.batch_rows,
                    linger=cfg.linger_ms / 1000,
                    connect_timeout=cfg.connect_timeout_ms / 1000,
                )
            )

    def append(self, rows: list[Element], watermark: int) -> None:
        if rows:
            self.log.append(rows, watermark)
            self.metrics.tuples_out.inc(len(rows))
        elif watermark > self.log.watermark:
            self.log.watermark = watermark
        else:
            return
        self._changed()

    def finish(self, watermark: int) -> None:
        self.log.finish(watermark)
        self._changed()

    def _changed(self) -> None:
        if self.log.full:
            self.room.clear()
        self.metrics.log_rows.set(self.log.retained)
        for sender in self.senders:
            sender.wake.set()

    def _on_feedback(self, sender: EdgeSender, feedback: pb.Feedback) -> None:
        if feedback.WhichOneof("body") == "level0":
            self.log.release(sender.edge, feedback.level0.seq + 1)
            if not self.log.full:
                self.room.set()
            self.metrics.log_rows.set(self.log.retained)

    async def wait_room(self) -> None:
        while self.log.full:
            self.room.clear()
            await self.room.wait()

    @property
    def done(self) -> bool:
        return self.log.end_of_stream and all(s.done for s in self.senders)

    def bytes_sent(self) -> int:
        return sum(s.bytes_sent for s in self.senders)
