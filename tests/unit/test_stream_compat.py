"""Stanford STREAM compatibility (issue 16): set operations over bare view
names, as the Linear Road script writes them (``AffSegWest Union
AffSegEast``, ``MinSegStr Except AffSeg``), mean SELECT * FROM each."""

from __future__ import annotations

import pytest

from semiactive.node.cql import CqlError, compile_program
from tests.unit.engine_harness import run

VIEWS = """
REGISTER STREAM r(seg integer, dir integer)
REGISTER QUERY west AS SELECT seg FROM r [Range 10 seconds] WHERE dir = 0
REGISTER QUERY east AS SELECT seg FROM r [Range 10 seconds] WHERE dir = 1
"""
ROWS = {"r": [(1000, 1, 0), (2000, 2, 1), (3000, 1, 1), (4000, 3, 0), (15_000, 2, 0)]}


@pytest.mark.parametrize(
    ("bare", "spelled"),
    [
        ("west Union east", "SELECT * FROM west UNION SELECT * FROM east"),
        ("west UNION ALL east", "SELECT * FROM west UNION ALL SELECT * FROM east"),
        ("west Except east", "SELECT * FROM west EXCEPT SELECT * FROM east"),
        (
            "(west Except east) Union east",
            "(SELECT * FROM west EXCEPT SELECT * FROM east) UNION SELECT * FROM east",
        ),
        ("RSTREAM(west Except east)", "RSTREAM(SELECT * FROM west EXCEPT SELECT * FROM east)"),
    ],
)
def test_bare_view_names_are_select_star(bare: str, spelled: str) -> None:
    a = run(VIEWS + f"REGISTER QUERY q AS {bare}", ROWS)
    b = run(VIEWS + f"REGISTER QUERY q AS {spelled}", ROWS)
    assert a == b and a


def test_an_unknown_view_name_is_located() -> None:
    with pytest.raises(CqlError) as info:
        compile_program(VIEWS + "REGISTER QUERY q AS west Union nort")
    assert "unknown stream, relation or query 'nort'" in str(info.value)
    assert (info.value.line, info.value.column) == (5, 32)


# ---- positional column naming: REGISTER QUERY q (a, b) AS ... -------------------------------

NAMED = VIEWS + (
    "REGISTER QUERY counts (segment, n) AS\n"
    "  RSTREAM(SELECT seg, COUNT(*) FROM r [Range 10 seconds] GROUP BY seg)\n"
)


def test_a_query_names_its_columns_in_order() -> None:
    program = compile_program(NAMED + "REGISTER QUERY busy AS SELECT segment FROM counts [Now] WHERE n > 1")
    assert program.query("counts").schema.names == ("segment", "n")
    named = run(NAMED + "REGISTER QUERY busy AS SELECT segment, n FROM counts [Now] WHERE n > 1", ROWS)
    spelled = run(
        VIEWS
        + "REGISTER QUERY counts AS RSTREAM(SELECT seg AS segment, COUNT(*) AS n FROM r [Range 10 seconds] "
        "GROUP BY seg)\nREGISTER QUERY busy AS SELECT segment, n FROM counts [Now] WHERE n > 1",
        ROWS,
    )
    assert named == spelled and named
    # SELECT * and set operations take the new names too.
    star = compile_program(NAMED + "REGISTER QUERY x AS counts Union counts")
    assert star.query("x").schema.names == ("segment", "n")


def test_one_name_in_parentheses_is_a_query_not_a_column_list() -> None:
    # (a) would be the bare-name query a: one column is renamed with SELECT ... AS.
    with pytest.raises(CqlError, match="unexpected 'AS'"):
        compile_program(VIEWS + "REGISTER QUERY q (s) AS SELECT seg FROM west")


@pytest.mark.parametrize(
    ("columns", "message", "column"),
    [
        ("(a, b, c)", "counts names 3 columns but its query gives 2", 24),
        ("(a, a)", "duplicate column name 'a'", 27),
        ("(ts, b)", "reserved", 24),
    ],
)
def test_a_wrong_column_list_is_located(columns: str, message: str, column: int) -> None:
    text = (
        VIEWS + f"REGISTER QUERY counts {columns} AS RSTREAM(SELECT seg, COUNT(*) FROM r [Now] GROUP BY seg)"
    )
    with pytest.raises(CqlError) as info:
        compile_program(text)
    assert message in str(info.value)
    assert (info.value.line, info.value.column) == (5, column)


def test_a_parenthesized_name_is_still_a_query() -> None:
    assert run(VIEWS + "REGISTER QUERY q (west)", ROWS) == run(
        VIEWS + "REGISTER QUERY q AS SELECT * FROM west", ROWS
    )


def test_a_recursive_query_reads_itself_by_its_new_names() -> None:
    text = (
        "REGISTER STREAM start (n integer)\n"
        "REGISTER QUERY countdown (left, step) AS\n"
        "  ISTREAM(SELECT n, 0 FROM start [Now]\n"
        "          UNION ALL SELECT left - 1, step + 1 FROM countdown [Now] WHERE left > 0)<1 second>\n"
    )
    assert run(text, {"start": [(0, 2)]}, end=5000) == [(1000, 2, 0), (2000, 1, 1), (3000, 0, 2)]
