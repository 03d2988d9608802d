"""CQL syntax tree -> SQLite, for the oracle of :mod:`semiactive.oracle.sql_oracle`.

A stream becomes a table ``(_pos, _ts, c0, c1, ...)`` holding its tuples in
arrival order; a relation becomes the text of one SELECT whose columns are
``c0, c1, ...`` and whose only parameter is the instant ``:t``, with the
set of instants at which it may change (a superset: evaluating it at an
instant where nothing changed costs a query and changes nothing).

Names and types are resolved here, from docs/cql.md, not by the engine's
binder. Every column reference is written as ``fN.cM`` so that SQLite's own
name rules (case-insensitive, its keywords) never apply. Where SQLite's
semantics differ from CQL's the translation says so: comparisons with NULL
are false (``COALESCE(..., 0)``, two-valued logic), float ``%`` is C's
``fmod``, float ``SUM`` / ``AVG`` are exactly rounded (``math.fsum``), an
aggregate without GROUP BY has no row on an empty input (``GROUP BY NULL``),
and ``EXCEPT`` is a multiset difference (``ROW_NUMBER`` pairs copies).

SQL text is built with f-strings throughout (ruff's S608): every name in it
is generated here, and every value from the program or its inputs is a
bound parameter, except integers the parser read.
"""
# ruff: noqa: S608

from __future__ import annotations

import math
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from semiactive.node.cql import ast, plan
from semiactive.oracle.diff import Row
from semiactive.oracle.sql_exprs import Exprs, Item, NotCovered, Scope, Ty, aggregated, output_name

__all__ = ["Col", "NotCovered", "Relation", "Stream", "Translator", "column_type", "install_functions"]


def column_type(t: plan.SqlType) -> Ty:
    if t.name is plan.TypeName.INTEGER:
        return "integer"
    if t.name is plan.TypeName.FLOAT:
        return "float"
    return "text"


@dataclass(frozen=True)
class Col:
    name: str
    ty: Ty


@dataclass
class Stream:
    """Tuples ``(ts, values)`` in arrival order; ``table`` once materialised."""

    cols: tuple[Col, ...]
    rows: list[tuple[int, Row]]
    ordered: bool
    table: str = ""


@dataclass
class Relation:
    cols: tuple[Col, ...]
    sql: str
    instants: frozenset[int]


Value = Stream | Relation


def _fmod(a: Any, b: Any) -> float | None:
    if a is None or b is None or b == 0 or not math.isfinite(a):
        return None
    return math.fmod(a, b)


class _FloatSum:
    """``SUM`` of floats, exactly rounded (docs/cql.md, Aggregates)."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def step(self, value: float | None) -> None:
        if value is not None:
            self.values.append(value)

    def total(self) -> float | None:
        if not self.values:
            return None
        try:
            return math.fsum(self.values)
        except (OverflowError, ValueError):
            return None  # NaN: SQLite stores it as NULL anyway

    def finalize(self) -> Any:  # typeshed wants an int; SQLite takes any value
        return self.total()


class _FloatAvg(_FloatSum):
    def finalize(self) -> Any:
        total = self.total()
        return None if total is None else total / len(self.values)


def install_functions(conn: sqlite3.Connection) -> None:
    conn.create_function("cql_fmod", 2, _fmod, deterministic=True)
    conn.create_aggregate("cql_fsum", 1, _FloatSum)
    conn.create_aggregate("cql_favg", 1, _FloatAvg)


def _names(n: int, prefix: str = "") -> str:
    return ", ".join(f"{prefix}c{i}" for i in range(n))


class Translator:
    """Turns queries into :data:`Value` s; ``named`` gives the value of a
    FROM name (an input or a registered query)."""

    def __init__(self, conn: sqlite3.Connection, end: int, named: Callable[[str], Value]) -> None:
        self.conn = conn
        self.end = end
        self.named = named
        self.params: dict[str, Any] = {"t": 0}
        self.seen: set[int] = set()
        self._count = 0

    def fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    # ---- execution -------------------------------------------------------------

    def fetch(self, sql: str, cols: Sequence[Col], t: int = 0) -> list[Row]:
        params = dict(self.params, t=t)
        try:
            rows = [tuple(r) for r in self.conn.execute(sql, params)]
        except sqlite3.OperationalError as exc:
            if "parser stack overflow" in str(exc):
                raise NotCovered(f"SQLite cannot parse a query nested this deeply: {exc}") from None
            if "overflow" in str(exc):
                raise NotCovered(f"SQLite cannot compute it: {exc} (beyond 64 bits)") from None
            raise
        ints = [i for i, c in enumerate(cols) if c.ty == "integer"]
        for row in rows:
            if any(isinstance(row[i + len(row) - len(cols)], float) for i in ints):
                raise NotCovered("integer arithmetic beyond 64 bits (SQLite turns it into a float)")
        return rows

    def snapshots(self, rel: Relation) -> Iterator[tuple[int, Counter[Row]]]:
        """``(t, R(t))`` at each instant up to the end where R changed."""
        before: Counter[Row] = Counter()
        for t in sorted(rel.instants):
            if t > self.end:
                break
            self.seen.add(t)
            now = Counter(self.fetch(rel.sql, rel.cols, t))
            if now != before:
                yield t, now
                before = now

    # ---- inputs and windows -----------------------------------------------------

    def relation_input(self, cols: tuple[Col, ...], changes: list[tuple[int, int, Row]]) -> Relation:
        table = self.fresh("r")
        names = _names(len(cols))
        self.conn.execute(f"CREATE TABLE {table} (_ts INTEGER, _sign INTEGER, {names})")
        marks = ", ".join("?" * (len(cols) + 2))
        self.conn.executemany(f"INSERT INTO {table} VALUES ({marks})", [(t, s, *r) for t, s, r in changes])
        self.conn.execute("CREATE TABLE IF NOT EXISTS _n (i INTEGER PRIMARY KEY)")
        have = self.conn.execute("SELECT COUNT(*) FROM _n").fetchone()[0]
        self.conn.executemany("INSERT INTO _n VALUES (?)", [(i,) for i in range(have + 1, len(changes) + 1)])
        sql = (
            f"SELECT {_names(len(cols), 'g.')} FROM (SELECT {names}, SUM(_sign) AS _c FROM {table} "
            f"WHERE _ts <= :t GROUP BY {names}) AS g JOIN _n ON _n.i <= g._c"
        )
        return Relation(cols, sql, frozenset(t for t, _, _ in changes))

    def table(self, stream: Stream) -> str:
        if not stream.table:
            stream.table = self.fresh("s")
            names = _names(len(stream.cols))
            self.conn.execute(f"CREATE TABLE {stream.table} (_pos INTEGER PRIMARY KEY, _ts INTEGER, {names})")
            marks = ", ".join("?" * (len(stream.cols) + 2))
            rows = [(i, ts, *row) for i, (ts, row) in enumerate(stream.rows, start=1)]
            self.conn.executemany(f"INSERT INTO {stream.table} VALUES ({marks})", rows)
            self.conn.execute(f"CREATE INDEX {stream.table}_ts ON {stream.table} (_ts, _pos)")
        return stream.table

    def window(self, stream: Stream, window: ast.WindowAst | None) -> Relation:
        """The relation a window makes of ``stream`` at ``:t`` (docs/cql.md's table)."""
        spec = window.spec if window is not None else plan.UnboundedWindow()
        table = self.table(stream)
        names = _names(len(stream.cols))
        stamps = {ts for ts, _ in stream.rows}
        select = f"SELECT {names} FROM {table} WHERE "
        if isinstance(spec, plan.NowWindow):
            return Relation(stream.cols, select + "_ts = :t", frozenset(stamps | {s + 1 for s in stamps}))
        if isinstance(spec, plan.UnboundedWindow):
            return Relation(stream.cols, select + "_ts <= :t", frozenset(stamps))
        if isinstance(spec, plan.RangeWindow):
            size, slide = spec.closed_range_ms, spec.slide_ms
            if slide <= 1:
                sql = select + f"_ts BETWEEN :t - {size} AND :t"
                return Relation(stream.cols, sql, frozenset(stamps | {s + size + 1 for s in stamps}))
            b = f"(:t - ((:t % {slide}) + {slide}) % {slide})"
            enter = {-(-s // slide) * slide for s in stamps}
            leave = {((s + size) // slide + 1) * slide for s in stamps}
            return Relation(
                stream.cols, select + f"_ts BETWEEN {b} - {size} AND {b}", frozenset(enter | leave)
            )
        assert window is not None
        if isinstance(spec, plan.RowsWindow):
            self._need_order(stream, [], window)
            last = f"SELECT _pos FROM {table} WHERE _ts <= :t ORDER BY _ts DESC, _pos DESC LIMIT 1"
            k = f"COALESCE(({last}), 0)"
            if spec.slide > 1:
                k = f"(({k}) / {spec.slide} * {spec.slide})"
            sql = select + f"_pos > {k} - {spec.rows} AND _pos <= {k}"
            return Relation(stream.cols, sql, frozenset(stamps))
        if isinstance(spec, plan.PartitionWindow):
            keys = [self._key(stream, key) for key in window.keys]
            self._need_order(stream, keys, window)
            bound = spec.closed_range_ms
            # The last N rows within the range: the same rows as those of the last N
            # that are within it (both are the newest rows of the partition).
            in_range = "" if bound is None else f" AND _ts >= :t - {bound}"
            sql = (
                f"SELECT {names} FROM (SELECT {names}, ROW_NUMBER() OVER (PARTITION BY "
                f"{', '.join(f'c{k}' for k in keys)} ORDER BY _pos DESC) AS _rn FROM {table} "
                f"WHERE _ts <= :t{in_range}) WHERE _rn <= {spec.rows}"
            )
            leave = set() if bound is None else {s + bound + 1 for s in stamps}
            return Relation(stream.cols, sql, frozenset(stamps | leave))
        raise NotCovered(f"window {window.text}")

    @staticmethod
    def _key(stream: Stream, key: ast.ColumnRef) -> int:
        matches = [i for i, c in enumerate(stream.cols) if c.name == key.name]
        if not matches:
            raise NotCovered(f"unknown PARTITION BY column {key.name!r}")
        return matches[0]

    @staticmethod
    def _need_order(stream: Stream, keys: list[int], window: ast.WindowAst) -> None:
        """A row window over a stream whose order within an instant is not
        defined is defined only if no instant has two different rows (of one
        partition)."""
        if stream.ordered:
            return
        seen: dict[tuple[int, Row], Row] = {}
        for ts, row in stream.rows:
            part = (ts, tuple(row[k] for k in keys))
            if seen.setdefault(part, row) != row:
                raise NotCovered(
                    f"{window.text} over a stream whose order within an instant is not defined "
                    f"(two different rows at instant {ts})"
                )

    # ---- queries ---------------------------------------------------------------

    def query(self, query: ast.Query) -> Value:
        if query.delay is not None:
            raise NotCovered(f"delay operator {query.delay.text}")
        return self.set_expr(query.body)

    def set_expr(self, expr: ast.SetExpr) -> Value:
        if isinstance(expr, ast.Select):
            return self.select(expr)
        if isinstance(expr, ast.StreamOp):
            return self.stream_op(expr)
        return self.set_op(expr)

    def relation(self, value: Value, window: ast.WindowAst | None) -> Relation:
        if isinstance(value, Stream):
            return self.window(value, window)
        if window is not None:
            raise NotCovered(f"window {window.text} on a relation")
        return value

    def stream_op(self, expr: ast.StreamOp) -> Stream:
        inner = self.set_expr(expr.query)
        op = expr.op.upper()
        if isinstance(inner, Stream) and op == "ISTREAM":
            return inner
        rel = self.relation(inner, None)
        rows: list[tuple[int, Row]] = []
        before: Counter[Row] = Counter()
        for t, now in self.snapshots(rel):
            out = now - before if op == "ISTREAM" else before - now if op == "DSTREAM" else now
            rows += [(t, row) for row, n in out.items() for _ in range(n)]
            before = now
        return Stream(rel.cols, rows, ordered=False)

    def select(self, select: ast.Select) -> Value:
        values = []
        items = []
        for number, fi in enumerate(select.from_items):
            if isinstance(fi, ast.FromAssign):
                raise NotCovered("ASSIGN (dynamic source selection)")
            if isinstance(fi, ast.FromSubquery):
                value, alias = self.query(fi.query), fi.alias
            else:
                value, alias = self.named(fi.name), fi.alias or fi.name
            values.append((value, fi.window))
            items.append(Item(alias, f"f{number}", tuple((c.name, c.ty) for c in value.cols)))
        scope = Scope(items)
        exprs = Exprs(scope, self.params, self.fresh)
        grouped = aggregated(select)
        out: list[tuple[str, Col]] = []
        for number, item in enumerate(select.items, start=1):
            if isinstance(item, ast.StarItem):
                for sql, name, ty in scope.star(item.qualifier, [c.name for _, c in out]):
                    out.append((sql, Col(name, ty)))
            else:
                sql, ty = exprs.expr(item.expr)
                out.append((sql, Col(output_name(item, number), ty)))
        cols = tuple(c for _, c in out)
        listed = ", ".join(f"{sql} AS c{i}" for i, (sql, _) in enumerate(out))
        where = f" WHERE {exprs.expr(select.where)[0]}" if select.where is not None else ""
        (first, first_window), *_ = values
        bare = len(values) == 1 and isinstance(first, Stream) and first_window is None
        if bare and isinstance(first, Stream) and not grouped and not select.distinct:
            table = self.table(first)
            sql = f"SELECT f0._ts, {listed} FROM {table} AS f0{where} ORDER BY f0._pos"
            rows = [(int(r[0]), tuple(r[1:])) for r in self.fetch(sql, cols)]
            return Stream(cols, rows, first.ordered)
        rels = [self.relation(v, w) for v, w in values]
        sources = ", ".join(f"({r.sql}) AS f{i}" for i, r in enumerate(rels))
        sql = f"SELECT {'DISTINCT ' if select.distinct else ''}{listed} FROM {sources}{where}"
        if grouped:
            keys = [_group_key(exprs, k) for k in select.group_by or ()]
            sql += f" GROUP BY {', '.join(keys) or 'NULL'}"
            if select.having is not None:
                sql += f" HAVING {exprs.expr(select.having)[0]}"
        return Relation(cols, sql, frozenset().union(*(r.instants for r in rels)))

    def set_op(self, expr: ast.SetOp) -> Value:
        left, right = self.set_expr(expr.left), self.set_expr(expr.right)
        if len(left.cols) != len(right.cols):
            raise NotCovered(f"{expr.op} of inputs with different numbers of columns")
        cols = tuple(Col(a.name, _widen(a.ty, b.ty)) for a, b in zip(left.cols, right.cols, strict=True))
        if isinstance(left, Stream) and isinstance(right, Stream):
            if expr.op == "EXCEPT":
                raise NotCovered("EXCEPT of streams")
            merged = _merge(_widened(left, cols), _widened(right, cols))
            return Stream(cols, merged, left.ordered and right.ordered)
        if isinstance(left, Stream) or isinstance(right, Stream):
            raise NotCovered(f"{expr.op} of a stream with a relation")
        n = len(cols)
        sides = []
        for side in (left, right):
            casts = ", ".join(
                f"CAST(c{i} AS REAL) AS c{i}" if (c.ty, w.ty) == ("integer", "float") else f"c{i}"
                for i, (c, w) in enumerate(zip(side.cols, cols, strict=True))
            )
            sides.append(f"SELECT {casts} FROM ({side.sql})")
        instants = left.instants | right.instants
        if expr.op != "EXCEPT":
            return Relation(cols, f" {expr.op} ".join(sides), instants)
        numbered = [
            f"SELECT {_names(n)}, ROW_NUMBER() OVER (PARTITION BY {_names(n)}) AS _rn FROM ({s})"
            for s in sides
        ]
        same = " AND ".join([f"b.c{i} IS a.c{i}" for i in range(n)] + ["b._rn = a._rn"])
        sql = (
            f"SELECT {_names(n, 'a.')} FROM ({numbered[0]}) AS a "
            f"WHERE NOT EXISTS (SELECT 1 FROM ({numbered[1]}) AS b WHERE {same})"
        )
        return Relation(cols, sql, instants)


def _group_key(exprs: Exprs, key: ast.Expr) -> str:
    """A GROUP BY key; an integer constant goes through CAST, else SQLite
    would read it as a column position."""
    sql, ty = exprs.expr(key)
    return f"CAST({sql} AS INTEGER)" if ty == "integer" and not _reads_columns(key) else sql


def _reads_columns(expr: ast.Expr) -> bool:
    if isinstance(expr, ast.ColumnRef | ast.Call):
        return True
    if isinstance(expr, ast.Negate | ast.Not):
        return _reads_columns(expr.operand)
    if isinstance(expr, ast.Binary):
        return _reads_columns(expr.left) or _reads_columns(expr.right)
    if isinstance(expr, ast.BoolExpr):
        return any(_reads_columns(o) for o in expr.operands)
    if isinstance(expr, ast.Case):
        return any(_reads_columns(o) for o in expr.parts)
    return False


def _widen(a: Ty, b: Ty) -> Ty:
    if a == b:
        return a
    if {a, b} == {"integer", "float"}:
        return "float"
    raise NotCovered(f"set operation over {a} and {b}")


def _widened(stream: Stream, cols: tuple[Col, ...]) -> list[tuple[int, Row]]:
    convert = [c.ty == "integer" and w.ty == "float" for c, w in zip(stream.cols, cols, strict=True)]
    if not any(convert):
        return stream.rows
    return [
        (ts, tuple(float(v) if f and v is not None else v for v, f in zip(row, convert, strict=True)))
        for ts, row in stream.rows
    ]


def _merge(left: list[tuple[int, Row]], right: list[tuple[int, Row]]) -> list[tuple[int, Row]]:
    """Both streams in time order; within an instant the left's tuples first."""
    out: list[tuple[int, Row]] = []
    i = j = 0
    while i < len(left) or j < len(right):
        t = min(x[0] for x in (left[i : i + 1] + right[j : j + 1]))
        while i < len(left) and left[i][0] == t:
            out.append(left[i])
            i += 1
        while j < len(right) and right[j][0] == t:
            out.append(right[j])
            j += 1
    return out
