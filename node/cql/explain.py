"""A readable description of a compiled program, for humans and tests.

For every registered query: its kind and output schema, whether it is
monotone (the recursive CQL paper, Table 1) and its operator tree, with windows, predicates
and expressions written in CQL with column names. Other queries are shown by
name (``QueryRef name``), so a shared sub-plan appears once. A last section
lists the cycles among queries with their delays and non-monotone operators
(a non-monotone operator on a cycle is what makes a delay necessary).
"""

from __future__ import annotations

import re

from semiactive.node.cql import plan
from semiactive.node.cql.ast import format_number
from semiactive.node.cql.cycles import owners, query_cycles
from semiactive.node.cql.limits import recursion_headroom

_NON_MONOTONE_WINDOWS = (plan.RowsWindow, plan.PartitionWindow)


def monotone(node: plan.PlanNode) -> bool:
    """Seed 001 Table 1: aggregates, EXCEPT, DISTINCT, row-based windows and
    DSTREAM are non-monotone; every other operator is monotone."""
    if isinstance(node, plan.Aggregate | plan.Except | plan.Distinct):
        return False
    if isinstance(node, plan.Window):
        return not isinstance(node.spec, _NON_MONOTONE_WINDOWS)
    if isinstance(node, plan.ToStream):
        return node.op is not plan.StreamOp.DSTREAM
    return True


def explain(program: plan.Program) -> str:
    with recursion_headroom():
        return _explain(program)


def _explain(program: plan.Program) -> str:
    owner = owners(program)
    lines = [
        f"input {name}: {decl.kind.value} {format_schema(decl.schema)}"
        for name, decl in program.inputs.items()
    ]
    shown: dict[plan.PlanNode, str] = {}
    for name, root in program.queries.items():
        if lines:
            lines.append("")
        lines.append(f"query {name}: {root.kind.value} {format_schema(root.schema)}")
        own = [n for n in _walk(root) if owner.get(n) == name]
        bad = list(dict.fromkeys(_short(n) for n in own if not monotone(n)))
        lines.append("  monotone: " + (f"no ({', '.join(bad)})" if bad else "yes"))
        _tree(root, 1, lines, shown, name)
    cycles, truncated = query_cycles(program)
    if cycles:
        lines.append("")
    for cycle in cycles:
        names = " -> ".join((*cycle.queries, cycle.queries[0]))
        delays = [
            f"{format_delay(n.delay_ms)} in {owner[n]}" for n in cycle.nodes if isinstance(n, plan.Delay)
        ]
        bad = [f"{_short(n)} in {owner[n]}" for n in cycle.nodes if not monotone(n)]
        lines.append(
            f"cycle {names}: delays: {', '.join(delays) or 'none'}; "
            f"non-monotone operators: {', '.join(bad) or 'none'}"
        )
    if truncated:
        lines.append("(more cycles not shown)")
    return "\n".join(lines) + "\n"


def _walk(root: plan.PlanNode) -> list[plan.PlanNode]:
    """The nodes below ``root`` in tree order, not entering other queries."""
    seen: dict[plan.PlanNode, None] = {}
    todo = [root]
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen[node] = None
        if not isinstance(node, plan.QueryRef):
            todo.extend(reversed(node.children))
    return list(seen)


def _tree(
    node: plan.PlanNode, depth: int, lines: list[str], shown: dict[plan.PlanNode, str], query: str
) -> None:
    indent = "  " * depth
    label = _label(node)
    if not monotone(node):
        label += "  [non-monotone]"
    if node.children and not isinstance(node, plan.QueryRef):
        if node in shown:
            lines.append(f"{indent}{label}  (shared, shown under query {shown[node]})")
            return
        shown[node] = query
    lines.append(indent + label)
    if not isinstance(node, plan.QueryRef):
        for child in node.children:
            _tree(child, depth + 1, lines, shown, query)


def format_schema(schema: plan.Schema) -> str:
    return "(" + ", ".join(f"{c.name} {c.type}" for c in schema.columns) + ")"


def format_duration(ms: int) -> str:
    for unit, size in (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000)):
        if ms >= size and ms % size == 0:
            count = ms // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    if ms >= 1000 and ms % 1000 == 0:
        count = ms // 1000
        return f"{count} second{'s' if count != 1 else ''}"
    return f"{ms} ms"


def format_delay(ms: int) -> str:
    return "<Now>" if ms == plan.EPSILON_MS else f"<{format_duration(ms)}>"


def format_window(spec: plan.WindowSpec, input_schema: plan.Schema) -> str:
    if isinstance(spec, plan.NowWindow):
        return "[Now]"
    if isinstance(spec, plan.UnboundedWindow):
        return "[Range Unbounded]"
    if isinstance(spec, plan.RangeWindow):
        slide = f" Slide {format_duration(spec.slide_ms)}" if spec.slide_ms != 1 else ""
        bounds = ", half-open" if spec.half_open else ""
        return f"[Range {format_duration(spec.range_ms)}{slide}{bounds}]"
    if isinstance(spec, plan.RowsWindow):
        slide = f" Slide {spec.slide}" if spec.slide != 1 else ""
        return f"[Rows {spec.rows}{slide}]"
    keys = ", ".join(_column_name(input_schema, k) for k in spec.keys)
    if spec.range_ms is None:
        return f"[Partition By {keys} Rows {spec.rows}]"
    bounds = ", half-open" if spec.half_open else ""
    return f"[Partition By {keys} Rows {spec.rows} Range {format_duration(spec.range_ms)}{bounds}]"


def _short(node: plan.PlanNode) -> str:
    """The operator, without expressions."""
    if isinstance(node, plan.Window | plan.ToStream | plan.Union | plan.Delay):
        return _label(node)
    return type(node).__name__


def _label(node: plan.PlanNode) -> str:
    if isinstance(node, plan.Scan):
        return f"Scan {node.name}"
    if isinstance(node, plan.QueryRef):
        return f"QueryRef {node.name}"
    if isinstance(node, plan.Window):
        return f"Window {format_window(node.spec, node.child.schema)}"
    if isinstance(node, plan.Select):
        return f"Select {format_expr(node.predicate, node.child.schema)}"
    if isinstance(node, plan.Project):
        items = []
        for expr, column in zip(node.exprs, node.schema.columns, strict=True):
            text = format_expr(expr, node.child.schema)
            plain = isinstance(expr, plan.ColRef) and expr.name == column.name
            items.append(text if plain or text == column.name else f"{text} AS {column.name}")
        return "Project " + ", ".join(items)
    if isinstance(node, plan.Join):
        if node.predicate is None:
            return "Join"
        both = plan.Schema(node.left.schema.columns + node.right.schema.columns)
        return f"Join ON {format_expr(node.predicate, both)}"
    if isinstance(node, plan.Aggregate):
        schema = node.child.schema
        text = "Aggregate"
        if node.group_by:
            text += " GROUP BY " + ", ".join(format_expr(k, schema) for k in node.group_by)
        if node.aggregates:
            text += ": " + ", ".join(format_aggregate(a, schema) for a in node.aggregates)
        return text
    if isinstance(node, plan.Distinct):
        return "Distinct"
    if isinstance(node, plan.Union):
        return "Union ALL" if node.all else "Union"
    if isinstance(node, plan.Except):
        return "Except"
    if isinstance(node, plan.ToStream):
        return {"istream": "IStream", "dstream": "DStream", "rstream": "RStream"}[node.op.value]
    if isinstance(node, plan.Delay):
        return f"Delay {format_delay(node.delay_ms)}"
    if isinstance(node, plan.Assign):
        return _assign_label(node)
    return type(node).__name__  # pragma: no cover - unknown node types


def _assign_label(node: plan.Assign) -> str:
    """ASSIGN as written, then the candidates it may read (its children
    after R, with their windows)."""
    args = [_column_name(node.schema, node.selector, True)]
    for take in node.takes:
        if take.column is None:
            source = "'" + str(take.attribute).replace("'", "''") + "'"
        else:
            source = _column_name(node.schema, take.column, True)
        args.append(f"{source} AS {take.name} {take.type}")
    window = format_window(node.window, node.schema)
    candidates = ", ".join(node.names) or "none"
    return f"Assign({', '.join(args)}) {window} AS {node.alias}; candidates: {candidates}"


# ---- expressions -------------------------------------------------------------

_SIMPLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\(.*\))?")
_PRECEDENCE = {"OR": 1, "AND": 2, "NOT": 3, "cmp": 4, "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}


def format_aggregate(call: plan.AggCall, schema: plan.Schema) -> str:
    arg = "*" if call.arg is None else format_expr(call.arg, schema)
    return f"{call.func.value}({arg})"


def format_expr(expr: plan.Expr, schema: plan.Schema) -> str:
    """CQL text for ``expr`` evaluated on rows of ``schema``; columns are
    qualified when the row joins several sources."""
    qualify = len({c.source for c in schema.columns if c.source}) > 1
    return _expr(expr, schema, qualify, 0)


def _column_name(schema: plan.Schema, index: int, qualify: bool = False) -> str:
    if not 0 <= index < len(schema):
        return f"#{index}"
    column = schema.columns[index]
    if not _SIMPLE_NAME.fullmatch(column.name):
        return f"({column.name})"  # a computed group key, e.g. "a + 1"
    return f"{column.source}.{column.name}" if qualify and column.source else column.name


def _expr(expr: plan.Expr, schema: plan.Schema, qualify: bool, outer: int) -> str:
    if isinstance(expr, plan.ColRef):
        return _column_name(schema, expr.index, qualify)
    if isinstance(expr, plan.Literal):
        if isinstance(expr.value, str):
            return "'" + expr.value.replace("'", "''") + "'"
        return format_number(expr.value)
    if isinstance(expr, plan.Negate):
        operand = _expr(expr.operand, schema, qualify, 7)
        if operand.startswith("-"):
            operand = f"({operand})"  # "--" would start a comment
        return _wrap("-" + operand, 7, outer)
    if isinstance(expr, plan.Not):
        return _wrap("NOT " + _expr(expr.operand, schema, qualify, 3), 3, outer)
    if isinstance(expr, plan.BoolOp):
        op = expr.op.upper()
        prec = _PRECEDENCE[op]
        parts = [_expr(o, schema, qualify, prec + 1) for o in expr.operands]
        return _wrap(f" {op} ".join(parts), prec, outer)
    if isinstance(expr, plan.Compare | plan.Arith):
        comparison = isinstance(expr, plan.Compare)
        prec = _PRECEDENCE["cmp" if comparison else expr.op]
        left = _expr(expr.left, schema, qualify, prec + 1 if comparison else prec)
        right = _expr(expr.right, schema, qualify, prec + 1)
        return _wrap(f"{left} {expr.op} {right}", prec, outer)
    if isinstance(expr, plan.Case):
        whens = "".join(
            f" WHEN {_expr(c, schema, qualify, 0)} THEN {_expr(v, schema, qualify, 0)}"
            for c, v in zip(expr.conditions, expr.values, strict=True)
        )
        otherwise = "" if expr.otherwise is None else f" ELSE {_expr(expr.otherwise, schema, qualify, 0)}"
        return f"CASE{whens}{otherwise} END"
    return repr(expr)  # pragma: no cover - unknown expression types


def _wrap(text: str, prec: int, outer: int) -> str:
    return f"({text})" if prec < outer else text
