"""One replica of one stage: the HA protocol's state machine (the SAS paper,
Algorithms 1 and 2; ha-protocol.md).

Primary and secondary run the same machinery: input section, operator
section (the stage's CQL program) and output log. They differ in what the
node around them does with it: a primary's log is streamed to the consumers;
a secondary's log is the paper's output queue, trimmed by the consumers'
acknowledgements and flushed to them on takeover.

A replica that lacks inputs its state depends on (a secondary after rows
were dropped unsent, a fresh secondary, a new primary under UB) gets a
:class:`~semiactive.ha.resync.ResyncPoint` from its producer. It then rebuilds: empty
state, inputs from the point's cut, processing without emitting up to the
point's position and time, the point's counters and output seq; from there
it emits exactly what the primary emits.

Pure: no sockets, no clock. The node daemon and the in-memory simulation
drive it the same way.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping

from semiactive.ha.output_log import UNBOUNDED, OutputLog
from semiactive.ha.resync import ResyncPoint, Snapshot, SnapshotLog, StateBytes, StateSnapshot
from semiactive.ha.stage import HaMode, StageSpec
from semiactive.node.cql import plan
from semiactive.node.engine import state
from semiactive.node.engine.columnar.shape import JoinQuery, VectorQuery, recognize
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine
from semiactive.node.engine.state_codec import StateFormatError
from semiactive.node.sections.codec import RowCodec
from semiactive.node.sections.input import EdgeInput, InputSection
from semiactive.node.sections.mqo import MqoSection
from semiactive.node.sections.operator import (
    ColumnarSection,
    ColumnarWindowSection,
    CostSchedule,
    OperatorSection,
    columnar_reason,
)
from semiactive.node.sections.record_rows import RecordLayout


class Mode(enum.Enum):
    PRIMARY = "primary"
    SECONDARY = "secondary"
    FENCED = "fenced"


def batch_size(mode: HaMode, configured: int) -> int:
    """The backup batch size B a consumer's HA mode asks of its producers:
    AS ships every row (1), SAS ``configured`` rows (A-SAS: its initial B), UB and none nothing."""
    if mode is HaMode.AS:
        return 1
    if mode in (HaMode.SAS, HaMode.ASAS):
        return configured
    return UNBOUNDED


#: Takes an engine's state (``semiactive.node.engine.state.capture``) and hands the
#: bytes, or the error that stopped it, to the callback: at once, or later
#: (the node daemon captures in a forked child so that its event loop runs
#: on while a large state is written).
StateCapture = Callable[[Engine, Callable[[StateBytes | BaseException], None]], None]


class CaptureLost(RuntimeError):
    """A capture ended without a state for a reason outside the state (its
    forked child was killed: the kernel's OOM killer, an operator): taken
    again at the next snapshot that is due. Any other error from a capture
    is the state's (one the codec refuses) and fails the replica."""


def columnar_stage_reason(stage: StageSpec, *, snapshots: bool = False) -> str | None:
    """Why ``stage`` keeps rows end to end; None when it runs on record
    blocks (:class:`ColumnarSection`, :class:`ColumnarWindowSection`): one
    stream input not routed to partitions, no emulated cost, a program
    :func:`columnar_reason` takes (``snapshots``: snapshot_rows is set)."""
    if stage.program is None or stage.output is None:
        return "an MQO stage"
    if len(stage.inputs) != 1:
        return "more than one input edge"
    edge = stage.inputs[0]
    if edge.kind is not plan.Kind.STREAM or edge.routing is not None:
        return "a relation or partition-routed input"
    if stage.cost_ms or any(cost for _, cost in stage.cost_schedule):
        return "an emulated operator cost (counted per row)"
    return columnar_reason(stage.program, stage.output, snapshots=snapshots)


def capture_now(engine: Engine, done: Callable[[StateBytes | BaseException], None]) -> None:
    done(state.capture(engine))


class StageReplica:
    def __init__(
        self,
        node: str,
        stage: StageSpec,
        mode: Mode,
        consumer_batch: Mapping[str, int],
        capacity: int = 1_000_000,
        run_rows: int | None = None,
        snapshot_rows: int = 0,
        snapshot_phase: int = 0,
        capture: StateCapture = capture_now,
        columnar: bool = False,
    ) -> None:
        """``consumer_batch``: per output edge id, the batch size B its
        consumer's HA mode asks for. ``run_rows``: at most about that many
        input rows per :meth:`run` (whole instants; :attr:`more` says when
        rows were left), so that a node can answer heartbeats between runs;
        None takes everything ready. ``snapshot_rows``: when the rows a
        Level-1 cut would keep reach that many, capture the operator state
        so that the cut can pass them (0: never). ``snapshot_phase``: the
        first capture comes that many rows early. The partitions of a stage
        count the same input positions (rows routed to the others
        included), so without it they would all capture at once.
        ``capture``: how a state is taken (:data:`StateCapture`); one at a
        time, and the cut waits for it. ``columnar``: run the stage on
        record blocks if :func:`columnar_stage_reason` allows it."""
        assert (stage.program is not None or stage.mqo is not None) and stage.output is not None
        self.node = node
        self.stage = stage
        self.mode = mode
        self.consumer_batch = dict(consumer_batch)
        self.capacity = capacity
        self.run_rows = run_rows
        self.snapshot_rows = snapshot_rows
        self.snapshot_phase = snapshot_phase
        self.capture = capture
        self.columnar = columnar and columnar_stage_reason(stage, snapshots=bool(snapshot_rows)) is None
        # A windowed aggregate keeps its state in the columnar engine.
        self._window_section = (
            self.columnar
            and stage.program is not None
            and stage.output is not None
            and _windowed(recognize(stage.program.queries[stage.output]))
        )
        self.captures = 0  # tokens of captures taken (0 means none)
        self.captures_lost = 0
        self.capture_error: BaseException | None = None
        self.warmup: ResyncPoint | None = None
        self.resyncs = 0
        self.rewind: set[str] = set()  # input edges whose producers must restart from next_seq
        # Per input edge, the seq its pressed producer holds from (Pressure
        # frames); and whether a capture is due for the latest of them.
        self.pressure: dict[str, int] = {}
        self._answered: dict[str, int] = {}  # per edge, the last from_seq a capture was due for
        self._through: dict[str, int] = {}  # per pressed edge, the seq to process before capturing
        self._relief = False
        self.log = OutputLog(self.capacity)
        for edge in stage.outputs:
            self.log.add_edge(edge.id, self.consumer_batch.get(edge.id, UNBOUNDED))
        self._build()

    def _build(self) -> None:
        """Fresh input and operator sections (and snapshots)."""
        stage = self.stage
        assert stage.output is not None
        edges = [
            EdgeInput(e.id, e.stream, e.index, RowCodec(e.schema, e.kind), drops_elided=e.routing is not None)
            for e in stage.inputs
        ]
        self.inputs = InputSection(edges, exact=True)
        cost = CostSchedule(stage.cost_ms, list(stage.cost_schedule))
        self.operator: OperatorSection | ColumnarWindowSection | MqoSection
        if self.columnar:
            assert stage.program is not None
            edge = edges[0]
            edge.layout = RecordLayout(edge.codec)
            out = stage.outputs[0] if stage.outputs else None
            schema = plan.resolve(stage.program.queries[stage.output]).schema
            out_layout = RecordLayout(RowCodec(out.schema if out is not None else schema, plan.Kind.STREAM))
            section = ColumnarWindowSection if self._window_section else ColumnarSection
            self.operator = section(stage.program, stage.output, edge.layout, out_layout)
        elif stage.mqo is not None:
            self.operator = MqoSection(stage.mqo, cost)
        else:
            assert stage.program is not None
            self.operator = OperatorSection(stage.program, stage.output, cost, lineage=True)
        self.snapshots = SnapshotLog()
        self.captured: StateSnapshot | None = None  # the latest operator state captured or restored
        self.capturing: tuple[int, int] | None = None  # (token, position) of a capture being taken
        # (low, out_seq) of the first snapshot with the latest low: the
        # output seq consumers must have processed for our cut to reach it.
        self._low_since = (0, 0)

    # -- input ------------------------------------------------------------------------

    def receive(self, edge: str, first_seq: int, rows: list[Element], watermark: int, eos: bool) -> int:
        """Rows from a producer (data or backup channel). Raises
        :class:`SeqGapError` if rows are missing and no resync point covers
        them."""
        if self.mode is Mode.FENCED:
            return 0
        return self.inputs.by_name[edge].accept_rows(first_seq, rows, watermark, eos)

    def receive_point(self, edge: str, point: ResyncPoint) -> bool:
        """A resync point sent ahead of rows from its cut. Applied when this
        replica cannot continue without it (its next row is before the cut);
        return whether it was applied."""
        current = self.inputs.by_name[edge]
        if current.next_seq >= point.edge_cut.get(edge, 0):
            return False
        self.resync(point)
        return True

    def resync(self, point: ResyncPoint) -> None:
        """Rebuild from ``point``. A state it carries that is not one of this
        program raises :class:`~semiactive.node.engine.state_codec.StateFormatError`,
        and the replica is left as it was."""
        before = (self.inputs, self.operator, self.snapshots, self.captured, self.capturing)
        self._build()
        if point.state is not None:
            try:
                if not isinstance(self.operator, OperatorSection):
                    raise StateFormatError("an MQO or columnar window stage has no state snapshots")
                state.restore(self.operator.engine, point.state.data)
            except ValueError:
                self.inputs, self.operator, self.snapshots, self.captured, self.capturing = before
                raise
            self.captured = point.state
        self.log.reset(point.out_seq)
        self.inputs.restart(point.cut_position, point.edge_cut)
        # Other input edges may already have delivered rows past their cut:
        # their producers must start again from the cut.
        self.rewind = {e.edge for e in self.inputs.edges} if len(self.inputs.edges) > 1 else set()
        self.warmup = point
        self.resyncs += 1
        if point.cut_position > point.position:
            self._finish_warmup()

    def press(self, edge: str, from_seq: int, through_seq: int = 0) -> None:
        """The producer of ``edge`` is pressed: this replica's cut holds its
        log from ``from_seq`` (0: no longer pressed). Capture the state once
        ``edge`` has been processed through ``through_seq`` (the output seq
        of the producer's newest state, so that this one capture lets the
        producer's cut reach it) and a row is past the latest state, at once
        if the producer is stopped, whatever :attr:`snapshot_rows` says.
        Each later ``from_seq`` (still pressed after our cut moved) asks for
        one more."""
        if from_seq:
            self._relief = self._relief or self._answered.get(edge) != from_seq
            self.pressure[edge] = self._answered[edge] = from_seq
            self._through[edge] = through_seq
        else:
            self.pressure.pop(edge, None)
            self._through.pop(edge, None)
            if not self.pressure:
                self._relief = False
                self.log.pressed = False

    def _through_reached(self) -> bool:
        """Every pressed edge has been processed through the producer's seq."""
        by_name = self.inputs.by_name
        return all(by_name[edge].handed >= seq for edge, seq in self._through.items())

    def _forward_pressure(self, usable: Snapshot | None) -> None:
        """Pass a producer's pressure on to our consumers when they, not our
        own state, hold our cut back: by a quarter of a log or more between
        the cut they allow (the usable snapshot's) and the latest snapshot's.
        Consumers always lag a little; pressing them for that would only
        make them capture for nothing."""
        latest = self.snapshots.latest()
        pressed = (
            bool(self.pressure)
            and latest is not None
            and (usable is None or (latest.low - usable.low) * 4 >= self.capacity)
            # Consumers whose cuts are past our newest state's output hold
            # nothing: our own capture, still being taken, holds the cut.
            # Pressing them at each new cut of theirs meanwhile made Linear
            # Road's balance stage capture up to 8 times per pressure.
            and self.log.needed_from() <= self._low_since[1]
        )
        if (
            pressed
            and not self.log.pressed
            and self._relief
            and self._takes_snapshots
            and self._through_reached()
        ):
            # Our own capture for this pressure is about to start: press the
            # consumers once it has, through its output seq, or they would
            # capture twice (for our old state, then for the new one). One
            # that waits for rows not processed yet (which a bad peer could
            # make forever) does not hold them.
            pressed = False
        self.log.pressed = pressed
        self.log.relief_seq = self._low_since[1] if pressed else 0

    @property
    def _takes_snapshots(self) -> bool:
        return bool(self.snapshot_rows) and isinstance(self.operator, OperatorSection)

    # -- processing ---------------------------------------------------------------------

    def run(self) -> int:
        """Process what the inputs allow; return the number of input rows."""
        if self.mode is Mode.FENCED:
            return 0
        if self.capture_error is not None:
            raise self.capture_error
        count = 0
        point = self.warmup
        if point is not None:
            rows, watermark = self.inputs.take(point.position, self.run_rows)
            count = sum(len(r) for r in rows.values())
            reached = self.inputs.position >= point.position
            target = point.time if reached else min(watermark, point.time)
            if rows or target > self.operator.time:
                self.operator.run(rows, target)  # rebuilding: outputs are the primary's, already sent
            if not reached:
                return count
            self._finish_warmup()
        rows, watermark = self.inputs.take(max_rows=self.run_rows)
        count += sum(len(r) for r in rows.values())
        if rows or watermark > self.operator.time:
            out = self.operator.run(rows, watermark)
            self.log.append(out, watermark, self.inputs.entered)
            for edge in self.log.edges:
                self.log.take_backup(edge)
            self._snapshot()
        elif self._relief and self.snapshot_rows:
            self._snapshot()  # no new input (the pressed producer may be stopped): capture now
        if self.inputs.end_of_stream and not self.inputs.backlog and not self.log.end_of_stream:
            self.log.finish(self.inputs.watermark())
        return count

    def _finish_warmup(self) -> None:
        point = self.warmup
        assert point is not None
        engine = self.operator.engine
        if point.time > engine.time:
            engine.advance(point.time)
        engine.restore_counters(point.counters)
        self.warmup = None
        self.log.watermark = max(self.log.watermark, point.time)
        self._snapshot()

    def _snapshot(self) -> None:
        position = self.inputs.position
        engine = self.operator.engine
        low = engine.state_low()
        cut = position + 1 if low is None else min(low, position + 1)
        # The latest state: the one being captured, else the one held.
        token, latest = self.capturing or (0, None if self.captured is None else self.captured.position)
        due = self.snapshot_rows
        if latest is None or cut > latest:
            token = 0  # the state no longer covers rows the cut would keep
            latest = None
            due -= self.snapshot_phase
        else:
            cut = latest + 1
        relieving = self._relief and self._through_reached()
        if relieving and position + 1 <= cut:
            # The latest state (held or being captured) covers every row
            # processed, those the pressure asked for included.
            self._relief = relieving = False
        start = self._takes_snapshots and self.capturing is None and (position + 1 - cut >= due or relieving)
        if start:
            self._relief = self._relief and not self._through_reached()
            self.captures += 1
            token, latest, cut = self.captures, position, position + 1
            self.capturing = (token, position)
        if cut != self._low_since[0]:
            self._low_since = (cut, self.log.head)
        held = self.captured if latest is not None and not token else None
        self.snapshots.record(
            Snapshot(position, self.log.head, cut, engine.counters(), self.operator.time, held, token)
        )
        if start:
            assert isinstance(self.operator, OperatorSection)
            self.capture(self.operator.engine, lambda result: self._captured(token, position, result))

    def _captured(self, token: int, position: int, result: StateBytes | BaseException) -> None:
        """Capture ``token`` (of the state after ``position``) ended. A
        replica rebuilt meanwhile has other snapshots: it is ignored then."""
        if self.capturing != (token, position):
            return
        self.capturing = None
        if isinstance(result, CaptureLost):
            self.captures_lost += 1
            self.snapshots.abandon(token)  # the cut stays where the previous state put it
            return
        if isinstance(result, BaseException):
            self.capture_error = result  # raised by the next run, as a capture in place would
            return
        self.captured = StateSnapshot(position, result)
        self.snapshots.fill(token, self.captured)

    @property
    def more(self) -> bool:
        """The last run left rows it could have processed."""
        return self.inputs.more

    @property
    def warming_up(self) -> bool:
        return self.warmup is not None

    # -- acknowledgements ---------------------------------------------------------------

    def level0(self, edge: str) -> int:
        """Level-0 for an input edge: received up to this seq."""
        return self.inputs.by_name[edge].last_seq

    def level1(self) -> ResyncPoint | None:
        """Level-1 for every input edge (one point covers them all): the cut
        below which producers may drop rows.

        The outputs this replica must still be able to reproduce start where
        its consumers' own cuts are (what their rebuilding would need), not
        where their Level-0 is: for a stateless consumer or a sink the two
        coincide; for a windowed one the cut lags by the window. Cuts thus
        compose down the chain, which lets the cluster survive a failure
        during the recovery of an adjacent stage."""
        if self.warmup is not None:
            return None
        snap = self.snapshots.usable(self.log.needed_from() - 1)
        self._forward_pressure(snap)
        if snap is None:
            return None
        edge_cut = self.inputs.edge_cut(snap.low)
        self.inputs.forget_before(snap.low)
        return ResyncPoint(
            position=snap.position,
            out_seq=snap.out_seq,
            cut_position=snap.low,
            edge_cut=edge_cut,
            counters=snap.counters,
            time=snap.time,
            state=snap.state,
        )

    def forget_unneeded(self) -> None:
        """What a secondary does instead of sending Level-1: forget the
        snapshots and the input positions only older cuts would need. Its
        consumers' acknowledgements reach it too (the notices), so it knows
        the cut it would send; without this its table of input positions
        grows by an entry per input row for the whole run."""
        self.level1()

    def acknowledged(self, edge: str, seq: int, point: ResyncPoint | None = None) -> None:
        """A consumer's Level-0 and/or Level-1 for one of our output edges."""
        self.log.acknowledge(edge, seq, point)

    # -- takeover -------------------------------------------------------------------------

    def promote(self) -> None:
        """Secondary becomes primary (Algorithm 2 lines 12-20): its output
        queue becomes the log the consumers are fed from."""
        self.mode = Mode.PRIMARY

    def fence(self) -> None:
        self.mode = Mode.FENCED


def _windowed(query: VectorQuery | JoinQuery) -> bool:
    """Whether a columnar stage's query keeps a window (an aggregate)."""
    return isinstance(query, VectorQuery) and query.aggregate is not None
