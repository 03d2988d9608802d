"""CQL text -> :mod:`semiactive.node.cql.ast`, with lark (LALR).

The grammar lives in ``grammar.lark``; this module turns lark's tree into
positioned AST nodes, checks what the grammar leaves open (type names, time
units, window sizes, function names) and converts lark's exceptions into
:class:`CqlError` saying what was found and what was expected. The tree is
transformed without recursion and then measured (:mod:`semiactive.node.cql.limits`),
so that absurdly nested input is an error at its position, not a crash.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import re
import sys
from pathlib import Path
from typing import Any, TypedDict

import lark
from lark import Lark, Token, Transformer_NonRecursive, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

from semiactive.node.cql import ast, plan
from semiactive.node.cql.errors import CqlError
from semiactive.node.cql.limits import check_depth

_UNITS: dict[str, int] = {}
for _names, _ms in (
    (("ms", "msec", "msecs", "millisecond", "milliseconds"), 1),
    (("s", "sec", "secs", "second", "seconds"), 1000),
    (("min", "mins", "minute", "minutes"), 60_000),
    (("hour", "hours"), 3_600_000),
    (("day", "days"), 86_400_000),
):
    for _name in _names:
        _UNITS[_name] = _ms

_MAX_DIGITS = 40

_TYPES = {"integer": plan.INTEGER, "int": plan.INTEGER, "float": plan.FLOAT, "byte": plan.BYTE}


_OPTIONS: dict[str, Any] = {
    "parser": "lalr",
    # Keywords are reserved everywhere (a contextual lexer would read a
    # misplaced keyword as an identifier and report a confusing error).
    "lexer": "basic",
    "propagate_positions": True,
    "maybe_placeholders": True,
}


@functools.cache
def _lark() -> Lark:
    """The parser. Building its LALR tables costs 0.07 s of CPU in every
    process that parses (each node of a cluster compiles the topology's
    queries at start), so the built parser is kept in the user's cache
    directory under a name that digests everything it was built from."""
    grammar = (Path(__file__).parent / "grammar.lark").read_text()
    cached = _cache_file(grammar)
    if cached is not None:
        # Absent or damaged, whatever its damage: built again.
        with contextlib.suppress(Exception), cached.open("rb") as f:
            return Lark.load(f)
    parser = Lark(grammar, **_OPTIONS)
    if cached is not None:
        with contextlib.suppress(OSError):
            cached.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Written aside and renamed: the nodes of a cluster start at once.
            part = cached.with_name(f"{cached.name}.{os.getpid()}")
            with part.open("wb") as f:
                parser.save(f)
            os.replace(part, cached)
    return parser


def _cache_file(grammar: str) -> Path | None:
    root = os.environ.get("XDG_CACHE_HOME") or (
        os.path.expanduser("~/.cache") if "HOME" in os.environ else ""
    )
    if not root:
        return None
    key = f"{grammar}\n{sorted(_OPTIONS.items())}\n{lark.__version__}\n{sys.version_info[:2]}"
    return Path(root) / "semiactive" / f"cql-parser-{hashlib.sha256(key.encode()).hexdigest()[:16]}.lark"


def parse(text: str, file: str = "<query>") -> ast.Program:
    """Parse a whole CQL program. Raises :class:`CqlError`."""
    unsupported = unsupported_sql(text)
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as exc:
        error = _syntax_error(exc, text, file)
        # SQL that CQL lacks (ORDER BY, LIKE, ...) usually fails a little
        # after it starts, or parses as something else: name it instead.
        before = [u for u in unsupported if u.position <= _error_position(exc, text)]
        raise (before[0].error(file) if before else error) from None
    if unsupported:
        raise unsupported[0].error(file)
    try:
        program = _ToAst(text, file).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, CqlError):
            raise exc.orig_exc from None
        raise
    assert isinstance(program, ast.Program)
    check_depth(program, file)
    return program


# ---- syntax errors -------------------------------------------------------------

_TERMINAL_NAMES = {
    "NAME": "identifier",
    "INT": "integer",
    "DECIMAL": "number",
    "STRING": "string",
    "COMPOP": "comparison operator",
    "DELAY": "delay such as <Now>",
    "$END": "end of input",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "COMMA": "','",
    "DOT": "'.'",
    "SEMICOLON": "';'",
    "STAR": "'*'",
    "SLASH": "'/'",
    "PERCENT": "'%'",
    "PLUS": "'+'",
    "MINUS": "'-'",
}


def _describe_terminal(name: str) -> str:
    return _TERMINAL_NAMES.get(name, name.lstrip("_"))


def _error_position(exc: UnexpectedInput, text: str) -> int:
    if isinstance(exc, UnexpectedToken):
        return len(text) if exc.token.type == "$END" else exc.token.start_pos or 0
    return exc.pos_in_stream or 0


def _syntax_error(exc: UnexpectedInput, text: str, file: str) -> CqlError:
    line, column = exc.line, exc.column
    if isinstance(exc, UnexpectedToken) and exc.token.type == "$END":
        found = "end of input"
        line, column = _end_position(text)
        position = len(text)
    elif isinstance(exc, UnexpectedToken):
        found = repr(str(exc.token))
        position = exc.token.start_pos or 0
    else:
        assert isinstance(exc, UnexpectedCharacters)
        position = exc.pos_in_stream or 0
        found = f"character {text[position]!r}"
    expected = sorted({_describe_terminal(t) for t in _expected_at(text, position)})
    message = f"syntax error: unexpected {found}"
    if found == "')'" and _unbalanced(text[: position + 1]):
        message += " (no matching '(')"
    if expected:
        message += "; expected " + (expected[0] if len(expected) == 1 else "one of " + ", ".join(expected))
    return CqlError(message, line, column, file)


def _expected_at(text: str, position: int) -> set[str]:
    """The terminals the parser accepts just before ``position``.

    LALR may reduce on a bad token before noticing the error, so the state in
    lark's exception can be too far out (e.g. "expected end of input" for a
    stray ')'); re-parse up to the bad token and ask the parser there.
    """
    interactive = _lark().parse_interactive(text)
    try:
        for token in interactive.iter_parse():
            if token.start_pos is not None and token.start_pos >= position:
                break
    except UnexpectedInput:
        pass
    return set(interactive.accepts())  # type: ignore[no-untyped-call]


_NOISE = re.compile(r"'([^']|'')*'|--[^\n]*|/\*(.|\n)*?\*/")


def _unbalanced(prefix: str) -> bool:
    code = _NOISE.sub(" ", prefix)
    return code.count(")") > code.count("(")


def _end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1


# ---- SQL that CQL does not have ---------------------------------------------------------

_HINTS = {
    "ORDER BY": "a stream is in time order; sort a query's output outside",
    "LIMIT": "a [Rows N] window keeps a stream's last N rows",
    "OFFSET": "a [Rows N] window keeps a stream's last N rows",
    "FETCH": "a [Rows N] window keeps a stream's last N rows",
    "TOP": "a [Rows N] window keeps a stream's last N rows",
    "LIKE": "text is compared with = <> < <= > >=",
    "IN": "write a = 1 OR a = 2",
    "BETWEEN": "write a >= low AND a <= high",
    "IS": "inputs are never NULL; x = x is false exactly when x is NULL",
    "JOIN": "list the inputs in FROM and join them in WHERE: FROM a [Now], b [Range 5 s] WHERE a.k = b.k",
    "INTERSECT": "the set operations are UNION, UNION ALL and EXCEPT",
    "WITH": "register the subquery with REGISTER QUERY name AS ... and read it by name",
    "INSERT": "inputs are REGISTER STREAM or REGISTER RELATION, queries REGISTER QUERY",
    "DISTINCT": "DISTINCT applies to a whole SELECT",
}
_JOIN_KINDS = ("inner", "left", "right", "full", "outer", "cross", "natural")
# Tokens that end a value and tokens that start one.
_VALUE_END = {"NAME", "INT", "DECIMAL", "STRING", "RPAR", "RSQB"}
_VALUE_START = {"NAME", "INT", "DECIMAL", "STRING", "LPAR", "MINUS"}


@dataclasses.dataclass(frozen=True)
class UnsupportedSql:
    """A construct of SQL that CQL does not have, where it starts."""

    construct: str
    position: int
    line: int
    column: int
    hint: str = ""

    def error(self, file: str) -> CqlError:
        message = f"`{self.construct}` is not supported in CQL" + (f" ({self.hint})" if self.hint else "")
        return CqlError(message, self.line, self.column, file)


def unsupported_sql(text: str) -> list[UnsupportedSql]:
    """Where ``text`` uses SQL that CQL does not have (ORDER BY, LIMIT,
    LIKE, IN, BETWEEN, IS NULL, JOIN ... ON, INTERSECT, WITH, CAST, ...), in
    text order. These words are no keywords (a column may be called
    ``limit``): a construct is recognised by its neighbours, in places
    where no CQL could have them."""
    tokens: list[Token] = []
    with contextlib.suppress(UnexpectedInput):  # a bad character: the parser says where
        tokens.extend(_lark().lex(text))

    def kind(i: int) -> str:
        return tokens[i].type if 0 <= i < len(tokens) else "$END"

    def word(i: int) -> str:
        return str(tokens[i]).lower() if kind(i) == "NAME" else ""

    found: list[UnsupportedSql] = []

    def add(first: int, construct: str, hint: str = "") -> None:
        t = tokens[first]
        hint = _HINTS.get(hint or construct.removeprefix("NOT ").split()[0], "")
        found.append(UnsupportedSql(construct, t.start_pos or 0, t.line or 1, t.column or 1, hint))

    for i in range(len(tokens)):
        w, after_value = word(i), kind(i - 1) in _VALUE_END
        if kind(i) == "NOT" and after_value and word(i + 1) in ("like", "ilike", "in", "between"):
            add(i, f"NOT {word(i + 1).upper()}")
        elif kind(i) == "DISTINCT" and kind(i - 1) == "LPAR" and word(i - 2) in ast.AGGREGATES:
            add(i - 2, f"{word(i - 2).upper()}(DISTINCT ...)", "DISTINCT")
        elif w == "order" and kind(i + 1) == "_BY":
            add(i, "ORDER BY")
        elif w in ("limit", "offset") and kind(i + 1) == "INT":
            add(i, w.upper())
        elif w == "fetch" and word(i + 1) in ("first", "next"):
            add(i, f"FETCH {word(i + 1).upper()}")
        elif w == "top" and kind(i - 1) in ("_SELECT", "DISTINCT") and kind(i + 1) == "INT":
            add(i, "TOP")
        elif w in ("like", "ilike", "between") and after_value and kind(i + 1) in _VALUE_START:
            add(i, w.upper())
        elif w == "in" and after_value and kind(i + 1) == "LPAR":
            add(i, "IN")
        elif w == "is" and after_value and "null" in (word(i + 1), kind(i + 1) == "NOT" and word(i + 2)):
            add(i, "IS NOT NULL" if kind(i + 1) == "NOT" else "IS NULL")
        elif w == "join" and kind(i + 1) in ("NAME", "LPAR"):
            first = i
            while word(first - 1) in _JOIN_KINDS:
                first -= 1
            if kind(first - 1) in _VALUE_END:
                add(first, " ".join(str(t).upper() for t in tokens[first : i + 1]), "JOIN")
        elif w == "intersect" and after_value and kind(i + 1) in ("_SELECT", "LPAR", "ALL"):
            add(i, "INTERSECT")
        elif w == "with" and kind(i + 1) == "NAME" and kind(i + 2) == "_AS" and kind(i + 3) == "LPAR":
            add(i, "WITH")
        elif w in ("cast", "exists") and kind(i + 1) == "LPAR":
            add(i, w.upper())
        elif (
            (w == "insert" and word(i + 1) == "into")
            or (w == "delete" and kind(i + 1) == "_FROM")
            or (w == "update" and kind(i + 1) == "NAME" and word(i + 2) == "set")
            or (w == "create" and word(i + 1) in ("table", "view", "stream", "index"))
        ):
            construct = f"{w.upper()} {str(tokens[i + 1]).upper()}" if w != "update" else "UPDATE ... SET"
            add(i, construct, "INSERT")
    return found


# ---- tree -> AST ------------------------------------------------------------------


class _Position(TypedDict):
    line: int
    column: int


def _pos(item: Any) -> _Position:
    """Position keywords for an AST node from a lark Meta or Token."""
    return {"line": item.line, "column": item.column}


_DELAY_RE = re.compile(r"<\s*(now|([0-9]+)\s*([a-z]*))\s*>", re.IGNORECASE)


@v_args(meta=True)
class _ToAst(Transformer_NonRecursive[Token, Any]):
    def __init__(self, text: str, file: str) -> None:
        super().__init__()
        self.text = text
        self.file = file

    def _error(self, message: str, where: Any) -> CqlError:
        return CqlError(message, where.line, where.column, self.file)

    def _int(self, text: Any, where: Any = None) -> int:
        """The value of a number (a token, or text found at ``where``); one
        longer than any sensible size is an error here rather than Python's
        limit on converting long digit strings (4300 digits)."""
        digits = str(text).lstrip("0")
        if len(digits) > _MAX_DIGITS:
            raise self._error(f"number {digits[:20]}... is too large", where or text)
        return int(str(text))

    # -- statements

    def start(self, meta: Any, children: list[Any]) -> ast.Program:
        statements: list[ast.Statement] = []
        anonymous = 0
        for child in children:
            if isinstance(child, ast.RegisterQuery) and child.anonymous:
                anonymous += 1
                child = dataclasses.replace(child, name=f"query{anonymous}")
            if isinstance(child, ast.RegisterInput | ast.RegisterQuery):
                statements.append(child)
        return ast.Program(tuple(statements), line=1, column=1)

    def register_input(self, meta: Any, children: list[Any]) -> ast.RegisterInput:
        kind_token, name, *attributes = children
        kind = plan.Kind.STREAM if kind_token.type == "STREAM" else plan.Kind.RELATION
        return ast.RegisterInput(kind, str(name), tuple(attributes), **_pos(meta))

    def attr(self, meta: Any, children: list[Any]) -> ast.Attribute:
        name, type_name, length = children
        lowered = str(type_name).lower()
        if lowered == "char":
            if length is None:
                raise self._error("type char needs a length, e.g. char(10)", type_name)
            if self._int(length) < 1:
                raise self._error("char length must be at least 1", length)
            sql_type = plan.char(self._int(length))
        elif lowered in _TYPES:
            if length is not None:
                raise self._error(f"type {lowered} takes no length", length)
            sql_type = _TYPES[lowered]
        else:
            raise self._error(
                f"unknown type {str(type_name)!r}; expected integer, int, float, byte or char(n)",
                type_name,
            )
        return ast.Attribute(str(name), sql_type, **_pos(meta))

    def register_query(self, meta: Any, children: list[Any]) -> ast.RegisterQuery:
        name, query = children
        return ast.RegisterQuery(str(name), query, **_pos(meta))

    def register_named_query(self, meta: Any, children: list[Any]) -> ast.RegisterQuery:
        name, columns, query = children
        return ast.RegisterQuery(str(name), query, columns=columns, **_pos(meta))

    def column_names(self, meta: Any, children: list[Any]) -> tuple[ast.ColumnName, ...]:
        return tuple(ast.ColumnName(str(t), line=t.line, column=t.column) for t in children)

    def bare_query(self, meta: Any, children: list[Any]) -> ast.RegisterQuery:
        return ast.RegisterQuery("", children[0], anonymous=True, **_pos(meta))

    # -- queries

    def query(self, meta: Any, children: list[Any]) -> ast.Query:
        body, delay_token = children
        delay = None if delay_token is None else self._delay(delay_token)
        return ast.Query(body, delay, **_pos(meta))

    def _delay(self, token: Token) -> ast.Delay:
        match = _DELAY_RE.fullmatch(str(token))
        assert match is not None
        if match.group(1).lower() == "now":
            return ast.Delay(plan.EPSILON_MS, str(token), **_pos(token))
        ms = self._int(match.group(2), token) * self._unit(match.group(3), token)
        if ms < 1:
            raise self._error(f"delay {token} must be at least 1 ms", token)
        return ast.Delay(ms, str(token), **_pos(token))

    def _unit(self, unit: str | None, where: Any) -> int:
        if not unit:
            return 1
        factor = _UNITS.get(unit.lower())
        if factor is None:
            raise self._error(
                f"unknown time unit {unit!r}; expected ms, seconds, minutes, hours or days",
                where,
            )
        return factor

    def named_term(self, meta: Any, children: list[Any]) -> ast.Select:
        """STREAM's ``A UNION B`` over view names: ``SELECT * FROM A``."""
        name = children[0]
        star = ast.StarItem(None, **_pos(name))
        return ast.Select(
            False,
            (star,),
            (ast.FromName(str(name), None, None, **_pos(name)),),
            None,
            None,
            None,
            **_pos(name),
        )

    def set_op_expr(self, meta: Any, children: list[Any]) -> ast.SetOp:
        left, (op, token), right = children
        return ast.SetOp(op, left, right, **_pos(token))

    def set_op(self, meta: Any, children: list[Any]) -> tuple[str, Token]:
        return " ".join(str(t).upper() for t in children), children[0]

    def stream_op(self, meta: Any, children: list[Any]) -> ast.StreamOp:
        token, body = children
        return ast.StreamOp(str(token).upper(), body, **_pos(token))

    def select(self, meta: Any, children: list[Any]) -> ast.Select:
        distinct, *middle, where, group_by, having = children
        items = tuple(c for c in middle if isinstance(c, ast.StarItem | ast.ExprItem))
        from_items = tuple(
            c for c in middle if isinstance(c, ast.FromName | ast.FromSubquery | ast.FromAssign)
        )
        return ast.Select(distinct is not None, items, from_items, where, group_by, having, **_pos(meta))

    def where(self, meta: Any, children: list[Any]) -> ast.Expr:
        return children[0]  # type: ignore[no-any-return]

    def having(self, meta: Any, children: list[Any]) -> ast.Expr:
        return children[0]  # type: ignore[no-any-return]

    def group_by(self, meta: Any, children: list[Any]) -> tuple[ast.Expr, ...]:
        return tuple(children)

    def star_item(self, meta: Any, children: list[Any]) -> ast.StarItem:
        return ast.StarItem(None, **_pos(meta))

    def qualified_star_item(self, meta: Any, children: list[Any]) -> ast.StarItem:
        return ast.StarItem(str(children[0]), **_pos(meta))

    def expr_item(self, meta: Any, children: list[Any]) -> ast.ExprItem:
        expr, alias = children
        return ast.ExprItem(expr, None if alias is None else str(alias), **_pos(meta))

    def from_name(self, meta: Any, children: list[Any]) -> ast.FromName:
        name, window, alias = children
        return ast.FromName(str(name), window, None if alias is None else str(alias), **_pos(meta))

    def from_subquery(self, meta: Any, children: list[Any]) -> ast.FromSubquery:
        query, window, alias = children
        return ast.FromSubquery(query, window, str(alias), **_pos(meta))

    def from_assign(self, meta: Any, children: list[Any]) -> ast.FromAssign:
        relation, selector, *projections, window, alias = children
        return ast.FromAssign(relation, selector, tuple(projections), window, str(alias), **_pos(meta))

    def assign_input(self, meta: Any, children: list[Any]) -> ast.FromName:
        return self.from_name(meta, children)

    def assign_proj(self, meta: Any, children: list[Any]) -> ast.AssignProjection:
        attribute, name, type_name, length = children
        if isinstance(attribute, Token):
            attribute = ast.StrLit(str(attribute)[1:-1].replace("''", "'"), **_pos(attribute))
        sql_type = self.attr(meta, [name, type_name, length]).type
        return ast.AssignProjection(attribute, str(name), sql_type, name.line, name.column, **_pos(meta))

    # -- windows

    def _window(self, meta: Any, spec: plan.WindowSpec, **extra: Any) -> ast.WindowAst:
        text = " ".join(self.text[meta.start_pos : meta.end_pos].split())
        return ast.WindowAst(spec, text, **extra, **_pos(meta))

    def now_window(self, meta: Any, children: list[Any]) -> ast.WindowAst:
        return self._window(meta, plan.NowWindow())

    def unbounded_window(self, meta: Any, children: list[Any]) -> ast.WindowAst:
        return self._window(meta, plan.UnboundedWindow())

    def range_window(self, meta: Any, children: list[Any]) -> ast.WindowAst:
        _, (range_ms, _range_token), slide = children
        slide_ms = 1
        if slide is not None:
            slide_ms, slide_token = slide
            if slide_ms < 1:
                raise self._error("window slide must be at least 1 ms", slide_token)
        if range_ms == 0 and slide_ms == 1:
            return self._window(meta, plan.NowWindow())
        return self._window(meta, plan.RangeWindow(range_ms, slide_ms))

    def rows_window(self, meta: Any, children: list[Any]) -> ast.WindowAst:
        _, rows, slide = children
        self._at_least_one(rows, "window row count")
        if slide is not None:
            self._at_least_one(slide, "window slide")
        spec = plan.RowsWindow(self._int(rows), 1 if slide is None else self._int(slide))
        return self._window(meta, spec)

    def partition_window(self, meta: Any, children: list[Any]) -> ast.WindowAst:
        _, *keys, rows, range_ = children
        self._at_least_one(rows, "window row count")
        range_ms = None if range_ is None else range_[0]
        return self._window(meta, plan.PartitionWindow((), self._int(rows), range_ms), keys=tuple(keys))

    def _at_least_one(self, token: Token, what: str) -> None:
        if self._int(token) < 1:
            raise self._error(f"{what} must be at least 1", token)

    def time(self, meta: Any, children: list[Any]) -> tuple[int, Token]:
        amount, unit = children
        where = amount if unit is None else unit
        return self._int(amount) * self._unit(None if unit is None else str(unit), where), amount

    # -- expressions

    def _bool(self, meta: Any, op: str, left: ast.Expr, right: ast.Expr) -> ast.BoolExpr:
        operands: list[ast.Expr] = []
        for side in (left, right):
            if isinstance(side, ast.BoolExpr) and side.op == op:
                operands.extend(side.operands)
            else:
                operands.append(side)
        return ast.BoolExpr(op, tuple(operands), **_pos(meta))

    def or_expr(self, meta: Any, children: list[Any]) -> ast.BoolExpr:
        return self._bool(meta, "OR", children[0], children[2])

    def and_expr(self, meta: Any, children: list[Any]) -> ast.BoolExpr:
        return self._bool(meta, "AND", children[0], children[2])

    def not_expr(self, meta: Any, children: list[Any]) -> ast.Not:
        return ast.Not(children[1], **_pos(meta))

    def compare(self, meta: Any, children: list[Any]) -> ast.Binary:
        left, op, right = children
        normal = "!=" if str(op) == "<>" else str(op)
        return ast.Binary(normal, left, right, op.line, op.column, **_pos(meta))

    def arith(self, meta: Any, children: list[Any]) -> ast.Binary:
        left, op, right = children
        return ast.Binary(str(op), left, right, op.line, op.column, **_pos(meta))

    def neg(self, meta: Any, children: list[Any]) -> ast.Negate:
        return ast.Negate(children[1], **_pos(meta))

    def int_lit(self, meta: Any, children: list[Any]) -> ast.IntLit:
        value = self._int(children[0])
        if value > plan.INT_MAX:
            raise self._error(
                f"integer literal {children[0]} is out of range: integers are 64-bit, at most {plan.INT_MAX} "
                "(write a float such as 1e20 for larger numbers)",
                children[0],
            )
        return ast.IntLit(value, **_pos(meta))

    def float_lit(self, meta: Any, children: list[Any]) -> ast.FloatLit:
        return ast.FloatLit(float(children[0]), **_pos(meta))

    def str_lit(self, meta: Any, children: list[Any]) -> ast.StrLit:
        return ast.StrLit(str(children[0])[1:-1].replace("''", "'"), **_pos(meta))

    def column(self, meta: Any, children: list[Any]) -> ast.ColumnRef:
        first, second = children
        if second is None:
            return ast.ColumnRef(None, str(first), **_pos(meta))
        return ast.ColumnRef(str(first), str(second), **_pos(meta))

    def call(self, meta: Any, children: list[Any]) -> ast.Call:
        name_token, (star, args) = children
        name = str(name_token).lower()
        if name not in ast.AGGREGATES:
            raise self._error(
                f"unknown function {str(name_token)!r}; the functions are COUNT, SUM, AVG, MIN and MAX",
                name_token,
            )
        if star and name != "count":
            raise self._error(f"{name.upper()}(*) is not allowed; only COUNT(*)", name_token)
        if not star and len(args) != 1:
            raise self._error(f"{name.upper()} takes exactly one argument, got {len(args)}", name_token)
        return ast.Call(name, tuple(args), star, **_pos(meta))

    def case_when(self, meta: Any, children: list[Any]) -> tuple[ast.Expr, ast.Expr]:
        return children[0], children[1]

    def case_expr(self, meta: Any, children: list[Any]) -> ast.Case:
        *whens, otherwise = children
        conditions = tuple(c for c, _ in whens)
        values = tuple(v for _, v in whens)
        return ast.Case(conditions, values, otherwise, **_pos(meta))

    def call_args(self, meta: Any, children: list[Any]) -> tuple[bool, list[ast.Expr]]:
        if len(children) == 1 and isinstance(children[0], Token) and children[0].type == "STAR":
            return True, []
        return False, [c for c in children if c is not None]
