"""``semiactive query check`` and ``semiactive query run``: the embedded mode's
command line, its JSON Lines contract and its errors (exit status 2, one
line naming file and line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from semiactive.cli import main
from tests.processes import semiactive

PROGRAM = """\
REGISTER STREAM S (k char(4), v integer)
-- a stream: the rows with v > 1, doubled
REGISTER QUERY big AS
  SELECT k, v * 2 AS twice FROM S WHERE v > 1
-- a relation: count and sum per k over the last 3 ms
REGISTER QUERY counts AS
  SELECT k, COUNT(*) AS n, SUM(v) AS total FROM S [Range 2] GROUP BY k
"""

ROWS = "ts,k,v\n1,a,1\n2,b,5\n2,c,3\n4,a,-2\n"


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    query = tmp_path / "q.cql"
    query.write_text(PROGRAM)
    data = tmp_path / "s.csv"
    data.write_text(ROWS)
    return query, data


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_prints_the_plan(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    query, _ = files
    code, out, err = _run(capsys, "query", "check", str(query))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert "input S: stream (k char(4), v integer)" in lines
    assert "query big: stream (k char(4), twice integer)" in lines
    assert "query counts: relation (k char(4), n integer, total integer)" in lines
    plan = out[out.index("query counts") :]
    for step in ("Aggregate GROUP BY k", "Window [Range 2 ms]", "Scan S"):
        assert step in plan
    assert plan.index("Aggregate") < plan.index("Window") < plan.index("Scan S")


def test_run_prints_the_last_query_as_json_lines(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    query, data = files
    code, out, err = _run(capsys, "query", "run", str(query), "--stream", f"S={data}")
    assert (code, err) == (0, "")
    # [Range 2]: a tuple is in the window at ts .. ts+2. At 4, a@1 leaves and
    # a@4 enters: group a keeps n = 1 but its total goes from 1 to -2. The run
    # ends at the last input instant (4), before b and c leave at 5.
    assert out.splitlines() == [
        '{"seq":1,"ts":1,"op":"+","k":"a","n":1,"total":1}',
        '{"seq":2,"ts":2,"op":"+","k":"b","n":1,"total":5}',
        '{"seq":3,"ts":2,"op":"+","k":"c","n":1,"total":3}',
        '{"seq":4,"ts":4,"op":"-","k":"a","n":1,"total":1}',
        '{"seq":5,"ts":4,"op":"+","k":"a","n":1,"total":-2}',
    ]


def test_run_output_chooses_the_query(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    query, data = files
    code, out, _ = _run(capsys, "query", "run", str(query), "--stream", f"S={data}", "--output", "big")
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == [
        {"seq": 1, "ts": 2, "k": "b", "twice": 10},
        {"seq": 2, "ts": 2, "k": "c", "twice": 6},
    ]
    hb = _run(
        capsys, "query", "run", str(query), "--stream", f"S={data}", "--output", "big", "--executor", "hb"
    )
    assert hb == (0, out, "")


def test_run_reads_json_lines_and_relation_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    query = tmp_path / "j.cql"
    query.write_text(
        "REGISTER STREAM Q (k integer, qty integer)\n"
        "REGISTER RELATION P (k integer, price integer)\n"
        "ISTREAM(SELECT Q.k, qty * price AS cost FROM Q [Now], P WHERE Q.k = P.k)\n"
    )
    orders = tmp_path / "q.jsonl"
    orders.write_text(
        '{"ts": 2, "k": 1, "qty": 3}\n{"ts": 6, "k": 1, "qty": 2}\n{"ts": 6, "k": 2, "qty": 9}\n'
    )
    prices = tmp_path / "p.csv"
    prices.write_text("ts,op,k,price\n1,+,1,5\n5,-,1,5\n5,+,1,7\n")
    code, out, err = _run(
        capsys, "query", "run", str(query), "--stream", f"Q={orders}", "--stream", f"P={prices}"
    )
    assert (code, err) == (0, "")
    # At 2 the price of 1 is 5; from 5 on it is 7; 2 has no price.
    assert out == '{"seq":1,"ts":2,"k":1,"cost":15}\n{"seq":2,"ts":6,"k":1,"cost":14}\n'


def test_bad_query_exits_2_with_file_line_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    query = tmp_path / "bad.cql"
    query.write_text("REGISTER STREAM S (a integer)\n\nSELECT a,\n       b FROM S\n")
    for action in (["check", str(query)], ["run", str(query)]):
        code, out, err = _run(capsys, "query", *action)
        assert (code, out) == (2, "")
        assert err == f"semiactive: {query}:4:8: unknown column 'b'; known columns: a\n"
    query.write_text("REGISTER STREAM S (a integer)\nSELECT a FROM S [Rows 0]\n")
    code, _, err = _run(capsys, "query", "check", str(query))
    assert code == 2 and err.startswith(f"semiactive: {query}:2:23: window row count must be at least 1")
    code, _, err = _run(capsys, "query", "check", str(tmp_path / "none.cql"))
    assert (
        code == 2
        and err == f"semiactive: {tmp_path / 'none.cql'}:1:1: cannot read: No such file or directory\n"
    )


def test_bad_csv_exits_2_naming_file_and_line(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    query, data = files
    data.write_text("ts,k,v\n1,a,1\n2,b,five\n")
    code, out, err = _run(capsys, "query", "run", str(query), "--stream", f"S={data}")
    assert (code, out) == (2, "")
    assert err == f"semiactive: {data}:3: column v: 'five' is not integer\n"
    data.write_text("ts,k,v\n1,a,1\n2,b\n")  # a short row
    code, _, err = _run(capsys, "query", "run", str(query), "--stream", f"S={data}")
    assert code == 2 and err.startswith(f"semiactive: {data}:3: column v: no value")


def test_stream_and_output_arguments_are_checked(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    query, data = files
    code, out, err = _run(capsys, "query", "run", str(query), "--stream", f"T={data}")
    assert (code, out) == (2, "")
    assert err == "semiactive: --stream T: the program registers no stream or relation 'T' (known: S)\n"
    code, _, err = _run(capsys, "query", "run", str(query), "--stream", str(data))
    assert code == 2 and "expected NAME=FILE" in err
    code, _, err = _run(capsys, "query", "run", str(query))
    assert (code, err) == (2, "semiactive: no --stream given for input(s) S\n")
    code, _, err = _run(capsys, "query", "run", str(query), "--stream", f"S={data}", "--output", "nope")
    assert (code, err) == (2, "semiactive: --output nope: no registered query of that name (big, counts)\n")
    code, _, err = _run(capsys, "query", "run", str(query), "--stream", f"S={data}x")
    assert code == 2 and err.startswith(f"semiactive: {data}x: cannot open")


def test_the_installed_command(files: tuple[Path, Path]) -> None:
    """The same through ``python -m semiactive``: output on stdout, errors on
    stderr, the exit status."""
    query, data = files
    ok = semiactive("query", "run", str(query), "--stream", f"S={data}", "--output", "big", timeout=60)
    assert (ok.returncode, ok.stderr) == (0, "")
    assert ok.stdout == '{"seq":1,"ts":2,"k":"b","twice":10}\n{"seq":2,"ts":2,"k":"c","twice":6}\n'
    data.write_text("ts,k,v\n3,a,1\n2,b,1\n")
    bad = semiactive("query", "run", str(query), "--stream", f"S={data}", timeout=60)
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == f"semiactive: {data}:3: ts 2 goes back in time (previous 3)\n"


# -- NULL (only from division by zero) flowing through a program ----------------------------------

NULLS = """\
REGISTER STREAM S (k integer, a integer, b integer)
REGISTER STREAM T (k integer, a integer, b integer)
REGISTER QUERY ratio AS SELECT k, a / b AS q FROM S
-- q holds NULL for b = 0: arithmetic on it is NULL, comparisons with it false
REGISTER QUERY used AS SELECT k, q + 1 AS r FROM ratio WHERE q > -100 OR k = 3
-- equal NULL join keys do not match (NULL = NULL is false)
REGISTER QUERY joined AS
  ISTREAM(SELECT S.k, T.k AS tk FROM S [Now], T [Now] WHERE S.a / S.b = T.a / T.b)
"""


def test_nulls_travel_through_columns_and_never_match(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = tmp_path / "n.cql"
    query.write_text(NULLS)
    s = tmp_path / "s.csv"
    s.write_text("ts,k,a,b\n1,1,6,3\n1,2,5,0\n2,3,7,0\n2,4,8,2\n")
    t = tmp_path / "t.csv"
    t.write_text("ts,k,a,b\n1,10,4,2\n1,20,9,0\n2,30,1,0\n2,40,4,1\n")
    streams = ["--stream", f"S={s}", "--stream", f"T={t}"]
    code, out, err = _run(capsys, "query", "run", str(query), *streams, "--output", "used")
    assert (code, err) == (0, "")
    # k=2: q NULL, the comparison is false and k != 3: dropped; k=3: kept, r NULL.
    assert out.splitlines() == [
        '{"seq":1,"ts":1,"k":1,"r":3}',
        '{"seq":2,"ts":2,"k":3,"r":null}',
        '{"seq":3,"ts":2,"k":4,"r":5}',
    ]
    code, out, err = _run(capsys, "query", "run", str(query), *streams, "--output", "joined")
    assert (code, err) == (0, "")
    # 6/3 = 4/2 = 2 at ts 1 matches; 5/0 and 9/0 (both NULL) do not; at ts 2
    # 8/2 = 4/1 matches, 7/0 and 1/0 do not.
    assert out.splitlines() == ['{"seq":1,"ts":1,"k":1,"tk":10}', '{"seq":2,"ts":2,"k":4,"tk":40}']


def test_reserved_column_names_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """seq, ts and op are the fields of every output row: no column may
    take their name, or a JSON object would have the key twice."""
    query = tmp_path / "r.cql"
    query.write_text("REGISTER STREAM S (a integer)\nREGISTER QUERY q AS\n  SELECT a, a * 2 AS ts FROM S\n")
    code, _, err = _run(capsys, "query", "check", str(query))
    assert code == 2
    assert err.startswith(f"semiactive: {query}:2:1: query 'q': column name 'ts' is reserved")
    query.write_text("REGISTER RELATION R (k integer, op char(1))\nSELECT k FROM R\n")
    code, _, err = _run(capsys, "query", "check", str(query))
    assert code == 2 and err.startswith(f"semiactive: {query}:1:33: column name 'op' is reserved")


def test_check_says_whether_a_partitioning_keeps_the_result(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    query, _ = files
    code, out, _ = _run(capsys, "query", "check", str(query), "--partition-by", "S=k")
    assert (
        code == 0 and "partitioned (S by k; other inputs whole to every partition): keeps the result" in out
    )
    code, _, err = _run(capsys, "query", "check", str(query), "--partition-by", "S=v")
    assert code == 2 and "query counts: GROUP BY" in err
    code, _, err = _run(capsys, "query", "check", str(query), "--partition-by", "S")
    assert code == 2 and "write STREAM=COL" in err
