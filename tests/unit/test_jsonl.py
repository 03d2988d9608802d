"""The JSON Lines contract of sinks, ``query run`` and source logs (node/connectors/jsonl.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.node.connectors.jsonl import formatter, parse
from semiactive.node.cql import plan


def _schema(*columns: tuple[str, plan.SqlType]) -> plan.Schema:
    return plan.Schema(tuple(plan.Column(name, t) for name, t in columns))


def test_stream_row_exact_text() -> None:
    fmt = formatter(_schema(("id", plan.INTEGER), ("val", plan.FLOAT)), plan.Kind.STREAM)
    # seq is the formatter's argument, not the element's lineage (7).
    assert fmt(1, (1000, 7, 1, 42, 3.5)) == '{"seq":1,"ts":1000,"id":42,"val":3.5}\n'


def test_relation_rows_have_op_after_ts() -> None:
    fmt = formatter(_schema(("k", plan.char(3)), ("n", plan.INTEGER)), plan.Kind.RELATION)
    assert fmt(4, (9, 1, 1, "abc", 2)) == '{"seq":4,"ts":9,"op":"+","k":"abc","n":2}\n'
    assert fmt(5, (10, 1, -1, "abc", 2)) == '{"seq":5,"ts":10,"op":"-","k":"abc","n":2}\n'


def test_null_and_non_finite_numbers_are_null() -> None:
    fmt = formatter(_schema(("q", plan.INTEGER), ("x", plan.FLOAT), ("c", plan.char(2))), plan.Kind.STREAM)
    line = fmt(1, (0, 1, 1, None, None, None))
    assert line == '{"seq":1,"ts":0,"q":null,"x":null,"c":null}\n'
    assert json.loads(fmt(2, (0, 1, 1, 1, float("inf"), "a")))["x"] is None
    assert json.loads(fmt(3, (0, 1, 1, 1, float("nan"), "a")))["x"] is None


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.1, "0.1"), (2.0, "2.0"), (-0.0, "-0.0"), (1e16, "1e+16"), (1.5e-7, "1.5e-07"), (1 / 3, repr(1 / 3))],
)
def test_floats_are_shortest_round_trip_and_valid_json(value: float, text: str) -> None:
    line = formatter(_schema(("x", plan.FLOAT)), plan.Kind.STREAM)(1, (0, 1, 1, value))
    assert line == f'{{"seq":1,"ts":0,"x":{text}}}\n'
    assert json.loads(line)["x"] == value


def test_strings_are_escaped_and_unicode_kept() -> None:
    fmt = formatter(_schema(("s", plan.char(40)), ("b", plan.BYTE)), plan.Kind.STREAM)
    text = 'say "hi"\\ \n\t\x01 é€'
    line = fmt(1, (0, 1, 1, text, '"'))
    assert line == '{"seq":1,"ts":0,"s":"say \\"hi\\"\\\\ \\n\\t\\u0001 é€","b":"\\""}\n'
    assert json.loads(line) == {"seq": 1, "ts": 0, "s": text, "b": '"'}
    assert line.count("\n") == 1  # one record, one line


def test_field_order_is_schema_order() -> None:
    schema = _schema(("z", plan.INTEGER), ("a", plan.INTEGER), ("m", plan.INTEGER))
    line = formatter(schema, plan.Kind.RELATION)(1, (5, 1, 1, 1, 2, 3))
    assert list(json.loads(line)) == ["seq", "ts", "op", "z", "a", "m"]
    assert line == '{"seq":1,"ts":5,"op":"+","z":1,"a":2,"m":3}\n'


def test_parse_takes_objects_only() -> None:
    assert parse('{"seq":1,"ts":2}') == {"seq": 1, "ts": 2}
    with pytest.raises(ValueError, match="object"):
        parse("[1, 2]")


@settings(max_examples=500, deadline=None)
@given(st.text() | st.sampled_from(["\u2028", "\ud800", "\x7f", "a\x00b", "\U0001f600", "\\", '"', ""]))
def test_text_is_what_json_dumps_writes(value: str) -> None:
    """The formatter quotes printable text itself (fast path): the same
    characters as ``json.dumps(ensure_ascii=False)``, whatever the text."""
    line = formatter(_schema(("s", plan.char(4000))), plan.Kind.STREAM)(1, (0, 1, 1, value))
    assert line == '{"seq":1,"ts":0,"s":' + json.dumps(value, ensure_ascii=False) + "}\n"


@pytest.mark.parametrize("value", [2**70, -(2**63), 0, 7])
def test_integers_are_json(value: int) -> None:
    line = formatter(_schema(("n", plan.INTEGER)), plan.Kind.STREAM)(1, (0, 1, 1, value))
    assert json.loads(line)["n"] == value
