"""A stream edge's wire records read and written as columns.

The wire's rows are fixed-size little-endian records (:mod:`.codec`), so a
received batch already is a numpy structured array: :meth:`ColumnCodec.decode`
views the bytes as one (no copy, no per-row loop) and hands its fields on
as a :class:`ColumnBatch`; :meth:`ColumnCodec.encode` fills one array and
writes it with a single ``tobytes``. Both give exactly what
:class:`~semiactive.node.sections.codec.RowCodec` gives (tests compare
bytes and elements). numpy over Arrow by measurement: docs/lab/columnar.md.

A batch holding a NULL (INT64_MIN or NaN on the wire) is not decoded as
columns (``None``): the columnar engine has no NULLs, its rows keep the
row path. Nor is one with text that is not UTF-8: the row path decodes it
with replacement characters, so its bytes would not pass through as they
came.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from semiactive.node.cql import plan
from semiactive.node.engine.columnar.batch import Array, ColumnBatch
from semiactive.node.sections.codec import INT_MAX, INT_MIN, CodecError, OutOfRangeError

_INT64_MIN = INT_MIN - 1  # NULL on the wire


class ColumnCodec:
    def __init__(self, schema: plan.Schema) -> None:
        fields: list[tuple[str, str]] = [("ts", "<i8")]
        for i, column in enumerate(schema.columns):
            name = column.type.name
            if name is plan.TypeName.INTEGER:
                fields.append((f"v{i}", "<i8"))
            elif name is plan.TypeName.FLOAT:
                fields.append((f"v{i}", "<f8"))
            elif name is plan.TypeName.CHAR:
                fields.append((f"v{i}", f"S{column.type.length}"))
            else:
                raise TypeError(f"column {column.name} of type {column.type} has no column form")
        self.schema = schema
        self.dtype = np.dtype(fields)
        self.row_size = self.dtype.itemsize

    def decode(self, blob: bytes, first_seq: int, count: int) -> ColumnBatch | None:
        """The batch's columns (lineage: each row's seq), or None if it
        holds a NULL."""
        if len(blob) != count * self.row_size:
            raise CodecError(
                f"batch of {len(blob)} bytes does not hold {count} rows of {self.row_size} bytes"
            )
        return self.columns(np.frombuffer(blob, dtype=self.dtype, count=count), first_seq)

    def columns(self, records: np.ndarray[Any, Any], first_seq: int) -> ColumnBatch | None:
        """:meth:`decode` of records already viewed as this layout."""
        count = len(records)
        columns: list[Array] = []
        for i, column in enumerate(self.schema.columns):
            values = records[f"v{i}"]
            name = column.type.name
            if name is plan.TypeName.INTEGER and count and int(values.min()) == _INT64_MIN:
                return None
            if name is plan.TypeName.FLOAT and count and bool(np.isnan(values).any()):
                return None
            if name is plan.TypeName.CHAR and count and not _utf8(values, column.type.length):
                return None
            columns.append(values)
        lineage = np.arange(first_seq, first_seq + count, dtype=np.int64)
        return ColumnBatch(records["ts"], lineage, tuple(columns))

    def text_as_bytes(self, batch: ColumnBatch) -> ColumnBatch:
        """``batch`` (made from rows) with its text columns as the UTF-8
        bytes a block of records holds, so that a value is one key whichever
        way its rows came (a window stage groups rows of both). Not cut to
        the column's length: the row engine keeps a longer text whole until
        it is sent. A column holding a NULL stays as it is, for the engine
        to refuse as the row path does."""
        columns = list(batch.columns)
        for i, column in enumerate(self.schema.columns):
            values = columns[i]
            if column.type.name is not plan.TypeName.CHAR or values.dtype.kind != "O" or not len(values):
                continue
            texts = values.tolist()
            if all(type(v) is str for v in texts):
                columns[i] = np.array([v.encode("utf-8") for v in texts], dtype=bytes)
        return ColumnBatch(batch.ts, batch.lin, tuple(columns))

    def encode(self, batch: ColumnBatch) -> bytes:
        """The batch as wire records; an integer int64 cannot carry (or
        INT64_MIN, NULL's code) is :class:`OutOfRangeError`."""
        out = np.empty(len(batch), dtype=self.dtype)
        out["ts"] = batch.ts
        for i, (column, values) in enumerate(zip(self.schema.columns, batch.columns, strict=True)):
            name = column.type.name
            if name is plan.TypeName.INTEGER:
                values = self._integers(column.name, batch, values)
            elif name is plan.TypeName.CHAR and values.dtype.kind != "S":
                values = np.array(
                    [v if type(v) is bytes else v.encode("utf-8") for v in values.tolist()],
                    dtype=f"S{column.type.length}",
                )
            out[f"v{i}"] = values
        return out.tobytes()

    def _integers(self, name: str, batch: ColumnBatch, values: Array) -> Array:
        bad: np.ndarray
        if values.dtype == object:
            bad = np.array([not INT_MIN <= v <= INT_MAX for v in values.tolist()], dtype=bool)
        elif not len(values) or int(values.min()) != _INT64_MIN:
            return values
        else:
            bad = values == _INT64_MIN
        if len(bad) and bool(bad.any()):
            at = int(np.flatnonzero(bad)[0])
            stream = ", ".join(self.schema.names)
            raise OutOfRangeError(
                f"cannot encode a row of stream ({stream}): row at ts {int(batch.ts[at])}: "
                f"column {name} = {values[at]} is outside the 64-bit integer range [{INT_MIN}, {INT_MAX}] "
                "(-2^63 is reserved for NULL)"
            )
        return values.astype(np.int64) if values.dtype == object else values


def _utf8(values: np.ndarray[Any, Any], length: int) -> bool:
    """Every ``char(length)`` value is UTF-8: the column's bytes decode as a
    whole and no value starts inside a character (so none ends inside one
    either), at C speed."""
    raw = np.ascontiguousarray(values).view(np.uint8).reshape(-1, length)
    if bool(((raw[:, 0] & 0xC0) == 0x80).any()):
        return False
    try:
        raw.tobytes().decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
