"""The CQL syntax tree: what parser.py produces and binder.py consumes.

Nodes are frozen dataclasses that remember where they start (1-based line
and column) so that every semantic error can point at the offending token.
Names of keywords and functions are normalised (upper / lower case); user
identifiers are kept as written (they are case-sensitive). Times are already
converted to milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from semiactive.node.cql import plan


@dataclass(frozen=True, kw_only=True)
class Node:
    line: int
    column: int


# ---- expressions -------------------------------------------------------------


@dataclass(frozen=True)
class Expr(Node):
    pass


@dataclass(frozen=True)
class ColumnRef(Expr):
    qualifier: str | None
    name: str


@dataclass(frozen=True)
class IntLit(Expr):
    value: int


@dataclass(frozen=True)
class FloatLit(Expr):
    value: float


@dataclass(frozen=True)
class StrLit(Expr):
    value: str


@dataclass(frozen=True)
class Negate(Expr):
    operand: Expr


@dataclass(frozen=True)
class Not(Expr):
    operand: Expr


@dataclass(frozen=True)
class Binary(Expr):
    """Arithmetic (``+ - * / %``) or comparison (``= != < <= > >=``; ``<>``
    is normalised to ``!=``). ``op_line``/``op_column`` locate the operator."""

    op: str
    left: Expr
    right: Expr
    op_line: int
    op_column: int


@dataclass(frozen=True)
class BoolExpr(Expr):
    """``AND`` / ``OR`` with two or more operands (chains are flattened)."""

    op: str
    operands: tuple[Expr, ...]


@dataclass(frozen=True)
class Call(Expr):
    """A function call; ``name`` is lower case, ``star`` marks ``COUNT(*)``."""

    name: str
    args: tuple[Expr, ...]
    star: bool = False


@dataclass(frozen=True)
class Case(Expr):
    """``CASE WHEN c1 THEN v1 [WHEN ...] [ELSE e] END``: the value of the
    first true condition, else ``otherwise`` (NULL without ELSE)."""

    conditions: tuple[Expr, ...]
    values: tuple[Expr, ...]
    otherwise: Expr | None = None

    @property
    def parts(self) -> tuple[Expr, ...]:
        """Every sub-expression: the conditions, the values, the ELSE."""
        return (*self.conditions, *self.values, *(() if self.otherwise is None else (self.otherwise,)))


COMPARISONS = frozenset({"=", "!=", "<", "<=", ">", ">="})
ARITHMETIC = frozenset({"+", "-", "*", "/", "%"})
AGGREGATES = frozenset({"count", "sum", "avg", "min", "max"})

# ---- queries -----------------------------------------------------------------


@dataclass(frozen=True)
class StarItem(Node):
    """``*`` or ``alias.*``."""

    qualifier: str | None


@dataclass(frozen=True)
class ExprItem(Node):
    expr: Expr
    alias: str | None


SelectItem = StarItem | ExprItem


@dataclass(frozen=True)
class WindowAst(Node):
    """A window as written. ``spec`` is the plan window except for
    Partition By, whose key columns are still names (``keys``)."""

    spec: plan.WindowSpec
    text: str
    keys: tuple[ColumnRef, ...] = ()


@dataclass(frozen=True)
class FromName(Node):
    name: str
    window: WindowAst | None
    alias: str | None


@dataclass(frozen=True)
class FromSubquery(Node):
    query: Query
    window: WindowAst | None
    alias: str


@dataclass(frozen=True)
class AssignProjection(Node):
    """``'frame' AS frame char(16)`` or ``Near.attr AS v integer``: the
    attribute to take (a constant, or per row the value of a column of the
    relation), the output column's name (at ``name_line``, ``name_column``)
    and type."""

    attribute: StrLit | ColumnRef
    name: str
    type: plan.SqlType
    name_line: int
    name_column: int


@dataclass(frozen=True)
class FromAssign(Node):
    """Seed 004's ASSIGN over ``relation``: per row, the input of the
    program named by ``selector``'s value (streams under ``window``),
    projected, joined with the row; the result is called ``alias``."""

    relation: FromName
    selector: ColumnRef
    projections: tuple[AssignProjection, ...]
    window: WindowAst | None
    alias: str


FromItem = FromName | FromSubquery | FromAssign


@dataclass(frozen=True)
class Select(Node):
    distinct: bool
    items: tuple[SelectItem, ...]
    from_items: tuple[FromItem, ...]
    where: Expr | None
    group_by: tuple[Expr, ...] | None
    having: Expr | None


@dataclass(frozen=True)
class SetOp(Node):
    """``UNION ALL`` / ``UNION`` / ``EXCEPT``; the position is the keyword's."""

    op: str
    left: SetExpr
    right: SetExpr


@dataclass(frozen=True)
class StreamOp(Node):
    """``ISTREAM`` / ``DSTREAM`` / ``RSTREAM`` ( ... )."""

    op: str
    query: SetExpr


SetExpr = Select | SetOp | StreamOp


@dataclass(frozen=True)
class Delay(Node):
    ms: int
    text: str


@dataclass(frozen=True)
class Query(Node):
    body: SetExpr
    delay: Delay | None


# ---- statements --------------------------------------------------------------


@dataclass(frozen=True)
class Attribute(Node):
    name: str
    type: plan.SqlType


@dataclass(frozen=True)
class RegisterInput(Node):
    kind: plan.Kind
    name: str
    attributes: tuple[Attribute, ...]


@dataclass(frozen=True)
class ColumnName(Node):
    name: str


@dataclass(frozen=True)
class RegisterQuery(Node):
    """``REGISTER QUERY name ...``; a bare query has ``anonymous`` set and a
    generated name ``queryN``."""

    name: str
    query: Query
    anonymous: bool = False
    # ``REGISTER QUERY name (a, b) AS ...``: the output columns, renamed in order.
    columns: tuple[ColumnName, ...] = ()


Statement = RegisterInput | RegisterQuery


@dataclass(frozen=True)
class Program(Node):
    statements: tuple[Statement, ...]


# ---- rendering ---------------------------------------------------------------

_PRECEDENCE = {"OR": 1, "AND": 2, "NOT": 3, "cmp": 4, "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}


def render(expr: Expr) -> str:
    """CQL text for ``expr`` (canonical spelling, minimal parentheses)."""
    return _render(expr, 0)


def _render(expr: Expr, outer: int) -> str:
    if isinstance(expr, ColumnRef):
        return f"{expr.qualifier}.{expr.name}" if expr.qualifier else expr.name
    if isinstance(expr, IntLit | FloatLit):
        return format_number(expr.value)
    if isinstance(expr, StrLit):
        return "'" + expr.value.replace("'", "''") + "'"
    if isinstance(expr, Call):
        args = "*" if expr.star else ", ".join(_render(a, 0) for a in expr.args)
        return f"{expr.name}({args})"
    if isinstance(expr, Case):
        whens = "".join(
            f" WHEN {_render(c, 0)} THEN {_render(v, 0)}"
            for c, v in zip(expr.conditions, expr.values, strict=True)
        )
        otherwise = "" if expr.otherwise is None else f" ELSE {_render(expr.otherwise, 0)}"
        return f"CASE{whens}{otherwise} END"
    if isinstance(expr, Negate):
        operand = _render(expr.operand, 7)
        if operand.startswith("-"):
            operand = f"({operand})"  # "--" would start a comment
        return _wrap(f"-{operand}", 7, outer)
    if isinstance(expr, Not):
        return _wrap(f"NOT {_render(expr.operand, 3)}", 3, outer)
    if isinstance(expr, BoolExpr):
        prec = _PRECEDENCE[expr.op]
        text = f" {expr.op} ".join(_render(o, prec + 1) for o in expr.operands)
        return _wrap(text, prec, outer)
    assert isinstance(expr, Binary)
    comparison = expr.op in COMPARISONS
    prec = _PRECEDENCE["cmp" if comparison else expr.op]
    # Comparisons do not chain: parenthesise a comparison on either side.
    left = _render(expr.left, prec + 1 if comparison else prec)
    text = f"{left} {expr.op} {_render(expr.right, prec + 1)}"
    return _wrap(text, prec, outer)


def format_number(value: float) -> str:
    """A number as CQL text: an infinite float (a literal such as ``1e999``
    that overflows) as ``1e999``, which reads back as the same value."""
    if value != value:
        return "(1e999 - 1e999)"
    if value in (math.inf, -math.inf):
        return "1e999" if value > 0 else "-1e999"
    return repr(value)


def _wrap(text: str, prec: int, outer: int) -> str:
    return f"({text})" if prec < outer else text
