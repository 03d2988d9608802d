"""The ends of a chain on record blocks: a synthetic source draws its tuples
with numpy (node/connectors/sources.py) and the JSON Lines of a block are
written from its columns (node/connectors/jsonl.py). Both must give exactly
what the row path gives: the same tuples, the same generator state after,
the same text."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.node.connectors.jsonl import LineWriter
from semiactive.node.connectors.sources import (
    BLOCK,
    LETTERS,
    SMALL_TAKE,
    Phase,
    RateSchedule,
    SyntheticSource,
    draws_block,
    randrange_block,
)
from semiactive.node.cql import plan
from semiactive.node.engine.columnar.batch import python_values
from semiactive.node.sections.codec import RowCodec
from semiactive.node.sections.record_rows import RecordLayout, RecordRows

CHAIN = plan.Schema(
    (
        plan.Column("id", plan.INTEGER),
        plan.Column("val", plan.INTEGER),
        plan.Column("w", plan.INTEGER),
        plan.Column("pad", plan.char(20)),
    )
)


@pytest.mark.parametrize("bound", [1, 2, 7, 1000, 1024, 1025, 2**20 + 1])
def test_numpy_draws_what_randrange_draws_and_leaves_the_generator_alike(bound: int) -> None:
    for count in (0, 1, 3, 5000):
        ours, theirs = random.Random(bound), random.Random(bound)
        expected = [theirs.randrange(bound) for _ in range(count)]
        assert randrange_block(ours, bound, count).tolist() == expected
        assert ours.random() == theirs.random()


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, BLOCK + 10), min_size=1, max_size=6), st.integers(0, 3 * BLOCK))
def test_a_source_of_integers_takes_records_of_the_tuples_it_takes(sizes: list[int], start: int) -> None:
    _records_are_the_rows(CHAIN, RateSchedule([Phase(0, 100_000.0), Phase(2000, 33_333.0)]), 7, sizes, start)


def _records_are_the_rows(
    schema: plan.Schema, schedule: RateSchedule, seed: int, sizes: list[int], start: int
) -> None:
    """Two sources of one seed, sought to ``start``: the record blocks one
    takes hold the tuples the other takes, take for take."""
    layout = RecordLayout(RowCodec(schema, plan.Kind.STREAM))
    rows, records = SyntheticSource(schema, schedule, seed), SyntheticSource(schema, schedule, seed)
    rows.seek(start)
    records.seek(start)
    for n in sizes:
        block = records.take_records(n, layout)
        assert block is not None
        assert block.rows() == rows.take(n)
    assert records.index == rows.index


def test_small_takes_are_drawn_as_rows_and_keep_the_generator_in_step() -> None:
    """Takes below SMALL_TAKE go through ``randrange``; the tuples and the
    generator are the same either way, across the threshold."""
    layout = RecordLayout(RowCodec(CHAIN, plan.Kind.STREAM))
    schedule = RateSchedule([Phase(0, 1000.0)])
    rows, records = SyntheticSource(CHAIN, schedule, 3), SyntheticSource(CHAIN, schedule, 3)
    for n in (1, SMALL_TAKE - 1, SMALL_TAKE, 2, SMALL_TAKE + 1, 5):
        block = records.take_records(n, layout)
        assert isinstance(block, RecordRows)
        assert block.first_seq == rows.index + 1
        assert block.rows() == rows.take(n)


@pytest.mark.parametrize("lengths", [[2], [0, 3], [3, 0, 0, 1], [0, 1, 0], [5, 5], [0, 0, 8]])
def test_numpy_draws_what_randrange_and_choices_draw_and_leaves_the_generator_alike(
    lengths: list[int],
) -> None:
    """Integers (0) and text of L letters (L), column by column within a
    tuple: the integers' rejected words move every later draw."""
    for seed in range(3):
        for count in (0, 1, 5, 4000):
            ours, theirs = random.Random(seed), random.Random(seed)
            expected = [
                [theirs.randrange(1000) if n == 0 else "".join(theirs.choices(LETTERS, k=n)) for n in lengths]
                for _ in range(count)
            ]
            got = [python_values(c) for c in draws_block(ours, lengths, count)]
            assert [list(row) for row in zip(*got, strict=True)] == expected
            assert ours.random() == theirs.random()


TEXT = plan.Schema(
    (
        plan.Column("id", plan.INTEGER),
        plan.Column("sym", plan.char(2)),
        plan.Column("val", plan.INTEGER),
        plan.Column("pad", plan.char(12)),
    )
)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, BLOCK + 10), min_size=1, max_size=4), st.integers(0, 2 * BLOCK))
def test_a_source_of_integers_and_text_takes_records_of_the_tuples_it_takes(
    sizes: list[int], start: int
) -> None:
    _records_are_the_rows(TEXT, RateSchedule([Phase(0, 100_000.0)]), 9, sizes, start)


def test_a_source_drawing_floats_keeps_rows() -> None:
    schema = plan.Schema((plan.Column("id", plan.INTEGER), plan.Column("x", plan.FLOAT)))
    source = SyntheticSource(schema, RateSchedule([Phase(0, 10.0)]), 1)
    assert source.take_records(5, RecordLayout(RowCodec(schema, plan.Kind.STREAM))) is None


# -- JSON Lines of a block ----------------------------------------------------------------------

MIXED = plan.Schema(  # columns that can be NULL (a sink's input computed with / or %)
    (
        plan.Column("n", plan.INTEGER, nullable=True),
        plan.Column("x", plan.FLOAT, nullable=True),
        plan.Column("t", plan.char(4)),
    )
)
LAYOUT = RecordLayout(RowCodec(MIXED, plan.Kind.STREAM))
_ROW = struct.Struct("<qqd4s")

values = st.tuples(
    st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([-(2**63), 0, -1])),  # -2^63: NULL
    st.one_of(st.floats(), st.sampled_from([math.nan, math.inf, -0.0, 1e16, 0.1])),
    st.one_of(
        st.binary(max_size=4),
        st.sampled_from([b'a"b', b"\\\\", b"\n", b"\x00a", "é".encode(), b"\xe9", b"\xff\xfe"]),
    ),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(values, min_size=1, max_size=30), st.integers(1, 10**12))
def test_the_lines_of_a_block_are_the_lines_of_its_rows(rows: list[tuple[Any, ...]], first: int) -> None:
    blob = b"".join(_ROW.pack(i, n, x, t) for i, (n, x, t) in enumerate(rows))
    block = LAYOUT.view(blob, first, len(rows))
    writer = LineWriter(MIXED, plan.Kind.STREAM)
    expected = "".join(writer.row(r[1], r) for r in block.rows())
    assert writer.lines(block) == expected
    assert writer.lines(block.rows()) == expected


def test_a_block_is_written_from_its_columns() -> None:
    """The column path is taken (no row decoded) for a block of plain values."""
    block = LAYOUT.view(b"".join(_ROW.pack(i, i, 0.5, b"ab") for i in range(5)), 1, 5)
    text = LineWriter(MIXED, plan.Kind.STREAM).lines(block)
    assert text.splitlines()[4] == '{"seq":5,"ts":4,"n":4,"x":0.5,"t":"ab"}'
    assert block._rows is None
