"""Seed 003's continuous queries: ``CREATE name MASTER m, ... [WINDOW SIZE w]
SELECT ... FROM s, ... [WHERE c AND ...]``.

A query is a conjunctive select-project-join over sources, run each time a
tuple arrives on one of its MASTER streams. Times are the streams' ``ts``
ticks (milliseconds everywhere in semiactive): ``WINDOW SIZE 4`` is 4 ticks,
``WINDOW SIZE 4 * second`` is 4000. Without WINDOW SIZE the window is
unbounded. docs/mqo.md maps each form to CQL.

A file may also declare, as CQL files do, a stream's columns (``REGISTER
STREAM Quote (name char(8), price integer)``: the queries' references to
it and the comparisons of its columns with constants are checked here, its
data against the types where it is read) and clocks (``REGISTER CLOCK C3
PERIOD 10 * second PHASE 3 * second``): :func:`parse_query_file`.

Errors are :class:`~semiactive.node.cql.errors.CqlError`: file, line and column.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from semiactive.mqo.clocks import Clock, daily_clock
from semiactive.node.cql import plan
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
TYPES = {"integer": plan.INTEGER, "int": plan.INTEGER, "float": plan.FLOAT, "byte": plan.BYTE}
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


@dataclass(frozen=True)
class StreamDeclaration:
    """``REGISTER STREAM name (column type, ...)``: a stream's value columns
    (``ts`` is every stream's) and where the declaration is."""

    name: str
    columns: tuple[plan.Column, ...]
    line: int = 0
    column: int = 0

    @property
    def schema(self) -> plan.Schema:
        return plan.Schema(self.columns)

    def type_of(self, column: str) -> plan.SqlType | None:
        if column == "ts":
            return plan.INTEGER
        return next((c.type for c in self.columns if c.name == column), None)


@dataclass(frozen=True)
class QueryFile:
    """What a file of queries holds: the queries, the streams it declares and
    its clocks (``REGISTER CLOCK``)."""

    queries: tuple[ContinuousQuery, ...]
    streams: Mapping[str, StreamDeclaration] = field(default_factory=dict)
    clocks: Mapping[str, Clock] = field(default_factory=dict)
    file: str = "<queries>"


_TOKEN = re.compile(
    r"""(?P<space>\s+|--[^\n]*)
      |(?P<number>\d+(?:\.\d+)?)
      |(?P<string>'(?:[^']|'')*')
      |(?P<name>[A-Za-z_][A-Za-z0-9_]*)
      |(?P<op><=|>=|<>|!=|[=<>*,.;()])""",
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
        return [name for name, _ in self.named(what)]

    def named(self, what: str) -> list[tuple[str, _Token]]:
        token = self.peek()
        out = [(self.name(what), token)]
        while self.at(","):
            self.take()
            token = self.peek()
            out.append((self.name(what), token))
        return out  # type: ignore[return-value]

    def statements(self) -> list[ContinuousQuery]:
        queries: list[ContinuousQuery] = []
        # Per query, for the checks against the declarations: its sources
        # and column references with their tokens, its comparisons.
        self.uses: list[tuple[ContinuousQuery, list[tuple[str, _Token]], list[tuple[Column, _Token]]]] = []
        self.compared: list[tuple[Comparison, _Token]] = []
        self.streams: dict[str, tuple[StreamDeclaration, _Token]] = {}
        self.clocks: dict[str, tuple[Clock, _Token]] = {}
        while self.peek() is not None:
            if self.at(";"):
                self.take()
            elif self.at("register"):
                self.declaration()
            elif self.at("create"):
                queries.append(self.statement())
            else:
                token = self.peek()
                assert token is not None
                raise self.error(
                    f"expected CREATE (a query) or REGISTER STREAM / REGISTER CLOCK (a declaration), "
                    f"found {token.text!r}"
                )
        return queries

    # -- declarations

    def declaration(self) -> None:
        self.expect("register")
        token = self.peek()
        if self.at("stream"):
            self.take()
            name_token = self.peek()
            name = self.name("a stream name")
            self.expect("(")
            columns = [self.column_declaration()]
            while self.at(","):
                self.take()
                columns.append(self.column_declaration())
            self.expect(")")
            for i, (column, at) in enumerate(columns):
                if column.name in [c.name for c, _ in columns[:i]]:
                    raise self.error(f"column {column.name!r} is declared twice", at)
            assert name_token is not None
            if name in self.streams or name in self.clocks:
                raise self.error(f"{name!r} is declared twice", name_token)
            declared = StreamDeclaration(
                name, tuple(c for c, _ in columns), name_token.line, name_token.column
            )
            self.streams[name] = (declared, name_token)
        elif self.at("clock"):
            self.take()
            name_token = self.peek()
            name = self.name("a clock name")
            assert name_token is not None
            if name in self.streams or name in self.clocks:
                raise self.error(f"{name!r} is declared twice", name_token)
            if daily_clock(name) is not None:
                raise self.error(
                    f"{name} is built in (every day at {name[6:]}:00); give another name", name_token
                )
            self.expect("period")
            period = self.duration("a clock period")
            phase = 0
            if self.at("phase"):
                self.take()
                phase_token = self.peek()
                phase = self.duration("a clock phase", allow_zero=True)
                if phase >= period:
                    raise self.error(f"phase {phase} must be less than the period {period} (ms)", phase_token)
            self.clocks[name] = (Clock(name, period, phase), name_token)
        elif self.at("relation"):
            raise self.error("MQO queries read streams: REGISTER RELATION is not supported here")
        elif self.at("query"):
            raise self.error(
                "REGISTER QUERY is CQL (semiactive query run); an MQO query is CREATE name MASTER ..."
            )
        else:
            found = f"{token.text!r}" if token else "the end of the text"
            raise self.error(f"expected STREAM or CLOCK after REGISTER, found {found}")

    def column_declaration(self) -> tuple[plan.Column, _Token]:
        token = self.peek()
        name = self.name("a column name")
        assert token is not None
        if name.lower() == "ts":
            raise self.error("ts is every stream's timestamp: declare the other columns", token)
        type_token = self.peek()
        if type_token is None or type_token.kind != "name":
            found = f"{type_token.text!r}" if type_token else "the end of the text"
            raise self.error(f"expected a type (integer, int, float, byte or char(n)), found {found}")
        self.take()
        if type_token.word == "char":
            if not self.at("("):
                raise self.error("type char needs a length, e.g. char(10)", type_token)
            self.take()
            length = self.peek()
            if length is None or length.kind != "number" or not length.text.isdigit() or int(length.text) < 1:
                raise self.error("char length must be a whole number, at least 1")
            self.take()
            self.expect(")")
            return plan.Column(name, plan.char(int(length.text))), token
        if type_token.word not in TYPES:
            raise self.error(
                f"unknown type {type_token.text!r}; expected integer, int, float, byte or char(n)", type_token
            )
        return plan.Column(name, TYPES[type_token.word]), token

    # -- queries

    def statement(self) -> ContinuousQuery:
        start = self.expect("create")
        name = self.name("a query name")
        self.expect("master")
        masters = self.named("a master stream")
        window = None
        if self.at("window"):
            self.take()
            self.expect("size")
            window = self.duration("a window size")
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
        named_sources = self.named("a source stream")
        sources = [s for s, _ in named_sources]
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
        if end is not None and not self.at(";", "create", "register"):
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
        query = ContinuousQuery(
            name, tuple(m for m, _ in masters), window, tuple(sources), where, select, text
        )
        refs = [(column(r), r[2]) for r in raw_select]
        for a, _, b, token in raw_where:
            for o in (a, b):
                if not isinstance(o, Literal):
                    refs.append((column(o), token))  # type: ignore[arg-type]
        self.uses.append((query, [*named_sources, *masters], refs))
        self.compared += [(c, token) for c, (_, _, _, token) in zip(where, raw_where, strict=True)]
        return query

    def _offset(self, token: _Token) -> int:
        lines = self.text.split("\n")
        return sum(len(x) + 1 for x in lines[: token.line - 1]) + token.column - 1

    def duration(self, what: str, allow_zero: bool = False) -> int:
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
                f"expected {what}: N, N * unit or unit * N (units: ms, second, minute, hour, day)"
            )
        ticks = value * unit
        if ticks != int(ticks) or ticks < 0 or (ticks == 0 and not allow_zero):
            kind = "non-negative" if allow_zero else "positive"
            raise self.error(
                f"{what.split(' ', 1)[1]} {ticks:g}: must be a {kind} whole number of ticks (ms)", token
            )
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

    # -- checks against the declarations

    def check(self, queries: list[ContinuousQuery]) -> None:
        streams = {name: d for name, (d, _) in self.streams.items()}
        for query, names, refs in self.uses:
            for name, token in names[: len(query.sources)]:
                if name in self.clocks:
                    raise self.error(
                        f"{name} is a clock: it has no rows to read, it can only be a MASTER", token
                    )
            for col, token in refs:
                declared = streams.get(col.source)
                if declared is not None and declared.type_of(col.name) is None:
                    known = ", ".join(c.name for c in declared.columns)
                    raise self.error(
                        f"{col}: {col.source} has no column {col.name!r} (REGISTER STREAM {col.source} "
                        f"at line {declared.line}: ts, {known})",
                        token,
                    )
        for c, token in self.compared:
            types = [self.type_of(o, streams) for o in (c.left, c.right)]
            if None not in types and types[0] != types[1]:
                raise self.error(f"{c}: compares {types[0]} with {types[1]}, which never holds", token)
        seen: set[str] = set()
        for q in queries:
            if q.name in seen:
                raise CqlError(f"query {q.name!r} is defined twice", 1, 1, self.file)
            seen.add(q.name)

    @staticmethod
    def type_of(operand: Operand, streams: Mapping[str, StreamDeclaration]) -> str | None:
        """ "number" or "text" when known: a constant's, a declared column's."""
        if isinstance(operand, Literal):
            return "text" if isinstance(operand.value, str) else "number"
        declared = streams.get(operand.source)
        sql_type = declared.type_of(operand.name) if declared is not None else None
        if sql_type is None:
            return None
        return "number" if sql_type.is_numeric else "text"


def parse_query_file(text: str, file: str = "<queries>") -> QueryFile:
    """The queries of ``text`` (names unique), its stream declarations
    (checked against the queries) and its clocks."""
    parser = _Parser(text, file)
    queries = parser.statements()
    parser.check(queries)
    return QueryFile(
        tuple(queries),
        {name: d for name, (d, _) in parser.streams.items()},
        {name: c for name, (c, _) in parser.clocks.items()},
        file,
    )


def parse_queries(text: str, file: str = "<queries>") -> list[ContinuousQuery]:
    """Every ``CREATE`` statement of ``text``; names must be unique. The
    file's declarations are checked (:func:`parse_query_file` gives them)."""
    return list(parse_query_file(text, file).queries)


def parse_query(text: str, file: str = "<query>") -> ContinuousQuery:
    queries = parse_queries(text, file)
    if len(queries) != 1:
        raise CqlError(f"expected one CREATE statement, found {len(queries)}", 1, 1, file)
    return queries[0]
