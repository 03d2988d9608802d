"""Grammar-aware fuzzing of ``semiactive query check`` and ``query run``.

Random CQL texts go through the functions the two commands call
(:func:`semiactive.embedded.query.check` and :func:`semiactive.embedded.query.run`) over
tiny input files made for whatever streams the text registers. Each step
may answer only with what it is there for (:func:`exercise`): ``check``
with the plan or a rejection, a :class:`CqlError` located in the text;
``run``, of a program ``check`` accepted, with its rows, not a compile
error ``check`` missed, and a :class:`SourceDataError` only for the data (an
evaluation error) or the executor (the heartbeat one declines recursion).
Anything else, a crash included, fails the test.

Three sources of texts: soups of the grammar's tokens (keywords,
identifiers, numbers up to the huge and infinite, operators, parentheses)
and mutations of the example programs in ``examples/*.cql`` (tokens deleted,
repeated, replaced, swapped), which may be rejected, cleanly; and programs
generated from a small grammar of valid programs, which must compile and
run, as must the examples themselves: a valid program rejected is a failure,
not an expected error. Runs are deterministic (``derandomize``) and take a
few seconds.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semiactive.embedded import query as embedded
from semiactive.node import cql
from semiactive.node.connectors.sources import SourceDataError
from semiactive.node.cql import CqlError, plan

EXAMPLES_DIR = Path(__file__).parents[2] / "examples"
# Workloads of an MQO stage (mqo: queries_file in a cluster config), in
# seed 003's template language: *.cql files that are not CQL programs.
MQO_WORKLOADS = {
    stage["mqo"]["queries_file"]
    for config in EXAMPLES_DIR.glob("*.yaml")
    for stage in yaml.safe_load(config.read_text()).get("stages", [])
    if "mqo" in stage
}
EXAMPLES = sorted(p for p in EXAMPLES_DIR.glob("*.cql") if p.name not in MQO_WORKLOADS)
# Mutated, every *.cql is as good a start (the MQO workload's mutants test
# rejections), and the fuzzer draws the same texts it always did.
EXAMPLE_TEXTS = [path.read_text() for path in sorted(EXAMPLES_DIR.glob("*.cql"))]

GRAMMAR = (Path(cql.__file__).parent / "grammar.lark").read_text()
KEYWORDS = [word.upper() for word in re.findall(r'^_?[A-Z]+: "(\w+)"i$', GRAMMAR, re.MULTILINE)]
IDENTIFIERS = ["s", "r", "t", "a", "b", "c", "d", "k", "x", "y", "q", "query1", "ts", "seq", "op"]
IDENTIFIERS += ["count", "sum", "avg", "min", "max", "integer", "int", "float", "byte", "char"]
IDENTIFIERS += ["seconds", "ms", "minute", "days"]
NUMBERS = [
    "0",
    "1",
    "2",
    "10",
    "1.5",
    ".5",
    "0.0",
    "1e3",
    "1e308",
    "1e999",
    "1e-999",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "9" * 60,
]
SYMBOLS = [
    "+",
    "-",
    "*",
    "/",
    "%",
    "=",
    "!=",
    "<>",
    "<",
    "<=",
    ">",
    ">=",
    ",",
    ".",
    ";",
    "(",
    ")",
    "[",
    "]",
    "<Now>",
    "<1 second>",
    "<5>",
    "<0>",
    "'x'",
    "''",
    "'it''s'",
    "'é'",
    "--c\n",
    "/* c */",
]
TOKENS = KEYWORDS + IDENTIFIERS + NUMBERS + SYMBOLS
HEADER = (
    "REGISTER STREAM s (a integer, b float, c char(4), d byte)\nREGISTER RELATION r (a integer, k char(2))\n"
)

_TOKEN = re.compile(
    r"'(?:[^']|'')*'|<\s*\w+(?:\s+\w+)?\s*>|--[^\n]*|/\*.*?\*/|\d*\.?\d+(?:[eE][+-]?\d+)?|\w+|\S", re.S
)


# ---- texts -----------------------------------------------------------------------------


@st.composite
def token_soups(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.sampled_from(TOKENS), max_size=40))
    header = draw(st.sampled_from(["", HEADER, HEADER + "SELECT "]))
    return header + " ".join(words)


@st.composite
def mutated_examples(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(EXAMPLE_TEXTS))
    tokens = [t for t in _TOKEN.findall(text) if not t.startswith(("--", "/*"))]
    # Positions uniform over the program (hypothesis favours small integers).
    rnd = draw(st.randoms(use_true_random=False))
    # Half the mutants only exchange tokens for alike ones: they mostly
    # parse, and reach the binder and the engine.
    actions = ["alike"] if draw(st.booleans()) else ["delete", "repeat", "replace", "swap", "insert", "alike"]
    for _ in range(draw(st.integers(1, 4))):
        if not tokens:
            break
        at = rnd.randrange(len(tokens))
        action = rnd.choice(actions)
        if action == "delete":
            del tokens[at]
        elif action == "repeat":
            tokens[at:at] = [tokens[at]] * rnd.randint(1, 3)
        elif action == "replace":
            tokens[at] = rnd.choice(TOKENS)
        elif action == "alike":
            tokens[at] = rnd.choice(_alike(tokens[at], tokens))
        elif action == "swap":
            other = rnd.randrange(len(tokens))
            tokens[at], tokens[other] = tokens[other], tokens[at]
        else:
            tokens.insert(at, rnd.choice(TOKENS))
    return " ".join(tokens)


SWAPPABLE = [
    ["ISTREAM", "DSTREAM", "RSTREAM"],
    ["UNION", "EXCEPT", "UNION ALL"],
    ["AND", "OR"],
    ["STREAM", "RELATION"],
    ["integer", "int", "float", "byte"],
    ["<Now>", "<1 second>", "<5>", "<0>", "<2 days>"],
    ["Now", "Range 0", "Range Unbounded", "Rows 1", "Range 1 Slide 5"],
]


def _alike(token: str, tokens: list[str]) -> list[str]:
    """Tokens that can stand where ``token`` is, so that the mutant often
    still parses and reaches the binder and the engine."""
    for group in (ARITH, COMPARE, NUMBERS, *SWAPPABLE):
        if token in group or token.upper() in group:
            return group
    if token[0].isdigit() or token[0] == ".":
        return NUMBERS
    if token.isidentifier() and token.upper() not in KEYWORDS:
        return [t for t in tokens if t.isidentifier() and t.upper() not in KEYWORDS] + IDENTIFIERS
    return [token]


# Generated programs: FROM items with the columns they bring (x, and y if
# joined), typed so that most programs compile and run.
SOURCES = {
    "s": {"a": "number", "b": "number", "c": "text", "d": "text"},
    "r": {"a": "number", "k": "text"},
}
WINDOWS = [
    "[Now]",
    "[Range 2]",
    "[Rows 2]",
    "[Range 2 Slide 2]",
    "[Partition By a Rows 1]",
    "",
    "[Range Unbounded]",
]
NUMBER_LITERALS = ["1", "0", "2", "2.5", "1e999", "-1e999", "1e308", "9223372036854775807"]
TEXT_LITERALS = ["'ab'", "'é'", "''"]
ARITH = ["+", "-", "*", "/", "%"]
COMPARE = ["=", "!=", "<", "<=", ">", ">="]
AGGREGATES = ["SUM({})", "AVG({})", "MIN({})", "MAX({})", "COUNT({})"]


def expressions(leaves: list[str]) -> st.SearchStrategy[str]:
    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        binary = st.tuples(inner, st.sampled_from(ARITH), inner, st.booleans())
        return st.one_of(
            binary.map(lambda t: f"({t[0]} {t[1]} {t[2]})" if t[3] else f"{t[0]} {t[1]} {t[2]}"),
            inner.map(lambda e: f"-({e})"),
            st.lists(inner, min_size=2, max_size=60).map(" + ".join),
        )

    return st.recursive(st.sampled_from(leaves), grow, max_leaves=10)


def conditions(numbers: list[str], texts: list[str]) -> st.SearchStrategy[str]:
    compare = st.one_of(
        st.tuples(expressions(numbers), st.sampled_from(COMPARE), expressions(numbers)).map(" ".join),
        st.tuples(st.sampled_from(texts), st.sampled_from(COMPARE), st.sampled_from(texts)).map(" ".join),
    )

    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            inner.map(lambda c: f"NOT {c}"),
        )

    return st.recursive(compare, grow, max_leaves=4)


@st.composite
def selects(draw: st.DrawFn) -> str:
    """A SELECT over one or two FROM items: plain, or grouped."""
    items = {"x": draw(st.sampled_from(sorted(SOURCES)))}
    if draw(st.booleans()):
        items["y"] = draw(st.sampled_from(sorted(SOURCES)))
    froms = []
    for alias, source in items.items():
        window = draw(st.sampled_from(WINDOWS)) if source == "s" else ""
        froms.append(f"{source} {window} AS {alias}")
    columns = [
        (f"{alias}.{name}", kind) for alias, source in items.items() for name, kind in SOURCES[source].items()
    ]
    numbers = [c for c, kind in columns if kind == "number"] + NUMBER_LITERALS
    texts = [c for c, kind in columns if kind == "text"] + TEXT_LITERALS
    where = f" WHERE {draw(conditions(numbers, texts))}" if draw(st.booleans()) else ""
    if draw(st.booleans()):
        key = draw(expressions(numbers[:3]))
        aggregates = [
            draw(st.sampled_from(AGGREGATES)).format(draw(expressions(numbers))) + f" AS g{n}"
            for n in range(draw(st.integers(0, 2)))
        ]
        having = ""
        if draw(st.booleans()):
            having = (
                f" HAVING COUNT(*) {draw(st.sampled_from(COMPARE))} {draw(st.sampled_from(NUMBER_LITERALS))}"
            )
        select_list = ", ".join([f"{key} AS k", "COUNT(*) AS n", *aggregates])
        return f"SELECT {select_list} FROM {', '.join(froms)}{where} GROUP BY {key}{having}"
    select_items = [draw(st.sampled_from(["*", "x.*"]))] if draw(st.booleans()) else []
    select_items += [f"{draw(expressions(numbers))} AS e{n}" for n in range(draw(st.integers(1, 3)))]
    distinct = draw(st.sampled_from(["", "", "DISTINCT "]))
    return f"SELECT {distinct}{', '.join(select_items)} FROM {', '.join(froms)}{where}"


@st.composite
def generated_programs(draw: st.DrawFn) -> str:
    query = draw(selects())
    wrap = draw(st.sampled_from(["{}", "ISTREAM({})", "DSTREAM({})", "RSTREAM({})", "ISTREAM({})<Now>"]))
    program = HEADER + "REGISTER QUERY q AS " + wrap.format(query)
    if draw(st.booleans()):
        condition = draw(conditions(["a", *NUMBER_LITERALS], ["'ab'"]))
        program += "\nREGISTER QUERY loop AS ISTREAM(SELECT a FROM s [Now] UNION ALL "
        program += f"SELECT a + 1 AS a FROM loop [Now] WHERE {condition})<1>"
    return program


# ---- running them ------------------------------------------------------------------------


VALUES = {
    plan.TypeName.INTEGER: ["-1", "0", "2", "9223372036854775807"],
    plan.TypeName.FLOAT: ["0.5", "-1.5", "0.0", "1e308"],
    plan.TypeName.BYTE: ["x", "y", "x", "z"],
    plan.TypeName.CHAR: ["a", "", "ab", "a"],
}


def write_inputs(program: plan.Program, directory: Path) -> Iterator[str]:
    """A four-row CSV for every input of ``program``, as ``--stream`` specs.
    A relation's third row deletes its first."""
    for number, (name, decl) in enumerate(program.inputs.items()):
        columns = decl.schema.columns
        relation = decl.kind is plan.Kind.RELATION
        lines = [",".join(["ts", *(c.name for c in columns), *(["op"] if relation else [])])]
        for row, ts in enumerate((1, 1, 2, 4)):
            source = 0 if relation and row == 2 else row
            values = [_fit(VALUES[c.type.name][source], c.type) for c in columns]
            op = ["-" if row == 2 else "+"] if relation else []
            lines.append(",".join([str(ts), *values, *op]))
        path = directory / f"input{number}.csv"
        path.write_text("\n".join(lines) + "\n")
        yield f"{name}={path}"


def _fit(value: str, sql_type: plan.SqlType) -> str:
    return value[: sql_type.length] if sql_type.name is plan.TypeName.CHAR else value


REJECTED = "rejected by check"
NOTHING_TO_RUN = "no query to run"
RAN = "ran"
DECLINED = "declined by the heartbeat executor"
DATA_ERROR = "an evaluation error of the data"


def exercise(
    text: str,
    directory: Path,
    executor: str = "dts",
    insert_delays: bool | None = None,
    *,
    valid: bool = False,
) -> str:
    """``query check`` (without then with ``--insert-delays``, or as told)
    then ``query run`` of ``text``; what happened (:data:`RAN`, ...). An
    error a step may not answer with fails here:

    - ``check`` rejects only with a :class:`CqlError` located in the text,
      in one line, and never a ``valid`` program; what it accepts without
      ``--insert-delays`` it accepts with (the option only repairs);
    - ``run`` of a program ``check`` accepted raises no CqlError (a query
      the engine cannot compile is ``check``'s to find) except for a
      program without queries, and a :class:`SourceDataError` only for a
      recursive program the heartbeat executor declines or, unless
      ``valid``, an evaluation error of the data.
    """
    query = directory / "fuzz.cql"
    query.write_text(text)
    modes = (False, True) if insert_delays is None else (insert_delays,)
    try:
        embedded.check(str(query), insert_delays=modes[0])
    except CqlError as exc:
        if valid:
            raise AssertionError(f"check rejected a valid program: {exc}") from exc
        assert_located(exc, query, text)
        return REJECTED
    for insert in modes[1:]:
        embedded.check(str(query), insert_delays=insert)
    program = embedded.load_program(str(query))
    streams = list(write_inputs(program, directory))
    if not program.queries:
        with pytest.raises(CqlError, match=r"^[^:]*:1:1: the program registers no query"):
            embedded.run(
                str(query), streams, output=None, executor=executor, run_limit=100, out=io.StringIO()
            )
        return NOTHING_TO_RUN
    try:
        embedded.run(str(query), streams, output=None, executor=executor, run_limit=100, out=io.StringIO())
    except SourceDataError as exc:
        message = str(exc)
        if message.startswith("--executor hb: the heartbeat executor runs non-recursive programs only"):
            assert executor == "hb"
            return DECLINED
        assert message.startswith("cannot evaluate the program up to instant ") and not valid, message
        return DATA_ERROR
    return RAN


def assert_located(error: CqlError, query: Path, text: str) -> None:
    """A rejection as the command line shows it: ``file:line:column:
    message``, one line, pointing into the text (or just past its end)."""
    assert error.file == str(query), repr(error)
    assert 1 <= error.line <= text.count("\n") + 1 and error.column >= 1, repr(error)
    assert error.message and "\n" not in str(error), repr(error)


@pytest.fixture(autouse=True)
def short_settling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recursive programs that never settle run 60 s of event time after
    their last input; 50 ms shows the same code paths, faster."""
    monkeypatch.setattr(embedded, "SETTLE_LIMIT_MS", 50)


FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.filter_too_much,
    ],
)


@settings(FUZZ, max_examples=1500)
@given(text=token_soups())
def test_token_soups(text: str, tmp_path: Path) -> None:
    exercise(text, tmp_path)


@settings(FUZZ, max_examples=1500)
@given(text=mutated_examples())
def test_mutated_examples(text: str, tmp_path: Path) -> None:
    exercise(text, tmp_path)


@settings(FUZZ, max_examples=400)
@given(
    text=generated_programs(), executor=st.sampled_from(["dts", "hb", "auto"]), insert_delays=st.booleans()
)
def test_generated_programs(text: str, executor: str, insert_delays: bool, tmp_path: Path) -> None:
    """Valid programs compile and run; the one program the heartbeat
    executor declines is a recursive one (the generated ``loop``)."""
    recursive = "REGISTER QUERY loop AS" in text
    expected = DECLINED if executor == "hb" and recursive else RAN
    assert exercise(text, tmp_path, executor, insert_delays, valid=True) == expected


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_pass_through_unharmed(path: Path, tmp_path: Path) -> None:
    assert exercise(path.read_text(), tmp_path, valid=True) == RAN


def test_every_example_is_fuzzed_but_the_mqo_workload() -> None:
    """Only what an MQO stage reads is left out of the CQL examples."""
    assert {"mqo-queries.cql"} == MQO_WORKLOADS
    assert (EXAMPLES_DIR / "mqo-queries.cql").exists() and len(EXAMPLES) >= 10
