"""Which queries run vectorized: the shapes the columnar engine knows.

A query runs vectorized when it is, from its input up,

- a stream ``S`` under any chain of selections and projections (a
  stateless stream query), or
- that chain under a ``[Rows N [Slide M]]``, ``[Range T [Slide L]]`` or
  ``[Now]`` window, an aggregate of COUNT and SUM / AVG / MIN / MAX of
  integers or floats, optionally a projection of the aggregates, and ISTREAM,
  DSTREAM or RSTREAM on top; with a GROUP BY whose keys are all selected,
  ISTREAM or DSTREAM, and then also ``[Partition By keys Rows N]`` grouped
  by the same keys; or
- ISTREAM, DSTREAM or RSTREAM of an equi-join of two windows of such chains
  (``[Range T]``, ``[Now]``, ``[Range Unbounded]``, ``[Range T Slide L]``,
  ``[Rows N]``, ``[Rows N Slide M]``, or ``[Partition By keys Rows N]`` on
  its keys), over integer and text
  columns (:mod:`.window_join`), or ISTREAM or DSTREAM of a GROUP BY with
  COUNT, SUM and AVG of integers over such a join (:mod:`.change_aggregate`);

and every expression in it has a vectorized form
(:func:`vector_exprs.unsupported`). Anything else keeps the row engine;
:func:`recognize` says why, and ``semiactive query check`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass

from semiactive.node.cql import plan
from semiactive.node.engine.columnar.vector_exprs import unsupported
from semiactive.node.engine.planner import conjunction, join_conditions

Chain = tuple[plan.Select | plan.Project, ...]


@dataclass(frozen=True)
class WindowedAggregate:
    rows: int | None  # [Rows N] or [Partition By ... Rows N]: N; a range window: None
    range_ms: int
    slide: int
    calls: tuple[plan.AggCall, ...]
    project: tuple[plan.Expr, ...] | None  # over the aggregate's columns: the keys, then the calls
    stream_op: plan.StreamOp
    group_by: tuple[plan.Expr, ...] = ()
    partition: bool = False  # [Partition By the group's keys Rows N]


@dataclass(frozen=True)
class VectorQuery:
    """A recognized query: its input, the selections and projections from
    the input up, and the windowed aggregate over them if any."""

    input: str
    chain: Chain
    aggregate: WindowedAggregate | None


@dataclass(frozen=True)
class JoinSide:
    """One window of a join: its stream's chain, how long a tuple stays
    (``[Range T]``: T + 1 ms, ``[Now]``: 1, ``[Range Unbounded]``: None;
    with ``[Range T Slide L]``, a slide of L ms) or how many stay
    (``[Rows N]``, ``[Rows N Slide M]``, ``[Partition By keys Rows N]``), the WHERE's conjuncts
    over this side alone and its join key, both over the window's own
    columns."""

    input: str
    chain: Chain
    width: int  # the window's columns
    life: int | None
    slide: int  # [Range T Slide L]: L ms; [Rows N Slide M]: M tuples; else 1
    rows: int | None  # [Rows N] or [Partition By ... Rows N]: N (then life is None)
    partition: tuple[int, ...]  # [Partition By ...]: the columns
    predicate: plan.Expr | None
    key: tuple[plan.Expr, ...]


@dataclass(frozen=True)
class JoinGrouping:
    """GROUP BY with COUNT, SUM and AVG of integers over a join's relation."""

    group_by: tuple[plan.Expr, ...]
    calls: tuple[plan.AggCall, ...]


@dataclass(frozen=True)
class JoinQuery:
    """ISTREAM, DSTREAM or RSTREAM of an equi-join of two windows, with the
    rest of its WHERE over the joined row, maybe a GROUP BY over it
    (``grouping``), and its SELECT list."""

    left: JoinSide
    right: JoinSide
    residual: plan.Expr | None
    project: tuple[plan.Expr, ...] | None  # over the joined row, or over the grouping's
    stream_op: plan.StreamOp
    grouping: JoinGrouping | None = None

    @property
    def inputs(self) -> tuple[str, str]:
        return self.left.input, self.right.input


class NotVectorized(Exception):
    """Why a query keeps the row engine (the message)."""


def recognize(root: plan.PlanNode) -> VectorQuery | JoinQuery:
    """The vectorized form of the query at ``root``, or :class:`NotVectorized`."""
    node = plan.resolve(root)
    if isinstance(node, plan.ToStream):
        return _windowed(node)
    if node.kind is not plan.Kind.STREAM:
        raise NotVectorized("a relation output (its changes keep the row engine)")
    name, chain = _chain(node)
    return VectorQuery(name, chain, None)


def _windowed(node: plan.ToStream) -> VectorQuery | JoinQuery:
    below = plan.resolve(node.child)
    project: tuple[plan.Expr, ...] | None = None
    if isinstance(below, plan.Project):
        project = below.exprs
        for expr in project:
            _check(expr)
        below = plan.resolve(below.child)
    if isinstance(below, plan.Select) and isinstance(plan.resolve(below.child), plan.Join):
        join = plan.resolve(below.child)
        assert isinstance(join, plan.Join)
        return _joined(node, join, below.predicate, project)
    if isinstance(below, plan.Join):
        return _joined(node, below, None, project)
    if not isinstance(below, plan.Aggregate):
        raise NotVectorized(f"{node.op.value.upper()} over {type(below).__name__} (only over an aggregate)")
    grouped = plan.resolve(below.child)
    if isinstance(grouped, plan.Select) and isinstance(plan.resolve(grouped.child), plan.Join):
        join = plan.resolve(grouped.child)
        assert isinstance(join, plan.Join)
        return _joined(node, join, grouped.predicate, project, below)
    if isinstance(grouped, plan.Join):
        return _joined(node, grouped, None, project, below)
    if below.group_by:
        _check_groups(below.group_by, project, node.op)
    window = plan.resolve(below.child)
    if not isinstance(window, plan.Window):
        raise NotVectorized("an aggregate over something else than a window")
    spec = window.spec
    partition = isinstance(spec, plan.PartitionWindow)
    rows: int | None
    if isinstance(spec, plan.PartitionWindow):
        rows, range_ms, slide = _partition(spec, below.group_by)
    else:
        rows, range_ms, slide = _window(spec)
    for call in below.aggregates:
        _check_call(call)
    name, chain = _chain(plan.resolve(window.child))
    aggregate = WindowedAggregate(
        rows, range_ms, slide, below.aggregates, project, node.op, below.group_by, partition
    )
    return VectorQuery(name, chain, aggregate)


def _joined(
    node: plan.ToStream,
    join: plan.Join,
    where: plan.Expr | None,
    project: tuple[plan.Expr, ...] | None,
    aggregate: plan.Aggregate | None = None,
) -> JoinQuery:
    """An equi-join of two windows of streams, over integers and text, and
    maybe an aggregate over it."""
    grouping = None if aggregate is None else _join_grouping(node, aggregate, project)
    if grouping is None:
        for column in plan.resolve(node).schema.columns:
            if column.type.name is plan.TypeName.FLOAT:
                raise NotVectorized("a join's float output (NaN and -0.0: rows equal by object)")
    parts = join_conditions(join, where)
    for expr in parts.residual:
        _check(expr)
    sides = (
        _join_side(join.left, parts.left_only, parts.left_key),
        _join_side(join.right, parts.right_only, parts.right_key),
    )
    return JoinQuery(sides[0], sides[1], conjunction(parts.residual), project, node.op, grouping)


def _join_grouping(
    node: plan.ToStream, aggregate: plan.Aggregate, project: tuple[plan.Expr, ...] | None
) -> JoinGrouping:
    """COUNT, SUM and AVG of integers over a join, its GROUP BY keys all
    selected; a float out only as an AVG itself (never NaN or -0.0)."""
    if node.op is plan.StreamOp.RSTREAM:
        raise NotVectorized("RSTREAM of an aggregate over a join")
    _check_groups(aggregate.group_by, project, node.op)
    for call in aggregate.aggregates:
        if call.func in (plan.AggFunc.MIN, plan.AggFunc.MAX):
            raise NotVectorized("MIN / MAX over a join (a deletion needs the group's values)")
        if call.arg is not None:
            _check(call.arg)
            if call.func is not plan.AggFunc.COUNT and call.arg.type.name is not plan.TypeName.INTEGER:
                raise NotVectorized(f"{call.func.value.upper()} of a {call.arg.type.name.value} over a join")
    averages = {
        len(aggregate.group_by) + i for i, c in enumerate(aggregate.aggregates) if c.func is plan.AggFunc.AVG
    }
    for expr in project or ():
        if expr.type.name is plan.TypeName.FLOAT and not (
            isinstance(expr, plan.ColRef) and expr.index in averages
        ):
            raise NotVectorized(
                "a float computed from a join's aggregate (NaN and -0.0: rows equal by object)"
            )
    return JoinGrouping(tuple(aggregate.group_by), tuple(aggregate.aggregates))


def _join_side(child: plan.PlanNode, only: list[plan.Expr], key: list[plan.Expr]) -> JoinSide:
    window = plan.resolve(child)
    if not isinstance(window, plan.Window):
        raise NotVectorized(f"a join of {type(window).__name__} (only of two windows)")
    spec = window.spec
    life: int | None = None
    slide = 1
    rows: int | None = None
    partition: tuple[int, ...] = ()
    if isinstance(spec, plan.NowWindow):
        life = 1
    elif isinstance(spec, plan.RangeWindow):
        life, slide = spec.closed_range_ms + 1, max(spec.slide_ms, 1)
    elif isinstance(spec, plan.RowsWindow):
        rows, slide = spec.rows, max(spec.slide, 1)
    elif isinstance(spec, plan.PartitionWindow) and spec.range_ms is None:
        keyed = {x.index for x in key if isinstance(x, plan.ColRef)}
        if len(keyed) != len(key) or keyed != set(spec.keys):
            raise NotVectorized("a join of [Partition By ...] on other than its keys")
        rows, partition = spec.rows, tuple(spec.keys)
    elif not isinstance(spec, plan.UnboundedWindow):
        raise NotVectorized("a join of [Partition By ... Range T]")
    for column in window.schema.columns:
        if column.type.name not in (plan.TypeName.INTEGER, plan.TypeName.CHAR) or column.nullable:
            what = "nullable" if column.nullable else column.type.name.value
            raise NotVectorized(f"a join of a window with a {what} column (rows equal by object)")
    for expr in (*only, *key):
        _check(expr)
    if any(expr.type.name is plan.TypeName.FLOAT for expr in key):
        raise NotVectorized("a join key of type float (NaN)")
    name, chain = _chain(plan.resolve(window.child))
    width = len(window.schema.columns)
    return JoinSide(name, chain, width, life, slide, rows, partition, conjunction(only), tuple(key))


def _check_groups(
    group_by: tuple[plan.Expr, ...], project: tuple[plan.Expr, ...] | None, op: plan.StreamOp
) -> None:
    """A GROUP BY runs vectorized when every key is in the SELECT list: then
    each group's row differs from every other's, and the stream operator
    decides group by group (without, two groups' rows could cancel)."""
    for expr in group_by:
        _check(expr)
        if expr.type.name is plan.TypeName.FLOAT:
            # NaN: numpy's unique makes one group of all NaNs, the row engine's dict one per NaN
            raise NotVectorized("a GROUP BY key of type float")
    if op is plan.StreamOp.RSTREAM:
        raise NotVectorized("RSTREAM of a GROUP BY (the whole relation at each change)")
    if project is None:
        return  # the aggregate's own row: the keys, then the calls
    selected = {x.index for x in project if isinstance(x, plan.ColRef)}
    if not set(range(len(group_by))) <= selected:
        raise NotVectorized("a GROUP BY key missing from the SELECT list")


def _partition(spec: plan.PartitionWindow, group_by: tuple[plan.Expr, ...]) -> tuple[int, int, int]:
    """``[Partition By keys Rows N]`` runs vectorized under a GROUP BY of
    exactly its keys: then a group's window is its partition."""
    if spec.range_ms is not None:
        raise NotVectorized("[Partition By ... Rows N Range T]")
    grouped = {x.index for x in group_by if isinstance(x, plan.ColRef)}
    if len(grouped) != len(group_by) or grouped != set(spec.keys):
        raise NotVectorized("[Partition By ...] under a GROUP BY of other keys")
    return spec.rows, 0, 1


def _window(spec: plan.WindowSpec) -> tuple[int | None, int, int]:
    if isinstance(spec, plan.NowWindow):
        return None, 0, 1
    if isinstance(spec, plan.RangeWindow):
        return None, spec.closed_range_ms, spec.slide_ms
    if isinstance(spec, plan.RowsWindow):
        return spec.rows, 0, spec.slide
    if isinstance(spec, plan.UnboundedWindow):
        raise NotVectorized("[Range Unbounded]")
    raise NotVectorized("[Partition By ...] without a GROUP BY of its keys")


def _check_call(call: plan.AggCall) -> None:
    if call.arg is None:
        return
    _check(call.arg)
    if call.func is plan.AggFunc.COUNT:
        return
    if call.arg.type.name not in (plan.TypeName.INTEGER, plan.TypeName.FLOAT):
        raise NotVectorized(f"{call.func.value.upper()} of a {call.arg.type.name.value}")


def _check(expr: plan.Expr) -> None:
    reason = unsupported(expr)
    if reason is not None:
        raise NotVectorized(reason)


def _chain(node: plan.PlanNode) -> tuple[str, Chain]:
    chain: list[plan.Select | plan.Project] = []
    node = plan.resolve(node)
    while isinstance(node, plan.Select | plan.Project):
        if isinstance(node, plan.Select):
            _check(node.predicate)
        else:
            for expr in node.exprs:
                _check(expr)
        chain.append(node)
        node = plan.resolve(node.child)
    if not isinstance(node, plan.Scan):
        raise NotVectorized(f"{type(node).__name__} in a stream's chain")
    return node.name, tuple(reversed(chain))


def describe(program: plan.Program) -> dict[str, str]:
    """Each query's path: ``vectorized`` or ``row engine: <why>``."""
    paths: dict[str, str] = {}
    for name, root in program.queries.items():
        try:
            recognize(root)
        except NotVectorized as exc:
            paths[name] = f"row engine: {exc}"
        else:
            paths[name] = "vectorized"
    return paths
