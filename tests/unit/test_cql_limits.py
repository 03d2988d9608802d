"""What the compiler and the code generator do with extreme programs:
infinite float literals, long sums, absurd nesting. Every outcome is a
result or a positioned :class:`CqlError`, never a Python traceback."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from semiactive.cli import main
from semiactive.embedded import query as embedded
from semiactive.node.connectors.jsonl import formatter
from semiactive.node.cql import CqlError, compile_program, explain, plan
from semiactive.node.cql.limits import MAX_DEPTH, MAX_NESTING
from semiactive.node.engine import expressions
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine
from semiactive.node.engine.operators import relational

HEAD = "REGISTER STREAM s (a integer, b integer, f float)\n"


def run(query: str, rows: list[tuple[Any, ...]], output: str | None = None) -> list[Element]:
    """Run ``HEAD + query`` over rows ``(ts, a, b, f)``."""
    program = compile_program(HEAD + query)
    inputs = {"s": [(ts, n, 1, *values) for n, (ts, *values) in enumerate(rows, start=1)]}
    return embedded.execute(program, inputs, output)


def values(rows: list[Element]) -> list[tuple[Any, ...]]:
    return [r[3:] for r in rows]


# ---- 1. infinite float literals ---------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("a < 1e999", [1, 2]),
        ("a > -1e999", [1, 2]),
        ("f < 1e999 AND a > 1", [2]),
        ("a > 1e999", []),
        ("a * 1e999 > 1e308", [1, 2]),
    ],
)
def test_infinite_literals_compile_and_compare(condition: str, expected: list[int]) -> None:
    rows = run(f"SELECT a FROM s WHERE {condition}", [(1, 1, 0, 0.5), (2, 2, 0, 1.5)])
    assert [v[0] for v in values(rows)] == expected


def test_infinite_literal_as_a_value_is_printed_as_null() -> None:
    program = compile_program(HEAD + "SELECT a, 1e999 AS big, -1e999 - f AS small FROM s")
    rows = embedded.execute(program, {"s": [(1, 1, 1, 7, 0, 0.5)]})
    assert values(rows) == [(7, math.inf, -math.inf)]
    root = program.query(program.last_query)
    assert formatter(root.schema, root.kind)(1, rows[0]) == '{"seq":1,"ts":1,"a":7,"big":null,"small":null}\n'


def test_generated_literals_evaluate_to_their_value() -> None:
    for value in (math.inf, -math.inf, 1.5, -0.0, 2**62, "it's"):
        function = expressions.scalar_function(plan.Literal(plan.FLOAT, value))
        assert function(()) == value
    nan = expressions.scalar_function(plan.Literal(plan.FLOAT, math.nan))(())
    assert math.isnan(nan)


def test_explain_writes_infinity_as_cql() -> None:
    program = compile_program(HEAD + "SELECT a FROM s WHERE f < 1e999 AND f > -1e999")
    assert "Select f < 1e999 AND f > -1e999" in explain(program)


def test_fmod_of_an_infinity_is_null() -> None:
    rows = run("SELECT f * 1e999 % 2 AS r, 7.5 % f AS s FROM s", [(1, 1, 0, 2.0)])
    assert values(rows) == [(None, 1.5)]


def test_float_sum_of_infinities_of_both_signs_is_nan_not_a_crash() -> None:
    rows = run("SELECT SUM(f * 1e308) AS total FROM s [Range 5]", [(1, 1, 0, 10.0), (2, 1, 0, -10.0)])
    assert [(r[0], r[2]) for r in rows] == [(1, 1), (2, -1), (2, 1)]
    assert rows[0][3] == math.inf and math.isnan(rows[2][3])


@pytest.mark.parametrize("text", ["9223372036854775808", "99999999999999999999999"])
def test_integer_literals_beyond_64_bits_are_errors(text: str) -> None:
    with pytest.raises(CqlError) as caught:
        compile_program(HEAD + f"SELECT a + {text} AS x FROM s")
    assert (caught.value.line, caught.value.column) == (2, 12)
    assert "out of range" in caught.value.message


def test_the_most_negative_literal_is_one_above_null() -> None:
    rows = run("SELECT -9223372036854775807 + a AS x FROM s", [(1, 0, 0, 0.0)])
    assert values(rows) == [(-(2**63) + 1,)]


def test_a_number_too_long_for_python_is_an_error() -> None:
    with pytest.raises(CqlError, match="too large"):
        compile_program(HEAD + f"SELECT a FROM s [Rows {'9' * 5000}]")


# ---- 2. long chains ----------------------------------------------------------------------


def test_a_sum_of_300_terms_runs() -> None:
    terms = " + ".join(["a"] * 300)
    rows = run(f"SELECT {terms} AS t FROM s WHERE {terms} > 0", [(1, 2, 0, 0.0), (2, -1, 0, 0.0)])
    assert values(rows) == [(600,)]


def test_a_nullable_sum_of_300_terms_runs() -> None:
    terms = " - ".join(["a / b"] * 300)
    rows = run(f"SELECT {terms} AS t FROM s", [(1, 7, 2, 0.0), (2, 7, 0, 0.0)])
    assert values(rows) == [(3 - 299 * 3,), (None,)]


def test_a_grouped_chain_at_the_depth_limit_runs() -> None:
    terms = " + ".join(["a"] * (MAX_DEPTH - 10))
    query = (
        f"SELECT {terms} AS k, SUM({terms}) AS t FROM s [Range 10] GROUP BY {terms} HAVING SUM({terms}) > 0"
    )
    rows = run(query, [(1, 1, 0, 0.0)])
    n = MAX_DEPTH - 10
    assert values(rows) == [(n, n)]
    assert "Aggregate" in explain(compile_program(HEAD + query))


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("a - b - 1", 5 - 3 - 1),
        ("a - (b - 1)", 5 - (3 - 1)),
        ("(a + b) * 2", (5 + 3) * 2),
        ("a * b + 2 * a", 5 * 3 + 2 * 5),
        ("a * (b + 2) * a", 5 * (3 + 2) * 5),
        ("a - -b", 5 + 3),
        ("-(a - b) * -2", 4),
        ("a / 2 * 2 + a % 2", 5),
        ("((a + 1) * 2 + 1) * 2", ((5 + 1) * 2 + 1) * 2),
        ("a * (b * (a - b))", 5 * (3 * 2)),
        ("a - b / 0 + 1", None),
        ("(a - b / 0) * 2", None),
    ],
)
def test_flat_chains_keep_cql_precedence(expr: str, expected: int | None) -> None:
    assert values(run(f"SELECT {expr} AS x FROM s", [(1, 5, 3, 0.0)])) == [(expected,)]


def test_float_chains_round_in_cql_order() -> None:
    rows = run("SELECT f + 1e16 - 1e16 AS x, f + (1e16 - 1e16) AS y FROM s", [(1, 0, 0, 1.0)])
    assert values(rows) == [((1.0 + 1e16) - 1e16, 1.0)]


# ---- 2. nesting limits --------------------------------------------------------------------


def nested(kind: str, n: int) -> str:
    if kind == "parentheses":
        return "(" * n + "a + 1" + ")" * n
    if kind == "right sum":
        return "a + (" * n + "a" + ")" * n
    if kind == "minus":
        return "- " * n + "a"
    if kind == "division":
        return "a / (" * n + "a" + ")" * n
    if kind == "alternating":
        return "(" * n + "a" + "".join(" + 1) * 2" for _ in range(n))
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["right sum", "minus", "division", "alternating"])
def test_nesting_beyond_the_limit_is_a_positioned_error(kind: str) -> None:
    with pytest.raises(CqlError) as caught:
        compile_program(HEAD + f"SELECT {nested(kind, 1000 if kind != 'right sum' else 5000)} AS x FROM s")
    assert caught.value.line == 2 and caught.value.column > 1
    assert "nested too deeply" in caught.value.message


@pytest.mark.parametrize("kind", ["right sum", "minus", "division", "alternating"])
def test_nesting_at_the_limit_runs(kind: str) -> None:
    rows = run(f"SELECT {nested(kind, MAX_NESTING - 5)} AS x FROM s", [(1, 1, 0, 0.0)])
    assert len(rows) == 1


def test_5000_parentheses_around_one_term_are_fine() -> None:
    assert values(run(f"SELECT {nested('parentheses', 5000)} AS x FROM s", [(1, 1, 0, 0.0)])) == [(2,)]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT a FROM s WHERE " + "NOT " * 1000 + "a > 1",
        "SELECT " + "a FROM (SELECT " * 1000 + "a FROM s" + ") AS x" * 1000,
        " UNION ALL ".join(["SELECT a FROM s"] * 1000),
        "ISTREAM(" * 1000 + "SELECT a FROM s [Now]" + ")" * 1000,
        "SELECT * FROM " + ", ".join(f"s [Now] AS x{i}" for i in range(1000)),
    ],
    ids=["not", "subqueries", "union", "istream", "joins"],
)
def test_deep_queries_are_positioned_errors(query: str) -> None:
    with pytest.raises(CqlError) as caught:
        compile_program(HEAD + query)
    assert caught.value.line == 2
    assert "nested too deeply" in caught.value.message


def test_code_generation_failure_is_a_cql_error_at_the_query(monkeypatch: pytest.MonkeyPatch) -> None:
    program = compile_program(
        HEAD + "REGISTER QUERY ok AS SELECT a FROM s\n\nREGISTER QUERY bad AS SELECT a FROM s WHERE a > 1"
    )

    build = expressions.build

    def refuse(code: str, **extra: Any) -> Any:
        if " if " in code:  # the selection's code, not the projections'
            raise SyntaxError("too many nested parentheses")
        return build(code, **extra)

    monkeypatch.setattr(expressions, "build", refuse)
    with pytest.raises(CqlError) as caught:
        Engine(program, ["bad"])
    assert (caught.value.line, caught.value.column) == (4, 1)
    assert caught.value.message.startswith(
        "query bad: cannot generate its code (too many nested parentheses)"
    )


def test_a_recursion_error_in_the_planner_is_a_cql_error(monkeypatch: pytest.MonkeyPatch) -> None:
    program = compile_program(HEAD + "SELECT a FROM s", file="q.cql")

    def deep(*args: Any, **kwargs: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(relational.ProjectOp, "__init__", deep)
    with pytest.raises(
        CqlError, match=r"^q\.cql:2:1: query query1: cannot generate its code \(nested too deeply\)"
    ):
        Engine(program)


def test_query_check_and_run_report_deep_nesting_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = tmp_path / "deep.cql"
    query.write_text(HEAD + f"SELECT {nested('right sum', 1000)} AS x FROM s\n")
    data = tmp_path / "s.csv"
    data.write_text("ts,a,b,f\n1,1,2,0.5\n")
    for args in (["check", str(query)], ["run", str(query), "--stream", f"s={data}"]):
        assert main(["query", *args]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1
        assert err.startswith(f"semiactive: {query}:2:")


def test_query_check_and_run_take_a_300_term_sum(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    query = tmp_path / "sum.cql"
    query.write_text(HEAD + "SELECT " + " + ".join(["a"] * 300) + " AS t FROM s WHERE a < 1e999\n")
    data = tmp_path / "s.csv"
    data.write_text("ts,a,b,f\n1,1,2,0.5\n")
    assert main(["query", "check", str(query)]) == 0
    assert main(["query", "run", str(query), "--stream", f"s={data}"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == '{"seq":1,"ts":1,"t":300}'
