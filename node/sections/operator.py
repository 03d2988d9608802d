"""The operator section (seed 002, 3.1): the stage's compiled CQL program.

Pure: takes rows per input stream and a watermark, returns the output
stream's new rows. ``cost_ms`` burns that much CPU per input row, to emulate
a heavier operator (seed 002, experiment 5) without changing any result.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from node.cql import plan
from node.engine.elements import Element
from node.engine.engine import Engine


class OperatorSection:
    def __init__(
        self, program: plan.Program, output: str, cost_ms: float = 0.0, lineage: bool = False
    ) -> None:
        self.program = program
        self.output = output
        self.cost_ms = cost_ms
        self.engine = Engine(program, [output], lineage=lineage)
        self.rows_in = 0
        self.busy_s = 0.0

    @property
    def time(self) -> int:
        return self.engine.time

    def run(self, inputs: Mapping[str, list[Element]], watermark: int) -> list[Element]:
        started = time.perf_counter()
        count = 0
        for name, rows in inputs.items():
            if rows:
                self.engine.push(name, rows)
                count += len(rows)
        out = self.engine.advance(watermark)[self.output] if watermark > self.engine.time else []
        if self.cost_ms and count:
            deadline = started + count * self.cost_ms / 1000
            while time.perf_counter() < deadline:
                pass
        self.rows_in += count
        self.busy_s += time.perf_counter() - started
        return out
