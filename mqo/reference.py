"""Seed 003's query semantics, plainly: the oracle of the tests.

At each arrival time s of one of its masters (after it was registered, up
to when it was removed) a query outputs every combination of one row per
source, all with timestamps in [s - window, s] (and after its registration),
satisfying its WHERE clause, that it has not output before. Nested loops
and a set of what was output: nothing shared, nothing clever.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from mqo.clocks import Clock
from mqo.query import Column, ContinuousQuery
from mqo.relations import Combo, Layout, Row


def reference_results(
    query: ContinuousQuery,
    streams: Mapping[str, Sequence[Row]],
    schemas: Mapping[str, Mapping[str, int]],
    clocks: Mapping[str, Clock],
    end: int,
    registered_after: int | None = None,
    removed_at: int | None = None,
) -> list[tuple[int, list[Combo]]]:
    """``(s, combos)`` per master arrival s in ``(registered_after, min(end, removed_at)]``."""
    start = -(2**62) if registered_after is None else registered_after
    stop = end if removed_at is None else min(end, removed_at)
    times: set[int] = set()
    for m in query.masters:
        if m in clocks:
            times.update(clocks[m].ticks(max(start, -1), stop))  # event time starts at 0
        else:
            times.update(r[0] for r in streams.get(m, ()) if start < r[0] <= stop)
    sources = sorted(query.sources)
    test = Layout(sources, schemas).test(query.where)
    emitted: set[tuple[tuple[str, int], ...]] = set()
    out = []
    for s in sorted(times):
        lo = s - query.window if query.window is not None else -(2**62)
        candidates = [
            [r for r in streams.get(src, ()) if lo <= r[0] <= s and r[0] > start] for src in sources
        ]
        now = []
        for combo in _product(sources, candidates, query, schemas):
            identity = tuple((src, r[1]) for src, r in zip(sources, combo, strict=True))
            if identity in emitted or (test is not None and not test(combo)):
                continue
            emitted.add(identity)
            now.append(combo)
        out.append((s, now))
    return out


def _product(
    sources: Sequence[str],
    candidates: Sequence[Sequence[Row]],
    query: ContinuousQuery,
    schemas: Mapping[str, Mapping[str, int]],
) -> Iterator[Combo]:
    """The cartesian product of the candidates, narrowed by each equality
    between a source and one before it (a dictionary lookup instead of a
    scan, so that a check of a busy run finishes); every predicate is still
    tested on the whole combination by the caller."""
    partial: list[Combo] = [()]
    for k, source in enumerate(sources):
        rows = candidates[k]
        link = next(
            (
                (mine, other)
                for c in query.where
                if c.op == "="
                for mine, other in ((c.left, c.right), (c.right, c.left))
                if isinstance(mine, Column)
                and isinstance(other, Column)
                and mine.source == source
                and other.source in sources[:k]
            ),
            None,
        )
        if link is None:
            partial = [(*combo, row) for combo in partial for row in rows]
            continue
        mine, other = link
        at = schemas[source][mine.name]
        where = sources.index(other.source)
        col = schemas[other.source][other.name]
        index: dict[object, list[Row]] = {}
        for row in rows:
            index.setdefault(row[at], []).append(row)
        partial = [(*combo, row) for combo in partial for row in index.get(combo[where][col], ())]
    yield from partial
