"""What a CQL output means, per instant, and how two outputs are compared.

Every output, the engine's or the oracle's (:mod:`semiactive.oracle.sql_oracle`), is
reduced to a :data:`Timeline`: for each instant, the signed count of every
row. The engine's output encodes it this way:

- an element is ``(ts, lin, sign, v0, v1, ...)`` (:mod:`semiactive.node.engine.elements`);
  ``ts`` is the instant, ``lin`` is bookkeeping for HA and ignored here;
- a stream's elements are insertions (sign +1): the timeline counts the rows
  emitted at each instant;
- a relation's elements are its changes: +1 inserts a row, -1 deletes one.
  Only the net change of an instant is meaningful (the engine may emit ``-r``
  and ``+r`` in one instant, which changes nothing), so the timeline holds the
  net signed count and drops zeros;
- a sink's JSON Lines (:mod:`semiactive.node.connectors.jsonl`) carry the same: ``ts``, ``op``
  (``+``/``-``, relations only) and the columns by name; ``seq`` is delivery
  order and ignored here.

Order within an instant is not part of the comparison: docs/cql.md defines it
only for ``UNION ALL`` (left first); two outputs agree when every instant has
the same multiset. Floats agree within a relative tolerance (``AVG`` of
integers is rounded by SQLite and by Python on different paths); an integer
and a float never agree (the result types are defined). NaN is NULL (both
print ``null``); with ``json_values`` so are infinities, as in a sink's file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Row = tuple[Any, ...]
Timeline = dict[int, dict[Row, int]]

REL_TOL = 1e-9
ABS_TOL = 1e-12


def _add(timeline: Timeline, ts: int, row: Row, count: int) -> None:
    rows = timeline.setdefault(ts, {})
    total = rows.get(row, 0) + count
    if total:
        rows[row] = total
    else:
        rows.pop(row, None)
        if not rows:
            del timeline[ts]


def stream_timeline(rows: Iterable[tuple[int, Row]]) -> Timeline:
    """A stream given as ``(ts, values)`` pairs."""
    timeline: Timeline = {}
    for ts, row in rows:
        _add(timeline, ts, tuple(row), 1)
    return timeline


def element_timeline(elements: Iterable[Sequence[Any]]) -> Timeline:
    """The engine's elements ``(ts, lin, sign, values...)``, stream or relation."""
    timeline: Timeline = {}
    for e in elements:
        _add(timeline, int(e[0]), tuple(e[3:]), int(e[2]))
    return timeline


def record_timeline(records: Iterable[Mapping[str, Any]], names: Sequence[str]) -> Timeline:
    """A sink's JSON Lines records; ``op`` ``-`` is a deletion."""
    timeline: Timeline = {}
    for rec in records:
        sign = -1 if rec.get("op") == "-" else 1
        _add(timeline, int(rec["ts"]), tuple(rec.get(n) for n in names), sign)
    return timeline


def _tag(value: Any, json_values: bool) -> tuple[int, Any]:
    """A value with its kind, so that ``2`` and ``2.0`` stay different rows."""
    if value is None:
        return (0, None)
    if isinstance(value, float):
        if math.isnan(value) or (json_values and math.isinf(value)):
            return (0, None)
        return (2, value)
    if isinstance(value, int) and not isinstance(value, bool):
        return (1, value)
    return (3, value)


def _close(a: tuple[tuple[int, Any], ...], b: tuple[tuple[int, Any], ...]) -> bool:
    if len(a) != len(b):
        return False
    for (ka, va), (kb, vb) in zip(a, b, strict=True):
        if ka != kb:
            return False
        if va != vb and not (ka == 2 and math.isclose(va, vb, rel_tol=REL_TOL, abs_tol=ABS_TOL)):
            return False
    return True


def _show(row: Row) -> str:
    return "(" + ", ".join(repr(v) for v in row) + ")"


@dataclass(frozen=True)
class Difference:
    """One instant where the outputs differ: ``(row, oracle count, engine
    count)`` for every row whose counts differ (net signed counts for a
    relation, so ``-1`` is a deletion)."""

    instant: int
    rows: tuple[tuple[Row, int, int], ...]
    other: str = "engine"

    def describe(self) -> str:
        parts = [f"{_show(row)} oracle {o:+d}, {self.other} {e:+d}" for row, o, e in self.rows[:4]]
        more = f" and {len(self.rows) - 4} more rows" if len(self.rows) > 4 else ""
        return f"at instant {self.instant}: " + "; ".join(parts) + more


@dataclass
class Comparison:
    """The outcome of :func:`compare`: ``instants`` is how many instants
    had output on either side."""

    instants: int = 0
    differences: list[Difference] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences

    def describe(self, limit: int = 3) -> str:
        if self.identical:
            return f"identical over {self.instants:,} instants with output"
        shown = "; ".join(d.describe() for d in self.differences[:limit])
        return f"{len(self.differences)} of {self.instants:,} instants differ, first {shown}"


def _instant(oracle: Mapping[Row, int], engine: Mapping[Row, int], json_values: bool) -> list[list[Any]]:
    """The rows of one instant whose counts differ once rows equal within
    the float tolerance are paired up: ``[key, row, oracle, engine]``."""
    table: dict[tuple[tuple[int, Any], ...], list[Any]] = {}
    for side, rows in ((2, oracle), (3, engine)):
        for row, count in rows.items():
            key = tuple(_tag(v, json_values) for v in row)
            entry = table.setdefault(key, [key, row, 0, 0])
            entry[side] += count
    open_ = [entry for entry in table.values() if entry[2] != entry[3]]
    for a in open_:
        for b in open_:
            surplus_a, surplus_b = a[3] - a[2], b[3] - b[2]
            if a is b or surplus_a <= 0 or surplus_b >= 0 or not _close(a[0], b[0]):
                continue
            moved = min(surplus_a, -surplus_b)
            a[2] += moved
            b[2] -= moved
    return [entry for entry in open_ if entry[2] != entry[3]]


def compare(
    oracle: Timeline,
    engine: Timeline,
    *,
    upto: int | None = None,
    json_values: bool = False,
    other: str = "engine",
) -> Comparison:
    """Compare instant by instant (up to ``upto`` if given) as multisets;
    ``other`` names the second side in descriptions."""
    instants = sorted(set(oracle) | set(engine))
    if upto is not None:
        instants = [t for t in instants if t <= upto]
    result = Comparison(len(instants))
    for t in instants:
        rows = _instant(oracle.get(t, {}), engine.get(t, {}), json_values)
        if rows:
            rows.sort(key=lambda entry: repr(entry[1]))
            result.differences.append(Difference(t, tuple((r[1], r[2], r[3]) for r in rows), other))
    return result
