"""``row_numbers`` (node/engine/columnar/group_numbers.py), which numbers a
join's rows and the netting of its output, against Python: numbers from 0
up, equal exactly where the rows are, over integer
columns whose spans fit in one packed int64 or do not (values at the int64
limits, many columns), text as Python strings and as bytes."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.node.engine.columnar.group_numbers import row_numbers

integers = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([-(2**63), 2**63 - 1, 2**62, -(2**62), 2**31]),
    st.integers(-(2**63), 2**63 - 1),
)
strings = st.sampled_from(["", "a", "a\0", "b", "\u20ac"])
byte_strings = st.sampled_from([b"", b"a", b"ab", b"b"])


@st.composite
def tables(draw: Any) -> tuple[list[np.ndarray[Any, Any]], list[tuple[Any, ...]]]:
    n = draw(st.integers(0, 40))
    columns: list[np.ndarray[Any, Any]] = []
    for kind in draw(st.lists(st.sampled_from(["int", "small", "str", "bytes"]), max_size=6)):
        if kind == "str":
            column = np.empty(n, dtype=object)
            column[:] = draw(st.lists(strings, min_size=n, max_size=n))
        elif kind == "bytes":
            column = np.array(draw(st.lists(byte_strings, min_size=n, max_size=n)), dtype="S2")
        else:
            values = integers if kind == "int" else st.integers(-2, 2)
            column = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.int64)
        columns.append(column)
    rows = list(zip(*(c.tolist() for c in columns), strict=True)) if columns else [()] * n
    return columns, rows


@settings(max_examples=400, deadline=None, derandomize=True)
@given(tables())
def test_rows_are_numbered_equal_exactly_where_they_are(table: Any) -> None:
    columns, rows = table
    numbers = row_numbers(columns, len(rows))
    assert numbers.dtype == np.int64
    first_of_row = {row: i for i, row in reversed(list(enumerate(rows)))}
    first_of_number = {x: i for i, x in reversed(list(enumerate(numbers.tolist())))}
    assert [first_of_number[x] for x in numbers.tolist()] == [first_of_row[row] for row in rows]
    assert sorted(set(numbers.tolist())) == list(range(len(first_of_row)))
