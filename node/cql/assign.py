"""Binding the placement paper's ASSIGN: names and types checked, one plan node built.

``ASSIGN(R [w], sel, 'a' AS x t, R.c AS y u) [w2] AS A`` is, by eq. 1, for
each row r of R the input of the program whose name is r.sel, projected on
the attributes named (by a constant, or per row by the value of a column
of R), joined with r. Which input and which attributes a row takes are only
known at run time, so the plan node (:class:`plan.Assign`) reads R and every
candidate, and the operator (node/engine/operators/assign.py) chooses per
row. Checked here: the selector and the attribute columns are text
columns of R, and the output names are distinct and not reserved.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from semiactive.node.cql import ast, plan
from semiactive.node.cql.errors import CqlError

Error = Callable[[str, ast.Node], CqlError]
RESERVED = ("ts", "seq", "op")  # binder.RESERVED, which imports this module


def bind_assign(
    item: ast.FromAssign,
    relation: plan.PlanNode,
    columns: tuple[plan.Column, ...],
    scans: Mapping[str, plan.Scan],
    error: Error,
) -> plan.Assign:
    """The plan of ``item`` over ``relation`` (R as a relation, whose
    ``columns`` are qualified by R's alias) and the program's inputs
    ``scans``, every one but R a candidate."""
    r_alias = item.relation.alias or item.relation.name

    def r_column(ref: ast.ColumnRef, what: str) -> int:
        if ref.qualifier is not None and ref.qualifier != r_alias:
            raise error(f"ASSIGN's {what} must be a column of {r_alias}, not of {ref.qualifier!r}", ref)
        found = [i for i, c in enumerate(columns) if c.name == ref.name]
        if not found:
            known = ", ".join(c.name for c in columns)
            raise error(
                f"{r_alias} has no column {ref.name!r} (ASSIGN's {what}); known columns: {known}", ref
            )
        column = columns[found[0]]
        if not column.type.is_text:
            raise error(
                f"ASSIGN's {what} {ref.name!r} is {column.type}; "
                "it must be char or byte (its value is a name)",
                ref,
            )
        return found[0]

    selector = r_column(item.selector, "selector")
    taken = {c.name: r_alias for c in columns}
    takes: list[plan.AssignTake] = []
    for p in item.projections:
        at = ast.Node(line=p.name_line, column=p.name_column)
        if p.name in RESERVED:
            raise error(
                f"column name {p.name!r} is reserved (every row has seq, ts and, in a relation, op)", at
            )
        if p.name in taken:
            raise error(
                f"duplicate output column name {p.name!r} in ASSIGN (also a column of {taken[p.name]})", at
            )
        taken[p.name] = item.alias
        if isinstance(p.attribute, ast.ColumnRef):
            takes.append(plan.AssignTake(p.name, p.type, column=r_column(p.attribute, "attribute column")))
        else:
            takes.append(plan.AssignTake(p.name, p.type, attribute=p.attribute.value))
    spec = item.window.spec if item.window is not None else plan.UnboundedWindow()
    if isinstance(spec, plan.PartitionWindow):
        assert item.window is not None
        raise error(
            "ASSIGN's window cannot be Partition By: its columns would differ between candidates",
            item.window,
        )
    names: list[str] = []
    candidates: list[plan.PlanNode] = []
    for name, scan in scans.items():
        if name == item.relation.name:
            continue
        names.append(name)
        node: plan.PlanNode = scan
        if scan.kind is plan.Kind.STREAM:
            node = plan.Window(scan.schema, plan.Kind.RELATION, scan, spec)
        candidates.append(node)
    nullable = any(c.nullable for node in candidates for c in node.schema.columns)
    declared = tuple(plan.Column(t.name, t.type, item.alias, nullable) for t in takes)
    return plan.Assign(
        plan.Schema(columns + declared),
        plan.Kind.RELATION,
        relation,
        selector,
        tuple(takes),
        tuple(names),
        tuple(candidates),
        spec,
        item.alias,
    )
