"""JSON Lines output: the observable contract of sinks, ``query run`` and
source logs.

One object per line, fields in SELECT order:
``{"seq": 1, "ts": 1000, "id": 7, "val": 3.5}``, plus ``"op": "+"`` or ``"-"``
for changes of a relation. The formatter is generated per schema (an
f-string, strings through ``json.dumps``), several times faster than building
a dict and calling ``json.dumps`` per row. :class:`LineWriter` writes a
block of records (a columnar stage's, a synthetic source's) from its
columns, with no row tuple made.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.node.sections.codec import INT_NULL
from semiactive.node.sections.record_rows import RecordRows, has_record_form


def _number(v: Any) -> str:
    if v.__class__ is int:
        return repr(v)
    if v is None:
        return "null"
    if isinstance(v, float) and not math.isfinite(v):
        return "null"
    return repr(v)


def _text(v: Any) -> str:
    # json.dumps(ensure_ascii=False) escapes only '"', '\\' and control
    # characters, none of which a printable string has: such a string (a
    # pad, a name) is quoted as it is, 6x faster.
    if v.__class__ is str and v.isprintable() and '"' not in v and "\\" not in v:
        return '"' + v + '"'
    return "null" if v is None else json.dumps(v, ensure_ascii=False)


def _quoter(text: Callable[[Any], Any] = lambda v: v) -> tuple[dict[Any, str], Callable[[Any], str]]:
    """A cache of quoted text values and the function that fills it: a
    column's values repeat (a pad, a name), and a dict lookup costs a
    quarter of :func:`_text`'s checks. ``text``: a value's text (a char
    column's wire bytes are decoded as the row codec decodes them)."""
    quoted: dict[Any, str] = {}

    def quote(v: Any) -> str:
        line = _text(text(v))
        if len(quoted) >= 4096:
            quoted.clear()
        quoted[v] = line
        return line

    return quoted, quote


def formatter(schema: plan.Schema, kind: plan.Kind) -> Callable[[int, Element], str]:
    """``fmt(seq, element) -> line`` (with the trailing newline). An int
    or a finite float is written in place, with no call: ``{v}`` is its
    ``repr``, as :func:`_number` gives; anything else goes through it."""
    parts = ['{{"seq":{seq},"ts":{e[0]}']
    quoted, quote = _quoter()
    namespace: dict[str, Any] = {
        "_number": _number,
        "_Q": quoted,
        "_quote": quote,
        "_op": lambda s: "+" if s > 0 else "-",
    }
    if kind is plan.Kind.RELATION:
        parts.append(',"op":"{_op(e[2])}"')
    for i, column in enumerate(schema.columns):
        # Keys are constants in the namespace: no quoting issues in the source.
        namespace[f"_k{i}"] = "," + json.dumps(column.name, ensure_ascii=False) + ":"
        v = f"e[{3 + i}]"
        if column.type.is_text:
            value = f"_Q[{v}] if {v} in _Q else _quote({v})"
        elif column.type.name is plan.TypeName.FLOAT:
            value = f"{v} if {v}.__class__ is float and {v} - {v} == 0 else _number({v})"
        else:
            value = f"{v} if {v}.__class__ is int else _number({v})"
        parts.append(f"{{_k{i}}}{{{value}}}")
    parts.append("}}\\n")
    template = "".join(parts)
    return eval(f"lambda seq, e: f'{template}'", namespace)  # type: ignore[no-any-return]  # noqa: S307


class LineWriter:
    """Lines of rows: a :class:`RecordRows` block of a stream from its
    columns (``tolist`` per column, one f-string per row), anything else
    row by row through :func:`formatter`. The same text either way: a
    block holding a NULL or a non-finite float goes row by row."""

    def __init__(self, schema: plan.Schema, kind: plan.Kind) -> None:
        self.schema = schema
        self.row = formatter(schema, kind)
        self._block: Callable[..., str] | None = None
        if kind is plan.Kind.STREAM:
            self._block = _block_formatter(schema)

    def lines(self, rows: Sequence[Element]) -> str:
        if self._block is not None and isinstance(rows, RecordRows) and len(rows):
            columns = self._columns(rows)
            if columns is not None:
                seqs = range(rows.first_seq, rows.first_seq + len(rows))
                return self._block(seqs, rows.ts.tolist(), *columns)
        fmt = self.row
        return "".join([fmt(r[1], r) for r in rows])

    def _columns(self, rows: RecordRows) -> list[list[Any]] | None:
        out = []
        for i, column in enumerate(self.schema.columns):
            values = rows.records[f"v{i}"]
            name = column.type.name
            if name is plan.TypeName.INTEGER and int(values.min()) == INT_NULL:
                return None
            if name is plan.TypeName.FLOAT and not bool(np.isfinite(values).all()):
                return None
            out.append(values.tolist())
        return out


def _block_formatter(schema: plan.Schema) -> Callable[..., str] | None:
    """``block(seqs, ts, *columns) -> lines``: integers and finite floats
    in place, char columns' bytes (as on the wire) decoded as the row
    codec decodes them and quoted as :func:`_text` quotes, through a cache."""
    if not has_record_form(schema, plan.Kind.STREAM):
        return None
    quoted, quote = _quoter(lambda raw: raw.decode("utf-8", "replace"))
    namespace: dict[str, Any] = {"_Q": quoted, "_quote": quote}
    parts = ['{{"seq":{s},"ts":{t}']
    names = []
    for i, column in enumerate(schema.columns):
        namespace[f"_k{i}"] = "," + json.dumps(column.name, ensure_ascii=False) + ":"
        v = f"c{i}"
        names.append(v)
        value = f"_Q[{v}] if {v} in _Q else _quote({v})" if column.type.is_text else v
        parts.append(f"{{_k{i}}}{{{value}}}")
    parts.append("}}\\n")
    template = "".join(parts)
    args = ", ".join(["seqs", "ts", *names])
    loop = ", ".join(["s", "t", *names])
    source = f"lambda {args}: ''.join([f'{template}' for {loop} in zip({args})])"
    return eval(source, namespace)  # type: ignore[no-any-return]  # noqa: S307


def parse(line: str) -> dict[str, Any]:
    value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError("a JSON Lines record must be an object")
    return value
