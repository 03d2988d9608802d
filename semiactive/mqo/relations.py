"""Window relations of the shared join nodes, and how their rows look.

A row is ``(ts, seq, values...)`` of one source; an item is ``(min_ts,
combo)`` where ``combo`` holds one row per source in sorted source order
(``plan``). A :class:`Relation` is a join input's window relation: items
hashed on the node's equi-join columns. Expiry is lazy (probes skip items
older than the window, a periodic sweep drops them), as the MQO paper's garbage
collector.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from semiactive.mqo.query import Column, Comparison, Literal

Row = tuple[Any, ...]
Combo = tuple[Row, ...]
Item = tuple[int, Combo]
KeyFn = Callable[[Combo], Any]

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class Layout:
    """Where a column's value is in a combo of some sources."""

    def __init__(self, sources: Sequence[str], schemas: Mapping[str, Mapping[str, int]]) -> None:
        self.sources = tuple(sources)
        self.position = {s: i for i, s in enumerate(self.sources)}
        self.schemas = schemas

    def getter(self, column: Column) -> Callable[[Combo], Any]:
        p = self.position[column.source]
        c = self.schemas[column.source][column.name]
        return lambda combo: combo[p][c]

    def key(self, columns: Sequence[Column]) -> KeyFn:
        """The hash key of a combo: one value, or a tuple of several (``()`` for none)."""
        getters = [self.getter(c) for c in columns]
        if len(getters) == 1:
            return getters[0]
        return lambda combo: tuple(g(combo) for g in getters)

    def test(self, comparisons: Sequence[Comparison]) -> Callable[[Combo], bool] | None:
        """A predicate over combos that holds when every comparison does
        (a type mismatch in an ordering comparison does not hold)."""
        if not comparisons:
            return None
        checks = []
        for c in comparisons:
            left = self._operand(c.left)
            right = self._operand(c.right)
            checks.append((_OPS[c.op], left, right))

        def holds(combo: Combo) -> bool:
            try:
                return all(op(left(combo), right(combo)) for op, left, right in checks)
            except TypeError:
                return False

        return holds

    def _operand(self, operand: Column | Literal) -> Callable[[Combo], Any]:
        if isinstance(operand, Literal):
            value = operand.value
            return lambda combo: value
        return self.getter(operand)

    def insert_at(self, source: str) -> int:
        """Where a row of ``source`` goes in a combo of ``sources + source``."""
        return sum(1 for s in self.sources if s < source)


class Relation:
    """A window relation: items hashed on ``columns`` (from a ``layout``)."""

    def __init__(self, layout: Layout, columns: Sequence[Column]) -> None:
        self.layout = layout
        self.columns = tuple(columns)
        self.key_of = layout.key(self.columns)
        self.index: dict[Any, list[Item]] = {}
        self.size = 0

    def insert(self, items: Iterable[Item]) -> None:
        index = self.index
        key_of = self.key_of
        n = 0
        for item in items:
            key = key_of(item[1])
            bucket = index.get(key)
            if bucket is None:
                index[key] = [item]
            else:
                bucket.append(item)
            n += 1
        self.size += n

    def probe(self, key: Any) -> list[Item]:
        return self.index.get(key, _EMPTY)

    def sweep(self, lo: int) -> None:
        """Drop the items older than ``lo`` (the garbage collector)."""
        kept: dict[Any, list[Item]] = {}
        size = 0
        for key, bucket in self.index.items():
            live = [item for item in bucket if item[0] >= lo]
            if live:
                kept[key] = live
                size += len(live)
        self.index = kept
        self.size = size

    def items(self) -> Iterator[Item]:
        for bucket in self.index.values():
            yield from bucket

    def copy(self, columns: Sequence[Column] | None = None) -> Relation:
        """A copy, hashed on ``columns`` (default: the same ones)."""
        out = Relation(self.layout, self.columns if columns is None else columns)
        if out.columns == self.columns:
            out.index = {k: list(v) for k, v in self.index.items()}
            out.size = self.size
        else:
            out.insert(self.items())
        return out


_EMPTY: list[Item] = []
