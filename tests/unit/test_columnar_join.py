"""The columnar engine's join of two windows against the row engine's, the
reference: random joins of windows by time and by count, sliding too (keys of
integers, of text, of expressions, none at all; residual predicates;
conditions on one side; a side through a registered query; a self-join)
over random inputs of both streams, with repeated rows (a row's copies
share one place in the row engine's multiset), huge integers, and
watermarks that land anywhere; every advance must return the same
elements, in the same order."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semiactive.node.cql import compile_program
from semiactive.node.engine.columnar import join_windows
from semiactive.node.engine.columnar.shape import NotVectorized, describe
from semiactive.node.engine.columnar.vector_engine import VectorEngine
from semiactive.node.engine.engine import Engine
from semiactive.node.sections.operator import columnar_reason

HEADER = (
    "REGISTER STREAM S (a integer, b integer, t char(3));\n"
    "REGISTER STREAM T (a integer, c integer, t char(3));\n"
    "REGISTER STREAM F (a integer, f float);\n"
)
HUGE = 2**62

windows = st.sampled_from(
    [
        "[Now]",
        "[Range 1]",
        "[Range 3]",
        "[Range 6]",
        "[Range Unbounded]",
        "[Rows 1]",
        "[Rows 3]",
        "[Range 3 Slide 2]",
        "[Range 5 Slide 3]",
        "[Range 1 Slide 4]",  # a tuple between two multiples of 4 and > 1 ms before the next: never in it
        "[Rows 3 Slide 2]",
        "[Rows 2 Slide 3]",  # one arrival in three never in it
    ]
)
# a [Partition By a ...] window joins on a alone
on_a = ["S.a = T.a", "S.a = T.a AND S.b < T.c", "T.a = S.a AND S.b >= 0 AND T.c != 2"]
conditions = st.sampled_from(
    [
        *on_a,
        "S.t = T.t",
        "S.a + 1 = T.c AND S.t <> T.t",
        "S.b > T.c",
        "S.a = T.a AND S.t = T.t",
        "S.a * S.b = T.c - T.a OR S.t = T.t",
    ]
)
partitioned = st.sampled_from(["[Partition By a Rows 1]", "[Partition By a Rows 2]"])
aggregates = st.sampled_from(
    ["COUNT(*) AS n", "SUM(T.c) AS s", "AVG(S.b) AS m", "SUM(S.b * T.c) AS p", "COUNT(T.t) AS q"]
)
selections = st.sampled_from(
    ["S.a, T.c", "S.b + T.c AS s", "S.t, T.t AS u, S.a", "S.a, S.b, S.t, T.a AS x, T.c, T.t AS u", "T.c"]
)


@st.composite
def programs(draw: Any) -> str:
    source = "S"
    text = HEADER
    if draw(st.booleans()):
        text += "REGISTER QUERY s1 AS SELECT a, b * 2 AS b, t FROM S WHERE b <> 1;\n"
        source = "s1"
    op = draw(st.sampled_from(["ISTREAM", "DSTREAM", "RSTREAM"]))
    if draw(st.integers(0, 5)) == 0:  # a self-join
        return text + (
            f"REGISTER QUERY out AS {op}(SELECT x.a, x.b, y.b AS c FROM S {draw(windows)} AS x, "
            f"S {draw(windows)} AS y WHERE x.a = y.a AND x.t <= y.t);\n"
        )
    condition = draw(conditions)
    where = condition.replace("S.", f"{source}.")
    items = draw(selections).replace("S.", f"{source}.")
    group_by = ""
    if op != "RSTREAM" and draw(st.integers(0, 3)) == 0:  # an aggregate over the join
        keys = draw(st.sampled_from(["", "S.a", "T.t", "S.a, T.t", "T.c"]))
        calls = draw(st.lists(aggregates, min_size=1, max_size=3, unique=True))
        items = ", ".join([*filter(None, [keys]), *calls]).replace("S.", f"{source}.")
        group_by = f" GROUP BY {keys}".replace("S.", f"{source}.") if keys else ""
    left, right = draw(windows), draw(windows)
    if condition in on_a and draw(st.booleans()):
        left, right = draw(st.sampled_from([(draw(partitioned), right), (left, draw(partitioned))]))
    join = f"{source} {left}, T {right} WHERE {where}"
    return text + f"REGISTER QUERY out AS {op}(SELECT {items} FROM {join}{group_by});\n"


# Mostly a few values, so that rows repeat: copies of a row share its place.
values = st.one_of(
    st.sampled_from([0, 1]),
    st.sampled_from([0, 1]),
    st.integers(-2, 2),
    st.sampled_from([HUGE, -HUGE, 2**63 - 1]),
)
texts = st.one_of(
    st.sampled_from(["", "a"]), st.sampled_from(["", "a"]), st.sampled_from(["ab", "a\0", "b\u20ac"])
)


@st.composite
def inputs(draw: Any) -> list[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], int]]:
    """Steps: S's rows, T's rows, then the watermark they are complete to."""
    steps, done = [], 0
    for _ in range(draw(st.integers(1, 8))):
        watermark = done + draw(st.sampled_from([1, 1, 2, 3, 7]))
        step = []
        for _ in "ST":
            stamps = sorted(draw(st.lists(st.integers(done + 1, watermark), max_size=6)))
            step.append([(ts, 0, 1, draw(values), draw(values), draw(texts)) for ts in stamps])
        steps.append((step[0], step[1], watermark))
        done = watermark
    steps.append(([], [], done + draw(st.integers(0, 9))))
    return steps


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), inputs())
def test_the_columnar_join_returns_what_the_row_engine_does(text: str, steps: Any) -> None:
    _same_outputs(text, steps)


# count windows whose own conditions drop tuples that still take a place
FORGETTING = st.sampled_from(
    [
        "ISTREAM(SELECT S.a, T.c FROM S [Rows 3], T [Now] WHERE S.a = T.a AND S.b >= 1)",
        "ISTREAM(SELECT S.a, T.c FROM S [Partition By a Rows 2], T [Range 2] WHERE S.a = T.a AND S.b >= 1)",
        "DSTREAM(SELECT S.b, T.c FROM S [Range 3], T [Rows 2] WHERE S.t = T.t AND T.c > 0)",
        # groups that come and go
        "ISTREAM(SELECT T.c, COUNT(*) AS n, SUM(S.b) AS s FROM S [Range 2], T [Now] "
        "WHERE S.a = T.a GROUP BY T.c)",
    ]
).map(lambda q: HEADER + f"REGISTER QUERY out AS {q};\n")


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(programs(), FORGETTING), inputs())
def test_forgotten_rows_and_keys_change_nothing(text: str, steps: Any) -> None:
    """Numbers of rows and keys that left are forgotten at every call
    (instead of once there are 1,024 more than tuples): a row or key seen
    again is new, and nothing it meets or starts is lost."""
    with patch.object(join_windows, "FORGET_AFTER", -(10**9)):
        _same_outputs(text, steps)


def test_a_group_outlives_the_groups_forgotten_before_it() -> None:
    """Group 1 (c = 2) is still there when group 0 (c = 1) is forgotten (at
    5): it is numbered 0 from then on, its count and sums with it."""
    text = HEADER + (
        "REGISTER QUERY out AS ISTREAM(SELECT T.c, COUNT(*) AS n, SUM(S.b) AS s "
        "FROM S [Range 2], T [Range 3] WHERE S.a = T.a GROUP BY T.c);\n"
    )
    steps = [
        ([(ts, 0, 1, 1, 5, "")], [(ts, 0, 1, 1, c, "")] if c else [], ts)
        for ts, c in ((1, 1), (2, 2), (3, 0), (4, 2), (5, 0), (6, 0), (7, 0), (8, 0))
    ]
    with patch.object(join_windows, "FORGET_AFTER", -(10**9)):
        _same_outputs(text, steps)


def _same_outputs(text: str, steps: Any) -> None:
    program = compile_program(text)
    assert describe(program)["out"] == "vectorized"
    row_engine = Engine(program, ["out"])
    vector = VectorEngine(program, ["out"])
    for s_rows, t_rows, watermark in steps:
        for name, rows in (("S", s_rows), ("T", t_rows)):
            row_engine.push(name, rows)
            vector.push(name, rows)
        expected = [(e[0], 0, *e[2:]) for e in row_engine.advance(watermark)["out"]]
        assert repr(vector.advance_elements(watermark)["out"]) == repr(expected), (text, watermark)


def test_copies_of_a_row_keep_the_place_their_run_began() -> None:
    """The row engine's multiset keeps a row where its first copy entered
    while a later copy is still there: the pair with (1, 7) comes before the
    pair with (1, 8) although the first (1, 7) has left."""
    program = compile_program(
        HEADER + "REGISTER QUERY out AS ISTREAM(SELECT T.c FROM S [Now], T [Range 3] WHERE S.a = T.a);\n"
    )
    row_engine, vector = Engine(program, ["out"]), VectorEngine(program, ["out"])
    steps = [
        ([], [(1, 0, 1, 1, 7, "")], 1),
        ([], [(2, 0, 1, 1, 8, ""), (3, 0, 1, 1, 7, "")], 3),
        ([(5, 0, 1, 1, 0, "")], [], 5),  # (1, 7) of ts 1 left at 5; its copy of ts 3 is still there
    ]
    for s_rows, t_rows, watermark in steps:
        row_engine.push("S", s_rows)
        row_engine.push("T", t_rows)
        vector.push("S", s_rows)
        vector.push("T", t_rows)
        expected = row_engine.advance(watermark)["out"]
        assert vector.advance_elements(watermark)["out"] == [(e[0], 0, *e[2:]) for e in expected]
    assert [e[3] for e in expected] == [7, 8]


def test_a_copy_that_enters_when_the_last_one_leaves_begins_a_run() -> None:
    """In ``[Range 3 Slide 2]`` the (1, 7) of ts 5 waits to enter at 6, the
    instant the (1, 7) of ts 2 leaves: a new run, behind (1, 8) of ts 4,
    although ts 5 is within 3 ms of ts 2."""
    text = HEADER + (
        "REGISTER QUERY out AS ISTREAM(SELECT T.c FROM S [Now], T [Range 3 Slide 2] WHERE S.a = T.a);\n"
    )
    steps = [
        ([], [(2, 0, 1, 1, 7, ""), (4, 0, 1, 1, 8, ""), (5, 0, 1, 1, 7, "")], 5),
        ([(7, 0, 1, 1, 0, "")], [], 7),
    ]
    _same_outputs(text, steps)
    row_engine = Engine(compile_program(text), ["out"])
    for s_rows, t_rows, watermark in steps:
        row_engine.push("S", s_rows)
        row_engine.push("T", t_rows)
        expected = row_engine.advance(watermark)["out"]
    assert [e[3] for e in expected] == [8, 7]


@pytest.mark.parametrize(
    ("query", "why"),
    [
        (
            "ISTREAM(SELECT S.a FROM S [Partition By a Rows 2 Range 3], T [Now] WHERE S.a = T.a)",
            "a join of [Partition By ... Range T]",
        ),
        (
            "ISTREAM(SELECT S.a, MAX(T.c) AS m FROM S [Now], T [Now] WHERE S.a = T.a GROUP BY S.a)",
            "MIN / MAX over a join (a deletion needs the group's values)",
        ),
        (
            "RSTREAM(SELECT S.a, COUNT(*) AS n FROM S [Now], T [Now] WHERE S.a = T.a GROUP BY S.a)",
            "RSTREAM of an aggregate over a join",
        ),
        (
            "ISTREAM(SELECT S.a, AVG(T.c) * 2 AS m FROM S [Now], T [Now] WHERE S.a = T.a GROUP BY S.a)",
            "a float computed from a join's aggregate (NaN and -0.0: rows equal by object)",
        ),
        (
            "ISTREAM(SELECT SUM(F.f) AS t FROM S [Now], F [Now] WHERE S.a = F.a)",
            "SUM of a float over a join",
        ),
        (
            "ISTREAM(SELECT COUNT(*) AS n FROM S [Now], T [Now] WHERE S.a = T.a GROUP BY S.t)",
            "a GROUP BY key missing from the SELECT list",
        ),
        (
            "ISTREAM(SELECT S.a FROM S [Partition By b Rows 2], T [Now] WHERE S.a = T.a)",
            "a join of [Partition By ...] on other than its keys",
        ),
        (
            "ISTREAM(SELECT S.a FROM S [Partition By a Rows 2], T [Now] WHERE S.a = T.a AND S.t = T.t)",
            "a join of [Partition By ...] on other than its keys",
        ),
        (
            "ISTREAM(SELECT S.a, F.f FROM S [Now], F [Now] WHERE S.a = F.a)",
            "a join's float output (NaN and -0.0: rows equal by object)",
        ),
        (
            "ISTREAM(SELECT S.a FROM S [Now], F [Now] WHERE S.a = F.a)",
            "a join of a window with a float column (rows equal by object)",
        ),
        (
            "ISTREAM(SELECT S.a FROM S [Now], T [Now] WHERE S.a * 0.5 = T.c)",
            "a join key of type float (NaN)",
        ),
        (
            "ISTREAM(SELECT S.a FROM S [Now], T [Now] WHERE S.a / S.b = T.c)",
            "'/' by other than a non-zero integer literal (NULL for a zero divisor)",
        ),
    ],
)
def test_what_keeps_a_join_on_the_row_engine_is_named(query: str, why: str) -> None:
    program = compile_program(HEADER + f"REGISTER QUERY out AS {query};\n")
    assert describe(program)["out"] == f"row engine: {why}"
    with pytest.raises(NotVectorized, match="query out: "):
        VectorEngine(program, ["out"])


def test_a_join_stage_keeps_the_row_engine() -> None:
    """Columns carry no lineage through a join: an HA stage runs it on rows."""
    program = compile_program(
        HEADER + "REGISTER QUERY out AS ISTREAM(SELECT S.a, T.c FROM S [Range 3], T [Now] WHERE S.a = T.a);\n"
    )
    assert columnar_reason(program, "out") == "a join of windows (on columns in one process only)"
    with pytest.raises(NotVectorized, match="lineage"):
        VectorEngine(program, ["out"], lineage=True)


def test_instants_far_apart_join_alike() -> None:
    """Timestamps spread over most of int64 (positions by rank, not by ms)."""
    program = compile_program(
        HEADER + "REGISTER QUERY out AS ISTREAM(SELECT S.b, T.c FROM S [Range 5], T [Range Unbounded] "
        "WHERE S.a = T.a);\n"
    )
    row_engine, vector = Engine(program, ["out"]), VectorEngine(program, ["out"])
    far = 2**62
    steps = [
        ([(1, 0, 1, 1, 1, ""), (3, 0, 1, 2, 2, "")], [(2, 0, 1, 1, 5, ""), (3, 0, 1, 2, 6, "")], 3),
        ([(far, 0, 1, 1, 3, "")], [(far - 2, 0, 1, 1, 7, "")], far),
        ([(far + 4, 0, 1, 1, 4, "")], [(far + 3, 0, 1, 1, 8, ""), (far + 4, 0, 1, 1, 9, "")], far + 10),
    ]
    for s_rows, t_rows, watermark in steps:
        for name, rows in (("S", s_rows), ("T", t_rows)):
            row_engine.push(name, rows)
            vector.push(name, rows)
        expected = [(e[0], 0, *e[2:]) for e in row_engine.advance(watermark)["out"]]
        assert vector.advance_elements(watermark)["out"] == expected
        assert expected
