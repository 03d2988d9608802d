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
from semiactive.node.engine.columnar.batch import ColumnBatch
from semiactive.node.engine.columnar.shape import JoinQuery, NotVectorized, recognize
from semiactive.node.engine.columnar.vector_engine import VectorEngine
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine
from semiactive.node.sections.codec import OutOfRangeError
from semiactive.node.sections.record_rows import RecordLayout, RecordRows


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

    def push(self, name: str, rows: Sequence[Element]) -> None: ...


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

    def _advance(self, watermark: int) -> Sequence[Element]:
        raise NotImplementedError

    def run(self, inputs: Mapping[str, Sequence[Element]], watermark: int) -> Sequence[Element]:
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


# Below this many rows a block goes through the row engine: the columnar
# engine costs about 0.1 ms a call whatever the batch (bench/columnar_wire.py:
# at batches of 100 it is slower than rows), and a chain at 1,000 tuples/s
# on blocks of a few rows had a p99 latency of 400-450 ms against 31-47 ms
# on rows (docs/lab/columnar.md).
MIN_COLUMN_ROWS = 64

_COLUMN_TYPES = (plan.TypeName.INTEGER, plan.TypeName.FLOAT, plan.TypeName.CHAR)


def columnar_reason(program: plan.Program, output: str, *, snapshots: bool = False) -> str | None:
    """Why the stage computing ``output`` keeps the row engine; None when
    the columnar engine runs it on record blocks: selections and
    projections of one stream (:class:`ColumnarSection`), or an aggregate
    (with or without GROUP BY) over a window of them
    (:class:`ColumnarWindowSection`; not with state ``snapshots``, which
    only the row engine captures), over columns that travel as records
    (integer, float, char)."""
    try:
        query = recognize(program.queries[output])
    except NotVectorized as exc:
        return str(exc)
    if isinstance(query, JoinQuery):
        return "a join of windows (on columns in one process only)"
    if query.aggregate is not None and snapshots:
        return "a windowed aggregate with snapshot_rows (state snapshots are the row engine's)"
    decl = program.inputs.get(query.input)
    if decl is None or decl.kind is not plan.Kind.STREAM:
        return "not a stream of the program's inputs"
    root = program.queries[output]
    columns = list(decl.schema.columns) + list(plan.resolve(root).schema.columns)
    if any(c.type.name not in _COLUMN_TYPES for c in columns):
        return "a byte column (no record form)"
    # Text is only passed on, grouped by or compared (as the wire's bytes,
    # vector_exprs): what recognize takes computes nothing else with it.
    return None


def as_records(columns: ColumnBatch, layout: RecordLayout) -> Sequence[Element]:
    """A stage's output columns as a block of ``layout``'s records; as rows
    where an integer does not fit int64, refused where the row path refuses
    it: at sending."""
    try:
        return layout.view(layout.columns.encode(columns), 0, len(columns))
    except OutOfRangeError:
        return columns.to_elements()


class ColumnarSection(OperatorSection):
    """:func:`columnar_reason`'s stages, run on record blocks: a block's
    columns go through the columnar engine and its output is written as
    records, with no row made. Rows (elements, a block of fewer than
    :data:`MIN_COLUMN_ROWS`, one with a NULL or text that is not UTF-8) go
    through the row engine, which also keeps what HA reads of a section
    (its time, counters, snapshots): the program holds no state, so the
    two engines need only share the time."""

    def __init__(self, program: plan.Program, output: str, layout: RecordLayout, out: RecordLayout) -> None:
        super().__init__(program, output, lineage=True)
        self.vector = VectorEngine(program, [output])
        self.layout = layout
        self.out = out
        self.blocks = 0  # runs that took the columnar path

    def run(self, inputs: Mapping[str, Sequence[Element]], watermark: int) -> Sequence[Element]:
        ((name, rows),) = inputs.items() if inputs else ((None, []),)
        batch = None
        if isinstance(rows, RecordRows) and rows.layout is self.layout and len(rows) >= MIN_COLUMN_ROWS:
            batch = self.layout.columns.columns(rows.records, rows.first_seq)
        if batch is None or name is None:
            if isinstance(rows, RecordRows):
                inputs = {name: rows.rows()}  # type: ignore[dict-item]
            out = super().run(inputs, watermark)
            self._catch_up(self.vector, self.engine.time)
            return out
        started = time.perf_counter()
        self._catch_up(self.vector, self.engine.time)
        self.vector.push(name, batch)
        result: Sequence[Element] = []
        if watermark > self.vector.time:
            result = as_records(self.vector.advance(watermark)[self.output], self.out)
        self._catch_up(self.engine, self.vector.time)
        self.blocks += 1
        self.rows_in += len(rows)
        self.busy_s += time.perf_counter() - started
        return result

    @staticmethod
    def _catch_up(engine: Engine | VectorEngine, time: int) -> None:
        if time > engine.time:
            engine.advance(time)


class ColumnarWindowSection(TimedSection):
    """:func:`columnar_reason`'s windowed stages: an aggregate over a window
    of one stream, run on the columnar engine alone, with
    lineage. Every block goes through it, records or rows, large or small
    (a NULL block is decoded, and refused, as the row path refuses it),
    since the window's state lives there only; the engine answers what HA
    asks of a section's engine (its time, ``state_low``, counters). Not an
    :class:`OperatorSection`: :class:`~semiactive.ha.replica.StageReplica`
    takes no state snapshot of it (its Level-1 cut follows the window)."""

    def __init__(self, program: plan.Program, output: str, layout: RecordLayout, out: RecordLayout) -> None:
        self.program = program
        self.output = output
        self.cost = CostSchedule()
        self.engine: VectorEngine = VectorEngine(program, [output], lineage=True)
        self.layout = layout
        self.out = out
        self.width = len(layout.codec.schema.columns)
        self.rows_in = 0
        self.busy_s = 0.0
        self.blocks = 0  # runs that took a block of records as it came

    def run(self, inputs: Mapping[str, Sequence[Element]], watermark: int) -> Sequence[Element]:
        started = time.perf_counter()
        for name, rows in inputs.items():
            if not rows:
                continue
            batch = None
            if isinstance(rows, RecordRows) and rows.layout is self.layout:
                batch = self.layout.columns.columns(rows.records, rows.first_seq)
                self.blocks += batch is not None
            if batch is None:
                elements = rows.rows() if isinstance(rows, RecordRows) else rows
                batch = self.layout.columns.text_as_bytes(ColumnBatch.from_elements(elements, self.width))
            self.engine.push(name, batch)
            self.rows_in += len(rows)
        result: Sequence[Element] = []
        if watermark > self.engine.time:
            columns = self.engine.advance(watermark)[self.output]
            if len(columns):
                result = as_records(columns, self.out)
        self.busy_s += time.perf_counter() - started
        return result
