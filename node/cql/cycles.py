"""Graph analysis of plans: strongly connected components and the delay rule.

Recursive CQL programs are cyclic plan graphs. Seed 001 (section 3.1) makes
them well defined by requiring a delay operator on every cycle: a tuple that
goes around the loop comes back at a later timestamp, so its existence can
no longer cancel itself at the same instant. :func:`check_delays` enforces
that rule (or, with ``insert_delays``, repairs programs by adding an epsilon
delay after a stream operator on the cycle, the recursive CQL paper's footnote 3).

Edges go from a node to its ``children`` (the nodes it reads), with QueryRef
nodes leading to their targets. Arrows in messages (``a -> b``) follow the
data: ``a`` feeds ``b``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from semiactive.node.cql import plan
from semiactive.node.cql.errors import CqlError

Successors = Callable[[plan.PlanNode], Iterable[plan.PlanNode]]


def _children(node: plan.PlanNode) -> tuple[plan.PlanNode, ...]:
    return node.children


def strongly_connected_components(
    roots: Iterable[plan.PlanNode], successors: Successors = _children
) -> list[list[plan.PlanNode]]:
    """The strongly connected components of the graph reachable from ``roots``.

    Iterative Tarjan (no recursion limit on deep plans). The output order is
    deterministic, given the order of ``roots`` and of each node's
    successors: a component comes after every component it reads from
    (inputs first: a valid execution order for the scheduler once each cyclic
    component is treated as one unit), and the nodes of a component are in
    depth-first discovery order. Trivial components (one node, no self-loop)
    are included; see :func:`is_cyclic`.
    """
    index: dict[plan.PlanNode, int] = {}
    low: dict[plan.PlanNode, int] = {}
    stack: list[plan.PlanNode] = []
    on_stack: set[plan.PlanNode] = set()
    components: list[list[plan.PlanNode]] = []

    def visit(node: plan.PlanNode) -> Iterator[plan.PlanNode]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        return iter(successors(node))

    for root in roots:
        if root in index:
            continue
        work = [(root, visit(root))]
        while work:
            node, pending = work[-1]
            for child in pending:
                if child not in index:
                    work.append((child, visit(child)))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[plan.PlanNode] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member is node:
                            break
                    component.reverse()
                    components.append(component)
    return components


def is_cyclic(component: list[plan.PlanNode], successors: Successors = _children) -> bool:
    """Whether a component holds a cycle (more than one node, or a self-loop)."""
    if len(component) > 1:
        return True
    node = component[0]
    return any(child is node for child in successors(node))


def owners(program: plan.Program) -> dict[plan.PlanNode, str]:
    """The registered query each plan node was built for (Scans belong to no
    query; a QueryRef belongs to the query that holds the reference)."""
    owner: dict[plan.PlanNode, str] = {}
    for name, root in program.queries.items():
        todo = [root]
        while todo:
            node = todo.pop()
            if node in owner or isinstance(node, plan.Scan):
                continue
            owner[node] = name
            if not isinstance(node, plan.QueryRef):
                todo.extend(node.children)
    return owner


def _no_delay(node: plan.PlanNode) -> list[plan.PlanNode]:
    return [c for c in node.children if not isinstance(c, plan.Delay)]


def _cycle_path(component: list[plan.PlanNode], start: plan.PlanNode) -> list[plan.PlanNode]:
    """A cycle through ``start`` inside ``component`` (breadth-first, so a
    shortest one), as the nodes in reading order: start, child, ..., start."""
    members = set(component)
    parent: dict[plan.PlanNode, plan.PlanNode] = {}
    frontier = [start]
    while frontier:
        following: list[plan.PlanNode] = []
        for node in frontier:
            for child in _no_delay(node):
                if child is start:
                    path = [node]
                    while path[-1] is not start:
                        path.append(parent[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child in members and child not in parent:
                    parent[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError("component without a cycle")  # pragma: no cover


def _describe(
    component: list[plan.PlanNode], program: plan.Program, owner: Mapping[plan.PlanNode, str]
) -> list[str]:
    """The registered queries on a delay-free cycle, in data-flow order, from
    and back to the earliest registered one."""
    order = list(program.queries)
    start = min((n for n in component if n in owner), key=lambda n: order.index(owner[n]), default=None)
    if start is None:  # pragma: no cover - every operator belongs to a query
        return []
    names: list[str] = []
    for node in reversed(_cycle_path(component, start)):
        name = owner.get(node)
        if name is not None and (not names or names[-1] != name):
            names.append(name)
    if len(names) == 1:
        names.append(names[0])
    return names


def check_delays(
    program: plan.Program,
    *,
    positions: Mapping[str, tuple[int, int]] | None = None,
    file: str = "<query>",
    insert_delays: bool = False,
) -> None:
    """Require a Delay on every cycle of ``program`` (see the module doc).

    With ``insert_delays`` a delay-free cycle gets an epsilon Delay at the
    output of one of its ToStream nodes (preferring the root of the earliest
    registered query), modifying ``program`` in place; only a cycle without a
    stream operator is then an error. Errors are positioned at the
    registration (``positions``) of the earliest registered query on the
    cycle.
    """
    while True:
        everything = [n for c in strongly_connected_components(program.queries.values()) for n in c]
        candidates = [n for n in everything if not isinstance(n, plan.Delay)]
        component = next(
            (c for c in strongly_connected_components(candidates, _no_delay) if is_cyclic(c, _no_delay)),
            None,
        )
        if component is None:
            return
        owner = owners(program)
        names = _describe(component, program, owner)
        if insert_delays:
            target = _stream_operator(component, program)
            if target is not None:
                _insert_delay(program, everything, target)
                continue
        line, column = (positions or {}).get(names[0], (1, 1)) if names else (1, 1)
        message = f"cycle without a delay operator through queries {' -> '.join(names)}; "
        if insert_delays:
            message += "there is no ISTREAM, DSTREAM or RSTREAM on it after which a delay could be inserted; "
        message += "end a stream query on the cycle with <Now> (e.g. ISTREAM(...)<Now>)"
        raise CqlError(message, line, column, file)


def _stream_operator(component: list[plan.PlanNode], program: plan.Program) -> plan.ToStream | None:
    """The ToStream of a delay-free component whose output delay leaves the
    fewest nodes on delay-free cycles (ties: the root of the earliest
    registered query, then discovery order)."""
    streams = [n for n in component if isinstance(n, plan.ToStream)]
    rank: dict[plan.PlanNode, int] = {}
    for number, root in enumerate(program.queries.values()):
        rank.setdefault(root, number)
    members = set(component)

    def remaining(cut: plan.PlanNode) -> int:
        def successors(node: plan.PlanNode) -> list[plan.PlanNode]:
            return [c for c in _no_delay(node) if c in members and c is not cut]

        components = strongly_connected_components(component, successors)
        return sum(len(c) for c in components if is_cyclic(c, successors))

    def key(node: plan.ToStream) -> tuple[int, int, int]:
        return remaining(node), rank.get(node, len(rank) + 1), component.index(node)

    return min(streams, key=key, default=None)


def _insert_delay(program: plan.Program, nodes: list[plan.PlanNode], target: plan.ToStream) -> None:
    """Put an epsilon Delay between ``target`` and all its readers."""
    delay = plan.Delay(target.schema, plan.Kind.STREAM, target, plan.EPSILON_MS)
    for node in nodes:
        for attribute in ("child", "left", "right", "target"):
            if getattr(node, attribute, None) is target:
                setattr(node, attribute, delay)
    for name, root in program.queries.items():
        if root is target:
            program.queries[name] = delay


@dataclass(frozen=True)
class QueryCycle:
    """An elementary cycle of registered queries (data-flow order, without
    repeating the first) and the plan nodes that lie on it."""

    queries: tuple[str, ...]
    nodes: tuple[plan.PlanNode, ...]


def query_cycles(program: plan.Program, limit: int = 100) -> tuple[list[QueryCycle], bool]:
    """The elementary cycles among registered queries, at most ``limit`` of
    them (the second result tells whether some were left out). A cycle's
    nodes are those on a loop through the operators of its queries only."""
    owner = owners(program)
    order = list(program.queries)
    feeds: dict[str, list[str]] = {name: [] for name in order}
    for node, name in owner.items():
        if isinstance(node, plan.QueryRef) and node.name in feeds and name not in feeds[node.name]:
            feeds[node.name].append(name)
    for readers in feeds.values():
        readers.sort(key=order.index)
    found: list[list[str]] = []
    truncated = False
    for first, start in enumerate(order):
        path = [start]
        todo = [iter(feeds[start])]
        while todo and not truncated:
            step = next(todo[-1], None)
            if step is None:
                todo.pop()
                path.pop()
            elif step == start:
                if len(found) == limit:
                    truncated = True
                else:
                    found.append(list(path))
            elif order.index(step) > first and step not in path:
                path.append(step)
                todo.append(iter(feeds[step]))
    cycles = []
    for names in found:
        members = set(names)

        def inside(node: plan.PlanNode, members: set[str] = members) -> list[plan.PlanNode]:
            if isinstance(node, plan.QueryRef):
                return [node.target] if node.name in members and node.target else []
            return [c for c in node.children if owner.get(c) in members]

        own = [n for n in owner if owner[n] in members]
        on_cycle = [n for c in strongly_connected_components(own, inside) if is_cyclic(c, inside) for n in c]
        cycles.append(QueryCycle(tuple(names), tuple(on_cycle)))
    return cycles, truncated
