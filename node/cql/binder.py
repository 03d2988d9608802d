"""AST -> logical plan (:mod:`semiactive.node.cql.plan`): names, kinds, schemas, types.

Queries may use queries registered later and may form cycles, so a query's
schema can depend on its own. Binding therefore iterates to a fixpoint: each
pass binds every query with the (kind, schema) the previous passes found for
the queries it references; a reference to a query not bound yet makes the
query *pending*, except on one side of a UNION / EXCEPT, whose schema can come
from the other side. Types only widen (integer -> float, char(n) -> char(m)),
so the passes converge; the plan of the last pass, where nothing changed, is
the result, and its QueryRef nodes are then pointed at their targets.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from semiactive.node.cql import ast, plan
from semiactive.node.cql.assign import bind_assign
from semiactive.node.cql.errors import CqlError
from semiactive.node.cql.exprs import ExprBinder, GroupedBinder, Scope, contains_aggregate


class _Pending(Exception):
    """A query this one needs has no known schema yet."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(names)
        self.names = names


@dataclass
class _Context:
    """Per-query state of one binding pass."""

    refs: list[plan.QueryRef] = field(default_factory=list)
    # Queries without a schema yet that one side of a set operation needed.
    incomplete: list[str] = field(default_factory=list)


@dataclass
class _FromItem:
    node: plan.PlanNode
    columns: tuple[plan.Column, ...]
    bare_stream: bool  # a stream without a window
    # (alias, columns) of each part the FROM row qualifies separately (ASSIGN:
    # R's columns, then the declared ones); empty: one part, the item's alias.
    parts: tuple[tuple[str, tuple[plan.Column, ...]], ...] = ()


@dataclass
class Bound:
    """What :func:`bind` returns: the program and where each query starts."""

    program: plan.Program
    positions: dict[str, tuple[int, int]]


def bind(
    tree: ast.Program, inputs: Mapping[str, plan.InputDecl] | None = None, file: str = "<query>"
) -> Bound:
    return _Binder(tree, dict(inputs or {}), file).run()


class _Binder:
    def __init__(self, tree: ast.Program, inputs: dict[str, plan.InputDecl], file: str) -> None:
        self.file = file
        self.inputs = inputs
        self.statements: dict[str, ast.RegisterQuery] = {}
        self.known: dict[str, tuple[plan.Kind, plan.Schema]] = {}
        declared_at: dict[str, ast.Statement] = {}
        for statement in tree.statements:
            name = statement.name
            if isinstance(statement, ast.RegisterInput) and name in self.inputs and name not in declared_at:
                # A stage input the program also declares (so one file runs
                # embedded and on a cluster): fine if it is what the producer sends.
                self._check_declaration(statement, self.inputs[name])
                declared_at[name] = statement
                continue
            if name in self.inputs or name in self.statements:
                raise self._error(self._duplicate(statement, declared_at.get(name)), statement)
            declared_at[name] = statement
            if isinstance(statement, ast.RegisterInput):
                self.inputs[name] = self._input(statement)
            else:
                self.statements[name] = statement
        self.scans = {
            name: plan.Scan(plan.Schema(_relabel(decl.schema.columns, name)), decl.kind, name)
            for name, decl in self.inputs.items()
        }

    @staticmethod
    def _duplicate(statement: ast.Statement, earlier: ast.Statement | None) -> str:
        name = statement.name
        if earlier is None:
            return f"{name!r} is already registered as a stage input"
        where = f"line {earlier.line}, column {earlier.column}"
        if isinstance(earlier, ast.RegisterQuery) and earlier.anonymous:
            where = f"the unnamed query at {where}"
        if isinstance(statement, ast.RegisterQuery) and statement.anonymous:
            return f"this unnamed query would be called {name!r}, which is already taken ({where})"
        return f"{name!r} is already registered ({where})"

    def _error(self, message: str, where: ast.Node) -> CqlError:
        return CqlError(message, where.line, where.column, self.file)

    def _check_declaration(self, statement: ast.RegisterInput, given: plan.InputDecl) -> None:
        declared = self._input(statement)

        def shown(decl: plan.InputDecl) -> str:
            columns = ", ".join(f"{c.name} {c.type}" for c in decl.schema.columns)
            return f"a {decl.kind.value} ({columns})"

        same = [(c.name, c.type) for c in declared.schema.columns] == [
            (c.name, c.type) for c in given.schema.columns
        ]
        if declared.kind is not given.kind or not same:
            raise self._error(
                f"{statement.name!r} is declared as {shown(declared)}, but the stage input is {shown(given)}",
                statement,
            )

    def _input(self, statement: ast.RegisterInput) -> plan.InputDecl:
        seen: set[str] = set()
        for attribute in statement.attributes:
            if attribute.name in seen:
                raise self._error(f"duplicate attribute {attribute.name!r}", attribute)
            if attribute.name in RESERVED:
                raise self._error(_reserved(attribute.name), attribute)
            seen.add(attribute.name)
        columns = tuple(plan.Column(a.name, a.type, statement.name) for a in statement.attributes)
        return plan.InputDecl(statement.name, statement.kind, plan.Schema(columns))

    # ---- the fixpoint -----------------------------------------------------------

    def run(self) -> Bound:
        limit = 10 * (len(self.statements) + 2)
        for _ in range(limit):
            roots: dict[str, plan.PlanNode] = {}
            contexts: dict[str, _Context] = {}
            pending: dict[str, list[str]] = {}
            errors: dict[str, CqlError] = {}
            changed = False
            for name, statement in self.statements.items():
                context = _Context()
                try:
                    root = self._named(statement, self._query(statement.query, context))
                except _Pending as exc:
                    pending[name] = exc.names
                    continue
                except CqlError as exc:
                    errors[name] = exc
                    continue
                roots[name], contexts[name] = root, context
                if self.known.get(name) != (root.kind, root.schema):
                    self.known[name] = (root.kind, root.schema)
                    changed = True
            if not changed:
                return self._finish(roots, contexts, pending, errors)
        first = next(iter(self.statements.values()))
        raise self._error("the query schemas do not converge (internal error)", first)

    def _finish(
        self,
        roots: dict[str, plan.PlanNode],
        contexts: dict[str, _Context],
        pending: dict[str, list[str]],
        errors: dict[str, CqlError],
    ) -> Bound:
        if errors:
            raise next(iter(errors.values()))
        if pending:
            self._undetermined(pending)
        for name, root in roots.items():
            clash = next((c for c in root.schema.names if c in RESERVED), None)
            if clash is not None:
                raise self._error(f"query {name!r}: {_reserved(clash)}", self.statements[name])
        for context in contexts.values():
            # Cannot happen without pending queries; kept as a safety net.
            assert not context.incomplete, context.incomplete
            for ref in context.refs:
                ref.target = roots[ref.name]
        positions = {n: (s.line, s.column) for n, s in self.statements.items()}
        program = plan.Program(dict(self.inputs), self.scans, roots, self.file, positions)
        return Bound(program, positions)

    def _undetermined(self, pending: dict[str, list[str]]) -> None:
        chain = [next(iter(pending))]
        while True:
            following = next((n for n in pending[chain[-1]] if n in pending), chain[-1])
            if following in chain:
                cycle = [*chain[chain.index(following) :], following]
                break
            chain.append(following)
        order = list(self.statements)
        first = min(cycle[:-1], key=order.index)
        start = cycle.index(first)
        rotated = cycle[start:-1] + cycle[:start] + [first]
        flow = " -> ".join(reversed(rotated))  # data flows from a query to its readers
        raise self._error(
            f"cannot determine the schema of query {first!r} (it depends only on itself through {flow})",
            self.statements[first],
        )

    def _named(self, statement: ast.RegisterQuery, root: plan.PlanNode) -> plan.PlanNode:
        """``REGISTER QUERY q (a, b) AS ...`` (Stanford STREAM's views): the
        query's columns renamed in order. Recursive references see the new
        names, as every reader does."""
        names = statement.columns
        if not names:
            return root
        columns = root.schema.columns
        if len(names) != len(columns):
            raise self._error(
                f"{statement.name} names {len(names)} columns but its query gives {len(columns)}", names[0]
            )
        seen: set[str] = set()
        for n in names:
            if n.name in RESERVED:
                raise self._error(_reserved(n.name), n)
            if n.name in seen:
                raise self._error(f"duplicate column name {n.name!r}", n)
            seen.add(n.name)
        pairs = list(zip(columns, names, strict=True))
        renamed = tuple(dataclasses.replace(c, name=n.name) for c, n in pairs)
        exprs = tuple(plan.ColRef(c.type, i, n.name, c.nullable) for i, (c, n) in enumerate(pairs))
        return plan.Project(plan.Schema(renamed), root.kind, root, exprs)

    # ---- queries --------------------------------------------------------------

    def _query(self, query: ast.Query, context: _Context) -> plan.PlanNode:
        node = self._set_expr(query.body, context)
        if query.delay is None:
            return node
        if node.kind is not plan.Kind.STREAM:
            raise self._error(
                f"delay {query.delay.text} on a relation-valued query; a delay shifts a "
                f"stream: apply it to ISTREAM(...), DSTREAM(...) or RSTREAM(...)",
                query.delay,
            )
        return plan.Delay(node.schema, plan.Kind.STREAM, node, query.delay.ms)

    def _set_expr(self, expr: ast.SetExpr, context: _Context) -> plan.PlanNode:
        if isinstance(expr, ast.Select):
            return self._select(expr, context)
        if isinstance(expr, ast.StreamOp):
            return self._stream_op(expr, context)
        return self._set_op(expr, context)

    def _stream_op(self, expr: ast.StreamOp, context: _Context) -> plan.PlanNode:
        inner = self._set_expr(expr.query, context)
        op = plan.StreamOp(expr.op.lower())
        if inner.kind is plan.Kind.STREAM:
            if op is plan.StreamOp.ISTREAM:
                return inner  # ISTREAM of a stream is that stream
            inner = plan.Window(inner.schema, plan.Kind.RELATION, inner, plan.UnboundedWindow())
        return plan.ToStream(inner.schema, plan.Kind.STREAM, inner, op)

    def _set_op(self, expr: ast.SetOp, context: _Context) -> plan.PlanNode:
        sides: list[plan.PlanNode | None] = []
        missing: list[str] = []
        for side in (expr.left, expr.right):
            try:
                sides.append(self._set_expr(side, context))
            except _Pending as exc:
                sides.append(None)
                missing.extend(exc.names)
        left, right = sides
        if left is None and right is None:
            raise _Pending(missing)
        for node, position in ((left, "left"), (right, "right")):
            if expr.op == "EXCEPT" and node is not None and node.kind is plan.Kind.STREAM:
                raise self._error(
                    f"EXCEPT needs relations, but its {position} input is a stream; apply a window to it",
                    expr,
                )
        if left is None or right is None:
            context.incomplete.extend(missing)
            known = left if left is not None else right
            assert known is not None
            return known  # schema and kind for now; rebound once the other side is known
        schema = self._combine(expr, left, right)
        if expr.op == "EXCEPT":
            return plan.Except(schema, plan.Kind.RELATION, left, right)
        return plan.Union(schema, left.kind, left, right, all=expr.op == "UNION ALL")

    def _combine(self, expr: ast.SetOp, left: plan.PlanNode, right: plan.PlanNode) -> plan.Schema:
        if left.kind is not right.kind:
            raise self._error(
                f"{expr.op} of a {left.kind.value} with a {right.kind.value}; both inputs must "
                "be streams or both relations (use ISTREAM(...) or a window)",
                expr,
            )
        if len(left.schema) != len(right.schema):
            raise self._error(
                f"{expr.op} inputs have different numbers of columns "
                f"({len(left.schema)} and {len(right.schema)})",
                expr,
            )
        columns = []
        pairs = zip(left.schema.columns, right.schema.columns, strict=True)
        for number, (a, b) in enumerate(pairs, start=1):
            widened = _widen(a.type, b.type)
            if widened is None:
                raise self._error(
                    f"type mismatch: {expr.op} column {number} ({a.name}) is {a.type} on the "
                    f"left and {b.type} on the right",
                    expr,
                )
            columns.append(plan.Column(a.name, widened, a.source, a.nullable or b.nullable))
        return plan.Schema(tuple(columns))

    # ---- SELECT ---------------------------------------------------------------

    def _select(self, select: ast.Select, context: _Context) -> plan.PlanNode:
        items: list[_FromItem] = []
        missing: list[str] = []
        scope = Scope(self.file)
        for from_item in select.from_items:
            try:
                item = self._from_item(from_item, context)
            except _Pending as exc:
                missing.extend(exc.names)
                continue
            items.append(item)
            for alias, columns in item.parts or ((_alias(from_item), item.columns),):
                scope.add(alias, columns, from_item)
        if missing:
            raise _Pending(missing)

        aggregated = (
            select.group_by is not None
            or select.having is not None
            or any(isinstance(i, ast.ExprItem) and contains_aggregate(i.expr) for i in select.items)
        )
        stream_valued = len(items) == 1 and items[0].bare_stream and not aggregated and not select.distinct
        node: plan.PlanNode | None = None
        for item in items:
            child = item.node
            if item.bare_stream and not stream_valued:
                child = plan.Window(
                    plan.Schema(item.columns), plan.Kind.RELATION, child, plan.UnboundedWindow()
                )
            if node is None:
                node = child
            else:
                joined = plan.Schema(tuple(scope.columns[: len(node.schema) + len(item.columns)]))
                node = plan.Join(joined, plan.Kind.RELATION, node, child)
        assert node is not None
        if select.where is not None:
            predicate = ExprBinder(scope, "WHERE").bind(select.where)
            self._need_condition(predicate, "WHERE", select.where)
            node = plan.Select(node.schema, node.kind, node, predicate)
        if aggregated:
            return self._aggregate(select, scope, node)
        exprs, names = self._select_list(select, scope, ExprBinder(scope, "the SELECT list"))
        sources = [scope.column(e).source if isinstance(e, plan.ColRef) else "" for e in exprs]
        return self._project(select, node, exprs, names, sources)

    def _from_item(self, item: ast.FromItem, context: _Context) -> _FromItem:
        if isinstance(item, ast.FromAssign):
            return self._assign(item, context)
        if isinstance(item, ast.FromSubquery):
            node = self._query(item.query, context)
        else:
            node = self._source(item, context)
        alias = _alias(item)
        columns = _relabel(node.schema.columns, alias)
        if item.window is None:
            return _FromItem(node, columns, node.kind is plan.Kind.STREAM)
        window = item.window
        if node.kind is not plan.Kind.STREAM:
            what = "subquery" if isinstance(item, ast.FromSubquery) else repr(item.name)
            raise self._error(
                f"window {window.text} on relation {what}; windows apply only to streams",
                window,
            )
        spec = window.spec
        if isinstance(spec, plan.PartitionWindow):
            names = {alias} | ({item.name} if isinstance(item, ast.FromName) else set())
            spec = replace(spec, keys=self._partition_keys(window, columns, names))
        return _FromItem(plan.Window(plan.Schema(columns), plan.Kind.RELATION, node, spec), columns, False)

    def _assign(self, item: ast.FromAssign, context: _Context) -> _FromItem:
        """Seed 004's ASSIGN (node/cql/assign.py) over R as a relation; R's
        columns keep R's alias, the declared ones take the ASSIGN's."""
        r = self._from_item(item.relation, context)
        relation = r.node
        if r.bare_stream:
            relation = plan.Window(
                plan.Schema(r.columns), plan.Kind.RELATION, relation, plan.UnboundedWindow()
            )
        node = bind_assign(item, relation, r.columns, self.scans, self._error)
        declared = node.schema.columns[len(r.columns) :]
        parts = ((_alias(item.relation), r.columns), (item.alias, declared))
        return _FromItem(node, node.schema.columns, False, parts)

    def _source(self, item: ast.FromName, context: _Context) -> plan.PlanNode:
        if item.name in self.scans:
            return self.scans[item.name]
        if item.name not in self.statements:
            raise self._error(f"unknown stream, relation or query {item.name!r}", item)
        known = self.known.get(item.name)
        if known is None:
            raise _Pending([item.name])
        ref = plan.QueryRef(known[1], known[0], item.name)
        context.refs.append(ref)
        return ref

    def _partition_keys(
        self, window: ast.WindowAst, columns: tuple[plan.Column, ...], names: set[str]
    ) -> tuple[int, ...]:
        keys = []
        for key in window.keys:
            if key.qualifier is not None and key.qualifier not in names:
                raise self._error(f"unknown stream or alias {key.qualifier!r} in PARTITION BY", key)
            matches = [i for i, c in enumerate(columns) if c.name == key.name]
            if not matches:
                known = ", ".join(c.name for c in columns)
                raise self._error(
                    f"unknown column {ast.render(key)!r} in PARTITION BY; known columns: {known}",
                    key,
                )
            keys.append(matches[0])
        return tuple(keys)

    def _aggregate(self, select: ast.Select, scope: Scope, node: plan.PlanNode) -> plan.PlanNode:
        keys: list[plan.Expr] = []
        key_columns: list[plan.Column] = []
        for key_ast in select.group_by or ():
            key = ExprBinder(scope, "GROUP BY").bind(key_ast)
            if key.type == plan.BOOLEAN:
                raise self._error("cannot group by a condition", key_ast)
            keys.append(key)
            if isinstance(key, plan.ColRef):
                key_columns.append(scope.column(key))
            else:
                key_columns.append(plan.Column(ast.render(key_ast), key.type, nullable=plan.can_be_null(key)))
        binder = GroupedBinder(scope, keys, key_columns)
        exprs, names = self._select_list(select, scope, binder)
        having = None
        if select.having is not None:
            having = binder.bind(select.having)
            self._need_condition(having, "HAVING", select.having)
        columns = tuple(key_columns + binder.aggregate_columns)
        result: plan.PlanNode = plan.Aggregate(
            plan.Schema(columns), plan.Kind.RELATION, node, tuple(keys), tuple(binder.aggregates)
        )
        if having is not None:
            result = plan.Select(result.schema, result.kind, result, having)
        sources = [columns[e.index].source if isinstance(e, plan.ColRef) else "" for e in exprs]
        return self._project(select, result, exprs, names, sources)

    def _select_list(
        self, select: ast.Select, scope: Scope, binder: ExprBinder
    ) -> tuple[list[plan.Expr], list[str]]:
        exprs: list[plan.Expr] = []
        names: list[str] = []
        first_at: dict[str, ast.Node] = {}
        stars = {id(i): scope.expand_star(i) for i in select.items if isinstance(i, ast.StarItem)}
        starred = Counter(ref.name for refs in stars.values() for ref in refs)
        for number, item in enumerate(select.items, start=1):
            entries: list[tuple[ast.Expr, str | None, ast.Node]]
            if isinstance(item, ast.StarItem):
                entries = [(ref, None, item) for ref in stars[id(item)]]
            else:
                entries = [(item.expr, _output_name(item, number), item)]
            for expr_ast, given, where in entries:
                if given is None:
                    assert isinstance(expr_ast, ast.ColumnRef)
                    name = _star_name(expr_ast, starred, first_at)
                else:
                    name = given
                bound = binder.bind(expr_ast)
                if bound.type == plan.BOOLEAN:
                    raise self._error(
                        f"a condition cannot be an output column ({ast.render(expr_ast)})",
                        expr_ast,
                    )
                if name in first_at:
                    first = first_at[name]
                    also = "" if first is where else f" (also at line {first.line}, column {first.column})"
                    raise self._error(
                        f"duplicate output column name {name!r}{also}; give the columns "
                        "distinct names with AS",
                        where,
                    )
                first_at[name] = where
                exprs.append(bound)
                names.append(name)
        return exprs, names

    def _project(
        self,
        select: ast.Select,
        child: plan.PlanNode,
        exprs: list[plan.Expr],
        names: list[str],
        sources: list[str],
    ) -> plan.PlanNode:
        identity = len(exprs) == len(child.schema) and all(
            isinstance(e, plan.ColRef) and e.index == i and names[i] == child.schema.names[i]
            for i, e in enumerate(exprs)
        )
        node = child
        if not identity:
            columns = tuple(
                plan.Column(n, e.type, s, plan.can_be_null(e))
                for n, e, s in zip(names, exprs, sources, strict=True)
            )
            node = plan.Project(plan.Schema(columns), child.kind, child, tuple(exprs))
        if select.distinct:
            node = plan.Distinct(node.schema, plan.Kind.RELATION, node)
        return node

    def _need_condition(self, predicate: plan.Expr, clause: str, where: ast.Expr) -> None:
        if predicate.type != plan.BOOLEAN:
            raise self._error(
                f"type mismatch: {clause} needs a condition, got {predicate.type} ({ast.render(where)})",
                where,
            )


# The fields every row has in JSON Lines ({"seq": .., "ts": .., "op": ..}).
RESERVED = ("ts", "seq", "op")


def _reserved(column: str) -> str:
    return (
        f"column name {column!r} is reserved (every row has seq, ts and, in a relation, op); "
        "rename it with AS"
    )


def _relabel(columns: tuple[plan.Column, ...], source: str) -> tuple[plan.Column, ...]:
    return tuple(replace(c, source=source) for c in columns)


def _alias(item: ast.FromItem) -> str:
    if isinstance(item, ast.FromSubquery | ast.FromAssign) or item.alias is not None:
        assert item.alias is not None
        return item.alias
    return item.name


def _star_name(ref: ast.ColumnRef, starred: Counter[str], taken: Mapping[str, object]) -> str:
    """The output name of a column ``*`` expands to: its own name, or
    ``alias_name`` when the stars of this SELECT bring several columns of
    that name (``SELECT * FROM s1 AS x, s2 AS y`` with ``a`` in both gives
    ``x_a`` and ``y_a``), with ``_2``, ``_3``... if that is taken already:
    a star never makes a duplicate name."""
    base = ref.name if starred[ref.name] <= 1 else f"{ref.qualifier}_{ref.name}"
    name, number = base, 1
    while name in taken:
        number += 1
        name = f"{base}_{number}"
    return name


def _output_name(item: ast.ExprItem, number: int) -> str:
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


def _widen(a: plan.SqlType, b: plan.SqlType) -> plan.SqlType | None:
    """The common type of a UNION / EXCEPT column, or None if incompatible."""
    if a == b:
        return a
    if a.is_numeric and b.is_numeric:
        return plan.FLOAT
    if a.is_text and b.is_text:
        return plan.char(max(a.length, b.length, 1))
    return None
