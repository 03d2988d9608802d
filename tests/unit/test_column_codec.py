"""Wire batches read and written as columns give exactly the row codec's
elements and bytes: integers at the int64 edges, floats, text with
multi-byte characters and padding, NULLs (left to the row path), and the
refusal of integers int64 cannot carry."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.node.cql import plan
from semiactive.node.engine.columnar.batch import ColumnBatch
from semiactive.node.sections.codec import INT_MAX, INT_MIN, OutOfRangeError, RowCodec
from semiactive.node.sections.column_codec import ColumnCodec

SCHEMA = plan.Schema(
    (plan.Column("id", plan.INTEGER), plan.Column("x", plan.FLOAT), plan.Column("name", plan.char(6)))
)
rows = st.lists(
    st.tuples(
        st.integers(INT_MIN, INT_MAX),
        st.floats(allow_nan=False),
        st.text(alphabet="abcé€\u00ff", max_size=3),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(rows, st.integers(1, 10**9))
def test_columns_decode_and_encode_as_the_row_codec_does(values: list[tuple[Any, ...]], first: int) -> None:
    elements = [(t, first + t, 1, *v) for t, v in enumerate(values)]
    row_codec, column_codec = RowCodec(SCHEMA, plan.Kind.STREAM), ColumnCodec(SCHEMA)
    assert column_codec.row_size == row_codec.row_size
    blob = row_codec.encode(elements)
    batch = column_codec.decode(blob, first, len(elements))
    # A value cut inside a character by char(6) is not UTF-8 on the wire:
    # the row path decodes it with a replacement character, so the batch
    # is left to it.
    cut = [v for _, _, v in values if not _is_utf8(v.encode()[:6])]
    assert (batch is None) == bool(cut)
    if batch is None:
        return
    assert batch.to_elements() == row_codec.decode(blob, first, len(elements))
    assert column_codec.encode(batch) == blob
    assert column_codec.encode(ColumnBatch.from_elements(elements, 3)) == blob


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_text_that_is_not_utf8_leaves_the_batch_to_the_row_path() -> None:
    """Whole-column decoding alone would pass a value ending inside a
    character followed by one starting with its continuation bytes."""
    codec = ColumnCodec(plan.Schema((plan.Column("t", plan.char(2)),)))
    euro = "€".encode()  # 3 bytes
    for values in ([euro[:2], euro[2:] + b"a"], [b"ab", b"\xff\x00"], [euro[:2], b"\x00\x00"]):
        records = np.array([(1, v) for v in values], dtype=codec.dtype)
        assert codec.decode(records.tobytes(), 1, len(values)) is None, values
    ok = np.array([(1, "é".encode()), (2, b"a")], dtype=codec.dtype)
    assert codec.decode(ok.tobytes(), 1, 2) is not None


def test_a_null_leaves_the_batch_to_the_row_path() -> None:
    row_codec, column_codec = RowCodec(SCHEMA, plan.Kind.STREAM), ColumnCodec(SCHEMA)
    for row in [(1, 1, 1, None, 0.5, "a"), (1, 1, 1, 3, None, "a")]:
        assert column_codec.decode(row_codec.encode([row]), 1, 1) is None


def test_an_integer_past_int64_is_refused_naming_the_column() -> None:
    column_codec = ColumnCodec(SCHEMA)
    for value in (2**63, INT_MIN - 1):
        batch = ColumnBatch.from_elements([(7, 1, 1, value, 0.0, "")], 3)
        with pytest.raises(OutOfRangeError, match=r"row at ts 7: column id = "):
            column_codec.encode(batch)
    ok = ColumnBatch(np.array([1]), np.array([1]), (np.array([INT_MAX]), np.array([0.0]), np.array([b"x"])))
    assert column_codec.decode(column_codec.encode(ok), 1, 1) is not None
