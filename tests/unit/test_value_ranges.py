"""Integers are 64-bit on the wire, with -2**63 reserved for NULL: sources
refuse values outside [-2**63 + 1, 2**63 - 1] naming file, line and column,
and the codec refuses to send a computed value it cannot carry, naming the
column, instead of dying with a bare struct error or turning it into NULL."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from semiactive.cli import main
from semiactive.embedded import query as embedded
from semiactive.ha.output_log import OutputLog
from semiactive.node.connectors.sources import INT_MAX, INT_MIN, SourceDataError, convert, read_rows
from semiactive.node.cql import compile_program, plan
from semiactive.node.engine.engine import Engine, EvaluationError
from semiactive.node.sections.codec import INT_NULL, OutOfRangeError, RowCodec
from semiactive.topology import Edge
from tests.grpc_sink import sender_to, sink_server

SCHEMA = plan.Schema((plan.Column("id", plan.INTEGER), plan.Column("v", plan.INTEGER, nullable=True)))
COLUMN = plan.Column("v", plan.INTEGER)


def test_the_range_is_int64_without_its_null() -> None:
    assert (INT_MIN, INT_MAX) == (-(2**63) + 1, 2**63 - 1)


@pytest.mark.parametrize("value", [str(2**63), str(-(2**63)), str(2**64), "9" * 30])
def test_convert_refuses_integers_beyond_64_bits(value: str) -> None:
    with pytest.raises(SourceDataError, match=r"^row 3: column v: .* is out of the integer range"):
        convert(value, COLUMN, "row 3")


@pytest.mark.parametrize("value", [INT_MIN, INT_MAX, 0])
def test_convert_takes_the_ends_of_the_range(value: int) -> None:
    assert convert(str(value), COLUMN, "row 0") == value


def test_a_long_bad_value_is_cut_short_in_the_message() -> None:
    with pytest.raises(SourceDataError) as caught:
        convert("x" * 10_000, COLUMN, "row 0")
    assert len(str(caught.value)) < 120


@pytest.mark.parametrize(
    ("suffix", "content"),
    [
        (".csv", f"ts,id,v\n1,1,5\n2,2,{2**63}\n"),
        (".csv", f"ts,id,v\n1,1,5\n2,2,{-(2**63)}\n"),
        (".jsonl", f'{{"ts":1,"id":1,"v":5}}\n{{"ts":2,"id":2,"v":{2**70}}}\n'),
    ],
)
def test_file_replay_refuses_them_naming_file_line_and_column(
    tmp_path: Path, suffix: str, content: str
) -> None:
    path = tmp_path / f"in{suffix}"
    path.write_text(content)
    with pytest.raises(SourceDataError, match=rf"^{path}:[23]: column v: .* out of the integer range"):
        list(read_rows(path, SCHEMA, plan.Kind.STREAM))


def test_file_replay_refuses_a_ts_beyond_the_engine_s_time(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text(f"ts,id,v\n1,1,5\n{2**63},2,6\n")
    with pytest.raises(SourceDataError, match=rf"^{path}:3: ts {2**63} is out of range"):
        list(read_rows(path, SCHEMA, plan.Kind.STREAM))


def test_query_run_reports_the_bad_value_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = tmp_path / "q.cql"
    query.write_text("REGISTER STREAM s (id integer, v integer)\nSELECT v FROM s\n")
    data = tmp_path / "s.csv"
    data.write_text(f"ts,id,v\n1,1,{-(2**63)}\n")
    assert main(["query", "run", str(query), "--stream", f"s={data}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"semiactive: {data}:2: column v:") and err.count("\n") == 1


# ---- computed values at the wire ------------------------------------------------------


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 10**30])
def test_encoding_a_computed_integer_beyond_64_bits_names_it(value: int) -> None:
    codec = RowCodec(SCHEMA, plan.Kind.STREAM)
    with pytest.raises(OutOfRangeError, match=rf"row at ts 7: column v = {value} is outside the 64-bit"):
        codec.encode([(5, 1, 1, 1, 2), (7, 2, 1, 3, value)])


def test_a_computed_null_sentinel_is_refused_not_turned_into_null() -> None:
    codec = RowCodec(SCHEMA, plan.Kind.RELATION)
    with pytest.raises(OutOfRangeError, match=rf"column v = {INT_NULL} is outside"):
        codec.encode([(7, 2, -1, 3, INT_NULL)])


def test_null_and_the_ends_of_the_range_still_travel() -> None:
    codec = RowCodec(SCHEMA, plan.Kind.RELATION)
    rows = [(1, 1, 1, INT_MIN, None), (2, 2, -1, INT_MAX, 0)]
    assert codec.decode(codec.encode(rows), 1, 2) == rows


def test_an_overflowing_sum_fails_at_the_wire_with_the_column() -> None:
    program = compile_program(
        "REGISTER STREAM s (id integer, v integer)\nSELECT SUM(v) AS total FROM s [Range 10]", file="q.cql"
    )
    engine = Engine(program)
    engine.push("s", [(1, 1, 1, 1, INT_MAX), (2, 2, 1, 2, INT_MAX)])
    out = engine.advance(2)[program.last_query]
    assert out[-1][3] == 2 * INT_MAX  # exact inside the stage
    root = program.query(program.last_query)
    with pytest.raises(OutOfRangeError, match=r"column total = 18446744073709551614 is outside"):
        RowCodec(root.schema, root.kind).encode(out)


def test_an_integer_too_large_for_a_float_is_an_evaluation_error() -> None:
    product = " * ".join(["v"] * 20)
    program = compile_program(
        f"REGISTER STREAM s (id integer, v integer)\nSELECT {product} * 1.5 AS x FROM s"
    )
    inputs = {"s": [(1, 1, 1, 1, INT_MAX)]}
    with pytest.raises(SourceDataError, match="cannot evaluate the program up to instant 1: int too large"):
        embedded.execute(program, inputs)
    engine = Engine(program)
    engine.push("s", inputs["s"])
    with pytest.raises(EvaluationError):
        engine.advance(1)


async def test_a_sender_stops_with_the_out_of_range_error_not_silently() -> None:
    """What a stage's sender does with such a row: its task ends with the
    error naming the column (the daemon logs it and exits), nothing is sent."""
    edge = Edge("up", "down", "s", SCHEMA, plan.Kind.STREAM, 0)
    log = OutputLog()
    log.add_edge(edge.id)
    log.append([(1, 1, 1, 7, 1), (2, 2, 1, 8, 2**63)], 2)
    async with sink_server(edge) as (sink, port):
        sender = sender_to(edge, port, log)
        with pytest.raises(OutOfRangeError, match=r"row at ts 2: column v = 9223372036854775808"):
            await asyncio.wait_for(sender.run(), timeout=20)
    assert sink.delivered == 0
