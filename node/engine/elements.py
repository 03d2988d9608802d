"""The element: the one record shape every operator passes on.

An element is a plain tuple ``(ts, lin, sign, v0, v1, ...)``:

- ``ts``: event time in ms of the instant the element belongs to;
- ``lin``: lineage, the oldest input position (stage-local, 1-based) this
  element depends on. The HA protocol's Level-1 cut is the smallest ``lin``
  still held in operator state (ha-protocol.md, "Level-1"). Derived elements
  carry a conservative (never larger) lineage;
- ``sign``: +1 for an insertion, -1 for a deletion. Streams only carry +1;
  relations are represented by their changes (Stanford STREAM's deltas);
- then the attribute values in schema order.

Plain tuples keep the hot loops cheap: a filter passes the same tuple object
on, and slicing ``e[VALUES:]`` gives the value row.
"""

from __future__ import annotations

from typing import Any

TS = 0
LIN = 1
SIGN = 2
VALUES = 3

Element = tuple[Any, ...]
Row = tuple[Any, ...]


def insert(ts: int, lin: int, values: Row) -> Element:
    return (ts, lin, 1, *values)


def delete(ts: int, lin: int, values: Row) -> Element:
    return (ts, lin, -1, *values)
