"""A CSV file of numbers read by numpy a block at a time
(node/connectors/csv_numeric.py), and ``query run`` feeding those blocks to
the columnar engine with no row in between.

The csv module's row-by-row reading is the definition: on random files
(tricky numbers, quotes, blank, short and long lines, any block size) the
numpy path gives the same rows, and on a bad row the same located error
after the same rows. ``query run`` on the column path prints what the row
engine prints.
"""

from __future__ import annotations

import io
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.embedded import query as embedded
from semiactive.node.connectors import sources
from semiactive.node.connectors.csv_numeric import NumericBlock
from semiactive.node.connectors.sources import SourceDataError, read_blocks, read_rows
from semiactive.node.cql import plan
from tests.unit.test_sources import _read_rows, _row_path

NUMBERS = plan.Schema((plan.Column("v", plan.INTEGER), plan.Column("x", plan.FLOAT)))
# Per column: values both numpy and Python take; values Python takes and
# numpy refuses or may read otherwise (the block then goes the csv
# module's way); values the row path refuses. Drawn mostly plain, so that
# whole blocks take the numpy path.
_VALUES = {
    # ts: the plain ones are how the next ts is written (see csv_files).
    "ts": (
        ["{}", "{}", " {}", "{} ", "+{}", "00{}"],
        ["٣", '"6"'],
        ["x", str(2**62), str(-(2**62)), "1.5", "", "0", str(2**62 - 1)],
    ),
    "v": (
        ["0", "-3", "12", " 4 ", "+9", "\x0c7", str(2**63 - 1), str(-(2**63) + 1)],
        ["1_000", "٣", '"8"'],
        [str(2**63), str(-(2**63)), "1.5", "1e3", "", "0x10", '"a"'],
    ),
    "x": (
        ["0.5", "-2", "1e3", "7", ".5", "5.", "1E-5", "-0.0", "0.1", "2.5e-308", "1e-320"],
        ["1_0.5", '"3"'],
        ["nan", "inf", "-infinity", "1e400", "x", "", "0x1p3"],
    ),
    "extra": (["a", "1", ""], [], []),
}
_cells = {name: st.sampled_from(plain * 12 + odd + bad) for name, (plain, odd, bad) in _VALUES.items()}


@st.composite
def csv_files(draw: st.DrawFn) -> str:
    # Mostly the fast path's header; sometimes one it does not take.
    header = draw(
        st.sampled_from([["ts", "v", "x"]] * 4 + [["ts", "v", "x", "extra"], ["ts", "v", "x", "v"]])
    )
    header = draw(st.permutations(header))
    lines = [", ".join(header)]
    ts = 0
    for _ in range(draw(st.integers(0, 30))):
        shape = draw(st.sampled_from(["row"] * 30 + ["blank", "spaces", "short", "long", "comment", "back"]))
        ts += draw(st.sampled_from([0, 0, 1, 2, 1000]))  # time goes on, unless a bad ts says otherwise
        cells = [draw(_cells[name]).format(ts) for name in header]
        if shape == "blank":
            lines.append("")
            continue
        if shape == "spaces":
            lines.append("   ")
            continue
        if shape == "short":
            cells = cells[:-1]
        if shape == "long":
            cells.append("9")
        if shape == "comment":
            cells[-1] += " #"
        if shape == "back":  # time goes back on a line numpy takes
            cells = [str(ts - 3) if name == "ts" else _VALUES[name][0][0] for name in header]
        lines.append(",".join(cells))
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    return ending.join(lines) + draw(st.sampled_from([ending, ""]))


@settings(max_examples=500, deadline=None, derandomize=True)
@given(csv_files(), st.sampled_from([1, 16, 60, 200, 1 << 20]))
def test_numpy_blocks_give_the_row_path_s_rows_and_errors(
    tmp_path_factory: pytest.TempPathFactory, text: str, block_bytes: int
) -> None:
    path = tmp_path_factory.mktemp("csv") / "in.csv"
    path.write_bytes(text.encode())
    expected = _row_path(path, False, NUMBERS)
    with patch.object(sources, "NUMERIC_BLOCK_BYTES", block_bytes):
        rows, error = _read_rows(path, NUMBERS, plan.Kind.STREAM)
    assert (rows, error) == expected
    assert [type(v) for r in rows for v in r] == [type(v) for r in expected[0] for v in r]


@pytest.mark.parametrize(
    "bad",
    [f"{2**62},1,0.5", f"{-(2**62)},1,0.5", "0,1,0.5", f"9,{-(2**63)},0.5", "9,1,nan", "9,1,-1e400"],
    ids=["ts-above", "ts-below", "ts-back", "int-null", "nan", "inf"],
)
@pytest.mark.parametrize("where", [0, 2])
@pytest.mark.parametrize("block_bytes", [1, 1 << 20])
def test_what_numpy_parses_but_the_row_path_refuses(
    tmp_path: Path, bad: str, where: int, block_bytes: int
) -> None:
    """Each check of the numpy block, on a line numpy itself reads: the
    same rows and error as the row path, at the file's start or later."""
    lines = ["5,1,0.5", "6,2,1.5", "7,3,2.5"]
    lines.insert(where, bad)
    path = tmp_path / "in.csv"
    path.write_text("ts,v,x\n" + "\n".join(lines) + "\n")
    with patch.object(sources, "NUMERIC_BLOCK_BYTES", block_bytes):
        rows, error = _read_rows(path, NUMBERS, plan.Kind.STREAM)
    assert (rows, error) == _row_path(path, False, NUMBERS)
    assert error or (bad, where) == ("0,1,0.5", 0)  # ts 0 first does not go back


def _numbers(path: Path, n: int, bad_at: int | None = None) -> None:
    lines = [f"{i // 2},{i * 7 - 300},{i / 4}" for i in range(n)]
    if bad_at is not None:
        lines[bad_at - 2] = f"{(bad_at - 2) // 2},{2**63},0.5"  # line bad_at of the file
    path.write_text("ts,v,x\n" + "\n".join(lines) + "\n")


def test_a_file_of_numbers_takes_no_row_path(tmp_path: Path) -> None:
    """The csv module's path would give the same rows, so the test counts
    its calls: none."""
    path = tmp_path / "big.csv"
    _numbers(path, 50_000)
    with (
        patch.object(sources, "NUMERIC_BLOCK_BYTES", 100_000),
        patch.object(sources, "_csv_block", wraps=sources._csv_block) as block_path,
        patch.object(sources, "_checked", wraps=sources._checked) as row_path,
    ):
        blocks = list(read_blocks(path, NUMBERS, plan.Kind.STREAM))
    assert block_path.call_count == row_path.call_count == 0
    assert all(isinstance(b, NumericBlock) for b in blocks) and len(blocks) > 1
    rows = [e for b in blocks for e in b.elements()]  # type: ignore[union-attr]
    assert rows[0] == (0, 1, 1, -300, 0.0) and rows[-1] == (24_999, 50_000, 1, 349_693, 12_499.75)


def test_a_bad_value_after_numpy_s_blocks_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    _numbers(path, 30_000, bad_at=29_000)
    rows: list[tuple[object, ...]] = []
    with (
        patch.object(sources, "NUMERIC_BLOCK_BYTES", 100_000),
        patch.object(sources, "_checked", wraps=sources._checked) as row_path,
        pytest.raises(SourceDataError, match=rf"^{path}:29000: column v: '{2**63}' is out of the integer"),
    ):
        rows.extend(read_rows(path, NUMBERS, plan.Kind.STREAM))
    assert row_path.call_count == 1  # the blocks before it were numpy's
    assert len(rows) == 28_998 and rows[-1][1] == 28_998


@pytest.mark.parametrize(("odd", "numpy_after"), [("1_000", True), ('"1000"', False)])
def test_after_a_block_numpy_refuses(tmp_path: Path, odd: str, numpy_after: bool) -> None:
    """A value numpy refuses and Python reads costs its block only; a
    quote (a quoted field may hold a line break) the rest of the file."""
    path = tmp_path / "odd.csv"
    lines = [f"{i // 2},{i * 7 - 300},{i / 4}" for i in range(50_000)]
    lines[10_000] = f"5000,{odd},0.5"
    path.write_text("ts,v,x\n" + "\n".join(lines) + "\n")
    with patch.object(sources, "NUMERIC_BLOCK_BYTES", 100_000):
        blocks = list(read_blocks(path, NUMBERS, plan.Kind.STREAM))
        rows = list(read_rows(path, NUMBERS, plan.Kind.STREAM))
    assert rows == _row_path(path, False, NUMBERS)[0] and rows[10_000][3] == 1000 and len(rows) == 50_000
    kinds = [isinstance(b, NumericBlock) for b in blocks]
    refused = kinds.index(False)
    assert kinds[:refused] == [True] * refused and refused > 0
    assert any(kinds[refused:]) is numpy_after


# Vectorized programs (the test fails if ``query run`` takes the row path).
PROGRAMS = [
    "REGISTER QUERY f AS SELECT * FROM S WHERE v >= 0;\n"
    "REGISTER QUERY q AS ISTREAM(SELECT SUM(v) AS total FROM f [Range 100 Slide 10])",
    "REGISTER QUERY q AS SELECT v * 2 AS w, x FROM S WHERE x < 1000.0",
    "REGISTER QUERY q AS ISTREAM(SELECT v, COUNT(*) AS n, MAX(v) AS top FROM S [Range 50] GROUP BY v)",
    "REGISTER QUERY q AS DSTREAM(SELECT MIN(v) AS low FROM S [Rows 7 Slide 3])",
]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    program=st.sampled_from(PROGRAMS),
    rows=st.lists(
        st.tuples(
            st.integers(0, 40),
            st.sampled_from([0, 1, -1, 5, 2**62, -(2**63) + 1, 2**63 - 1]) | st.integers(-20, 20),
            st.floats(-1e6, 1e6, allow_nan=False) | st.sampled_from([0.1, -0.0, 1e300]),
        ),
        max_size=80,
    ),
    block_bytes=st.sampled_from([1, 50, 1 << 20]),
)
def test_query_run_on_columns_prints_what_the_row_engine_prints(
    tmp_path_factory: pytest.TempPathFactory,
    program: str,
    rows: list[tuple[int, int, float]],
    block_bytes: int,
) -> None:
    directory = tmp_path_factory.mktemp("run")
    (directory / "q.cql").write_text(f"REGISTER STREAM S (v integer, x float);\n{program}\n")
    steps = sorted(rows, key=lambda r: r[0])
    (directory / "s.csv").write_text("ts,v,x\n" + "".join(f"{t * 3},{v},{x!r}\n" for t, v, x in steps))
    printed = _printed_by_both(directory, [f"S={directory / 's.csv'}"], block_bytes)
    assert printed["auto"] == printed["dts"]


def _printed_by_both(
    directory: Path, streams: list[str], block_bytes: int, slice_rows: int = embedded.SLICE_ROWS
) -> dict[str, str]:
    """What ``query run`` of ``directory``'s q.cql prints with ``auto``
    (which must take the column path) and with ``dts`` (the row path)."""
    printed = {}
    for executor in ("auto", "dts"):
        out = io.StringIO()
        with (
            patch.object(sources, "NUMERIC_BLOCK_BYTES", block_bytes),
            patch.object(embedded, "stream", side_effect=AssertionError("row path"))
            if executor == "auto"
            else patch.object(embedded, "stream_columns", side_effect=AssertionError("column path")),
        ):
            try:
                embedded.run(
                    str(directory / "q.cql"),
                    streams,
                    output=None,
                    executor=executor,
                    run_limit=100,
                    out=out,
                    slice_rows=slice_rows,
                )
            except SourceDataError as exc:
                out.write(f"error: {exc}")
        printed[executor] = out.getvalue()
    return printed


JOINS = [
    "REGISTER QUERY q AS ISTREAM(SELECT S.v, T.w FROM S [Range 6], T [Now] WHERE S.v = T.v)",
    "REGISTER QUERY q AS DSTREAM(SELECT S.v, T.w FROM S [Rows 3], T [Range 2] WHERE S.v = T.v AND T.w > 0)",
    "REGISTER QUERY q AS ISTREAM(SELECT T.v, k FROM S [Now], T [Partition By v Rows 1] WHERE S.v = T.v)",
    "REGISTER QUERY q AS RSTREAM(SELECT T.v, k FROM S [Now], T [Partition By v Rows 1] WHERE S.v = T.v)",
    "REGISTER QUERY q AS RSTREAM(SELECT S.v, w FROM S [Range 4 Slide 3], T [Rows 3 Slide 2] WHERE S.v = T.v)",
    "REGISTER QUERY q AS ISTREAM(SELECT S.v, COUNT(*) AS n, SUM(w) AS s, AVG(w) AS m "
    "FROM S [Range 6], T [Now] WHERE S.v = T.v GROUP BY S.v)",
]
TIMED = st.lists(st.tuples(st.integers(0, 30), st.integers(-3, 3), st.integers(-2, 2)), max_size=60)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    program=st.sampled_from(JOINS),
    left=TIMED,
    right=TIMED,
    text=st.booleans(),
    block_bytes=st.sampled_from([1, 40, 1 << 20]),
    slice_rows=st.sampled_from([1, 7, 0]),
)
def test_query_run_merges_two_files_on_columns_as_the_row_engine_does(
    tmp_path_factory: pytest.TempPathFactory,
    program: str,
    left: list[tuple[int, int, int]],
    right: list[tuple[int, int, int]],
    text: bool,
    block_bytes: int,
    slice_rows: int,
) -> None:
    """Two files, merged by ts a block at a time (blocks of one row, of a
    few, of the whole file; text columns make them the csv module's
    blocks): the same output as the row engine's row-by-row merge."""
    directory = tmp_path_factory.mktemp("join")
    kind = "char(4)" if text else "integer"
    (directory / "q.cql").write_text(
        f"REGISTER STREAM S (v integer, k {kind});\nREGISTER STREAM T (v integer, w integer);\n{program}\n"
    )
    for name, rows, column in (("s", left, "k"), ("t", right, "w")):
        lines = "".join(f"{t},{v},{x}\n" for t, v, x in sorted(rows, key=lambda r: r[0]))
        (directory / f"{name}.csv").write_text(f"ts,v,{column}\n" + lines)
    streams = [f"S={directory / 's.csv'}", f"T={directory / 't.csv'}"]
    printed = _printed_by_both(directory, streams, block_bytes, slice_rows)
    assert "error" not in printed["dts"]
    assert printed["auto"] == printed["dts"]
