"""Names and expressions of one SELECT, as SQLite text (for the oracle).

:class:`Scope` resolves CQL column references the way docs/cql.md says
(``name`` or ``alias.name``; an alias replaces the stream's name) to
positional SQL names ``fN.cM``; :class:`Exprs` writes expressions with
CQL's semantics and infers their types (``integer op integer`` is an
integer, anything with a float a float), which decide integer or float
``%``, exact float sums, and UNION widening. Float and text literals are
bound as parameters so that SQLite never re-reads a number's text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from semiactive.node.cql import ast

Ty = Literal["integer", "float", "text", "condition"]


class NotCovered(Exception):
    """The program uses something the oracle does not translate."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Item:
    """A FROM item: its CQL alias, its SQL alias and its columns."""

    alias: str
    sql: str
    cols: tuple[tuple[str, Ty], ...]


class Scope:
    def __init__(self, items: Sequence[Item]) -> None:
        self.items = list(items)

    def column(self, ref: ast.ColumnRef) -> tuple[str, Ty]:
        items = [i for i in self.items if ref.qualifier in (None, i.alias)]
        matches = [(i, j) for i in items for j, (name, _) in enumerate(i.cols) if name == ref.name]
        if len(matches) != 1:
            raise NotCovered(f"column {ast.render(ref)!r} is unknown or ambiguous")
        item, j = matches[0]
        return f"{item.sql}.c{j}", item.cols[j][1]

    def star(self, qualifier: str | None, taken: Sequence[str]) -> list[tuple[str, str, Ty]]:
        """``*`` or ``alias.*`` as ``(sql, output name, type)``: a name the
        SELECT's stars bring twice becomes ``alias_name``, and a name already
        taken gets ``_2``, ``_3``... (docs/cql.md, SELECT)."""
        every = [(i, j) for i in self.items for j in range(len(i.cols))]
        starred = Counter(i.cols[j][0] for i, j in every)
        chosen = [(i, j) for i, j in every if qualifier in (None, i.alias)]
        names = list(taken)
        out = []
        for item, j in chosen:
            name, ty = item.cols[j]
            base = name if starred[name] <= 1 else f"{item.alias}_{name}"
            candidate, n = base, 1
            while candidate in names:
                n += 1
                candidate = f"{base}_{n}"
            names.append(candidate)
            out.append((f"{item.sql}.c{j}", candidate, ty))
        return out


def output_name(item: ast.ExprItem, number: int) -> str:
    """docs/cql.md: the alias, a column's name, ``count`` for ``COUNT(*)``,
    ``func_column`` for an aggregate of a column, else ``exprN``."""
    if item.alias is not None:
        return item.alias
    expr = item.expr
    if isinstance(expr, ast.ColumnRef):
        return expr.name
    if isinstance(expr, ast.Call):
        if expr.star:
            return expr.name
        if isinstance(expr.args[0], ast.ColumnRef):
            return f"{expr.name}_{expr.args[0].name}"
    return f"expr{number}"


def has_aggregate(expr: ast.Expr) -> bool:
    if isinstance(expr, ast.Call):
        return True
    if isinstance(expr, ast.Negate | ast.Not):
        return has_aggregate(expr.operand)
    if isinstance(expr, ast.Binary):
        return has_aggregate(expr.left) or has_aggregate(expr.right)
    if isinstance(expr, ast.BoolExpr):
        return any(has_aggregate(o) for o in expr.operands)
    if isinstance(expr, ast.Case):
        return any(has_aggregate(o) for o in expr.parts)
    return False


def aggregated(select: ast.Select) -> bool:
    """GROUP BY, HAVING or an aggregate in the SELECT list."""
    return (
        select.group_by is not None
        or select.having is not None
        or any(isinstance(i, ast.ExprItem) and has_aggregate(i.expr) for i in select.items)
    )


_SQL_COMPARE = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


class Exprs:
    """Writes expressions over ``scope``; literals go to ``params`` under
    names from ``fresh``."""

    def __init__(self, scope: Scope, params: dict[str, Any], fresh: Callable[[str], str]) -> None:
        self.scope = scope
        self.params = params
        self.fresh = fresh

    def _param(self, value: Any) -> str:
        name = self.fresh("p")
        self.params[name] = value
        return f":{name}"

    def expr(self, e: ast.Expr) -> tuple[str, Ty]:
        if isinstance(e, ast.ColumnRef):
            return self.scope.column(e)
        if isinstance(e, ast.IntLit):
            return f"({e.value})", "integer"
        if isinstance(e, ast.FloatLit):
            return self._param(e.value), "float"
        if isinstance(e, ast.StrLit):
            return self._param(e.value), "text"
        if isinstance(e, ast.Negate):
            sql, ty = self.expr(e.operand)
            return f"(-{sql})", ty
        if isinstance(e, ast.Not):
            return f"(NOT {self.expr(e.operand)[0]})", "condition"
        if isinstance(e, ast.BoolExpr):
            joined = f" {e.op.upper()} ".join(self.expr(o)[0] for o in e.operands)
            return f"({joined})", "condition"
        if isinstance(e, ast.Call):
            return self.call(e)
        if isinstance(e, ast.Case):
            return self.case(e)
        assert isinstance(e, ast.Binary)
        (left, lt), (right, rt) = self.expr(e.left), self.expr(e.right)
        if e.op in _SQL_COMPARE:
            return f"COALESCE({left} {_SQL_COMPARE[e.op]} {right}, 0)", "condition"
        result: Ty = "integer" if lt == rt == "integer" else "float"
        if e.op == "%" and result == "float":
            return f"cql_fmod({left}, {right})", result
        return f"({left} {e.op} {right})", result

    def case(self, e: ast.Case) -> tuple[str, Ty]:
        whens = [(self.expr(c)[0], self.expr(v)) for c, v in zip(e.conditions, e.values, strict=True)]
        otherwise = None if e.otherwise is None else self.expr(e.otherwise)
        types = {ty for _, (_, ty) in whens} | ({otherwise[1]} if otherwise else set())
        result: Ty = "text" if "text" in types else "integer" if types == {"integer"} else "float"

        def value(sql: str, ty: Ty) -> str:
            return f"CAST({sql} AS REAL)" if result == "float" and ty == "integer" else sql

        text = "".join(f" WHEN {c} THEN {value(*v)}" for c, v in whens)
        if otherwise is not None:
            text += f" ELSE {value(*otherwise)}"
        return f"(CASE{text} END)", result

    def call(self, call: ast.Call) -> tuple[str, Ty]:
        name = call.name.lower()
        if call.star:
            return "COUNT(*)", "integer"
        if name not in ast.AGGREGATES or len(call.args) != 1:
            raise NotCovered(f"function {name}()")
        arg, ty = self.expr(call.args[0])
        if name == "count":
            return f"COUNT({arg})", "integer"
        if name in ("min", "max"):
            return f"{name.upper()}({arg})", ty
        if ty == "float":
            return f"cql_f{name}({arg})", "float"
        return f"{name.upper()}({arg})", "integer" if name == "sum" else "float"
