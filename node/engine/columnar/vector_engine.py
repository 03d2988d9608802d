"""The columnar engine: a program's vectorized queries over column batches.

Same contract as the row engine (:class:`semiactive.node.engine.engine.Engine`):
inputs are pushed in ts order, :meth:`VectorEngine.advance` says they are
complete up to a watermark and returns what each requested query produced
up to it, element for element what the row engine returns. It runs only
programs whose requested queries are all recognized (:mod:`.shape`). Its
outputs carry lineage 0 (as the row engine's without lineage tracking).
With ``lineage=True`` it answers what an HA stage asks of an engine
(:meth:`VectorEngine.state_low`, counters).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from semiactive.node.cql import plan
from semiactive.node.engine.columnar.batch import UNREAD, Array, ColumnBatch, Int64s, concat
from semiactive.node.engine.columnar.change_aggregate import ChangeAggregate
from semiactive.node.engine.columnar.grouped_window_aggregate import GroupedEvaluated, GroupedWindowAggregate
from semiactive.node.engine.columnar.join_windows import (
    Arrivals,
    CountWindow,
    JoinWindow,
    SlidingCountWindow,
    TimeWindow,
)
from semiactive.node.engine.columnar.relation_stream import RelationStream
from semiactive.node.engine.columnar.shape import (
    Chain,
    JoinQuery,
    JoinSide,
    NotVectorized,
    VectorQuery,
    WindowedAggregate,
    recognize,
)
from semiactive.node.engine.columnar.vector_exprs import INT64, columns_read, evaluate
from semiactive.node.engine.columnar.window_aggregate import Evaluated, WindowAggregate
from semiactive.node.engine.columnar.window_join import Keep, WindowJoin, net_changes
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import BEFORE_TIME, EvaluationError, LateInputError, UnsortedInputError


class _Query:
    def __init__(self, query: VectorQuery, lineage: bool = False) -> None:
        self.query = query
        self.lineage = lineage
        spec = query.aggregate
        self.window: WindowAggregate | None = None
        self.grouped: GroupedWindowAggregate | None = None
        self.groups: dict[tuple[object, ...], tuple[object, ...]] = {}  # key -> its row, grouped
        if spec is not None and spec.group_by:
            self.grouped = GroupedWindowAggregate(
                spec.calls,
                len(spec.group_by),
                rows=spec.rows,
                range_ms=spec.range_ms,
                slide=spec.slide,
                partition=spec.partition,
                lineage=lineage,
            )
        elif spec is not None:
            self.window = WindowAggregate(
                spec.calls, rows=spec.rows, range_ms=spec.range_ms, slide=spec.slide, lineage=lineage
            )
        self.last: tuple[object, ...] | None = None  # the aggregate relation's row, if any
        self.needed = _needed_columns(query)

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.query.input,)

    def run(self, ready: dict[str, ColumnBatch], done: int, watermark: int) -> ColumnBatch:
        batch = _through(
            self.query.chain,
            ready[self.query.input],
            self.needed,
            self.lineage or self.query.aggregate is None,
        )
        spec = self.query.aggregate
        if spec is None:
            return batch
        n = len(batch)
        args = [
            evaluate(call.arg, batch.columns, n) if call.arg is not None else np.empty(n, dtype=np.int64)
            for call in spec.calls
        ]
        lin = batch.lin if self.lineage else None
        if self.grouped is not None:
            keys = [evaluate(x, batch.columns, n) for x in spec.group_by]
            evaluated = self.grouped.advance(batch.ts, keys, args, done, watermark, lin)
            return self._grouped_to_stream(spec, evaluated)
        assert self.window is not None
        return self._to_stream(spec, self.window.advance(batch.ts, args, done, watermark, lin))

    def state_low(self) -> int | None:
        window = self.window or self.grouped
        return window.state_low() if window is not None else None

    def counters(self) -> tuple[int, ...]:
        window = self.window or self.grouped
        return window.counters() if window is not None else ()

    def restore_phase(self, pending: int) -> None:
        """Adopt another replica's slide phase: the window keeps what the
        phase needs, and the aggregate's rows are the ones visible then (the
        rows ISTREAM and DSTREAM compare the next ones with)."""
        spec = self.query.aggregate
        assert spec is not None
        if self.grouped is not None:
            keys, values = self.grouped.restore_phase(pending)
            columns = (*keys, *values)
            if spec.project is not None:
                columns = tuple(evaluate(x, columns, len(keys[0])) for x in spec.project)
            index = np.arange(len(keys[0]), dtype=np.int64)
            self.groups = dict(zip(_rows_at(keys, index), _rows_at(columns, index), strict=True))
            return
        assert self.window is not None
        columns, present = self.window.restore_phase(pending)
        if spec.project is not None:
            columns = tuple(evaluate(x, columns, 1) for x in spec.project)
        self.last = _rows_at(columns, np.zeros(1, dtype=np.int64))[0] if present else None

    def _grouped_to_stream(self, spec: WindowedAggregate, ev: GroupedEvaluated) -> ColumnBatch:
        """Each touched group's new row where it changed (ISTREAM), or its
        old row (DSTREAM). A group's previous row is its previous query's
        here, else the one kept from the call before: Python touches only
        each group's first and last query of the call."""
        n = len(ev.ts)
        columns = (*ev.keys, *ev.columns)
        if spec.project is not None:
            columns = tuple(evaluate(x, columns, n) for x in spec.project)
        if not n:
            return ColumnBatch.empty(len(columns))
        previous, present = ev.previous, ev.present
        inside = previous >= 0
        before = previous[inside]
        had = np.zeros(n, dtype=bool)
        had[inside] = present[before]
        same = np.zeros(n, dtype=bool)
        same[inside] = True
        for column in columns:
            same[inside] &= np.asarray(column[inside] == column[before], dtype=bool)
        firsts = np.flatnonzero(~inside)
        first_keys = _rows_at(ev.keys, firsts)
        first_rows = _rows_at(columns, firsts)
        old_rows: dict[int, tuple[object, ...]] = {}
        for i, key, row in zip(firsts.tolist(), first_keys, first_rows, strict=True):
            old = self.groups.get(key)
            if old is not None:
                old_rows[i] = old
                had[i] = True
                same[i] = old == row
        if spec.stream_op is plan.StreamOp.DSTREAM:
            emit = np.flatnonzero(had & ~(present & same))
            source = np.where(previous[emit] >= 0, previous[emit], emit)
            out_cols = [c[source] for c in columns]
            for at, i in enumerate(emit.tolist()):
                if previous[i] < 0:  # the row kept from the call before
                    for k, value in enumerate(old_rows[i]):
                        out_cols[k] = _assign(out_cols[k], at, value)
        else:
            emit = np.flatnonzero(present & ~(had & same))
            out_cols = [c[emit] for c in columns]
        last = np.ones(n, dtype=bool)
        last[before] = False
        lasts = np.flatnonzero(last)
        last_keys, last_rows = _rows_at(ev.keys, lasts), _rows_at(columns, lasts)
        for i, key, row in zip(lasts.tolist(), last_keys, last_rows, strict=True):
            if present[i]:
                self.groups[key] = row
            else:
                self.groups.pop(key, None)
        ts = ev.ts[emit]
        return ColumnBatch(ts, np.zeros(len(ts), dtype=np.int64), tuple(out_cols))

    def _to_stream(self, spec: WindowedAggregate, ev: Evaluated) -> ColumnBatch:
        columns = ev.columns
        if spec.project is not None:
            columns = tuple(evaluate(x, ev.columns, len(ev.ts)) for x in spec.project)
        if not len(ev.ts):
            return ColumnBatch.empty(len(columns))
        # Compare each instant's row with the one before (the carried row
        # first): the relation changed where the presence or a value did.
        present = ev.present
        rows = len(ev.ts)
        differs = np.zeros(rows, dtype=bool)
        for column in columns:
            differs[1:] |= np.asarray(column[1:] != column[:-1], dtype=bool)
        differs[1:] |= present[1:] != present[:-1]
        was = np.empty(rows, dtype=bool)
        was[0] = self.last is not None
        was[1:] = present[:-1]
        (first,) = _rows_at(columns, np.zeros(1, dtype=np.int64))
        differs[0] = bool(present[0]) != was[0] or (was[0] and first != self.last)
        if spec.stream_op is plan.StreamOp.DSTREAM:
            emit = was & differs
            # The row that left: the one before (the carried row at index 0).
            index = np.flatnonzero(emit)
            out_cols = tuple(_previous(c, index, self.last, k) for k, c in enumerate(columns))
        else:  # ISTREAM, and RSTREAM of a one-row relation: the new row when it changed
            index = np.flatnonzero(present & differs)
            out_cols = tuple(c[index] for c in columns)
        self.last = _rows_at(columns, np.array([rows - 1]))[0] if present[-1] else None
        ts = ev.ts[index]
        return ColumnBatch(ts, np.zeros(len(ts), dtype=np.int64), out_cols)


class _JoinQuery:
    """ISTREAM / DSTREAM / RSTREAM of a join of two windows (:mod:`.window_join`),
    or ISTREAM / DSTREAM of an aggregate over it (:mod:`.change_aggregate`)."""

    def __init__(self, query: JoinQuery) -> None:
        self.query = query
        left, right = query.left, query.right
        self.join = WindowJoin(_join_window(left), _join_window(right), len(left.key))
        width = len(query.project) if query.project is not None else left.width + right.width
        self.relation = RelationStream(width) if query.stream_op is plan.StreamOp.RSTREAM else None
        grouping = query.grouping
        self.grouping = None if grouping is None else ChangeAggregate(grouping.group_by, grouping.calls)

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.query.inputs

    def run(self, ready: dict[str, ColumnBatch], done: int, watermark: int) -> ColumnBatch:
        arrivals = []
        for side in (self.query.left, self.query.right):
            batch = _through(side.chain, ready[side.input], [None] * len(side.chain), False)
            n = len(batch)
            passes = np.ones(n, dtype=bool)
            if side.predicate is not None and n:
                passes = np.asarray(evaluate(side.predicate, batch.columns, n), dtype=bool)
            keys = tuple(evaluate(x, batch.columns, n) for x in side.key)
            arrivals.append(Arrivals(batch.ts, batch.columns, keys, passes))
        residual = self.query.residual
        keep: Keep | None = None
        if residual is not None:
            keep = lambda columns: evaluate(residual, columns, len(columns[0]))  # noqa: E731
        changes = self.join.advance(arrivals[0], arrivals[1], done, watermark, keep)
        ts, sign, columns = changes.ts, changes.sign, changes.columns
        if self.grouping is not None:
            ts, sign, columns = self.grouping.advance(ts, sign, columns)
        if self.query.project is not None:
            columns = tuple(evaluate(x, columns, len(ts)) for x in self.query.project)
        if self.relation is not None:
            ts, columns = self.relation.advance(ts, sign, columns)
            return ColumnBatch(ts, np.zeros(len(ts), dtype=np.int64), columns)
        want = 1 if self.query.stream_op is plan.StreamOp.ISTREAM else -1
        index = net_changes(ts, sign, columns, want)
        return ColumnBatch(ts[index], np.zeros(len(index), dtype=np.int64), tuple(c[index] for c in columns))

    def state_low(self) -> int | None:
        return None

    def counters(self) -> tuple[int, ...]:
        return ()

    def restore_phase(self, pending: int) -> None:
        raise AssertionError("a join has no slide phase")


def _join_window(side: JoinSide) -> JoinWindow:
    if side.rows is not None and side.slide > 1:
        return SlidingCountWindow(side.rows, side.slide, side.width)
    if side.rows is not None:
        return CountWindow(side.rows, side.partition, side.width)
    return TimeWindow(side.life, side.width, side.slide)


def _through(
    chain: Chain, batch: ColumnBatch, needed: Sequence[set[int] | None], lineage: bool
) -> ColumnBatch:
    """``batch`` through a chain of selections and projections, computing
    only the ``needed`` columns of each step (None: all)."""
    for node, wanted in zip(chain, needed, strict=True):
        if not len(batch):
            break
        if isinstance(node, plan.Select):
            keep = np.flatnonzero(evaluate(node.predicate, batch.columns, len(batch)))
            batch = batch.take_columns(keep, wanted, lineage=lineage)
        else:
            n = len(batch)
            batch = batch.with_columns(
                tuple(
                    evaluate(x, batch.columns, n) if wanted is None or i in wanted else UNREAD
                    for i, x in enumerate(node.exprs)
                )
            )
    return batch


def _rows_at(columns: Sequence[Array], index: Int64s) -> list[tuple[object, ...]]:
    """The rows at ``index`` as tuples of Python values."""
    return list(zip(*(c[index].tolist() for c in columns), strict=True)) if len(index) else []


def _assign(column: Array, at: int, value: object) -> Array:
    """``column[at] = value``, made an object column if int64 cannot hold it."""
    if column.dtype == np.int64 and type(value) is int and not INT64[0] <= value <= INT64[1]:
        column = column.astype(object)
    column[at] = value
    return column


def _needed_columns(query: VectorQuery) -> list[set[int] | None]:
    """For each step of the chain, the columns of its output that later
    steps read (None: all, the query's output): a selection copies only
    those."""
    spec = query.aggregate
    after: set[int] | None = None
    if spec is not None:
        after = set().union(
            *(columns_read(c.arg) for c in spec.calls if c.arg is not None),
            *(columns_read(x) for x in spec.group_by),
        )
    needed: list[set[int] | None] = []
    for node in reversed(query.chain):
        needed.append(after)
        if isinstance(node, plan.Project):
            exprs = node.exprs if after is None else [node.exprs[i] for i in sorted(after)]
            after = set().union(*(columns_read(x) for x in exprs))
        elif after is not None:
            after = after | columns_read(node.predicate)
    return list(reversed(needed))


def _previous(column: Array, index: Int64s, carried: tuple[object, ...] | None, k: int) -> Array:
    out = column[np.maximum(index - 1, 0)].copy()
    if len(index) and index[0] == 0:
        assert carried is not None
        out = _assign(out, 0, carried[k])
    return out


class VectorEngine:
    def __init__(
        self, program: plan.Program, outputs: Sequence[str] | None = None, *, lineage: bool = False
    ) -> None:
        names = list(outputs) if outputs else [program.last_query]
        unknown = [n for n in names if n not in program.queries]
        if unknown:
            raise KeyError(f"no registered query named {', '.join(unknown)}")
        self.queries: dict[str, _Query | _JoinQuery] = {}
        for name in names:
            try:
                query = recognize(program.queries[name])
            except NotVectorized as exc:
                raise NotVectorized(f"query {name}: {exc}") from None
            if isinstance(query, JoinQuery):
                if lineage:
                    raise NotVectorized(f"query {name}: a join (its lineage is not tracked on columns)")
                self.queries[name] = _JoinQuery(query)
            else:
                self.queries[name] = _Query(query, lineage)
        self.widths = {name: len(decl.schema.columns) for name, decl in program.inputs.items()}
        self.pending: dict[str, ColumnBatch] = {}
        self.time = BEFORE_TIME

    def push(self, name: str, batch: ColumnBatch | Sequence[Element]) -> None:
        """Queue a batch of input ``name`` (columns, or the row engine's
        elements): sorted by ts, after :attr:`time`, none before what the
        input already queued."""
        if name not in self.widths:
            raise KeyError(f"the program has no input named {name!r}")
        if all(name not in q.inputs for q in self.queries.values()):
            return  # an input none of the requested queries reads (a relation, say)
        if not isinstance(batch, ColumnBatch):
            batch = ColumnBatch.from_elements(batch, self.widths[name])
        if not len(batch):
            return
        first = int(batch.ts[0])
        if first <= self.time:
            raise LateInputError(
                f"input {name}: tuple at ts={first} arrived after instant {self.time} was processed"
            )
        queued = self.pending.get(name)
        if queued is not None and len(queued) and first < int(queued.ts[-1]):
            raise UnsortedInputError(
                f"input {name}: tuple at ts={first} arrived after one at ts={int(queued.ts[-1])}"
            )
        if len(batch) > 1 and bool(np.any(batch.ts[1:] < batch.ts[:-1])):
            raise UnsortedInputError(f"input {name}: timestamps decrease within a batch")
        self.pending[name] = concat(queued, batch) if queued is not None else batch

    def advance(self, watermark: int) -> dict[str, ColumnBatch]:
        """Process every instant up to ``watermark``; each requested query's
        output produced on the way."""
        if watermark <= self.time:
            return {name: ColumnBatch.empty(0) for name in self.queries}
        ready: dict[str, ColumnBatch] = {}
        for name, queued in list(self.pending.items()):
            if int(queued.ts[-1]) <= watermark:  # the usual case: all of it
                ready[name] = queued
                del self.pending[name]
                continue
            cut = int(np.searchsorted(queued.ts, watermark, side="right"))
            ready[name] = queued.take(slice(0, cut))  # type: ignore[arg-type]
            self.pending[name] = queued.take(slice(cut, None))  # type: ignore[arg-type]
        out: dict[str, ColumnBatch] = {}
        for source, width in self.widths.items():
            if source not in ready:
                ready[source] = ColumnBatch.empty(width)
        for name, query in self.queries.items():
            try:
                out[name] = query.run(ready, self.time, watermark)
            except (ArithmeticError, ValueError) as exc:  # as the row engine: an int too large for a float
                raise EvaluationError(
                    f"cannot evaluate the program up to instant {watermark}: {exc}"
                ) from exc
        self.time = watermark
        return out

    # -- what the HA layer asks (lineage=True) ---------------------------------

    def state_low(self) -> int | None:
        """The oldest input lineage a window or a queued batch still holds."""
        lows = [int(batch.lin[0]) for batch in self.pending.values() if len(batch.lin)]
        lows += [low for q in self.queries.values() if (low := q.state_low()) is not None]
        return min(lows) if lows else None

    def counters(self) -> tuple[tuple[int, ...], ...]:
        """History-dependent counters, per query: a ``[Rows N Slide M]``
        window's slide phase, else none."""
        return tuple(q.counters() for q in self.queries.values())

    def restore_counters(self, values: Sequence[tuple[int, ...]]) -> dict[str, list[Element]]:
        """Adopt another replica's counters after a rebuild. What that
        changes is not emitted (the replica emitted it before): an empty
        output per query, as the row engine's re-run of the instant gives
        to a rebuilding replica, which drops it."""
        queries = list(self.queries.values())
        if len(values) != len(queries):
            raise ValueError("counter snapshot does not match this program")
        for query, value in zip(queries, values, strict=True):
            if len(value) != len(query.counters()):
                raise ValueError("counter snapshot does not match this program")
            if value:
                query.restore_phase(int(value[0]))
        return {name: [] for name in self.queries}

    def advance_elements(self, watermark: int) -> dict[str, list[Element]]:
        """:meth:`advance` as the row engine's element lists."""
        return {name: batch.to_elements() for name, batch in self.advance(watermark).items()}


class ElementEngine:
    """A :class:`VectorEngine` behind the row engine's element interface
    (``push`` elements, ``advance`` to element lists), for callers written
    against the row engine."""

    def __init__(self, engine: VectorEngine) -> None:
        self.engine = engine

    def push(self, name: str, elements: Sequence[Element]) -> None:
        self.engine.push(name, elements)

    def advance(self, watermark: int) -> dict[str, list[Element]]:
        return self.engine.advance_elements(watermark)
