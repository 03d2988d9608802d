"""An independent oracle for CQL: a program evaluated instant by instant in SQLite.

verify.py's reference runs the engine again, which proves "distributed
equals centralised", never "correct". This module computes what a program
means from the definitions in docs/cql.md and nothing of the engine but its
parser: it resolves names and types itself (:mod:`semiactive.oracle.sql_translate`),
writes every relation as one SQL statement over the instant ``:t`` (a
window is a ``WHERE`` on its stream's table, the definition in the docs'
table), runs it at every instant where one of its inputs can change, and
derives ISTREAM / DSTREAM / RSTREAM by differencing consecutive results as
multisets. Streams are materialised as tables ``(_pos, _ts, c0, c1, ...)`` in
arrival order.

Covered: the relational subset of docs/cql.md (windows, selection,
projection, arithmetic, joins, GROUP BY / HAVING with the five aggregates,
DISTINCT, UNION [ALL], EXCEPT, the three stream operators, subqueries and
registered queries). Anything else (delays, recursion, a ``[Rows N]`` over a
stream whose order within an instant is not defined) raises
:class:`NotCovered`: no answer rather than a wrong one.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from semiactive.node.cql import ast, parse, plan
from semiactive.node.cql.bounds import WindowBounds, with_bounds
from semiactive.oracle.diff import Row, Timeline, stream_timeline
from semiactive.oracle.sql_translate import (
    Col,
    NotCovered,
    Relation,
    Stream,
    Translator,
    column_type,
    install_functions,
)

__all__ = ["Feed", "NotCovered", "Outcome", "evaluate"]


@dataclass(frozen=True)
class Feed:
    """An input's content: a stream's tuples ``(ts, v0, ...)`` in arrival
    order, or a relation's changes ``(ts, +1 | -1, v0, ...)``. ``schema`` and
    ``kind`` are needed for inputs the program does not declare (a stage's
    inputs); ``ordered`` is False for a stream whose order within an instant
    is not defined (an ISTREAM's output, say)."""

    rows: Sequence[Row]
    schema: plan.Schema | None = None
    kind: plan.Kind | None = None
    ordered: bool = True


@dataclass
class Outcome:
    """A query's output as the oracle computes it. ``changes`` is its
    timeline; ``rows`` the stream's tuples ``(ts, values)`` in order, or the
    relation's changes ``(ts, sign, values)`` (what :class:`Feed` takes);
    ``instants`` counts the instants the oracle evaluated."""

    kind: plan.Kind
    names: tuple[str, ...]
    changes: Timeline
    rows: list[Row] = field(default_factory=list)
    ordered: bool = True
    instants: int = 0

    def feed(self, schema: plan.Schema) -> Feed:
        """This output as the input of a later program (a downstream stage)."""
        return Feed(self.rows, schema, self.kind, self.ordered)


def evaluate(
    text: str,
    feeds: Mapping[str, Feed],
    end: int,
    output: str | None = None,
    window_bounds: WindowBounds = "closed",
) -> Outcome:
    """The output of query ``output`` (default: the last registered) of the
    CQL program ``text`` over ``feeds``, at every instant up to ``end``,
    with ``[Range T]`` windows under ``window_bounds``.
    Raises :class:`NotCovered` for a program outside the oracle's subset
    and :class:`~semiactive.node.cql.CqlError` for one that does not parse."""
    program = with_bounds(parse(text), window_bounds)
    with closing(sqlite3.connect(":memory:")) as conn:
        install_functions(conn)
        return _Evaluator(program, feeds, end, conn).outcome(output)


class _Evaluator:
    """Values of named inputs and queries, computed once each, on demand."""

    def __init__(
        self, program: ast.Program, feeds: Mapping[str, Feed], end: int, conn: sqlite3.Connection
    ) -> None:
        self.feeds = feeds
        self.end = end
        self.conn = conn
        self.translator = Translator(conn, end, self.named)
        self.queries: dict[str, ast.RegisterQuery] = {}
        self.declared: dict[str, tuple[plan.Kind, tuple[Col, ...]]] = {}
        for name, feed in feeds.items():
            if feed.schema is not None:
                self.declared[name] = (feed.kind or plan.Kind.STREAM, _columns(feed.schema.columns))
        for statement in program.statements:
            if isinstance(statement, ast.RegisterInput):
                cols = tuple(Col(a.name, column_type(a.type)) for a in statement.attributes)
                self.declared[statement.name] = (statement.kind, cols)
            else:
                self.queries[statement.name] = statement
        self.values: dict[str, Stream | Relation] = {}
        self.busy: list[str] = []

    def named(self, name: str) -> Stream | Relation:
        value = self.values.get(name)
        if value is not None:
            return value
        if name in self.declared:
            value = self._input(name)
        elif name in self.queries:
            if name in self.busy:
                cycle = " -> ".join([*self.busy[self.busy.index(name) :], name])
                raise NotCovered(f"recursive queries ({cycle})")
            self.busy.append(name)
            value = self.translator.query(self.queries[name].query)
            self.busy.pop()
        else:
            raise NotCovered(f"unknown stream, relation or query {name!r}")
        self.values[name] = value
        return value

    def _input(self, name: str) -> Stream | Relation:
        kind, cols = self.declared[name]
        feed = self.feeds.get(name)
        rows = feed.rows if feed is not None else ()
        floats = [i for i, c in enumerate(cols) if c.ty == "float"]
        if kind is plan.Kind.STREAM:
            tuples = [(int(r[0]), _floated(tuple(r[1:]), floats)) for r in rows if r[0] <= self.end]
            return Stream(cols, tuples, feed.ordered if feed is not None else True)
        changes = [(int(r[0]), int(r[1]), _floated(tuple(r[2:]), floats)) for r in rows if r[0] <= self.end]
        return self.translator.relation_input(cols, changes)

    def outcome(self, output: str | None) -> Outcome:
        name = output or next(reversed(self.queries), None)
        if name is None or name not in self.queries:
            raise NotCovered(f"no registered query named {output!r}")
        value = self.named(name)
        names = tuple(c.name for c in value.cols)
        if isinstance(value, Stream):
            rows: list[Row] = [(ts, *row) for ts, row in value.rows]
            self.translator.seen.update(ts for ts, _ in value.rows)
            return Outcome(
                plan.Kind.STREAM,
                names,
                stream_timeline(value.rows),
                rows,
                value.ordered,
                len(self.translator.seen),
            )
        changes: Timeline = {}
        flat: list[Row] = []
        before: Counter[Row] = Counter()
        for t, now in self.translator.snapshots(value):
            gone, new = before - now, now - before
            changes[t] = {**{r: -n for r, n in gone.items()}, **dict(new)}
            flat += [(t, -1, *r) for r, n in gone.items() for _ in range(n)]
            flat += [(t, 1, *r) for r, n in new.items() for _ in range(n)]
            before = now
        return Outcome(plan.Kind.RELATION, names, changes, flat, True, len(self.translator.seen))


def _columns(columns: Sequence[plan.Column]) -> tuple[Col, ...]:
    return tuple(Col(c.name, column_type(c.type)) for c in columns)


def _floated(values: Row, floats: Sequence[int]) -> Row:
    """Values of float columns as floats (SQLite, like Python, divides
    integers by truncating)."""
    if not floats:
        return values
    out: list[Any] = list(values)
    for i in floats:
        if isinstance(out[i], int):
            out[i] = float(out[i])
    return tuple(out)
