"""``SELECT *`` over a join whose inputs share column names, which Stanford
STREAM accepts: a name that several starred items bring is qualified with
the item's alias (``X_A``, ``Y_A``), so the output columns are unique and
later queries can refer to them."""

from __future__ import annotations

from typing import Any

import pytest

from semiactive.embedded import query as embedded
from semiactive.node.cql import CqlError, compile_program

INPUTS = "REGISTER STREAM S1 (A integer, B integer)\nREGISTER STREAM S2 (A integer, C integer)\n"


def names(text: str, query: str | None = None) -> tuple[str, ...]:
    program = compile_program(INPUTS + text)
    return program.query(query or program.last_query).schema.names


def test_stream_example_runs_with_qualified_names() -> None:
    program = compile_program(INPUTS + "SELECT * FROM S1 [Now] AS X, S2 [Now] AS Y WHERE X.A = Y.A")
    assert program.query("query1").schema.names == ("X_A", "B", "Y_A", "C")
    inputs = {"S1": [(1, 1, 1, 1, 10), (2, 2, 1, 2, 20)], "S2": [(1, 1, 1, 1, 5), (2, 2, 1, 3, 6)]}
    rows = embedded.execute(program, inputs)
    assert [(r[0], r[2], *r[3:]) for r in rows] == [(1, 1, 1, 10, 1, 5), (2, -1, 1, 10, 1, 5)]


def test_later_queries_refer_to_the_qualified_names() -> None:
    text = (
        "REGISTER QUERY j AS SELECT * FROM S1 [Now] AS X, S2 [Now] AS Y WHERE X.A = Y.A\n"
        "REGISTER QUERY k AS ISTREAM(SELECT X_A, Y_A + C AS z FROM j)"
    )
    program = compile_program(INPUTS + text)
    rows: list[Any] = embedded.execute(program, {"S1": [(1, 1, 1, 4, 0)], "S2": [(1, 1, 1, 4, 1)]})
    assert [r[3:] for r in rows] == [(4, 5)]


def test_names_are_qualified_by_the_stream_without_an_alias() -> None:
    assert names("SELECT * FROM S1 [Now], S2 [Now]") == ("S1_A", "B", "S2_A", "C")


def test_qualified_stars_collide_the_same_way() -> None:
    assert names("SELECT X.*, Y.* FROM S1 [Now] AS X, S2 [Now] AS Y") == ("X_A", "B", "Y_A", "C")
    assert names("SELECT Y.*, X.B FROM S1 [Now] AS X, S2 [Now] AS Y") == ("A", "C", "B")


def test_a_self_join_qualifies_every_column() -> None:
    assert names("SELECT * FROM S1 [Now] AS X, S1 [Now] AS Y") == ("X_A", "X_B", "Y_A", "Y_B")


def test_a_qualified_name_already_taken_gets_a_number() -> None:
    text = "REGISTER STREAM S3 (X_A integer)\nSELECT * FROM S3 [Now], S1 [Now] AS X, S2 [Now] AS Y"
    assert names(text) == ("X_A", "X_A_2", "B", "Y_A", "C")


def test_explicit_duplicates_are_still_errors() -> None:
    with pytest.raises(CqlError, match="duplicate output column name 'A'"):
        compile_program(INPUTS + "SELECT X.A, Y.A FROM S1 [Now] AS X, S2 [Now] AS Y")
    with pytest.raises(CqlError, match="duplicate output column name 'B'"):
        compile_program(INPUTS + "SELECT *, B FROM S1 [Now] AS X, S2 [Now] AS Y")


def test_a_renamed_column_never_clashes_with_a_later_star_column() -> None:
    text = "REGISTER STREAM S3 (X_A integer)\nSELECT * FROM S1 [Now] AS X, S2 [Now] AS Y, S3 [Now]"
    assert names(text) == ("X_A", "B", "Y_A", "C", "X_A_2")
