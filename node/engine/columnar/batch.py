"""A column batch: the elements of one stream as arrays.

``ts`` and ``lin`` are int64 arrays (an element's event time and lineage,
:mod:`semiactive.node.engine.elements`); ``columns`` holds one array per
attribute. Every element is an insertion (streams carry only +1), so the
sign is implied. Integers are int64; a column computed past the int64
range is an object array of Python ints, so results stay exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from semiactive.node.engine.elements import VALUES, Element

Array = npt.NDArray[Any]
Int64s = npt.NDArray[np.int64]


def column_of(values: Sequence[object]) -> Array:
    """One attribute's values as an array: int64, float64, else objects
    (strings, ints past int64)."""
    if all(type(v) is int for v in values):
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            return np.array(values, dtype=object)
    if all(type(v) is float for v in values):
        return np.array(values, dtype=np.float64)
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


UNREAD: Int64s = np.empty(0, dtype=np.int64)  # a column no later step reads


@dataclass(frozen=True)
class ColumnBatch:
    ts: Int64s
    lin: Int64s
    columns: tuple[Array, ...]

    def __len__(self) -> int:
        return len(self.ts)

    @classmethod
    def empty(cls, width: int) -> ColumnBatch:
        none = np.empty(0, dtype=np.int64)
        return cls(none, none, tuple(np.empty(0, dtype=np.int64) for _ in range(width)))

    @classmethod
    def from_elements(cls, elements: Sequence[Element], width: int) -> ColumnBatch:
        """Columns of insertion elements ``(ts, lin, 1, v0, ...)``."""
        if not elements:
            return cls.empty(width)
        if any(e[2] != 1 for e in elements):
            raise ValueError("a column batch holds stream elements (sign +1) only")
        fields = list(zip(*elements, strict=True))
        return cls(
            np.array(fields[0], dtype=np.int64),
            np.array(fields[1], dtype=np.int64),
            tuple(column_of(fields[VALUES + i]) for i in range(width)),
        )

    def to_elements(self) -> list[Element]:
        """The same elements as the row engine's tuples (Python ints and
        floats, not numpy scalars, so they compare and encode alike)."""
        if not len(self):
            return []
        values = [python_values(c) for c in self.columns]
        ones = [1] * len(self)
        return list(zip(self.ts.tolist(), self.lin.tolist(), ones, *values, strict=True))

    def take(self, keep: npt.NDArray[np.bool_] | Int64s) -> ColumnBatch:
        return ColumnBatch(self.ts[keep], self.lin[keep], tuple(c[keep] for c in self.columns))

    def take_columns(self, index: Int64s, needed: set[int] | None, *, lineage: bool) -> ColumnBatch:
        """The rows at ``index``, copying only the ``needed`` columns (None:
        all) and the lineage if asked; the others are left empty, for
        steps that never read them."""
        columns = tuple(
            c[index] if needed is None or i in needed else UNREAD for i, c in enumerate(self.columns)
        )
        return ColumnBatch(self.ts[index], self.lin[index] if lineage else UNREAD, columns)

    def with_columns(self, columns: tuple[Array, ...]) -> ColumnBatch:
        return ColumnBatch(self.ts, self.lin, columns)


def python_values(column: Array) -> list[Any]:
    """Python values of a column; a char column read off the wire holds
    NUL-padded bytes (numpy drops the padding), text in the row engine."""
    values = column.tolist()
    if column.dtype.kind == "S":
        return [v.decode("utf-8", "replace") for v in values]
    return values  # type: ignore[no-any-return]


def concat(first: ColumnBatch, second: ColumnBatch) -> ColumnBatch:
    if not len(first):
        return second
    if not len(second):
        return first
    return ColumnBatch(
        np.concatenate((first.ts, second.ts)),
        np.concatenate((first.lin, second.lin)),
        tuple(_concat_column(a, b) for a, b in zip(first.columns, second.columns, strict=True)),
    )


def _concat_column(a: Array, b: Array) -> Array:
    if a.dtype == b.dtype or a.dtype.kind == b.dtype.kind == "S":  # bytes of two lengths join
        return np.concatenate((a, b))
    out = np.empty(len(a) + len(b), dtype=object)
    out[: len(a)] = a.tolist()
    out[len(a) :] = b.tolist()
    return out
