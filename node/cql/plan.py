"""The logical plan: what the CQL compiler produces and the engine executes.

A plan is a DAG of typed operator nodes. Registered queries are named nodes of
that DAG; a query that references another query shares its node, and recursive
programs close cycles through :class:`Delay` nodes (the recursive CQL paper, section 3).

Every node is either stream-valued or relation-valued (:class:`Kind`), and has
a :class:`Schema`. Expressions are resolved: column references are positions in
the input row of the node that evaluates them, so the engine never looks names
up at run time.

Time is integer milliseconds of event time. The smallest step, epsilon (the
``[Now]`` window's lifetime and the ``<Now>`` delay), is 1 ms.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

EPSILON_MS = 1

# The integer range: 64-bit, without -2**63, which is NULL on the wire
# (node/sections/codec.py), so that every integer, and its negation, can travel.
INT_MIN = -(2**63) + 1
INT_MAX = 2**63 - 1


class Kind(enum.Enum):
    STREAM = "stream"
    RELATION = "relation"


class TypeName(enum.Enum):
    INTEGER = "integer"
    FLOAT = "float"
    BYTE = "byte"
    CHAR = "char"
    BOOLEAN = "boolean"  # only for predicates; never a column type


@dataclass(frozen=True)
class SqlType:
    name: TypeName
    length: int = 0  # char(n) only

    @property
    def is_numeric(self) -> bool:
        return self.name in (TypeName.INTEGER, TypeName.FLOAT)

    @property
    def is_text(self) -> bool:
        return self.name in (TypeName.CHAR, TypeName.BYTE)

    def __str__(self) -> str:
        if self.name is TypeName.CHAR:
            return f"char({self.length})"
        return str(self.name.value)


INTEGER = SqlType(TypeName.INTEGER)
FLOAT = SqlType(TypeName.FLOAT)
BYTE = SqlType(TypeName.BYTE)
BOOLEAN = SqlType(TypeName.BOOLEAN)


def char(n: int) -> SqlType:
    return SqlType(TypeName.CHAR, n)


@dataclass(frozen=True)
class Column:
    name: str
    type: SqlType
    # The FROM alias (or stream name) the column came from, for qualified
    # references such as ``market.price``; empty for computed columns.
    source: str = ""
    # Whether the column can hold NULL: it is computed by an expression that
    # can divide by zero (here or in the query or stage it comes from).
    nullable: bool = False


@dataclass(frozen=True)
class Schema:
    columns: tuple[Column, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def types(self) -> tuple[SqlType, ...]:
        return tuple(c.type for c in self.columns)

    def __len__(self) -> int:
        return len(self.columns)


# --------------------------------------------------------------------------
# Expressions (typed and resolved)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Expr:
    type: SqlType


@dataclass(frozen=True)
class ColRef(Expr):
    """The value at ``index`` of the row the expression is evaluated on;
    ``nullable`` if that column can hold NULL."""

    index: int
    name: str = ""
    nullable: bool = False


@dataclass(frozen=True)
class Literal(Expr):
    value: int | float | str


@dataclass(frozen=True)
class Arith(Expr):
    """``+ - * / %``. Integer ``/`` and ``%`` truncate toward zero (as C and
    Stanford STREAM do). Division or modulo by zero gives NULL (``None``);
    ``nullable`` marks expressions that can be NULL so the engine guards only
    those."""

    op: str
    left: Expr
    right: Expr
    nullable: bool = False


@dataclass(frozen=True)
class Negate(Expr):
    operand: Expr
    nullable: bool = False


@dataclass(frozen=True)
class Case(Expr):
    """``CASE WHEN ... THEN ... [ELSE ...] END``: ``values[i]`` for the first
    true ``conditions[i]``, else ``otherwise``; NULL without ELSE, hence
    ``nullable`` (also when a value can be NULL)."""

    conditions: tuple[Expr, ...]
    values: tuple[Expr, ...]
    otherwise: Expr | None = None
    nullable: bool = False


def can_be_null(expr: Expr) -> bool:
    """Whether ``expr`` can evaluate to NULL: it divides (``/``, ``%``) or
    reads a nullable column somewhere in its arithmetic."""
    todo = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, ColRef | Arith | Negate | Case) and node.nullable:
            return True
        if isinstance(node, Arith):
            todo += (node.left, node.right)
        elif isinstance(node, Negate):
            todo.append(node.operand)
    return False


@dataclass(frozen=True)
class Compare(Expr):
    """``= != <> < <= > >=``; type BOOLEAN. A NULL operand makes it false."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class BoolOp(Expr):
    """``AND`` / ``OR`` over two or more operands; type BOOLEAN."""

    op: str
    operands: tuple[Expr, ...]


@dataclass(frozen=True)
class Not(Expr):
    operand: Expr


class AggFunc(enum.Enum):
    COUNT = "count"
    SUM = "sum"
    AVG = "avg"
    MIN = "min"
    MAX = "max"


@dataclass(frozen=True)
class AggCall:
    """One aggregate. ``arg`` is None for ``COUNT(*)``. Result types: COUNT
    integer; SUM the argument's type; AVG float; MIN/MAX the argument's type."""

    func: AggFunc
    arg: Expr | None
    type: SqlType


# --------------------------------------------------------------------------
# Windows (stream -> relation)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class NowWindow:
    """``[Now]``: each tuple lives for epsilon (1 ms): at its ``ts`` only."""


@dataclass(frozen=True)
class RangeWindow:
    """``[Range T]`` / ``[Range T Slide L]``.

    At time t the relation holds the tuples with ``b - T <= ts <= b`` where
    ``b = floor(t / L) * L`` (CQL). ``slide_ms`` 1 means no slide.
    ``half_open``: Stanford STREAM's ``b - T < ts <= b`` instead
    (node/cql/bounds.py).
    """

    range_ms: int
    slide_ms: int = 1
    half_open: bool = False

    @property
    def closed_range_ms(self) -> int:
        """T of the closed window that holds the same tuples."""
        return self.range_ms - 1 if self.half_open and self.range_ms > 0 else self.range_ms


@dataclass(frozen=True)
class UnboundedWindow:
    """``[Range Unbounded]``: every tuple so far. Also the default for a stream
    in FROM without a window (Stanford STREAM 0.6)."""


@dataclass(frozen=True)
class RowsWindow:
    """``[Rows N]`` / ``[Rows N Slide M]``: the last N tuples; with a slide,
    the relation changes only when the count of arrived tuples reaches a
    multiple of M (it then holds the last N of those)."""

    rows: int
    slide: int = 1


@dataclass(frozen=True)
class PartitionWindow:
    """``[Partition By a, b Rows N]``: the last N tuples of every partition.
    ``[Partition By a, b Rows N Range T]`` (Oracle CQL): of those, only the
    ones a ``[Range T]`` would still hold (``range_ms``; ``half_open`` as in
    :class:`RangeWindow`), so that a partition whose key stopped arriving
    empties and its state is dropped."""

    keys: tuple[int, ...]  # column positions in the stream's schema
    rows: int
    range_ms: int | None = None
    half_open: bool = False

    @property
    def closed_range_ms(self) -> int | None:
        """T of the closed range that holds the same tuples (None: no range)."""
        if self.range_ms is None:
            return None
        return self.range_ms - 1 if self.half_open and self.range_ms > 0 else self.range_ms


WindowSpec = NowWindow | RangeWindow | UnboundedWindow | RowsWindow | PartitionWindow


# --------------------------------------------------------------------------
# Plan nodes
# --------------------------------------------------------------------------


@dataclass(eq=False)
class PlanNode:
    """Base of all plan nodes. Nodes compare by identity: a node referenced by
    two queries is one node of the DAG."""

    schema: Schema
    kind: Kind

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return ()


@dataclass(eq=False)
class Scan(PlanNode):
    """An external input: a registered stream or relation fed from outside
    the program (a source, an upstream stage, a file)."""

    name: str = ""


@dataclass(eq=False)
class QueryRef(PlanNode):
    """A reference to a registered query by name, resolved after all queries
    are registered so that queries can reference each other in cycles. The
    engine follows ``target``."""

    name: str = ""
    target: PlanNode | None = None

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.target,) if self.target is not None else ()


@dataclass(eq=False)
class Window(PlanNode):
    """Stream to relation."""

    child: PlanNode = field(default=None)  # type: ignore[assignment]
    spec: WindowSpec = field(default_factory=UnboundedWindow)

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass(eq=False)
class Select(PlanNode):
    """WHERE / HAVING. Keeps the child's kind and schema."""

    child: PlanNode = field(default=None)  # type: ignore[assignment]
    predicate: Expr = field(default=None)  # type: ignore[assignment]

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass(eq=False)
class Project(PlanNode):
    """SELECT list. Keeps the child's kind."""

    child: PlanNode = field(default=None)  # type: ignore[assignment]
    exprs: tuple[Expr, ...] = ()

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass(eq=False)
class Join(PlanNode):
    """Relation x relation, then ``predicate`` (None = cross product). The
    output row is the left row followed by the right row."""

    left: PlanNode = field(default=None)  # type: ignore[assignment]
    right: PlanNode = field(default=None)  # type: ignore[assignment]
    predicate: Expr | None = None

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.left, self.right)


@dataclass(eq=False)
class Aggregate(PlanNode):
    """GROUP BY over a relation. Output row: group key values, then aggregate
    results. Without GROUP BY there is one group, present while the input
    relation is non-empty."""

    child: PlanNode = field(default=None)  # type: ignore[assignment]
    group_by: tuple[Expr, ...] = ()
    aggregates: tuple[AggCall, ...] = ()

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass(eq=False)
class Distinct(PlanNode):
    child: PlanNode = field(default=None)  # type: ignore[assignment]

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass(eq=False)
class Union(PlanNode):
    """UNION ALL (``all``) or UNION (set semantics). Both inputs have the same
    kind; numeric columns widen integer -> float."""

    left: PlanNode = field(default=None)  # type: ignore[assignment]
    right: PlanNode = field(default=None)  # type: ignore[assignment]
    all: bool = True

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.left, self.right)


@dataclass(eq=False)
class Except(PlanNode):
    """Relation EXCEPT relation (multiset difference, as EXCEPT ALL)."""

    left: PlanNode = field(default=None)  # type: ignore[assignment]
    right: PlanNode = field(default=None)  # type: ignore[assignment]

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class AssignTake:
    """One projection of ASSIGN: the attribute named by ``attribute`` (a
    constant) or, row by row, by the value of column ``column`` of R; the
    output column ``name`` and its declared ``type``."""

    name: str
    type: SqlType
    attribute: str | None = None
    column: int | None = None


@dataclass(eq=False)
class Assign(PlanNode):
    """Seed 004's ASSIGN (section 3.2.1, eq. 1): for each row r of
    ``relation`` (R), the candidate whose name is r's ``selector`` value,
    projected by ``takes``, joined with r. ``candidates`` are the program's
    inputs other than R, each as a relation (streams under ``window``),
    named by ``names``; the output row is r, then the taken values."""

    relation: PlanNode = field(default=None)  # type: ignore[assignment]
    selector: int = 0
    takes: tuple[AssignTake, ...] = ()
    names: tuple[str, ...] = ()
    candidates: tuple[PlanNode, ...] = ()
    window: WindowSpec = field(default_factory=UnboundedWindow)
    alias: str = ""

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.relation, *self.candidates)


class StreamOp(enum.Enum):
    ISTREAM = "istream"
    DSTREAM = "dstream"
    RSTREAM = "rstream"


@dataclass(eq=False)
class ToStream(PlanNode):
    """ISTREAM / DSTREAM / RSTREAM: relation to stream."""

    child: PlanNode = field(default=None)  # type: ignore[assignment]
    op: StreamOp = StreamOp.ISTREAM

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass(eq=False)
class Delay(PlanNode):
    """``( ... )<d>``: shifts every tuple's timestamp by ``delay_ms`` (>= 1).
    Stream to stream. Cycles in the plan must pass through a Delay."""

    child: PlanNode = field(default=None)  # type: ignore[assignment]
    delay_ms: int = EPSILON_MS

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass
class InputDecl:
    """``REGISTER STREAM|RELATION name (attr type, ...)``."""

    name: str
    kind: Kind
    schema: Schema


@dataclass
class Program:
    """A compiled CQL program: declared inputs and registered queries, in
    registration order. ``queries[name]`` is the root node of that query.
    ``file`` and ``positions`` (line, column of each query) let the engine
    report a query it cannot generate code for as a positioned CQL error."""

    inputs: dict[str, InputDecl]
    scans: dict[str, Scan]
    queries: dict[str, PlanNode]
    file: str = "<query>"
    positions: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def last_query(self) -> str:
        return next(reversed(self.queries))

    def query(self, name: str) -> PlanNode:
        return resolve(self.queries[name])


def resolve(node: PlanNode) -> PlanNode:
    """Follow QueryRef indirections to the real node."""
    seen = 0
    while isinstance(node, QueryRef):
        assert node.target is not None, f"unresolved query reference {node.name}"
        node = node.target
        seen += 1
        if seen > 10_000:
            raise ValueError("query references form a loop without operators")
    return node
