"""RowCodec: the fixed-size little-endian rows of an edge (node/sections/codec.py)."""

from __future__ import annotations

import math
import struct

import pytest

from semiactive.node.cql import compile_program, plan
from semiactive.node.sections.codec import INT_NULL, CodecError, RowCodec
from semiactive.node.sections.record_rows import RecordLayout


def _schema(*columns: tuple[str, plan.SqlType]) -> plan.Schema:
    return plan.Schema(tuple(plan.Column(name, t) for name, t in columns))


ALL = _schema(("i", plan.INTEGER), ("f", plan.FLOAT), ("b", plan.BYTE), ("c", plan.char(6)))


def test_row_size_is_ts_then_the_attributes_without_padding() -> None:
    # ts 8 + integer 8 + float 8 + byte 1 + char(6) 6; a relation adds a sign byte.
    assert RowCodec(ALL, plan.Kind.STREAM).row_size == 31
    assert RowCodec(ALL, plan.Kind.RELATION).row_size == 32


def test_round_trip_of_every_type_with_consecutive_seqs() -> None:
    codec = RowCodec(ALL, plan.Kind.STREAM)
    rows = [
        (0, 1, 1, 0, 0.0, "a", ""),
        (5, 2, 1, 2**63 - 1, -2.5, "z", "abc"),
        (5, 3, 1, -(2**63) + 1, 1e300, "é", "héllo"),  # é: one latin-1 byte; héllo: 6 UTF-8 bytes
        (9, 4, 1, -7, -0.0, "\x00", "€€"),  # two 3-byte characters fill char(6)
    ]
    blob = codec.encode(rows)
    assert len(blob) == 4 * 31
    # Decoding numbers rows from first_seq: the seq is not on the wire.
    decoded = codec.decode(blob, 100, 4)
    assert [r[1] for r in decoded] == [100, 101, 102, 103]
    assert [(r[0], *r[2:]) for r in decoded] == [(r[0], *r[2:]) for r in rows]
    assert math.copysign(1.0, decoded[3][4]) == -1.0


def test_exact_little_endian_layout_and_nul_padding() -> None:
    codec = RowCodec(_schema(("a", plan.INTEGER), ("c", plan.char(5))), plan.Kind.STREAM)
    blob = codec.encode([(258, 1, 1, -2, "ab")])
    assert blob == (258).to_bytes(8, "little") + (-2).to_bytes(8, "little", signed=True) + b"ab\0\0\0"
    # Trailing NULs are padding: they never come back.
    assert codec.decode(blob, 1, 1) == [(258, 1, 1, -2, "ab")]


def test_relation_rows_carry_their_sign() -> None:
    schema = _schema(("k", plan.INTEGER))
    codec = RowCodec(schema, plan.Kind.RELATION)
    rows = [(1, 1, 1, 10), (2, 2, -1, 10), (2, 3, 1, 11)]
    blob = codec.encode(rows)
    assert blob[8:9] == struct.pack("<b", 1) and blob[17 + 8 : 17 + 9] == struct.pack("<b", -1)
    assert codec.decode(blob, 1, 3) == rows
    # A stream has no sign on the wire: every decoded row is an insertion.
    stream = RowCodec(schema, plan.Kind.STREAM)
    assert [r[2] for r in stream.decode(stream.encode(rows), 1, 3)] == [1, 1, 1]


def test_null_travels_as_int64_min_and_nan() -> None:
    schema = plan.Schema(
        (plan.Column("q", plan.INTEGER, nullable=True), plan.Column("x", plan.FLOAT, nullable=True))
    )
    codec = RowCodec(schema, plan.Kind.STREAM)
    blob = codec.encode([(3, 1, 1, None, None)])
    ts, q, x = struct.unpack("<qqd", blob)
    assert (ts, q) == (3, INT_NULL) and math.isnan(x)
    assert codec.decode(blob, 1, 1) == [(3, 1, 1, None, None)]


def test_a_null_where_the_plan_allows_none_refuses_the_batch() -> None:
    """A peer's NULL in a column that cannot hold one (a source's) would
    reach generated code that does not guard it: refused at decoding, on
    rows and on records alike. A NaN there is a float the sender computed
    (inf - inf) and stays a NaN."""
    schema = _schema(("q", plan.INTEGER), ("x", plan.FLOAT))
    codec = RowCodec(schema, plan.Kind.STREAM)
    nulls = struct.pack("<qqd", 3, INT_NULL, 0.5)
    for decode in (codec.decode, RecordLayout(codec).view):
        with pytest.raises(CodecError, match="column q cannot be NULL"):
            decode(struct.pack("<qqd", 2, 7, 0.5) + nulls, 1, 2)
    (row,) = codec.decode(struct.pack("<qqd", 3, 7, math.nan), 1, 1)
    assert row[3] == 7 and math.isnan(row[4])


@pytest.mark.parametrize(("size", "count"), [(31 * 2 - 1, 2), (31 * 2 + 1, 2), (31 * 2, 3), (31, 0)])
def test_wrong_sizes_raise(size: int, count: int) -> None:
    codec = RowCodec(ALL, plan.Kind.STREAM)
    with pytest.raises(CodecError, match=f"does not hold {count} rows of 31 bytes"):
        codec.decode(b"\x01" * size, 1, count)


def test_values_that_do_not_fit_the_layout_raise() -> None:
    codec = RowCodec(ALL, plan.Kind.STREAM)
    with pytest.raises(CodecError, match=r"stream \(i integer, f float, b byte, c char\(6\)\)"):
        codec.encode([(1, 1, 1, "seven", 1.0, "a", "x")])
    with pytest.raises(CodecError):
        codec.encode([(1, 1, 1, 2**63, 1.0, "a", "x")])  # beyond int64
    with pytest.raises(CodecError):
        codec.encode([(1, 1, 1, 1, 1.0, "ab", "x")])  # a byte is one byte
    with pytest.raises(CodecError):
        codec.encode([(1, 1, 1, 1, 1.0, "a", None)])  # text has no NULL


def test_fingerprint_differs_per_layout() -> None:
    base = _schema(("a", plan.INTEGER), ("c", plan.char(4)))
    fingerprints = {
        RowCodec(base, plan.Kind.STREAM).fingerprint(),
        RowCodec(base, plan.Kind.RELATION).fingerprint(),
        RowCodec(_schema(("a", plan.FLOAT), ("c", plan.char(4))), plan.Kind.STREAM).fingerprint(),
        RowCodec(_schema(("a", plan.INTEGER), ("c", plan.char(5))), plan.Kind.STREAM).fingerprint(),
        RowCodec(_schema(("b", plan.INTEGER), ("c", plan.char(4))), plan.Kind.STREAM).fingerprint(),
        RowCodec(_schema(("c", plan.char(4)), ("a", plan.INTEGER)), plan.Kind.STREAM).fingerprint(),
    }
    assert len(fingerprints) == 6
    assert RowCodec(base, plan.Kind.STREAM).fingerprint() == "stream:<qq4s:a,c"
    # Same layout, same fingerprint (the column's source does not travel).
    twin = plan.Schema((plan.Column("a", plan.INTEGER, "s0"), plan.Column("c", plan.char(4), "s0")))
    assert RowCodec(twin, plan.Kind.STREAM).fingerprint() == RowCodec(base, plan.Kind.STREAM).fingerprint()


def test_text_literals_are_sized_in_bytes_so_they_travel_intact() -> None:
    program = compile_program("REGISTER STREAM S (a integer)\nSELECT a, 'é€' AS tag FROM S")
    schema = program.query(program.last_query).schema
    assert str(schema.columns[1].type) == "char(5)"  # 2 + 3 bytes of UTF-8, not 2 characters
    codec = RowCodec(schema, plan.Kind.STREAM)
    assert codec.decode(codec.encode([(1, 1, 1, 7, "é€")]), 1, 1) == [(1, 1, 1, 7, "é€")]
