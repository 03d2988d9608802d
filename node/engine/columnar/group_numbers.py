"""Stable numbers for the groups of a GROUP BY, for the incremental grouped
window paths (:mod:`.grouped_range_sums`, :mod:`.grouped_partition_rows`).

A key keeps its number for as long as the caller keeps the group; numbers
are dense from 0, so a path can index arrays by them. Keys are int64,
bytes columns (text off the wire) or object columns of Python strings
(text in one process): all are hashable Python values once out of numpy.
numpy finds a call's distinct numbers and bytes in one sort, a dict its
distinct strings.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from semiactive.node.engine.columnar.batch import Array, Int64s
from semiactive.node.engine.columnar.window_aggregate import join


def numbered(key: Array) -> bool:
    """A key column :class:`GroupNumbers` takes: int64, bytes, or strings.
    Strings are not made bytes: numpy's bytes drop trailing NULs, which
    would make ``'a'`` and ``'a\\0'`` one group (on the wire they are one
    value, the codec strips them; in one process they are two). Any other
    object in a text column is refused: a number can equal one of another
    type (1 and 1.0), and which of them a group shows would then depend on
    the order they came in."""
    if key.dtype == np.int64 or key.dtype.kind == "S":
        return True
    return key.dtype.kind == "O" and {*map(type, key.tolist())} <= {str}


class GroupNumbers:
    def __init__(self, keys: int) -> None:
        self.numbers: dict[tuple[object, ...], int] = {}
        # Each number's key values, one array per key column.
        self.key_values: list[Array] = [np.empty(0, dtype=np.int64) for _ in range(keys)]

    def __len__(self) -> int:
        return len(self.numbers)

    def of(self, keys: Sequence[Array]) -> Int64s:
        """Each tuple's group number; keys not seen before get the next
        numbers (a Python step per distinct key of the call, not per tuple)."""
        n = len(keys[0]) if keys else 0
        if not n:
            return np.empty(0, dtype=np.int64)
        if len(keys) == 1:
            distinct, inverse = distinct_values(keys[0])
            rows: list[tuple[object, ...]] = [(k,) for k in distinct.tolist()]
            columns = [distinct]
        else:
            rank = row_numbers(keys, n)
            _, first, inverse = np.unique(rank, return_index=True, return_inverse=True)
            columns = [k[first] for k in keys]
            rows = list(zip(*(c.tolist() for c in columns), strict=True))
        numbers = self.numbers
        # map, not a Python loop: a join numbers every distinct row it takes
        known = np.fromiter(map(numbers.get, rows, [-1] * len(rows)), dtype=np.int64, count=len(rows))
        fresh = np.flatnonzero(known < 0)
        if len(fresh):
            start = len(numbers)
            known[fresh] = np.arange(start, start + len(fresh), dtype=np.int64)
            numbers.update(
                zip([rows[i] for i in fresh.tolist()], range(start, start + len(fresh)), strict=True)
            )
            self.key_values = [join(kept, c[fresh]) for kept, c in zip(self.key_values, columns, strict=True)]
        return known[inverse.reshape(-1)]

    def keep(self, live: Int64s) -> Int64s:
        """Keep only the groups ``live`` (sorted numbers), numbered 0, 1, ...
        in that order; forget the others' keys (a key seen again is then a
        new group). Returns the new number of each old one (-1: gone)."""
        number = np.full(len(self.numbers), -1, dtype=np.int64)
        number[live] = np.arange(len(live), dtype=np.int64)
        self.key_values = [k[live] for k in self.key_values]
        keys = zip(*(k.tolist() for k in self.key_values), strict=True) if self.key_values else iter([()])
        self.numbers = {key: i for i, key in enumerate(keys)}
        return number


def distinct_values(column: Array) -> tuple[Array, Int64s]:
    """A column's distinct values and each value's index among them. Strings
    through a dict, in order of first sight: a sort of Python objects costs
    a comparison call per step, 10x the hashing."""
    if column.dtype.kind != "O":
        distinct, inverse = np.unique(column, return_inverse=True)
        return distinct, inverse
    values = column.tolist()
    index = {v: i for i, v in enumerate(dict.fromkeys(values))}
    out = np.empty(len(index), dtype=object)
    out[:] = list(index)
    return out, np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))


def row_numbers(columns: Sequence[Array], n: int) -> Int64s:
    """A number per row of ``columns`` (``n`` rows), from 0 up, equal
    exactly where the rows are. Integer
    columns are packed into one int64 (each value from its column's least,
    times the spans of the columns after it) while the spans' product fits,
    and the packed rows ranked by one sort; other columns count by their
    distinct values' ranks. np.unique over rows views them as bytes: 7x
    slower; a rank per column, combined one column at a time: 5x."""
    packed = np.zeros(n, dtype=np.int64)
    if not n:
        return packed
    room = 1  # packed values are below this
    for column in columns:
        if column.dtype == np.int64:
            least = int(column.min())
            span, values = int(column.max()) - least + 1, column
        else:
            distinct, inverse = distinct_values(column)
            least, span, values = 0, len(distinct), inverse.reshape(-1)
        if room * span >= PACKED:
            packed, room = _ranked(packed)
            if room * span >= PACKED:  # a column of values far apart: its ranks
                distinct, inverse = distinct_values(values)
                least, span, values = 0, len(distinct), inverse.reshape(-1)
        packed = packed * span + (values - least)
        room *= span
    return _ranked(packed)[0]


#: Packed rows stay below this (so that a product of spans cannot wrap).
PACKED = 2**62


def _ranked(packed: Int64s) -> tuple[Int64s, int]:
    """Dense ranks of ``packed``, and how many distinct values there are."""
    distinct, inverse = np.unique(packed, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), len(distinct)
