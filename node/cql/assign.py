"""Seed 004's ASSIGN, compiled to the relational algebra the engine runs.

``ASSIGN(R [w], sel, 'a' AS x t, R.c AS y u) OVER (S1, S2) [w2] AS A`` is,
by eq. 1, for each row r of R the relation named by r.sel, projected on the
attributes named (by a constant, or per row by the value of a column of
R), joined with r. Over a known set of candidates that is a union, over
each candidate S and each choice of attributes it has for the
projections, of::

    SELECT R.*, S.a AS x, S.b AS y FROM R, S [w2] WHERE R.sel = 'S' AND R.c = 'b'

A candidate that lacks an attribute, or whose attribute does not fit the
declared type, contributes no branch: those rows of R get no result, never
an error. The branches are disjoint (they differ in R.sel or in the
per-row attribute names), so the union keeps every result once. Because
ASSIGN becomes joins, selections and a union, every executor (DTS, HB,
the compiled engine) and the SQLite oracle run it unchanged.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from node.cql import ast, plan
from node.cql.errors import CqlError


def fits(attribute: plan.SqlType, declared: plan.SqlType) -> bool:
    """Whether values of ``attribute`` are values of ``declared``."""
    if declared.name is plan.TypeName.CHAR:
        return attribute.name is plan.TypeName.CHAR and attribute.length <= declared.length
    if declared.name is plan.TypeName.FLOAT:
        return attribute.name in (plan.TypeName.FLOAT, plan.TypeName.INTEGER, plan.TypeName.BYTE)
    if declared.name is plan.TypeName.INTEGER:
        return attribute.name in (plan.TypeName.INTEGER, plan.TypeName.BYTE)
    return attribute.name is declared.name


def _equals(index: int, column: plan.Column, value: str) -> plan.Expr:
    return plan.Compare(
        plan.BOOLEAN,
        "=",
        plan.ColRef(column.type, index, column.name),
        plan.Literal(plan.char(max(1, len(value))), value),
    )


def _zero(declared: plan.SqlType) -> plan.Literal:
    value: int | float | str = "" if declared.name is plan.TypeName.CHAR else 0
    return plan.Literal(declared, value)


def compile_assign(
    item: ast.FromAssign,
    relation: plan.PlanNode,
    candidates: Sequence[tuple[str, plan.PlanNode]],
    error: Callable[[str, ast.Node], CqlError],
) -> plan.PlanNode:
    """The plan of ``item`` over ``relation`` (R, a relation) and each
    candidate (name, relation after its window)."""
    r_cols = relation.schema.columns
    width = len(r_cols)

    def r_column(ref: ast.ColumnRef, what: str) -> int:
        if ref.qualifier is not None and ref.qualifier != item.relation.name:
            raise error(
                f"ASSIGN's {what} must be a column of {item.relation.name}, not of {ref.qualifier!r}", ref
            )
        found = [i for i, c in enumerate(r_cols) if c.name == ref.name]
        if not found:
            known = ", ".join(c.name for c in r_cols)
            raise error(
                f"{item.relation.name} has no column {ref.name!r} (ASSIGN's {what}); known: {known}", ref
            )
        if r_cols[found[0]].type.name is not plan.TypeName.CHAR:
            raise error(f"ASSIGN's {what} {ref.name!r} must be a char column: its value names something", ref)
        return found[0]

    selector = r_column(item.selector, "selector")
    per_row = {
        k: r_column(p.attribute, "attribute column")
        for k, p in enumerate(item.projections)
        if isinstance(p.attribute, ast.ColumnRef)
    }
    names = [c.name for c in r_cols]
    for p in item.projections:
        if p.name in names:
            raise error(f"ASSIGN output column {p.name!r} is taken (by {item.relation.name} or another)", p)
        names.append(p.name)
    columns = tuple([*r_cols, *(plan.Column(p.name, p.type, item.alias) for p in item.projections)])
    schema = plan.Schema(columns)
    branches: list[plan.PlanNode] = []
    for name, node in candidates:
        s_cols = node.schema.columns
        options: list[list[tuple[int, str | None]]] = []
        for k, p in enumerate(item.projections):
            if k in per_row:
                options.append([(i, c.name) for i, c in enumerate(s_cols) if fits(c.type, p.type)])
            else:
                assert isinstance(p.attribute, ast.StrLit)
                wanted = str(p.attribute.value)
                options.append(
                    [(i, None) for i, c in enumerate(s_cols) if c.name == wanted and fits(c.type, p.type)]
                )
        for choice in itertools.product(*options):
            joined = plan.Join(plan.Schema(r_cols + s_cols), plan.Kind.RELATION, relation, node)
            conditions = [_equals(selector, r_cols[selector], name)]
            conditions += [
                _equals(per_row[k], r_cols[per_row[k]], attr) for k, (_, attr) in enumerate(choice) if attr
            ]
            predicate = (
                conditions[0] if len(conditions) == 1 else plan.BoolOp(plan.BOOLEAN, "AND", tuple(conditions))
            )
            selected = plan.Select(joined.schema, plan.Kind.RELATION, joined, predicate)
            exprs: list[plan.Expr] = [plan.ColRef(c.type, i, c.name) for i, c in enumerate(r_cols)]
            exprs += [plan.ColRef(s_cols[i].type, width + i, s_cols[i].name) for i, _ in choice]
            branches.append(plan.Project(schema, plan.Kind.RELATION, selected, tuple(exprs)))
    if not branches:
        never = plan.Compare(plan.BOOLEAN, "=", plan.Literal(plan.INTEGER, 1), plan.Literal(plan.INTEGER, 0))
        empty = plan.Select(relation.schema, plan.Kind.RELATION, relation, never)
        zeros: list[plan.Expr] = [plan.ColRef(c.type, i, c.name) for i, c in enumerate(r_cols)]
        zeros += [_zero(p.type) for p in item.projections]
        return plan.Project(schema, plan.Kind.RELATION, empty, tuple(zeros))
    out = branches[0]
    for branch in branches[1:]:
        out = plan.Union(schema, plan.Kind.RELATION, out, branch, True)
    return out
