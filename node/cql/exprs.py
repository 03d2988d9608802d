"""Name resolution and type checking of CQL expressions (used by binder.py).

A :class:`Scope` holds the columns of a query's FROM row; :class:`ExprBinder`
turns AST expressions evaluated on that row into typed plan expressions, and
:class:`GroupedBinder` does the same for expressions evaluated on the output
row of an Aggregate (group keys, then aggregate results), where a bare column
is only allowed if it is a group key.
"""

from __future__ import annotations

from dataclasses import dataclass

from semiactive.node.cql import ast, plan
from semiactive.node.cql.errors import CqlError


@dataclass(frozen=True)
class ScopeItem:
    """One FROM item: the names it can be qualified with and its columns at
    ``start`` .. ``start + len(columns)`` of the FROM row."""

    alias: str
    qualifiers: frozenset[str]
    start: int
    columns: tuple[plan.Column, ...]


class Scope:
    """The columns visible in a SELECT: the FROM items' columns, in order."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.items: list[ScopeItem] = []
        self.columns: list[plan.Column] = []

    def add(self, alias: str, columns: tuple[plan.Column, ...], where: ast.Node) -> ScopeItem:
        if any(alias == other.alias for other in self.items):
            raise CqlError(
                f"{alias!r} appears twice in FROM; give one of them an alias (FROM {alias} AS x)",
                where.line,
                where.column,
                self.file,
            )
        item = ScopeItem(alias, frozenset({alias}), len(self.columns), columns)
        self.items.append(item)
        self.columns.extend(columns)
        return item

    def resolve(self, ref: ast.ColumnRef) -> plan.ColRef:
        if ref.qualifier is not None:
            candidates = [i for i in self.items if ref.qualifier in i.qualifiers]
            if not candidates:
                names = ", ".join(i.alias for i in self.items)
                raise self._error(
                    f"unknown stream or alias {ref.qualifier!r} in {ast.render(ref)}; FROM has {names}",
                    ref,
                )
        else:
            candidates = self.items
        matches = [
            (item, offset)
            for item in candidates
            for offset, column in enumerate(item.columns)
            if column.name == ref.name
        ]
        if not matches:
            known = ", ".join(dict.fromkeys(c.name for i in candidates for c in i.columns))
            raise self._error(f"unknown column {ast.render(ref)!r}; known columns: {known}", ref)
        if len(matches) > 1:
            where = " and ".join(item.alias for item, _ in matches)
            raise self._error(
                f"ambiguous column {ref.name!r}: it is in {where}; qualify it, "
                f"e.g. {matches[0][0].alias}.{ref.name}",
                ref,
            )
        item, offset = matches[0]
        column = item.columns[offset]
        return plan.ColRef(column.type, item.start + offset, column.name, column.nullable)

    def column(self, ref: plan.ColRef) -> plan.Column:
        return self.columns[ref.index]

    def expand_star(self, star: ast.StarItem) -> list[ast.ColumnRef]:
        """``*`` or ``alias.*`` as qualified column references (positioned at
        the star, so errors about them point there)."""
        items = self.items
        if star.qualifier is not None:
            items = [i for i in self.items if star.qualifier in i.qualifiers]
            if not items:
                raise self._error(f"unknown stream or alias {star.qualifier!r} in SELECT", star)
        return [
            ast.ColumnRef(item.alias, column.name, line=star.line, column=star.column)
            for item in items
            for column in item.columns
        ]

    def _error(self, message: str, where: ast.Node) -> CqlError:
        return CqlError(message, where.line, where.column, self.file)


def contains_aggregate(expr: ast.Expr) -> bool:
    if isinstance(expr, ast.Call):
        return True
    if isinstance(expr, ast.Negate | ast.Not):
        return contains_aggregate(expr.operand)
    if isinstance(expr, ast.Binary):
        return contains_aggregate(expr.left) or contains_aggregate(expr.right)
    if isinstance(expr, ast.BoolExpr):
        return any(contains_aggregate(o) for o in expr.operands)
    if isinstance(expr, ast.Case):
        return any(contains_aggregate(o) for o in expr.parts)
    return False


class ExprBinder:
    """Binds expressions on the FROM row. ``clause`` names where the
    expression is, for the error about aggregates that are not allowed."""

    def __init__(self, scope: Scope, clause: str) -> None:
        self.scope = scope
        self.file = scope.file
        self.clause = clause

    def error(self, message: str, line: int, column: int) -> CqlError:
        return CqlError(message, line, column, self.file)

    def bind(self, expr: ast.Expr) -> plan.Expr:
        hooked = self.hook(expr)
        if hooked is not None:
            return hooked
        if isinstance(expr, ast.ColumnRef):
            return self.column(expr)
        if isinstance(expr, ast.Call):
            return self.call(expr)
        if isinstance(expr, ast.IntLit):
            return plan.Literal(plan.INTEGER, expr.value)
        if isinstance(expr, ast.FloatLit):
            return plan.Literal(plan.FLOAT, expr.value)
        if isinstance(expr, ast.StrLit):
            # char(n) counts bytes (UTF-8), as on the wire.
            return plan.Literal(plan.char(len(expr.value.encode())), expr.value)
        if isinstance(expr, ast.Negate):
            return self._negate(expr)
        if isinstance(expr, ast.Not):
            operand = self.bind(expr.operand)
            self._need_boolean(operand, "NOT", expr.operand)
            return plan.Not(plan.BOOLEAN, operand)
        if isinstance(expr, ast.BoolExpr):
            operands = tuple(self.bind(o) for o in expr.operands)
            for node, bound in zip(expr.operands, operands, strict=True):
                self._need_boolean(bound, expr.op, node)
            return plan.BoolOp(plan.BOOLEAN, expr.op, operands)
        if isinstance(expr, ast.Case):
            return self._case(expr)
        assert isinstance(expr, ast.Binary)
        left, right = self.bind(expr.left), self.bind(expr.right)
        if expr.op in ast.COMPARISONS:
            return self._compare(expr, left, right)
        return self._arith(expr, left, right)

    # Overridden by GroupedBinder.
    def hook(self, expr: ast.Expr) -> plan.Expr | None:
        return None

    def column(self, expr: ast.ColumnRef) -> plan.Expr:
        return self.scope.resolve(expr)

    def call(self, expr: ast.Call) -> plan.Expr:
        if self.clause == "aggregate":
            message = f"nested aggregate function {expr.name.upper()}() is not allowed"
        else:
            message = f"aggregate function {expr.name.upper()}() is not allowed in {self.clause}"
        raise self.error(message, expr.line, expr.column)

    def _negate(self, expr: ast.Negate) -> plan.Expr:
        operand = self.bind(expr.operand)
        if not operand.type.is_numeric:
            raise self.error(
                f"type mismatch: unary minus needs a number, got {operand.type}",
                expr.line,
                expr.column,
            )
        if isinstance(operand, plan.Literal) and not isinstance(operand.value, str):
            return plan.Literal(operand.type, -operand.value)
        return plan.Negate(operand.type, operand)

    def _case(self, expr: ast.Case) -> plan.Expr:
        conditions = tuple(self.bind(c) for c in expr.conditions)
        for node, bound in zip(expr.conditions, conditions, strict=True):
            self._need_boolean(bound, "WHEN", node)
        given = [*expr.values, *(() if expr.otherwise is None else (expr.otherwise,))]
        bound_values = [self.bind(v) for v in given]
        for node, bound in zip(given, bound_values, strict=True):
            if bound.type == plan.BOOLEAN:
                raise self.error(
                    f"type mismatch: a CASE value cannot be a condition ({ast.render(node)})",
                    node.line,
                    node.column,
                )
        types = [v.type for v in bound_values]
        if all(t.is_numeric for t in types):
            result = plan.INTEGER if all(t.name is plan.TypeName.INTEGER for t in types) else plan.FLOAT
        elif all(t.is_text for t in types):
            result = plan.char(max(t.length for t in types))
        else:
            shown = ", ".join(str(t) for t in dict.fromkeys(types))
            raise self.error(
                f"type mismatch: CASE values must all be numbers or all be text, got {shown}",
                expr.line,
                expr.column,
            )
        otherwise = bound_values[len(expr.values)] if expr.otherwise is not None else None
        nullable = otherwise is None or any(plan.can_be_null(v) for v in bound_values)
        return plan.Case(result, conditions, tuple(bound_values[: len(expr.values)]), otherwise, nullable)

    def _need_boolean(self, bound: plan.Expr, op: str, where: ast.Expr) -> None:
        if bound.type != plan.BOOLEAN:
            raise self.error(
                f"type mismatch: {op} needs conditions, got {bound.type} ({ast.render(where)})",
                where.line,
                where.column,
            )

    def _compare(self, expr: ast.Binary, left: plan.Expr, right: plan.Expr) -> plan.Expr:
        lt, rt = left.type, right.type
        if not ((lt.is_numeric and rt.is_numeric) or (lt.is_text and rt.is_text)):
            raise self.error(
                f"type mismatch: cannot compare {lt} with {rt} ({ast.render(expr)})",
                expr.op_line,
                expr.op_column,
            )
        return plan.Compare(plan.BOOLEAN, expr.op, left, right)

    def _arith(self, expr: ast.Binary, left: plan.Expr, right: plan.Expr) -> plan.Expr:
        lt, rt = left.type, right.type
        if not (lt.is_numeric and rt.is_numeric):
            raise self.error(
                f"type mismatch: cannot apply '{expr.op}' to {lt} and {rt} ({ast.render(expr)})",
                expr.op_line,
                expr.op_column,
            )
        both_int = lt.name is plan.TypeName.INTEGER and rt.name is plan.TypeName.INTEGER
        result = plan.INTEGER if both_int else plan.FLOAT
        # Division or modulo gives NULL for a zero divisor; by a non-zero
        # integer literal, only where the dividend is NULL (can_be_null).
        by_literal = both_int and isinstance(right, plan.Literal) and right.value != 0
        return plan.Arith(result, expr.op, left, right, nullable=expr.op in ("/", "%") and not by_literal)


def bind_aggregate(call: ast.Call, scope: Scope) -> plan.AggCall:
    """Type an aggregate call whose argument is evaluated on the FROM row."""
    func = plan.AggFunc(call.name)
    if call.star:
        return plan.AggCall(func, None, plan.INTEGER)
    arg = ExprBinder(scope, "aggregate").bind(call.args[0])
    where = call.args[0]
    name = call.name.upper()
    if arg.type == plan.BOOLEAN:
        raise CqlError(
            f"type mismatch: {name} of a condition ({ast.render(where)})",
            where.line,
            where.column,
            scope.file,
        )
    if func in (plan.AggFunc.SUM, plan.AggFunc.AVG) and not arg.type.is_numeric:
        raise CqlError(
            f"type mismatch: {name} needs a number, got {arg.type} ({ast.render(where)})",
            where.line,
            where.column,
            scope.file,
        )
    if func is plan.AggFunc.COUNT:
        result = plan.INTEGER
    elif func is plan.AggFunc.AVG:
        result = plan.FLOAT
    else:
        result = arg.type
    return plan.AggCall(func, arg, result)


class GroupedBinder(ExprBinder):
    """Binds HAVING and SELECT expressions of an aggregate query onto the
    Aggregate's output row: a sub-expression equal to a GROUP BY key becomes
    that key's column, an aggregate call becomes its result column (calls
    are shared), and any other column reference is an error."""

    def __init__(
        self,
        scope: Scope,
        keys: list[plan.Expr],
        key_columns: list[plan.Column],
    ) -> None:
        super().__init__(scope, "aggregate")
        self.keys = keys
        self.key_columns = key_columns
        self.aggregates: list[plan.AggCall] = []
        self.aggregate_columns: list[plan.Column] = []

    def hook(self, expr: ast.Expr) -> plan.Expr | None:
        if contains_aggregate(expr):
            return None
        bound = ExprBinder(self.scope, "aggregate").bind(expr)
        for index, key in enumerate(self.keys):
            if bound == key:
                column = self.key_columns[index]
                return plan.ColRef(key.type, index, column.name, column.nullable)
        if isinstance(bound, plan.Literal):
            return bound
        return None

    def column(self, expr: ast.ColumnRef) -> plan.Expr:
        raise self.error(
            f"column {ast.render(expr)!r} must appear in GROUP BY or be used in an aggregate function",
            expr.line,
            expr.column,
        )

    def call(self, expr: ast.Call) -> plan.Expr:
        aggregate = bind_aggregate(expr, self.scope)
        if aggregate in self.aggregates:
            index = self.aggregates.index(aggregate)
        else:
            index = len(self.aggregates)
            self.aggregates.append(aggregate)
            # COUNT is never NULL; the others are when every value is.
            nullable = aggregate.arg is not None and plan.can_be_null(aggregate.arg)
            nullable = nullable and aggregate.func is not plan.AggFunc.COUNT
            self.aggregate_columns.append(plan.Column(ast.render(expr), aggregate.type, nullable=nullable))
        column = self.aggregate_columns[index]
        return plan.ColRef(aggregate.type, len(self.keys) + index, column.name, column.nullable)
