"""One broker message as one row of a stream, or the reason it is not.

A Kafka or NATS source reads messages written by programs it does not
control, so every message is checked like a file row (:func:`convert`) and a
bad one is *rejected*, never fatal: the source sends it to its dead letters
with the :class:`Rejected` reason and goes on. Reasons are a small fixed set
(they label ``semiactive_source_rejected_total``):

- ``malformed``: not UTF-8, not a JSON object, not one CSV line of the
  right width;
- ``missing``: no ``ts`` or no value for a column;
- ``type``: a value that does not fit its column, a ``ts`` that is not an
  integer instant;
- ``late``: later than the source's bounded out-of-orderness allows
  (decided by :class:`~semiactive.node.connectors.event_time_merge.EventTimeMerge`).

Formats: ``json``, one object with ``ts`` and every column (other keys are
ignored); ``csv``, one line ``ts,<columns in schema order>``.
"""

from __future__ import annotations

import csv
import json
from typing import Any, Literal

from semiactive.node.connectors.sources import INT_MAX, INT_MIN, TS_MAX, TS_MIN, SourceDataError, convert
from semiactive.node.cql import plan

Reason = Literal["malformed", "missing", "type", "late"]
REASONS: tuple[Reason, ...] = ("malformed", "missing", "type", "late")


class Rejected(SourceDataError):
    """A message that is no row of the stream; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason: Reason = reason
        self.detail = detail


def _plain_integer(value: Any) -> bool:
    return type(value) is int and INT_MIN <= value <= INT_MAX


_PLAIN = {plan.TypeName.INTEGER: _plain_integer}


def json_text(value: Any) -> str | None:
    """A JSON value as the text :func:`convert` parses (1.5 is no integer,
    true no number, null no value)."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def event_ts(value: Any) -> int:
    """A ``ts`` (a JSON integer, or a CSV field's text): an integer instant
    the cluster can carry."""
    ts: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        ts = value
    elif isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        ts = int(value)
    if ts is None:
        raise Rejected("type", f"ts must be an integer, got {json.dumps(value)[:40]}")
    if not TS_MIN <= ts <= TS_MAX:
        raise Rejected("type", f"ts {ts} is out of range [{TS_MIN}, {TS_MAX}]")
    return ts


class MessageDecoder:
    """Turns a message's payload into ``(ts, values)`` for ``schema``."""

    def __init__(self, schema: plan.Schema, format: Literal["json", "csv"]) -> None:
        self.columns = schema.columns
        self.format = format
        # A JSON value that already has its column's Python type is taken
        # as it is (checked for range); anything else goes through the
        # text a file row would have, so both accept and refuse the same.
        self._plain = [_PLAIN.get(c.type.name) for c in self.columns]

    def decode(self, payload: bytes) -> tuple[int, tuple[Any, ...]]:
        try:
            text = payload.decode()
        except UnicodeDecodeError:
            raise Rejected("malformed", "not UTF-8 text") from None
        if self.format == "csv":
            return self._csv(text)
        return self._json(text)

    def _json(self, text: str) -> tuple[int, tuple[Any, ...]]:
        try:
            obj = json.loads(text)
        except ValueError:
            raise Rejected("malformed", "not JSON") from None
        if not isinstance(obj, dict):
            raise Rejected("malformed", "not a JSON object")
        if "ts" not in obj:
            raise Rejected("missing", "no ts")
        ts = obj["ts"]
        if type(ts) is not int or not TS_MIN <= ts <= TS_MAX:
            if isinstance(ts, str):
                raise Rejected("type", "ts must be an integer, got a string")
            ts = event_ts(ts)
        values = []
        for column, plain in zip(self.columns, self._plain, strict=True):
            try:
                value = obj[column.name]
            except KeyError:
                raise Rejected("missing", f"no column {column.name}") from None
            if plain is None or not plain(value):
                value = self._value(json_text(value), column)
            values.append(value)
        return ts, tuple(values)

    def _csv(self, text: str) -> tuple[int, tuple[Any, ...]]:
        try:
            lines = list(csv.reader([text.rstrip("\r\n")], strict=True))
        except csv.Error:
            raise Rejected("malformed", "not one CSV line") from None
        fields = lines[0] if len(lines) == 1 else []
        if len(fields) != len(self.columns) + 1:
            raise Rejected("malformed", f"{len(fields)} fields, expected ts and {len(self.columns)} columns")
        ts = event_ts(fields[0])
        return ts, tuple(self._value(f, c) for f, c in zip(fields[1:], self.columns, strict=True))

    @staticmethod
    def _value(text: str | None, column: plan.Column) -> Any:
        if text is None:
            raise Rejected("missing", f"column {column.name}: no value")
        try:
            return convert(text, column, "message")
        except SourceDataError as exc:
            raise Rejected("type", str(exc).removeprefix("message: ")) from None
