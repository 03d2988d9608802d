"""A broker message is checked like a file row; a bad one is rejected with
one of a few reasons (the label of semiactive_source_rejected_total)."""

from __future__ import annotations

import pytest

from semiactive.node.connectors.message_rows import MessageDecoder, Rejected
from semiactive.node.cql import plan

SCHEMA = plan.Schema(
    (plan.Column("id", plan.INTEGER), plan.Column("name", plan.char(4)), plan.Column("x", plan.FLOAT))
)


def test_a_json_message_is_a_row() -> None:
    decoder = MessageDecoder(SCHEMA, "json")
    assert decoder.decode(b'{"ts": 7, "id": 1, "name": "ab", "x": 0.5, "other": true}') == (7, (1, "ab", 0.5))


def test_a_csv_message_is_a_row() -> None:
    decoder = MessageDecoder(SCHEMA, "csv")
    assert decoder.decode(b'7,1,"a,b",2\n') == (7, (1, "a,b", 2.0))


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\xff", "malformed"),
        (b"{", "malformed"),
        (b"[1]", "malformed"),
        (b"null", "malformed"),
        (b'{"id": 1, "name": "a", "x": 1}', "missing"),
        (b'{"ts": 1, "name": "a", "x": 1}', "missing"),
        (b'{"ts": 1, "id": null, "name": "a", "x": 1}', "missing"),
        (b'{"ts": "1", "id": 1, "name": "a", "x": 1}', "type"),
        (b'{"ts": 1.5, "id": 1, "name": "a", "x": 1}', "type"),
        (b'{"ts": true, "id": 1, "name": "a", "x": 1}', "type"),
        (b'{"ts": 4611686018427387904, "id": 1, "name": "a", "x": 1}', "type"),
        (b'{"ts": 1, "id": 1.5, "name": "a", "x": 1}', "type"),
        (b'{"ts": 1, "id": 9223372036854775808, "name": "a", "x": 1}', "type"),
        (b'{"ts": 1, "id": 1, "name": "abcde", "x": 1}', "type"),
        (b'{"ts": 1, "id": 1, "name": "a", "x": "NaN"}', "type"),
    ],
)
def test_a_bad_json_message_is_rejected_with_its_reason(payload: bytes, reason: str) -> None:
    with pytest.raises(Rejected) as caught:
        MessageDecoder(SCHEMA, "json").decode(payload)
    assert caught.value.reason == reason


@pytest.mark.parametrize(
    ("payload", "reason"),
    [(b"1,2,ab", "malformed"), (b"1,2,ab,3,4", "malformed"), (b"x,2,ab,3", "type"), (b"1,2,ab,y", "type")],
)
def test_a_bad_csv_message_is_rejected_with_its_reason(payload: bytes, reason: str) -> None:
    with pytest.raises(Rejected) as caught:
        MessageDecoder(SCHEMA, "csv").decode(payload)
    assert caught.value.reason == reason
