"""The operator section (the SAS paper, 3.1): the stage's compiled CQL program.

Pure: takes rows per input stream and a watermark, returns the output
stream's new rows. A :class:`CostSchedule` burns CPU per input row, to
emulate a heavier operator (the SAS paper, experiment 5) without changing any
result; the cost of a row depends on its timestamp, not on the wall clock,
so a secondary reprocessing a row pays what the primary paid.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Mapping, Sequence
from typing import Protocol

from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine


class CostSchedule:
    """Milliseconds of CPU per input row: ``base_ms`` before the first
    phase, then each phase's ``cost_ms`` from its event time ``at_s`` on."""

    def __init__(self, base_ms: float = 0.0, phases: Sequence[tuple[float, float]] = ()) -> None:
        self.base_ms = base_ms
        self.starts = [round(at_s * 1000) for at_s, _ in phases]
        self.costs = [cost_ms for _, cost_ms in phases]

    def __bool__(self) -> bool:
        return bool(self.base_ms or any(self.costs))

    def total_ms(self, rows: Sequence[Element]) -> float:
        if not self.starts:
            return self.base_ms * len(rows)
        total = 0.0
        for row in rows:
            k = bisect.bisect_right(self.starts, row[0]) - 1
            total += self.costs[k] if k >= 0 else self.base_ms
        return total


class _Pushable(Protocol):
    @property
    def time(self) -> int: ...

    def push(self, name: str, rows: list[Element]) -> None: ...


class TimedSection:
    """What every operator section shares: push each input's rows into
    ``engine``, advance it to the watermark, burn the :class:`CostSchedule`'s
    CPU and count rows and busy time for the metrics."""

    engine: _Pushable
    cost: CostSchedule
    rows_in: int
    busy_s: float

    @property
    def time(self) -> int:
        return self.engine.time

    def _advance(self, watermark: int) -> list[Element]:
        raise NotImplementedError

    def run(self, inputs: Mapping[str, list[Element]], watermark: int) -> list[Element]:
        started = time.perf_counter()
        count = 0
        cost_ms = 0.0
        for name, rows in inputs.items():
            if rows:
                self.engine.push(name, rows)
                count += len(rows)
                if self.cost:
                    cost_ms += self.cost.total_ms(rows)
        out = self._advance(watermark)
        if cost_ms:
            deadline = started + cost_ms / 1000
            while time.perf_counter() < deadline:
                pass
        self.rows_in += count
        self.busy_s += time.perf_counter() - started
        return out


class OperatorSection(TimedSection):
    def __init__(
        self,
        program: plan.Program,
        output: str,
        cost: CostSchedule | None = None,
        lineage: bool = False,
    ) -> None:
        self.program = program
        self.output = output
        self.cost = cost or CostSchedule()
        self.engine: Engine = Engine(program, [output], lineage=lineage)
        self.rows_in = 0
        self.busy_s = 0.0

    def _advance(self, watermark: int) -> list[Element]:
        return self.engine.advance(watermark)[self.output] if watermark > self.engine.time else []
