"""Rows on the wire: fixed-size little-endian records, one struct per edge.

A batch carries ``count`` rows with consecutive ``seq`` starting at
``first_seq``, so seq is not repeated per row. A row is ``ts`` (int64), then
``sign`` (int8, relations only), then the attributes: integer int64, float
float64, byte 1 byte, char(n) n bytes UTF-8, NUL-padded. NULL, which only
``/`` and ``%`` by zero and CASE without ELSE can produce, travels as
INT64_MIN or NaN. A column the plan says cannot be NULL is checked on
decoding: an integer NULL there refuses the batch (:class:`CodecError`; a
peer's bytes, and the stage's generated code does not guard such a column),
and a NaN stays a NaN (a float the sender computed, e.g. inf - inf).

An integer a query computed beyond int64, or equal to INT64_MIN (which
would arrive as NULL), cannot travel: :meth:`RowCodec.encode` raises
:class:`OutOfRangeError` naming the row, column and value. The check costs
one comparison per integer: ``struct`` itself refuses values beyond int64,
and INT64_MIN is turned into such a value; the slow path then finds the
culprit.

Decoding and encoding are generated list comprehensions over
``struct.iter_unpack`` / ``Struct.pack``: about half a microsecond a row,
which keeps a 100,000 tuples/s chain within two cores.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

from semiactive.node.cql import plan
from semiactive.node.engine.elements import VALUES, Element

INT_MIN, INT_MAX = plan.INT_MIN, plan.INT_MAX
INT_NULL = INT_MIN - 1
_BEYOND = 2**64  # what INT_NULL is encoded as: struct refuses it


class CodecError(ValueError):
    """Bytes that are not a whole number of rows of this edge's layout, or
    rows that cannot be encoded in it."""


class OutOfRangeError(CodecError):
    """A row holds an integer outside [INT_MIN, INT_MAX]: a value a query
    computed (an overflowing SUM, a product) that int64 cannot carry."""


def wire_size(schema: plan.Schema) -> int:
    """Bytes of one stream row of ``schema`` on the wire: ``ts`` and the
    attributes (what a synthetic source's ``tuple_bytes`` must cover)."""
    size = 8
    for c in schema.columns:
        name = c.type.name
        size += (
            8
            if name in (plan.TypeName.INTEGER, plan.TypeName.FLOAT)
            else (1 if name is plan.TypeName.BYTE else c.type.length)
        )
    return size


def _null_float(v: float) -> float | None:
    return None if math.isnan(v) else v


class WireRows(Sequence[Element]):
    """Rows that already hold their wire records
    (:class:`~semiactive.node.sections.record_rows.RecordRows`): encoding
    them is a copy of their bytes when the layouts match."""

    def wire_bytes(self, fingerprint: str) -> bytes | None:
        raise NotImplementedError


class RowCodec:
    def __init__(self, schema: plan.Schema, kind: plan.Kind) -> None:
        self.schema = schema
        self.kind = kind
        relation = kind is plan.Kind.RELATION
        fmt = "<q" + ("b" if relation else "")
        dec: list[str] = []
        enc: list[str] = []
        for i, column in enumerate(schema.columns):
            var = f"v{i}"
            name = column.type.name
            if name is plan.TypeName.INTEGER:
                fmt += "q"
                if column.nullable:
                    dec.append(f"(None if {var} == {INT_NULL} else {var})")
                else:
                    dec.append(f"({var} if {var} != {INT_NULL} else _not_null({i}))")
                enc.append(f"({INT_NULL} if {var} is None else {var} if {var} != {INT_NULL} else {_BEYOND})")
            elif name is plan.TypeName.FLOAT:
                fmt += "d"
                # A column that cannot be NULL keeps a computed NaN (inf - inf) a NaN.
                dec.append(f"_nf({var})" if column.nullable else var)
                enc.append(f"(_nan if {var} is None else {var})")
            elif name is plan.TypeName.BYTE:
                fmt += "c"
                dec.append(f"{var}.decode('latin-1')")
                enc.append(f"{var}.encode('latin-1')")
            elif name is plan.TypeName.CHAR:
                fmt += f"{column.type.length}s"
                dec.append(f"{var}.rstrip(b'\\0').decode('utf-8', 'replace')")
                enc.append(f"{var}.encode('utf-8')")
            else:
                raise TypeError(f"column {column.name} of type {column.type} cannot travel")
        self.struct = struct.Struct(fmt)
        self.row_size = self.struct.size
        self._fingerprint = f"{kind.value}:{fmt}:" + ",".join(schema.names)
        names = ", ".join(["ts"] + (["sg"] if relation else []) + [f"v{i}" for i in range(len(schema))])
        sign = "sg" if relation else "1"
        values = "".join(f", {d}" for d in dec)
        namespace: dict[str, Any] = {
            "_nf": _null_float,
            "_nan": math.nan,
            "_S": self.struct,
            "_not_null": self._refuse_null,
        }
        self._decode: Callable[[bytes, int], list[Element]] = eval(  # noqa: S307
            f"lambda blob, s0: [(ts, s0 + i, {sign}{values}) for i, ({names},) "
            f"in enumerate(_S.iter_unpack(blob))]",
            namespace,
        )
        # Rows unpacked into locals: cheaper than indexing each field.
        pack_args = ", ".join(["ts"] + (["sg"] if relation else []) + enc)
        fields = ", ".join(["ts", "_lin", "sg"] + [f"v{i}" for i in range(len(schema))])
        self._encode: Callable[[Sequence[Element]], bytes] = eval(  # noqa: S307
            f"lambda rows: b''.join([_pack({pack_args}) for ({fields},) in rows])",
            {**namespace, "_pack": self.struct.pack},
        )

    def decode(self, blob: bytes, first_seq: int, count: int) -> list[Element]:
        """Rows as elements ``(ts, seq, sign, values...)``: the input
        section's lineage of a row is its seq on the edge."""
        if len(blob) != count * self.row_size:
            raise CodecError(
                f"batch of {len(blob)} bytes does not hold {count} rows of {self.row_size} bytes"
            )
        try:
            return self._decode(blob, first_seq)
        except (struct.error, UnicodeDecodeError) as exc:  # pragma: no cover - sizes checked
            raise CodecError(str(exc)) from exc

    def _refuse_null(self, index: int) -> None:
        raise CodecError(f"column {self.schema.columns[index].name} cannot be NULL, and a row holds NULL")

    def encode(self, elements: Sequence[Element]) -> bytes:
        if isinstance(elements, WireRows):
            blob = elements.wire_bytes(self._fingerprint)
            if blob is not None:
                return blob
        try:
            return self._encode(elements)
        except (struct.error, AttributeError, TypeError, ValueError) as exc:
            culprit = self._out_of_range(elements)
            if culprit is not None:
                raise OutOfRangeError(f"cannot encode a row of {self.describe()}: {culprit}") from exc
            raise CodecError(f"cannot encode a row of {self.describe()}: {exc}") from exc

    def _out_of_range(self, elements: Sequence[Element]) -> str | None:
        """The first integer of ``elements`` that int64 cannot carry, described."""
        integers = [
            (VALUES + i, c.name)
            for i, c in enumerate(self.schema.columns)
            if c.type.name is plan.TypeName.INTEGER
        ]
        for e in elements:
            if type(e[0]) is int and not INT_MIN <= e[0] <= INT_MAX:
                return f"ts {e[0]} is outside the 64-bit range"
            for index, name in integers:
                value = e[index]
                if type(value) is int and not INT_MIN <= value <= INT_MAX:
                    return (
                        f"row at ts {e[0]}: column {name} = {value} is outside the 64-bit integer range "
                        f"[{INT_MIN}, {INT_MAX}] (-2^63 is reserved for NULL)"
                    )
        return None

    def describe(self) -> str:
        cols = ", ".join(f"{c.name} {c.type}" for c in self.schema.columns)
        return f"{self.kind.value} ({cols})"

    def fingerprint(self) -> str:
        """What both ends of an edge must agree on."""
        return self._fingerprint
