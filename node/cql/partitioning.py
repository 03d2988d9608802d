"""Whether a CQL program keeps its result when run as partitions, pure.

A partitioned stage runs ``count`` copies of its program. Each copy gets
only its own rows of every partitioned input: rows routed by a hash of key
columns, or round-robin by seq. Each copy gets every row of the other
(broadcast) inputs. The consumer merges the copies' outputs. That is right
only if the union of the outputs is the unpartitioned output at every
instant. :func:`check_partitioning` proves this from the plan, or refuses.
It is conservative: a refusal does not mean a difference is certain.

Each node's rows are modelled as REPLICATED or PARTITIONED. REPLICATED: every
copy holds the same full data, because the node reads only broadcast inputs.
PARTITIONED(key): the copies hold disjoint parts of the data. With a key,
the partition of a row is the hash of the values at ``key`` (positions in
the node's row, in order). So equal key values are in one copy, and equal
rows too. The key is None when that is unknown (round-robin, or the key
columns are projected away). An operator is safe when every group it looks
at lies in one copy:

- row-wise operators and time windows (Select, Project, Now/Range/Unbounded
  windows, Delay) are safe on any input;
- GROUP BY and ``[Partition By .. Rows N]`` are safe when the key is in
  their grouping. Partition By keeps the last rows of a group by their
  order within an instant; every operator emits in an order fixed by its
  input order (first appearance, never hash order), so each copy sees a
  group's rows in the whole stream's order, also over a derived stream;
- DISTINCT, UNION (set), EXCEPT and ISTREAM/DSTREAM compare equal rows.
  Equal rows must meet in one copy, so the key must be known;
- a join must pair rows inside one copy: one side replicated, or both
  sides' keys equated by the WHERE clause or the join predicate;
- RSTREAM is refused. The engine emits the whole relation only at instants
  when it changed, so a copy that did not change would stay silent;
- a global aggregate, ``[Rows N]``, ASSIGN and recursion are refused.

Hashing (:mod:`semiactive.node.sections.partitions`) maps equal numbers (``3``, ``3.0``) to
one partition, and equal strings too. So key equalities are trusted only
between two numbers or between two texts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from semiactive.errors import UserError
from semiactive.node.cql import plan


class PartitioningError(UserError):
    """A partitioning that could change a program's result, or bad keys."""


@dataclass(frozen=True)
class _Dist:
    """How a node's rows are spread over the partitions (module docstring)."""

    partitioned: bool
    key: tuple[int, ...] | None = None


_REPLICATED = _Dist(False)

# Column equalities (i, j), i < j, that a filter above guarantees.
_Equalities = frozenset[tuple[int, int]]
_NONE: _Equalities = frozenset()


def check_partitioning(
    program: plan.Program, output: str, keys: Mapping[str, tuple[str, ...] | None]
) -> None:
    """Raise :class:`PartitioningError` if running ``program`` as partitions
    could change query ``output``. ``keys`` gives, per input stream, the key
    columns that route its rows. ``()`` means round-robin. A stream that is
    absent, or maps to None, is broadcast."""
    if output not in program.queries:
        raise PartitioningError(f"no query {output!r} in the program ({', '.join(program.queries)})")
    scans = _scans(program, keys)
    dist = _Analysis(scans).visit(program.queries[output], output)
    if not dist.partitioned:
        if scans:
            why = f"it derives only from broadcast inputs (partitioned: {', '.join(sorted(scans))})"
        else:
            why = "no input is partitioned"
        raise PartitioningError(
            f"query {output}: {why}; every partition would emit the whole result, so the consumer "
            "would see it once per partition"
        )


def _scans(program: plan.Program, keys: Mapping[str, tuple[str, ...] | None]) -> dict[str, _Dist]:
    """The distribution of every partitioned input, once ``keys`` are checked."""
    inputs = ", ".join(program.inputs) or "none"
    dists: dict[str, _Dist] = {}
    for stream, columns in keys.items():
        if columns is None:
            continue
        if stream not in program.inputs:
            if stream in program.queries:
                raise PartitioningError(
                    f"partition key for {stream}: {stream} is a query of the program, not one of its "
                    f"inputs ({inputs}); only inputs are partitioned"
                )
            raise PartitioningError(f"partition key for unknown input stream {stream!r} (inputs: {inputs})")
        decl = program.inputs[stream]
        names = decl.schema.names
        for column in columns:
            if column not in names:
                raise PartitioningError(
                    f"partition key of {stream}: no column {column!r} (columns: {', '.join(names)})"
                )
        if len(set(columns)) != len(columns):
            raise PartitioningError(f"partition key of {stream}: a column is named twice ({columns})")
        if not columns and decl.kind is plan.Kind.RELATION:
            raise PartitioningError(
                f"relation {stream} cannot be partitioned round-robin: a deletion must reach the "
                "partition that holds the row; partition it by key columns or broadcast it"
            )
        key = tuple(names.index(c) for c in columns) if columns else None
        dists[stream] = _Dist(True, key)
    return dists


class _Analysis:
    def __init__(self, scans: dict[str, _Dist]) -> None:
        self.scans = scans
        self.memo: dict[tuple[int, _Equalities], _Dist] = {}
        self.path: set[int] = set()

    def visit(self, node: plan.PlanNode, query: str, filtered: _Equalities = _NONE) -> _Dist:
        """``filtered``: equalities between the node's columns that hold on
        every row the program keeps, because a filter sits above through
        row-wise operators only (only Select and Join use them)."""
        seen: set[int] = set()
        while isinstance(node, plan.QueryRef):
            if node.target is None:
                raise PartitioningError(f"query {query}: unresolved reference to query {node.name}")
            if id(node) in seen:
                raise PartitioningError(f"query {query}: recursive programs are not partitioned")
            seen.add(id(node))
            query, node = node.name, node.target
        if not isinstance(node, plan.Select | plan.Join):
            filtered = _NONE
        memo = (id(node), filtered)
        if memo in self.memo:
            return self.memo[memo]
        if id(node) in self.path:
            raise PartitioningError(
                f"query {query}: recursive programs are not partitioned (a row's consequences come "
                "back through the loop and can meet other partitions' rows)"
            )
        self.path.add(id(node))
        try:
            dist = self._node(node, query, filtered)
        finally:
            self.path.discard(id(node))
        self.memo[memo] = dist
        return dist

    def _node(self, node: plan.PlanNode, query: str, filtered: _Equalities) -> _Dist:
        if isinstance(node, plan.Scan):
            return self.scans.get(node.name, _REPLICATED)
        if isinstance(node, plan.Select):
            return self.visit(node.child, query, filtered | _equalities(node.predicate))
        if isinstance(node, plan.Join):
            return self._join(node, query, filtered)
        if isinstance(node, plan.Assign):
            raise PartitioningError(f"query {query}: ASSIGN is not partitioned; run it unpartitioned")
        children = [self.visit(c, query) for c in node.children]
        if not any(c.partitioned for c in children):
            return _REPLICATED
        if isinstance(node, plan.Delay):
            return children[0]
        if isinstance(node, plan.Project):
            return _project(children[0], node.exprs)
        if isinstance(node, plan.Window):
            return _window(node, children[0], query)
        if isinstance(node, plan.Aggregate):
            return _aggregate(node, children[0], query)
        if isinstance(node, plan.Distinct):
            _need_key(children[0], query, "DISTINCT", node.child)
            return _Dist(True, children[0].key)
        if isinstance(node, plan.ToStream):
            return _to_stream(node, children[0], query)
        if isinstance(node, plan.Union | plan.Except):
            return _set_operation(node, children[0], children[1], query)
        raise PartitioningError(f"query {query}: {type(node).__name__} is not partitioned")

    def _join(self, node: plan.Join, query: str, filtered: _Equalities) -> _Dist:
        width = len(node.left.schema)
        equal = filtered | _equalities(node.predicate)
        left = self.visit(node.left, query, frozenset((i, j) for i, j in equal if j < width))
        right = self.visit(
            node.right, query, frozenset((i - width, j - width) for i, j in equal if i >= width)
        )
        if not right.partitioned:
            return _Dist(left.partitioned, left.key)
        right_key = None if right.key is None else tuple(width + k for k in right.key)
        if not left.partitioned:
            return _Dist(True, right_key)
        names = tuple(f"{c.source}.{c.name}" if c.source else c.name for c in node.schema.columns)
        if left.key is None or right_key is None:
            raise PartitioningError(
                f"query {query}: a join of two partitioned inputs, one of them with no known key "
                "(round-robin, or its key columns projected away); rows that match can be in "
                "different partitions. Partition both by the joined columns, or broadcast one"
            )
        classes = _classes(equal)
        if len(left.key) != len(right_key) or any(
            classes.get(a, a) != classes.get(b, b) for a, b in zip(left.key, right_key, strict=True)
        ):
            wanted = " AND ".join(
                f"{names[a]} = {names[b]}" for a, b in zip(left.key, right_key, strict=False)
            )
            raise PartitioningError(
                f"query {query}: a join of two partitioned inputs must equate their partition keys "
                f"(partitioned by {_columns(names, left.key)} and {_columns(names, right_key)}: needs "
                f"{wanted or 'keys of the same length'} between numbers or texts); rows that match "
                "can be in different partitions. Partition both by the joined columns, or broadcast one"
            )
        return _Dist(True, left.key)


def _project(child: _Dist, exprs: tuple[plan.Expr, ...]) -> _Dist:
    if child.key is None:
        return _Dist(True, None)
    kept: dict[int, int] = {}
    for position, expr in enumerate(exprs):
        if isinstance(expr, plan.ColRef):
            kept.setdefault(expr.index, position)
    if all(k in kept for k in child.key):
        return _Dist(True, tuple(kept[k] for k in child.key))
    return _Dist(True, None)


def _window(node: plan.Window, child: _Dist, query: str) -> _Dist:
    spec = node.spec
    if isinstance(spec, plan.RowsWindow):
        raise PartitioningError(
            f"query {query}: a [Rows {spec.rows}] window over a partitioned stream holds the last rows "
            "of the whole stream, not of one partition; use [Partition By <key> Rows N] or run it "
            "unpartitioned"
        )
    if isinstance(spec, plan.PartitionWindow):
        names = node.child.schema.names
        by = _columns(names, spec.keys)
        if not child.key or not set(child.key) <= set(spec.keys):
            have = "no known key" if not child.key else f"key {_columns(names, child.key)}"
            raise PartitioningError(
                f"query {query}: {_partition_text(by, spec)} over a stream partitioned with "
                f"{have}; every partition key column must be a Partition By column, so that each "
                "window partition is in one stage partition"
            )
    return _Dist(True, child.key)


def _partition_text(by: str, spec: plan.PartitionWindow) -> str:
    range_ = "" if spec.range_ms is None else f" Range {spec.range_ms} ms"
    return f"[Partition By {by} Rows {spec.rows}{range_}]"


def _aggregate(node: plan.Aggregate, child: _Dist, query: str) -> _Dist:
    names = node.child.schema.names
    if not node.group_by:
        raise PartitioningError(
            f"query {query}: a global aggregate (no GROUP BY) over a partitioned input changes the "
            "result; partition by a GROUP BY column or run it unpartitioned"
        )
    _need_key(child, query, "GROUP BY", node.child)
    assert child.key is not None
    groups: dict[int, int] = {}
    for position, expr in enumerate(node.group_by):
        if isinstance(expr, plan.ColRef):
            groups.setdefault(expr.index, position)
    missing = [k for k in child.key if k not in groups]
    if missing:
        raise PartitioningError(
            f"query {query}: GROUP BY does not contain the partition key column(s) "
            f"{_columns(names, tuple(missing))}, so one group can be in several partitions; "
            "partition by GROUP BY columns or run it unpartitioned"
        )
    return _Dist(True, tuple(groups[k] for k in child.key))


def _to_stream(node: plan.ToStream, child: _Dist, query: str) -> _Dist:
    op = node.op.value.upper()
    if node.op is plan.StreamOp.RSTREAM:
        raise PartitioningError(
            f"query {query}: RSTREAM over a partitioned relation; a partition emits its part of "
            "the relation only at instants when that part changed, so parts that did not change "
            "would be missing. Run it unpartitioned"
        )
    _need_key(child, query, op, node.child)
    return _Dist(True, child.key)


def _set_operation(node: plan.Union | plan.Except, left: _Dist, right: _Dist, query: str) -> _Dist:
    what = "EXCEPT" if isinstance(node, plan.Except) else "UNION ALL" if node.all else "UNION"
    if not right.partitioned and isinstance(node, plan.Except):
        # A row's whole count is in one partition; the others subtract from 0.
        _need_key(left, query, what, node.left)
        return _Dist(True, left.key)
    if not (left.partitioned and right.partitioned):
        raise PartitioningError(
            f"query {query}: {what} of a partitioned and a broadcast input; the broadcast side "
            f"would be {'subtracted from' if isinstance(node, plan.Except) else 'emitted by'} "
            "every partition. Partition both inputs or neither"
        )
    same = left.key is not None and left.key == right.key
    if isinstance(node, plan.Union) and node.all:
        return _Dist(True, left.key if same else None)
    if not same:
        raise PartitioningError(
            f"query {query}: {what} compares rows of both inputs, so both must be partitioned by "
            "the same columns (same positions) for equal rows to meet in one partition"
        )
    return _Dist(True, left.key)


def _need_key(child: _Dist, query: str, what: str, node: plan.PlanNode) -> None:
    if child.key is None:
        raise PartitioningError(
            f"query {query}: {what} over a partitioned input with no known key (round-robin, or "
            "its key columns projected away); rows it must see together can be in different "
            f"partitions. Partition by input columns that reach it unchanged ({', '.join(node.schema.names)})"
        )


def _columns(names: tuple[str, ...], positions: tuple[int, ...]) -> str:
    return ", ".join(names[p] for p in positions)


def _conjuncts(expr: plan.Expr) -> Iterator[plan.Expr]:
    if isinstance(expr, plan.BoolOp) and expr.op.upper() == "AND":
        for operand in expr.operands:
            yield from _conjuncts(operand)
    else:
        yield expr


def _equalities(predicate: plan.Expr | None) -> _Equalities:
    """Column equalities ``a = b`` among the predicate's top-level AND
    conjuncts whose equal values hash equal (two numbers or two texts)."""
    if predicate is None:
        return _NONE
    pairs = set()
    for c in _conjuncts(predicate):
        if (
            isinstance(c, plan.Compare)
            and c.op == "="
            and isinstance(c.left, plan.ColRef)
            and isinstance(c.right, plan.ColRef)
            and (
                (c.left.type.is_numeric and c.right.type.is_numeric)
                or (c.left.type.is_text and c.right.type.is_text)
            )
        ):
            a, b = sorted((c.left.index, c.right.index))
            pairs.add((a, b))
    return frozenset(pairs)


def _classes(equal: _Equalities) -> dict[int, int]:
    """Each column's representative under the equalities' transitive closure."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for a, b in equal:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: find(x) for x in parent}
