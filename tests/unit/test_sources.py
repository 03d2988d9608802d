"""Where tuples come from (node/connectors/sources.py): rate schedules, the seeded
synthetic generator, and CSV / JSON Lines replay with located errors."""

from __future__ import annotations

import bisect
import itertools
import math
import random
import re
import string
from fractions import Fraction
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.node.connectors import sources
from semiactive.node.connectors.sources import (
    BLOCK,
    Phase,
    RateSchedule,
    SourceDataError,
    SyntheticSource,
    _checked,
    csv_reader,
    read_rows,
)
from semiactive.node.cql import plan
from semiactive.node.sections.codec import wire_size


def _schema(*columns: tuple[str, plan.SqlType]) -> plan.Schema:
    return plan.Schema(tuple(plan.Column(name, t) for name, t in columns))


KV = _schema(("k", plan.char(4)), ("v", plan.INTEGER))

# -- RateSchedule ---------------------------------------------------------------------------


def test_two_phases_100_then_1000_per_second_from_10_s() -> None:
    s = RateSchedule([Phase(0, 100), Phase(10_000, 1000)])
    # Phase 1: one tuple every 10 ms, 1000 of them (ts 0 .. 9990); phase 2:
    # one per ms from 10 000 on.
    assert [s.ts(i) for i in (0, 1, 2, 99, 999)] == [0, 10, 20, 990, 9990]
    assert [s.ts(i) for i in (1000, 1001, 1999)] == [10_000, 10_001, 10_999]
    assert s.count_until(-1) == 0
    assert s.count_until(0) == 1
    assert s.count_until(9) == 1
    assert s.count_until(10) == 2
    assert s.count_until(9_999) == 1000
    assert s.count_until(10_000) == 1001
    assert s.count_until(10_500) == 1501
    assert s.count_until(10.9) == 2  # fractions of a ms count as the ms they are in


def test_fractional_rates_never_drift() -> None:
    s = RateSchedule([Phase(0, 3), Phase(1000, 2.5)])
    # 3/s: ts = floor(j * 1000 / 3); the phase holds ceil(1000 * 3 / 1000) = 3 tuples.
    assert [s.ts(i) for i in range(3)] == [0, 333, 666]
    # 2.5/s: one every 400 ms from 1000.
    assert [s.ts(i) for i in range(3, 7)] == [1000, 1400, 1800, 2200]
    assert s.ts(3 + 2500) == 1000 + 1_000_000  # 2500 tuples later: exactly 1000 s


@pytest.mark.parametrize(
    "phases",
    [
        [Phase(0, 100), Phase(10_000, 1000)],
        [Phase(0, 3), Phase(1000, 2.5), Phase(3000, 700)],
        [Phase(0, 1000), Phase(50, 7), Phase(1500, 333.3)],
    ],
)
def test_count_until_agrees_with_ts(phases: list[Phase]) -> None:
    s = RateSchedule(phases)
    times = [s.ts(i) for i in range(3000)]
    assert times == sorted(times)
    for ms in range(-2, times[-1]):
        assert s.count_until(ms) == bisect.bisect_right(times, ms), ms


SCHEDULES = [
    [Phase(0, 100), Phase(10_000, 1000)],
    [Phase(0, 3), Phase(1000, 2.5), Phase(3000, 700)],
    [Phase(0, 1000), Phase(50, 7), Phase(1500, 333.3)],
    [Phase(0, 125_000)],
]


def _ts_by_definition(s: RateSchedule, i: int) -> int:
    """The schedule's definition, in Fractions: T + floor(j * 1000 / r)."""
    k = bisect.bisect_right(s.first_index, i) - 1
    return s.starts[k] + math.floor((i - s.first_index[k]) * 1000 / Fraction(s.rates[k]))


@pytest.mark.parametrize("phases", SCHEDULES)
def test_ts_and_ts_range_follow_the_definition(phases: list[Phase]) -> None:
    s = RateSchedule(phases)
    expected = [_ts_by_definition(s, i) for i in range(5000)]
    assert [s.ts(i) for i in range(5000)] == expected
    assert s.ts_range(0, 5000) == expected
    for start, stop in [(0, 0), (7, 8), (29, 3001), (4999, 5000), (1234, 1234)]:
        assert s.ts_range(start, stop) == expected[start:stop]


# -- SyntheticSource ----------------------------------------------------------------------------

PADDED = _schema(("id", plan.INTEGER), ("val", plan.INTEGER), ("x", plan.FLOAT), ("pad", plan.char(20)))


def _source(seed: int) -> SyntheticSource:
    return SyntheticSource(PADDED, RateSchedule([Phase(0, 1000)]), seed)


def test_same_seed_same_tuples_whatever_the_batching() -> None:
    whole = _source(5).take(50)
    pieces = _source(5)
    split = pieces.take(20) + pieces.take(1) + pieces.take(29)
    assert whole == split
    assert _source(6).take(50) != whole


def test_a_generator_started_anywhere_goes_on_with_the_same_tuples() -> None:
    """What a source started again relies on (its rows are not kept)."""
    whole = _source(5).take(2 * BLOCK + 1100)
    for start in (0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 3):
        gen = _source(5)
        gen.seek(start)
        assert gen.index == start and gen.next_ts() == whole[start][0]
        assert gen.take(1000) == whole[start : start + 1000], start


def test_synthetic_tuple_shape() -> None:
    rows = _source(5).take(1000)
    assert [r[0] for r in rows[:3]] == [0, 1, 2]  # 1000/s: one per ms
    assert [r[1] for r in rows[:3]] == [1, 2, 3]  # seq from 1
    assert {r[2] for r in rows} == {1}
    assert [r[3] for r in rows[:3]] == [0, 1, 2]  # id counts from 0
    assert all(0 <= r[4] < 1000 and isinstance(r[4], int) for r in rows)
    assert all(0 <= r[5] < 1000 and isinstance(r[5], float) for r in rows)
    assert {r[6] for r in rows} == {"semiactivesemiactive"}  # the fixed filler
    assert len({r[4] for r in rows}) > 500  # not constant


def _tuples_by_definition(
    schema: plan.Schema, phases: list[Phase], seed: int, count: int
) -> list[tuple[object, ...]]:
    """The generator's definition, a tuple at a time: values drawn column by
    column from the block's seed, ts from the schedule."""
    rng = random.Random(seed)
    schedule = RateSchedule(phases)
    out: list[tuple[object, ...]] = []
    for i in range(count):
        if i % BLOCK == 0:
            rng.seed(seed if i == 0 else f"{seed}:{i // BLOCK}")
        values: list[object] = []
        for column in schema.columns:
            name = column.type.name
            if column.name == "id" and name is plan.TypeName.INTEGER:
                values.append(i)
            elif column.name == "pad" and name is plan.TypeName.CHAR:
                values.append(("semiactive" * 9)[: column.type.length])
            elif name is plan.TypeName.INTEGER:
                values.append(rng.randrange(1000))
            elif name is plan.TypeName.FLOAT:
                values.append(round(rng.random() * 1000, 3))
            elif name is plan.TypeName.BYTE:
                values.append(rng.choice(string.ascii_lowercase))
            else:
                values.append("".join(rng.choices(string.ascii_lowercase, k=column.type.length)))
        out.append((_ts_by_definition(schedule, i), i + 1, 1, *values))
    return out


EVERY_TYPE = _schema(
    ("a", plan.INTEGER),
    ("id", plan.INTEGER),
    ("f", plan.FLOAT),
    ("b", plan.BYTE),
    ("t", plan.char(5)),
    ("v", plan.INTEGER),
    ("pad", plan.char(33)),
)


@pytest.mark.parametrize("schema", [EVERY_TYPE, PADDED, _schema(("id", plan.INTEGER)), KV])
def test_tuples_follow_the_definition_whatever_the_batching(schema: plan.Schema) -> None:
    """Values drawn a column at a time would differ; batches must not show."""
    phases = [Phase(0, 1000), Phase(50, 7), Phase(1500, 333.3)]
    count = BLOCK + 2000
    expected = _tuples_by_definition(schema, phases, 11, count)
    gen = SyntheticSource(schema, RateSchedule(phases), 11)
    taken: list[tuple[object, ...]] = []
    for size in itertools.cycle([1, 997, 0, 4096, 3]):
        if len(taken) >= count:
            break
        taken += gen.take(min(size, count - len(taken)))
    assert taken == expected


def test_due_follows_the_schedule() -> None:
    gen = _source(1)
    assert gen.due(-1) == 0
    assert gen.due(9.5) == 10  # ts 0 .. 9
    gen.take(4)
    assert gen.due(9.5) == 6
    assert gen.next_ts() == 4


def test_wire_size() -> None:
    assert wire_size(PADDED) == 8 + 8 + 8 + 8 + 20
    assert wire_size(_schema(("b", plan.BYTE), ("c", plan.char(3)))) == 8 + 1 + 3


# -- read_rows -------------------------------------------------------------------------------------


def test_csv_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("ts,v,note,k\n1,10,x,a\n1,-3,y,bb\n7,0,z,\n")  # any column order; extra columns
    assert list(read_rows(path, KV, plan.Kind.STREAM)) == [
        (1, 1, 1, "a", 10),
        (1, 2, 1, "bb", -3),
        (7, 3, 1, "", 0),
    ]


def test_csv_with_spaces_after_commas(tmp_path: Path) -> None:
    """``ts, k, v`` is the header ``ts,k,v``: spaces around names and after
    commas are no part of them; a quoted value keeps its spaces."""
    path = tmp_path / "s.csv"
    path.write_text('ts, k , v\n1, a, 10\n2, " b", -3 \n')
    assert list(read_rows(path, KV, plan.Kind.STREAM)) == [(1, 1, 1, "a", 10), (2, 2, 1, " b", -3)]
    relation = tmp_path / "r.csv"
    relation.write_text("ts, op, k, v\n1, +, a, 1\n4, - , a, 1\n")
    assert list(read_rows(relation, KV, plan.Kind.RELATION)) == [(1, 1, 1, "a", 1), (4, 2, -1, "a", 1)]


def test_jsonl_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"ts": 2, "k": "é", "v": 5}\n\n{"ts": 3, "k": "a", "v": 6, "extra": true}\n')
    assert list(read_rows(path, KV, plan.Kind.STREAM)) == [(2, 1, 1, "é", 5), (3, 2, 1, "a", 6)]
    floats = tmp_path / "f.jsonl"
    floats.write_text('{"ts": 0, "x": 2}\n{"ts": 0, "x": 2.5}\n')
    assert list(read_rows(floats, _schema(("x", plan.FLOAT)), plan.Kind.STREAM)) == [
        (0, 1, 1, 2.0),
        (0, 2, 1, 2.5),
    ]


def test_relation_op_column(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text("ts,op,k,v\n1,+,a,1\n4,-,a,1\n4,+,a,2\n")
    assert list(read_rows(path, KV, plan.Kind.RELATION)) == [
        (1, 1, 1, "a", 1),
        (4, 2, -1, "a", 1),
        (4, 3, 1, "a", 2),
    ]
    path.write_text("ts,op,k,v\n1,+,a,1\n2,*,a,1\n")
    with pytest.raises(SourceDataError, match=f"^{re.escape(str(path))}:3: op must be"):
        list(read_rows(path, KV, plan.Kind.RELATION))
    path.write_text("ts,k,v\n1,a,1\n")
    with pytest.raises(SourceDataError, match=f"^{re.escape(str(path))}:1: missing column.* op"):
        list(read_rows(path, KV, plan.Kind.RELATION))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ts,k,v\n1,a,1\n2,b,x\n", r":3: column v: 'x' is not integer$"),
        ("ts,k,v\n1,a,1\n2,b,1.5\n", r":3: column v: '1.5' is not integer$"),
        ("ts,k,v\n5,a,1\n4,b,1\n", r":3: ts 4 goes back in time \(previous 5\)$"),
        ("ts,k,v\n5,a,1\nsoon,b,1\n", r":3: ts must be an integer"),
        ("ts,k\n1,a\n", r":1: missing column\(s\) v in the header$"),
        ("k,v\na,1\n", r":1: missing column\(s\) ts in the header$"),
        ("ts,k,v\n1,abcde,1\n", r":2: column k: 'abcde' is longer than char\(4\)$"),
        ("ts,k,v\n1,ééé,1\n", r":2: column k: 'ééé' is longer than char\(4\)$"),  # 6 bytes
        ("ts,k,v\n1,a,1\n2,b\n", r":3: column v: no value"),  # a short row
        ("ts,k,v\n1,a,1,9\n", r":2: more fields than the header has \(3\)$"),
    ],
)
def test_csv_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "in.csv"
    path.write_text(text)
    with pytest.raises(SourceDataError, match=f"^{re.escape(str(path))}{message}"):
        list(read_rows(path, KV, plan.Kind.STREAM))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"ts": 1, "k": "a", "v": 1.7}', r"column v: '1.7' is not integer"),
        ('{"ts": 1, "k": "a", "v": true}', r"column v: 'true' is not integer"),
        ('{"ts": 1, "k": "a", "v": null}', r"column v: no value"),
        ('{"ts": 1.5, "k": "a", "v": 1}', r"ts must be an integer"),
        ('{"ts": 1, "k": "a"}', r"missing column v"),
        ("[1, 2]", r"expected a JSON object"),
        ('{"ts": 1,', r"not JSON"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('{"ts": 0, "k": "ok", "v": 0}\n' + line + "\n")
    with pytest.raises(SourceDataError, match=f"^{re.escape(str(path))}:2: {message}"):
        list(read_rows(path, KV, plan.Kind.STREAM))


def test_float_and_byte_values_are_checked(tmp_path: Path) -> None:
    schema = _schema(("x", plan.FLOAT), ("b", plan.BYTE))
    path = tmp_path / "in.csv"
    path.write_text("ts,x,b\n1,2.5,q\n2,-1e3,é\n")
    assert list(read_rows(path, schema, plan.Kind.STREAM)) == [(1, 1, 1, 2.5, "q"), (2, 2, 1, -1000.0, "é")]
    # NULL only comes from division by zero: no NaN or infinity as input.
    for bad, message in (("nan", "'nan' is not float"), ("inf", "'inf' is not float")):
        path.write_text(f"ts,x,b\n1,{bad},q\n")
        with pytest.raises(SourceDataError, match=f"^{re.escape(str(path))}:2: column x: {message}$"):
            list(read_rows(path, schema, plan.Kind.STREAM))
    for bad in ("", "qq", "€"):
        path.write_text(f"ts,x,b\n1,1.0,{bad}\n")
        with pytest.raises(
            SourceDataError, match=f"^{re.escape(str(path))}:2: column b: .* is not one byte$"
        ):
            list(read_rows(path, schema, plan.Kind.STREAM))


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(SourceDataError, match="cannot open"):
        list(read_rows(tmp_path / "missing.csv", KV, plan.Kind.STREAM))


# -- CSV a block at a time -----------------------------------------------------------------------

MIXED = _schema(("k", plan.char(4)), ("v", plan.INTEGER), ("x", plan.FLOAT), ("b", plan.BYTE))
# Per column: values the row path takes, then ones it refuses; refused ones
# are drawn about one time in ten, so that whole blocks are valid too.
_VALUES = {
    "ts": (["0", "1", "2", "3", " 7", "9", "-1", str(2**62 - 1)], ["x", str(2**62), "1.5"]),
    "op": (["+", "-", " + "], ["*", ""]),
    "k": (["a", "bb", "", "abcd", "éé", " q"], ["abcde", "ééé"]),
    "v": (
        ["0", "-3", "12", "1_000", " 4 ", str(2**63 - 1), str(-(2**63) + 1)],
        [str(2**63), str(-(2**63)), "1.5"],
    ),
    "x": (["0.5", "-2", "1e3", "7"], ["nan", "inf", "x"]),
    "b": (["a", "é", "\u00ff"], ["€", "", "ab"]),
}
_cells = {name: st.sampled_from(good * 5 + bad) for name, (good, bad) in _VALUES.items()}


@st.composite
def csv_files(draw: st.DrawFn) -> tuple[str, bool]:
    relation = draw(st.booleans())
    header = ["ts", *(["op"] if relation else []), "k", "v", "x", "b"]
    header = draw(st.permutations(header))
    lines = [", ".join(header)]
    for _ in range(draw(st.integers(0, 14))):
        shape = draw(st.sampled_from(["row"] * 12 + ["blank", "short", "long"]))
        cells = [draw(_cells[name]) for name in header]
        if shape == "blank":
            lines.append("")
            continue
        if shape == "short":
            cells = cells[:-1]
        if shape == "long":
            cells.append("9")
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n", relation


Read = tuple[list[tuple[object, ...]], str]  # rows, and the error after them ("" if none)


def _row_path(path: Path, relation: bool, schema: plan.Schema = MIXED) -> Read:
    """The rows and the error of the row-by-row reader (DictReader records)."""
    out: list[tuple[object, ...]] = []
    with path.open(newline="") as handle:
        reader = csv_reader(handle)
        records = ((reader.line_num, row) for row in reader)
        try:
            for row in _checked(path, records, schema, relation, len(reader.fieldnames or [])):
                out.append(row)
        except SourceDataError as exc:
            return out, str(exc)
    return out, ""


def _read_rows(path: Path, schema: plan.Schema, kind: plan.Kind) -> Read:
    """``read_rows``'s rows, and its error after them."""
    rows: list[tuple[object, ...]] = []
    try:
        for row in read_rows(path, schema, kind):
            rows.append(row)
    except SourceDataError as exc:
        return rows, str(exc)
    return rows, ""


@settings(max_examples=400, deadline=None, derandomize=True)
@given(csv_files(), st.sampled_from([1, 2, 3, 5, 4096]))
def test_csv_blocks_give_the_row_path_s_rows_and_errors(
    tmp_path_factory: pytest.TempPathFactory, file: tuple[str, bool], block: int
) -> None:
    """Every row, and on a bad one the same located error after the same
    rows, whatever the block size."""
    text, relation = file
    path = tmp_path_factory.mktemp("csv") / "in.csv"
    path.write_text(text)
    expected_rows, expected_error = _row_path(path, relation)
    kind = plan.Kind.RELATION if relation else plan.Kind.STREAM
    with patch.object(sources, "CSV_BLOCK", block):
        rows, error = _read_rows(path, MIXED, kind)
    assert (rows, error) == (expected_rows, expected_error)


def test_a_large_csv_file_is_read_in_blocks(tmp_path: Path) -> None:
    """Whole blocks take the column path (a break in it shows here: the
    row path alone would give the same rows, so the test counts calls)."""
    path = tmp_path / "big.csv"
    path.write_text(
        "ts,k,v,x,b\n" + "".join(f"{i // 3},k{i % 7},{i - 5000},{i / 8},z\n" for i in range(10_000))
    )
    with patch.object(sources, "_checked", wraps=sources._checked) as row_path:
        rows = list(read_rows(path, MIXED, plan.Kind.STREAM))
    assert row_path.call_count == 0
    assert rows[0] == (0, 1, 1, "k0", -5000, 0.0, "z") and rows[-1] == (
        3333,
        10_000,
        1,
        "k3",
        4999,
        9999 / 8,
        "z",
    )
    assert [r[1] for r in rows] == list(range(1, 10_001))
