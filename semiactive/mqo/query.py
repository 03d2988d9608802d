"""Seed 003's continuous queries: ``CREATE name MASTER m, ... [WINDOW SIZE w]
SELECT ... FROM s, ... [WHERE c AND ...]``.

A query is a conjunctive select-project-join over sources, run each time a
tuple arrives on one of its MASTER streams. Times are the streams' ``ts``
ticks (milliseconds everywhere in semiactive): ``WINDOW SIZE 4`` is 4 ticks,
``WINDOW SIZE 4 * second`` is 4000. Without WINDOW SIZE the window is
unbounded. docs/mqo.md maps each form to CQL.

Errors are :class:`~semiactive.node.cql.errors.CqlError`: file, line and column.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from semiactive.node.cql.errors import CqlError

TIME_UNITS_MS = {
    "ms": 1,
    "millisecond": 1,
    "milliseconds": 1,
    "s": 1000,
    "sec": 1000,
    "second": 1000,
    "seconds": 1000,
    "minute": 60_000,
    "minutes": 60_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "day": 86_400_000,
    "days": 86_400_000,
}
COMPARATORS = ("=", "!=", "<>", "<", "<=", ">", ">=")
KEYWORDS = {"create", "master", "window", "size", "select", "from", "where", "and"}
MAX_NAME = 128

Value = int | float | str


@dataclass(frozen=True, order=True)
class Column:
    """``source.name``: every column of a query is qualified by its source."""

    source: str
    name: str

    def __str__(self) -> str:
        return f"{self.source}.{self.name}"


@dataclass(frozen=True, order=True)
class Literal:
    value: Value

    def __str__(self) -> str:
        return repr(self.value) if isinstance(self.value, str) else str(self.value)


Operand = Column | Literal


@dataclass(frozen=True, order=True)
class Comparison:
    left: Operand
    op: str
    right: Operand

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"

    @property
    def sources(self) -> frozenset[str]:
        return frozenset(o.source for o in (self.left, self.right) if isinstance(o, Column))

    @property
    def is_equijoin(self) -> bool:
        return self.op == "=" and len(self.sources) == 2


@dataclass(frozen=True)
class ContinuousQuery:
    name: str
    masters: tuple[str, ...]
    window: int | None
    sources: tuple[str, ...]
    where: tuple[Comparison, ...] = ()
    select: tuple[Column, ...] | None = None  # None: SELECT *
    text: str = field(default="", compare=False)

    @property
    def join_predicates(self) -> frozenset[Comparison]:
        """Comparisons between two sources: what a shared join node evaluates."""
        return frozenset(c for c in self.where if len(c.sources) == 2)

    @property
    def filters(self) -> tuple[Comparison, ...]:
        """Comparisons within one source or with constants: per-query filters."""
        return tuple(c for c in self.where if len(c.sources) < 2)


_TOKEN = re.compile(
    r"""(?P<space>\s+|--[^\n]*)
      |(?P<number>\d+(?:\.\d+)?)
      |(?P<string>'(?:[^']|'')*')
      |(?P<name>[A-Za-z_][A-Za-z0-9_]*)
      |(?P<op><=|>=|<>|!=|[=<>*,.;])""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    line: int
    column: int

    @property
    def word(self) -> str:
        return self.text.lower() if self.kind == "name" else ""


def _tokens(text: str, file: str) -> Iterator[_Token]:
    pos, line, line_start = 0, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise CqlError(f"unexpected character {text[pos]!r}", line, pos - line_start + 1, file)
        kind = m.lastgroup or ""
        if kind != "space":
            yield _Token(kind, m.group(), line, pos - line_start + 1)
        newlines = m.group().count("\n")
        if newlines:
            line += newlines
            line_start = pos + m.group().rindex("\n") + 1
        pos = m.end()


class _Parser:
    def __init__(self, text: str, file: str) -> None:
        self.text = text
        self.file = file
        self.tokens = list(_tokens(text, file))
        self.i = 0

    def error(self, message: str, token: _Token | None = None) -> CqlError:
        token = token or self.peek()
        if token is None:
            lines = self.text.split("\n")
            return CqlError(message + " (at the end of the text)", len(lines), len(lines[-1]) + 1, self.file)
        return CqlError(message, token.line, token.column, self.file)

    def peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise self.error("unexpected end of the text")
        self.i += 1
        return token

    def at(self, *words: str) -> bool:
        token = self.peek()
        return token is not None and (token.word in words or (token.kind == "op" and token.text in words))

    def expect(self, word: str) -> _Token:
        token = self.peek()
        if not self.at(word):
            found = f"{token.text!r}" if token else "the end of the text"
            raise self.error(f"expected {word.upper() if word.isalpha() else word!r}, found {found}")
        return self.take()

    def name(self, what: str) -> str:
        token = self.peek()
        if token is None or token.kind != "name" or token.word in KEYWORDS:
            found = f"{token.text!r}" if token else "the end of the text"
            raise self.error(f"expected {what}, found {found}")
        if len(token.text) > MAX_NAME:
            raise self.error(f"{what} longer than {MAX_NAME} characters")
        self.take()
        return token.text

    def names(self, what: str) -> list[str]:
        out = [self.name(what)]
        while self.at(","):
            self.take()
            out.append(self.name(what))
        return out

    def statements(self) -> list[ContinuousQuery]:
        queries: list[ContinuousQuery] = []
        while self.peek() is not None:
            if self.at(";"):
                self.take()
                continue
            queries.append(self.statement())
        return queries

    def statement(self) -> ContinuousQuery:
        start = self.expect("create")
        name = self.name("a query name")
        self.expect("master")
        masters = self.names("a master stream")
        window = None
        if self.at("window"):
            self.take()
            self.expect("size")
            window = self.duration()
        self.expect("select")
        star = self.at("*")
        raw_select: list[tuple[str | None, str, _Token]] = []
        if star:
            self.take()
        else:
            raw_select.append(self.column_ref())
            while self.at(","):
                self.take()
                raw_select.append(self.column_ref())
        self.expect("from")
        from_token = self.peek()
        sources = self.names("a source stream")
        for i, s in enumerate(sources):
            if s in sources[:i]:
                raise self.error(
                    f"source {s!r} appears twice in FROM (self-joins are not supported)", from_token
                )
        raw_where: list[tuple[object, str, object, _Token]] = []
        if self.at("where"):
            self.take()
            raw_where.append(self.comparison())
            while self.at("and"):
                self.take()
                raw_where.append(self.comparison())
        end = self.peek()
        if end is not None and not self.at(";", "create"):
            raise self.error(f"expected AND, ';' or the next CREATE, found {end.text!r}")
        stop = len(self.text) if end is None else self._offset(end)
        text = self.text[self._offset(start) : stop].strip().rstrip(";").strip()

        def column(ref: tuple[str | None, str, _Token]) -> Column:
            source, col, token = ref
            if source is None:
                if len(sources) != 1:
                    raise self.error(f"column {col!r}: qualify it with its source (FROM has several)", token)
                source = sources[0]
            if source not in sources:
                raise self.error(f"{source}.{col}: {source!r} is not in FROM ({', '.join(sources)})", token)
            return Column(source, col)

        def operand(raw: object) -> Operand:
            return raw if isinstance(raw, Literal) else column(raw)  # type: ignore[arg-type]

        where = tuple(Comparison(operand(a), op, operand(b)) for a, op, b, _ in raw_where)
        for (_, _, _, token), c in zip(raw_where, where, strict=True):
            if not c.sources:
                raise self.error(f"{c}: compares two constants", token)
        select = None if star else tuple(column(r) for r in raw_select)
        return ContinuousQuery(name, tuple(masters), window, tuple(sources), where, select, text)

    def _offset(self, token: _Token) -> int:
        lines = self.text.split("\n")
        return sum(len(x) + 1 for x in lines[: token.line - 1]) + token.column - 1

    def duration(self) -> int:
        token = self.peek()
        value: float | None = None
        unit = 1
        if token is not None and token.kind == "number":
            value = float(self.take().text)
            if self.at("*"):
                self.take()
                unit = self.unit()
        elif token is not None and token.word in TIME_UNITS_MS:
            unit = self.unit()
            self.expect("*")
            number = self.peek()
            if number is None or number.kind != "number":
                raise self.error("expected a number of time units")
            value = float(self.take().text)
        else:
            raise self.error(
                "expected a window size: N, N * unit or unit * N (units: ms, second, minute, hour, day)"
            )
        ticks = value * unit
        if ticks != int(ticks) or ticks <= 0:
            raise self.error(f"window size {ticks:g}: must be a positive whole number of ticks (ms)", token)
        return int(ticks)

    def unit(self) -> int:
        token = self.peek()
        if token is None or token.word not in TIME_UNITS_MS:
            raise self.error(f"expected a time unit ({', '.join(sorted(set(TIME_UNITS_MS)))})")
        self.take()
        return TIME_UNITS_MS[token.word]

    def column_ref(self) -> tuple[str | None, str, _Token]:
        token = self.peek()
        first = self.name("a column")
        if self.at("."):
            self.take()
            return first, self.name("a column name"), token  # type: ignore[return-value]
        return None, first, token  # type: ignore[return-value]

    def comparison(self) -> tuple[object, str, object, _Token]:
        token = self.peek()
        left = self.operand()
        op_token = self.peek()
        if op_token is None or op_token.text not in COMPARATORS:
            raise self.error(f"expected a comparison ({' '.join(COMPARATORS)})")
        self.take()
        right = self.operand()
        return left, "!=" if op_token.text == "<>" else op_token.text, right, token  # type: ignore[return-value]

    def operand(self) -> object:
        token = self.peek()
        if token is not None and token.kind == "number":
            self.take()
            return Literal(float(token.text) if "." in token.text else int(token.text))
        if token is not None and token.kind == "string":
            self.take()
            return Literal(token.text[1:-1].replace("''", "'"))
        return self.column_ref()


def parse_queries(text: str, file: str = "<queries>") -> list[ContinuousQuery]:
    """Every ``CREATE`` statement of ``text``; names must be unique."""
    queries = _Parser(text, file).statements()
    seen: set[str] = set()
    for q in queries:
        if q.name in seen:
            raise CqlError(f"query {q.name!r} is defined twice", 1, 1, file)
        seen.add(q.name)
    return queries


def parse_query(text: str, file: str = "<query>") -> ContinuousQuery:
    queries = parse_queries(text, file)
    if len(queries) != 1:
        raise CqlError(f"expected one CREATE statement, found {len(queries)}", 1, 1, file)
    return queries[0]
