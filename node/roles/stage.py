"""The stage role: input section -> operator section -> output section.

One task runs the operator section whenever rows or time arrive. Pressure
travels upstream: a full output log pauses this task; an input backlog over
``queue_rows`` pauses the reading of input streams (see InboundEdgeSession).
"""

from __future__ import annotations

import asyncio
import logging

from node.sections.input import InputSection
from node.sections.operator import OperatorSection
from node.sections.output import OutputSection

log = logging.getLogger(__name__)


class StageRole:
    def __init__(
        self, inputs: InputSection, operator: OperatorSection, output: OutputSection, queue_rows: int
    ) -> None:
        self.inputs = inputs
        self.operator = operator
        self.output = output
        self.queue_rows = queue_rows
        self.wake = asyncio.Event()
        self.room = asyncio.Event()
        self.room.set()
        self.finished_input = False

    async def on_rows(self) -> None:
        """Called by the input streams after each batch; blocks them while
        the backlog is too long."""
        self.wake.set()
        while self.inputs.backlog > self.queue_rows:
            self.room.clear()
            await self.room.wait()

    async def run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            await self.output.wait_room()
            rows, watermark = self.inputs.take()
            self.room.set()
            if rows or watermark > self.operator.time:
                out = self.operator.run(rows, watermark)
                self.output.append(out, watermark)
            if self.inputs.end_of_stream and not self.inputs.backlog and not self.finished_input:
                self.finished_input = True
                self.output.finish(self.inputs.watermark())
                log.info("end of stream at watermark %d", self.inputs.watermark())
            await asyncio.sleep(0)
