"""A CSV file of numbers parsed a block of lines at a time by numpy
(``np.loadtxt``'s C parser, about 20 times the csv module's speed).

It is a fast path, never the definition: a block is taken only if every
line parses into exactly the header's fields with every value in range and
ts non-decreasing. Anything else (a quote, an empty or short line, a value
numpy reads differently from Python's ``int``/``float``, such as ``1_000``)
returns None, and the caller reads that block the csv module's way (from a
block with a quote on, the rest of the file), which locates the error or
reads what numpy refused. It applies to a stream whose columns are all
integer or float and whose header names exactly ``ts`` and those columns
(no others, none twice).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from semiactive.node.cql import plan

NUMPY_TYPES = {plan.TypeName.INTEGER: np.int64, plan.TypeName.FLOAT: np.float64}


@dataclass(frozen=True)
class Layout:
    """How a header's fields parse: the record type numpy fills, and the
    schema's columns in schema order."""

    dtype: np.dtype[Any]
    columns: tuple[str, ...]


@dataclass(frozen=True)
class NumericBlock:
    """Parsed lines: ts and the schema's columns, and the first line's seq."""

    ts: npt.NDArray[np.int64]
    columns: tuple[npt.NDArray[Any], ...]
    first_seq: int

    def __len__(self) -> int:
        return len(self.ts)

    def elements(self) -> Iterator[tuple[Any, ...]]:
        """``(ts, seq, 1, values...)`` with Python ints and floats, as the
        row path gives them."""
        seqs = range(self.first_seq, self.first_seq + len(self))
        ones = [1] * len(self)
        return zip(self.ts.tolist(), seqs, ones, *(c.tolist() for c in self.columns), strict=True)


def layout(header: Sequence[str], schema: plan.Schema) -> Layout | None:
    """The layout of a header, or None if the fast path does not apply."""
    types = {c.name: NUMPY_TYPES.get(c.type.name) for c in schema.columns}
    if len(set(header)) != len(header) or set(header) != {"ts", *types} or "ts" in types:
        return None
    if any(t is None for t in types.values()):
        return None
    fields = [(name, np.int64 if name == "ts" else types[name]) for name in header]
    return Layout(np.dtype(fields), tuple(c.name for c in schema.columns))


def parse(
    lines: list[str],
    shape: Layout,
    first_seq: int,
    last_ts: int | None,
    ts_bounds: tuple[int, int],
    int_bounds: tuple[int, int],
) -> NumericBlock | None:
    """The block's values, or None if any line is not taken as it is."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": blank lines only
            # No comments, no quotes: a '#' or '"' is not part of a number,
            # so a line with one fails here and goes the csv module's way.
            records = np.loadtxt(
                lines, delimiter=",", dtype=shape.dtype, comments=None, quotechar=None, ndmin=1
            )
    except ValueError:
        return None
    if len(records) != len(lines):  # numpy skips empty lines, the line numbers would move
        return None
    ts = np.ascontiguousarray(records["ts"])
    if not len(ts) or ts[0] < ts_bounds[0] or ts[-1] > ts_bounds[1] or np.any(ts[1:] < ts[:-1]):
        return None
    if last_ts is not None and ts[0] < last_ts:
        return None
    columns = tuple(np.ascontiguousarray(records[name]) for name in shape.columns)
    for column in columns:
        if column.dtype == np.int64:
            if column.min() < int_bounds[0] or column.max() > int_bounds[1]:
                return None
        elif not np.isfinite(column).all():
            return None
    return NumericBlock(ts, columns, first_seq)
