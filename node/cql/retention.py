"""Which parts of a program hold input rows for ever, pure.

A protected stage's Level-1 cut is the oldest input row its state still
depends on (docs/ha.md, "Acknowledgements"), and its producers retain
every row from that cut on, so that a replica can be rebuilt. A
``[Range Unbounded]`` window, a ``[Partition By .. Rows N]`` window (the
last rows of every key ever seen) and a relation read from an input (its
rows stay until deleted) keep their first rows for the whole run: the cut
never passes them, and the producers' logs grow until ``queue_rows``, then
the run stalls. :func:`lasting_state` names those parts so that
``cluster check`` can say so before a run, not after.
"""

from __future__ import annotations

from semiactive.node.cql import plan


def lasting_state(program: plan.Program, output: str) -> list[str]:
    """Each window or input relation that keeps rows for ever, in the
    queries ``output`` depends on, as ``"[Range Unbounded] in query Q"``;
    in order of first appearance, without repeats."""
    found: list[str] = []
    seen_queries: set[str] = set()
    pending = [output]
    while pending:
        name = pending.pop(0)
        if name in seen_queries:
            continue
        seen_queries.add(name)
        stack: list[plan.PlanNode] = [program.query(name)]
        visited: set[int] = set()
        while stack:
            node = stack.pop()
            if id(node) in visited:
                continue
            visited.add(id(node))
            if isinstance(node, plan.QueryRef):
                pending.append(node.name)
                continue
            what = _lasting(node)
            if what is not None and f"{what} in query {name}" not in found:
                found.append(f"{what} in query {name}")
            stack.extend(reversed(node.children))
    return found


def _lasting(node: plan.PlanNode) -> str | None:
    if isinstance(node, plan.Window):
        spec = node.spec
        if isinstance(spec, plan.UnboundedWindow):
            return "[Range Unbounded]"
        if isinstance(spec, plan.PartitionWindow) and spec.range_ms is None:
            keys = ", ".join(node.child.schema.names[k] for k in spec.keys)
            return f"[Partition By {keys} Rows {spec.rows}]"
    if isinstance(node, plan.Scan) and node.kind is plan.Kind.RELATION:
        return f"the input relation {node.name}"
    return None
