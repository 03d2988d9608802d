"""Stanford STREAM compatibility (issue 16): set operations over bare view
names, as the Linear Road script writes them (``AffSegWest Union
AffSegEast``, ``MinSegStr Except AffSeg``), mean SELECT * FROM each."""

from __future__ import annotations

import pytest

from node.cql import CqlError, compile_program
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
