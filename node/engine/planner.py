"""Turn a logical plan into physical operators.

One operator per plan node (QueryRef followed), created in two passes so that
recursive programs, whose nodes reach themselves through a Delay, can be
linked. Two rewrites happen on the way: a WHERE above joins is split into
per-side filters (pushed down), equi-join keys (hashed) and a residual
predicate; and an aggregate directly over a row or time window of a base
stream with integer SUM / COUNT / AVG is fused into one operator
(:class:`~semiactive.node.engine.operators.fused.WindowAggregateOp`), the common case
that must be fast, and so is a GROUP BY over a partition window on the same
keys (:class:`~semiactive.node.engine.operators.partition_aggregate.PartitionAggregateOp`)
and one over a sliding range window
(:class:`~semiactive.node.engine.operators.pane_aggregate.PaneAggregateOp`: the slide
boundary then merges partial aggregates instead of every tuple).
Operators that would compute the same thing from the same inputs are shared
(:func:`share`).

Operators generate and compile Python code. The CQL parser bounds how deep
a program nests so that this succeeds; should it still fail (CPython's
limits on nesting, recursion or memory), :func:`build` reports the query
whose operator failed as a positioned :class:`CqlError`, not a traceback.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from semiactive.node.cql import plan
from semiactive.node.cql.cycles import owners
from semiactive.node.cql.errors import CqlError
from semiactive.node.cql.limits import recursion_headroom
from semiactive.node.engine.operators.aggregate import AggregateOp
from semiactive.node.engine.operators.assign import AssignOp
from semiactive.node.engine.operators.base import Operator
from semiactive.node.engine.operators.fused import WindowAggregateOp, fusable
from semiactive.node.engine.operators.join import JoinOp
from semiactive.node.engine.operators.pane_aggregate import PaneAggregateOp
from semiactive.node.engine.operators.pane_aggregate import fusable as pane_fusable
from semiactive.node.engine.operators.partition_aggregate import PartitionAggregateOp
from semiactive.node.engine.operators.partition_aggregate import fusable as partition_fusable
from semiactive.node.engine.operators.relational import DistinctOp, ExceptOp, ProjectOp, SelectOp, UnionOp
from semiactive.node.engine.operators.streaming import DelayOp, ScanOp, ToStreamOp
from semiactive.node.engine.operators.windows import (
    PartitionRangeWindowOp,
    PartitionWindowOp,
    RangeWindowOp,
    RowsWindowOp,
    SlidingRangeWindowOp,
)


@dataclasses.dataclass
class PhysicalPlan:
    operators: list[Operator]
    scans: dict[str, ScanOp]
    queries: dict[str, Operator]


# What compiling generated code can raise for a program it cannot take.
GENERATION_ERRORS = (SyntaxError, RecursionError, MemoryError, ValueError)


class _Failed(Exception):
    """Generating the operator of ``node`` failed with ``cause``."""

    def __init__(self, node: plan.PlanNode, cause: BaseException) -> None:
        super().__init__(node, cause)
        self.node = node
        self.cause = cause


def generation_error(program: plan.Program, query: str, cause: BaseException) -> CqlError:
    """A failure to generate or compile the code of ``query``, positioned at
    the query (the engine knows no finer position)."""
    if isinstance(cause, SyntaxError):
        reason = cause.msg
    elif isinstance(cause, RecursionError):
        reason = "nested too deeply"
    elif isinstance(cause, MemoryError):
        reason = "out of memory"
    else:
        reason = str(cause)
    line, column = program.positions.get(query, (1, 1))
    return CqlError(
        f"query {query}: cannot generate its code ({reason}); simplify its expressions or split it "
        "into registered queries",
        line,
        column,
        program.file,
    )


def build(program: plan.Program, *, fuse: bool = True, panes: bool = True) -> PhysicalPlan:
    """The operators of ``program``; ``fuse=False`` skips the rewrites
    (fusion, shared operators): the reference tests compare them with;
    ``panes=False`` only the pane aggregate (a benchmark's baseline).
    Raises :class:`CqlError` for a query whose code cannot be generated."""
    with recursion_headroom():
        builder = _Builder(program, fuse, panes)
        queries: dict[str, Operator] = {}
        for name, root in program.queries.items():
            try:
                queries[name] = builder.op(root)
            except _Failed as exc:
                owner = owners(program).get(exc.node, name)
                raise generation_error(program, owner, exc.cause) from exc.cause
            except GENERATION_ERRORS as exc:
                raise generation_error(program, name, exc) from exc
    operators = builder.operators
    if fuse:
        operators = share(operators, queries)
    return PhysicalPlan(operators, builder.scans, queries)


def _signature(op: Operator) -> tuple[Any, ...] | None:
    """What an operator computes from its inputs, for the kinds worth sharing
    (None: never shared). Two operators with one signature and the same
    inputs receive the same elements, so they hold the same state and emit
    the same output."""
    if isinstance(op, ToStreamOp):
        return (ToStreamOp, op.op)
    if isinstance(op, DelayOp):
        return (DelayOp, op.delay_ms)
    if isinstance(op, SelectOp):
        return (SelectOp, op.condition)
    if isinstance(op, ProjectOp):
        return (ProjectOp, op.element)
    if isinstance(op, RangeWindowOp) and op.range_ms is not None:
        return (RangeWindowOp, op.range_ms)
    return None


def share(operators: list[Operator], queries: dict[str, Operator]) -> list[Operator]:
    """Common sub-plans computed once: queries that repeat another's work
    (Fig. 7 with one sub-query reads ``ISTREAM(avg_0)<Now>`` twice) share its
    operators. Repeated until nothing changes, so a shared operator's
    readers can be shared in turn; ``queries`` is updated in place."""
    while True:
        seen: dict[tuple[Any, ...], Operator] = {}
        twin: Operator | None = None
        for op in operators:
            signature = _signature(op)
            if signature is None:
                continue
            first = seen.setdefault((*signature, *(id(c) for c in op.children)), op)
            if first is not op:
                twin = op
                break
        if twin is None:
            return operators
        operators = [o for o in operators if o is not twin]
        for o in operators:
            o.children = [first if c is twin else c for c in o.children]
        for name, o in queries.items():
            if o is twin:
                queries[name] = first


def conjuncts(expr: plan.Expr) -> list[plan.Expr]:
    if isinstance(expr, plan.BoolOp) and expr.op.lower() == "and":
        return [c for o in expr.operands for c in conjuncts(o)]
    return [expr]


def conjunction(items: list[plan.Expr]) -> plan.Expr | None:
    if not items:
        return None
    if len(items) == 1:
        return items[0]
    return plan.BoolOp(plan.BOOLEAN, "and", tuple(items))


def columns_used(expr: plan.Expr) -> set[int]:
    if isinstance(expr, plan.ColRef):
        return {expr.index}
    used: set[int] = set()
    for f in dataclasses.fields(expr):
        value = getattr(expr, f.name)
        if isinstance(value, plan.Expr):
            used |= columns_used(value)
        elif isinstance(value, tuple):
            for v in value:
                if isinstance(v, plan.Expr):
                    used |= columns_used(v)
    return used


def shift(expr: plan.Expr, delta: int) -> plan.Expr:
    """The same expression with every column position moved by ``delta``."""
    if isinstance(expr, plan.ColRef):
        return dataclasses.replace(expr, index=expr.index + delta)
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(expr):
        value = getattr(expr, f.name)
        if isinstance(value, plan.Expr):
            changes[f.name] = shift(value, delta)
        elif isinstance(value, tuple) and value and isinstance(value[0], plan.Expr):
            changes[f.name] = tuple(shift(v, delta) for v in value)
    return dataclasses.replace(expr, **changes) if changes else expr


def lineage_monotone(node: plan.PlanNode) -> bool:
    """Whether the stream's lineage never decreases: true for a base input
    and filters or projections of it."""
    node = plan.resolve(node)
    if isinstance(node, plan.Scan):
        return node.kind is plan.Kind.STREAM
    if isinstance(node, plan.Select | plan.Project):
        return lineage_monotone(node.child)
    return False


def _count_uses(program: plan.Program) -> dict[int, int]:
    """How many parents (plus one for a registered query's root) each node
    has: a node used twice must keep its own operator, not be fused away."""
    uses: dict[int, int] = {}
    seen: set[int] = set()
    stack = [plan.resolve(r) for r in program.queries.values()]
    for root in stack:
        uses[id(root)] = uses.get(id(root), 0) + 1
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for child in node.children:
            child = plan.resolve(child)
            uses[id(child)] = uses.get(id(child), 0) + 1
            stack.append(child)
    return uses


class _Builder:
    """Creates one operator per plan node, registering it before linking its
    children so that a cycle finds the operator already made."""

    def __init__(self, program: plan.Program, fuse: bool, panes: bool = True) -> None:
        self.fuse = fuse
        self.panes = panes
        self.uses = _count_uses(program)
        self.operators: list[Operator] = []
        self.scans: dict[str, ScanOp] = {}
        self.made: dict[int, Operator] = {}
        for name, scan in program.scans.items():
            op = ScanOp(name, scan.kind)
            self.scans[name] = op
            self._register(scan, op)

    def _register(self, node: plan.PlanNode | None, op: Operator) -> Operator:
        if node is not None:
            self.made[id(node)] = op
        self.operators.append(op)
        return op

    def _private(self, node: plan.PlanNode) -> bool:
        """True if ``node`` feeds only one parent and is not yet built, so
        that parent may absorb it."""
        return self.uses.get(id(node), 0) <= 1 and id(node) not in self.made

    def op(self, node: plan.PlanNode) -> Operator:
        node = plan.resolve(node)
        existing = self.made.get(id(node))
        if existing is not None:
            return existing
        try:
            op, inputs = self._create(node)
        except GENERATION_ERRORS as exc:
            raise _Failed(node, exc) from exc
        self._register(node, op)
        op.children = [self.op(c) if isinstance(c, plan.PlanNode) else c for c in inputs]
        return op

    def _create(self, node: plan.PlanNode) -> tuple[Operator, list[plan.PlanNode | Operator]]:
        """The operator for ``node`` and what feeds it: plan nodes (built by
        :meth:`op`) or operators already made here."""
        label = type(node).__name__.lower()
        if isinstance(node, plan.Scan):
            raise ValueError(f"input {node.name} is not declared in the program")
        if isinstance(node, plan.Window):
            return self._window(node), [node.child]
        if isinstance(node, plan.Select):
            inner = plan.resolve(node.child)
            if isinstance(inner, plan.Join) and self._private(inner):
                return self._join(inner, node.predicate)
            if isinstance(inner, plan.Assign) and self._private(inner):
                return self._assign(inner, node.predicate)
            return SelectOp(node.predicate, label), [node.child]
        if isinstance(node, plan.Project):
            width = len(plan.resolve(node.child).schema)
            identity = len(node.exprs) == width and all(
                isinstance(x, plan.ColRef) and x.index == i for i, x in enumerate(node.exprs)
            )
            return ProjectOp(node.exprs, identity, label), [node.child]
        if isinstance(node, plan.Join):
            return self._join(node, None)
        if isinstance(node, plan.Aggregate):
            window = plan.resolve(node.child)
            if (
                self.fuse
                and fusable(node)
                and isinstance(window, plan.Window)
                and self._private(window)
                and lineage_monotone(window.child)
            ):
                return WindowAggregateOp(window.spec, node.aggregates, label), [window.child]
            if self.fuse and self.panes and pane_fusable(node) and self._private(window):
                assert isinstance(window, plan.Window) and isinstance(window.spec, plan.RangeWindow)
                spec = window.spec
                panes = PaneAggregateOp(
                    spec.closed_range_ms, spec.slide_ms, node.group_by, node.aggregates, label
                )
                return panes, [window.child]
            if self.fuse and partition_fusable(node) and self._private(window):
                assert isinstance(window, plan.Window) and isinstance(window.spec, plan.PartitionWindow)
                mono = lineage_monotone(window.child)
                op = PartitionAggregateOp(window.spec.rows, node.group_by, node.aggregates, mono, label)
                return op, [window.child]
            return AggregateOp(node.group_by, node.aggregates, label), [node.child]
        if isinstance(node, plan.Distinct):
            return DistinctOp(label), [node.child]
        if isinstance(node, plan.Union | plan.Except):
            widen = [
                [
                    own.type.name is plan.TypeName.INTEGER and col.type.name is plan.TypeName.FLOAT
                    for own, col in zip(plan.resolve(side).schema.columns, node.schema.columns, strict=True)
                ]
                for side in (node.left, node.right)
            ]
            if isinstance(node, plan.Except):
                return ExceptOp(widen, label), [node.left, node.right]
            return UnionOp(node.all, widen, node.kind, label), [node.left, node.right]
        if isinstance(node, plan.ToStream):
            return ToStreamOp(node.op, node.op.value), [node.child]
        if isinstance(node, plan.Assign):
            return self._assign(node, None)
        if isinstance(node, plan.Delay):
            return DelayOp(node.delay_ms, len(node.schema), f"delay {node.delay_ms}ms"), [node.child]
        raise TypeError(f"cannot execute plan node {node!r}")

    def _window(self, node: plan.Window) -> Operator:
        spec = node.spec
        mono = lineage_monotone(node.child)
        width = len(node.schema)
        if isinstance(spec, plan.NowWindow):
            return RangeWindowOp(0, width, mono, "[Now]")
        if isinstance(spec, plan.UnboundedWindow):
            return RangeWindowOp(None, width, mono, "[Range Unbounded]")
        if isinstance(spec, plan.RangeWindow):
            size = spec.closed_range_ms
            if spec.slide_ms <= 1:
                return RangeWindowOp(size, width, mono, f"[Range {size}]")
            return SlidingRangeWindowOp(size, spec.slide_ms, mono, f"[Range {size} Slide {spec.slide_ms}]")
        if isinstance(spec, plan.RowsWindow):
            return RowsWindowOp(spec.rows, spec.slide, mono, f"[Rows {spec.rows} Slide {spec.slide}]")
        if isinstance(spec, plan.PartitionWindow):
            life = spec.closed_range_ms
            if life is None:
                return PartitionWindowOp(spec.keys, spec.rows, width, mono, f"[Partition Rows {spec.rows}]")
            label = f"[Partition Rows {spec.rows} Range {life}]"
            return PartitionRangeWindowOp(spec.keys, spec.rows, life, width, mono, label)
        raise TypeError(f"unknown window {spec!r}")

    def _join(
        self, join: plan.Join, where: plan.Expr | None
    ) -> tuple[Operator, list[plan.PlanNode | Operator]]:
        """A join with its WHERE: push single-side conjuncts down, hash on
        equalities across the sides, check the rest on the joined row."""
        left_node, right_node = plan.resolve(join.left), plan.resolve(join.right)
        parts = join_conditions(join, where)
        op = JoinOp(parts.left_key, parts.right_key, conjunction(parts.residual), "join")
        return op, [self._side(left_node, parts.left_only), self._side(right_node, parts.right_only)]

    def _assign(
        self, node: plan.Assign, where: plan.Expr | None
    ) -> tuple[Operator, list[plan.PlanNode | Operator]]:
        """ASSIGN, and the placement paper's query analyser: the conjuncts of a WHERE
        over it that read R's columns alone (R's come first in its result)
        filter R before the ASSIGN, so that a row the query drops names no
        source: it never enters the ASSIGN's state, and connection
        management (node/sections/connections.py) connects nothing for it."""
        candidates = [
            (name, plan.resolve(c).schema.names) for name, c in zip(node.names, node.candidates, strict=True)
        ]
        op: Operator = AssignOp(node.selector, node.takes, candidates, "assign")
        width = len(plan.resolve(node.relation).schema)
        pushed: list[plan.Expr] = []
        rest: list[plan.Expr] = []
        for c in conjuncts(where) if where is not None else []:
            used = columns_used(c)
            (pushed if used and max(used) < width else rest).append(c)
        inputs: list[plan.PlanNode | Operator] = [self._side(node.relation, pushed), *node.candidates]
        if not rest:
            return op, inputs
        self._register(None, op)
        op.children = [self.op(c) if isinstance(c, plan.PlanNode) else c for c in inputs]
        condition = conjunction(rest)
        assert condition is not None
        return SelectOp(condition, "select"), [op]

    def _side(self, node: plan.PlanNode, predicates: list[plan.Expr]) -> plan.PlanNode | Operator:
        """One input of a join, with the conjuncts pushed down to it."""
        pred = conjunction(predicates)
        if isinstance(node, plan.Join) and self._private(node):
            op, inputs = self._join(node, pred)
            self._register(None, op)
            op.children = [self.op(c) if isinstance(c, plan.PlanNode) else c for c in inputs]
            return op
        if pred is None:
            return node
        select = self._register(None, SelectOp(pred, "pushed-down select"))
        select.children = [self.op(node)]
        return select


@dataclasses.dataclass(frozen=True)
class JoinConditions:
    """A join's WHERE taken apart: conjuncts over one side alone (each over
    that side's own columns), equalities across the sides (the hash key,
    one expression per side), and the rest, over the joined row."""

    left_only: list[plan.Expr]
    right_only: list[plan.Expr]
    left_key: list[plan.Expr]
    right_key: list[plan.Expr]
    residual: list[plan.Expr]


def join_conditions(join: plan.Join, where: plan.Expr | None) -> JoinConditions:
    """The conditions of ``join`` under ``where``, as the row engine's join
    and the columnar engine's both take them."""
    width = len(plan.resolve(join.left).schema)
    items = conjuncts(where) if where is not None else []
    if join.predicate is not None:
        items += conjuncts(join.predicate)
    parts = JoinConditions([], [], [], [], [])
    for c in items:
        used = columns_used(c)
        if used and max(used) < width:
            parts.left_only.append(c)
        elif used and min(used) >= width:
            parts.right_only.append(shift(c, -width))
        elif isinstance(c, plan.Compare) and c.op in ("=", "==") and _splits(c, width):
            a, b = (c.left, c.right) if max(columns_used(c.left)) < width else (c.right, c.left)
            parts.left_key.append(a)
            parts.right_key.append(shift(b, -width))
        else:
            parts.residual.append(c)
    return parts


def _splits(c: plan.Compare, width: int) -> bool:
    lu, ru = columns_used(c.left), columns_used(c.right)
    if not lu or not ru:
        return False
    return (max(lu) < width and min(ru) >= width) or (max(ru) < width and min(lu) >= width)
