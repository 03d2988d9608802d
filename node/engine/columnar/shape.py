"""Which queries run vectorized: the shapes the columnar engine knows.

A query runs vectorized when it is, from its input up,

- a stream ``S`` under any chain of selections and projections (a
  stateless stream query), or
- that chain under a ``[Rows N [Slide M]]``, ``[Range T [Slide L]]`` or
  ``[Now]`` window, an aggregate of COUNT, integer SUM / AVG and integer
  MIN / MAX, optionally a projection of the aggregates, and ISTREAM,
  DSTREAM or RSTREAM on top; with a GROUP BY whose keys are all selected,
  ISTREAM or DSTREAM, and then also ``[Partition By keys Rows N]`` grouped
  by the same keys;

and every expression in it has a vectorized form
(:func:`vector_exprs.unsupported`). Anything else keeps the row engine;
:func:`recognize` says why, and ``semiactive query check`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass

from semiactive.node.cql import plan
from semiactive.node.engine.columnar.vector_exprs import unsupported

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


class NotVectorized(Exception):
    """Why a query keeps the row engine (the message)."""


def recognize(root: plan.PlanNode) -> VectorQuery:
    """The vectorized form of the query at ``root``, or :class:`NotVectorized`."""
    node = plan.resolve(root)
    if isinstance(node, plan.ToStream):
        return _windowed(node)
    if node.kind is not plan.Kind.STREAM:
        raise NotVectorized("a relation output (its changes keep the row engine)")
    name, chain = _chain(node)
    return VectorQuery(name, chain, None)


def _windowed(node: plan.ToStream) -> VectorQuery:
    below = plan.resolve(node.child)
    project: tuple[plan.Expr, ...] | None = None
    if isinstance(below, plan.Project):
        project = below.exprs
        for expr in project:
            _check(expr)
        below = plan.resolve(below.child)
    if not isinstance(below, plan.Aggregate):
        raise NotVectorized(f"{node.op.value.upper()} over {type(below).__name__} (only over an aggregate)")
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
