"""Seed 003's query semantics, plainly: the oracle of the tests.

At each arrival time s of one of its masters (after it was registered, up
to when it was removed) a query outputs every combination of one row per
source, all with timestamps in [s - window, s] (and after its registration),
satisfying its WHERE clause, that it has not output before. Nested loops
and a set of what was output: nothing shared, nothing clever.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from semiactive.mqo.clocks import Clock
from semiactive.mqo.query import Column, ContinuousQuery
from semiactive.mqo.relations import Combo, Layout, Row
from semiactive.mqo.stage import MqoStageSpec, OutputRows, check_registration


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


Life = tuple[ContinuousQuery, int | None, int | None]  # query, registered after, removed at


def reference_output(
    spec: MqoStageSpec, streams: Mapping[str, Sequence[Row]], end: int
) -> list[tuple[Any, ...]]:
    """The stage's output computed by :mod:`semiactive.oracle.mqo_reference` from complete
    input streams of elements, registrations included: what a sink of the
    stage must hold. A query registered at t sees what arrives after t; one
    removed at t fires last before t."""
    lives: list[Life] = []
    live: dict[str, int] = {}
    for q in spec.queries:
        live[q.name] = len(lives)
        lives.append((q, None, None))
    registry = sorted(streams.get(spec.registry, ()) if spec.registry else (), key=lambda e: (e[0], e[1]))
    for row in registry:
        t, op, name, text = row[0], row[3], row[4], row[5]
        query, refused = check_registration(spec, set(live), op, name, text)
        if refused is not None:
            continue
        if query is None:
            i = live.pop(name)
            lives[i] = (lives[i][0], lives[i][1], t - 1)
        else:
            live[name] = len(lives)
            lives.append((query, t, None))
    rows = OutputRows(spec, queries=[q for q, _, _ in lives])
    at: dict[int, dict[str, list[Combo]]] = defaultdict(dict)
    for q, after, removed in lives:
        for s, combos in reference_results(q, streams, rows.schemas, spec.clocks, end, after, removed):
            if combos:
                at[s][q.name] = combos
    return [row for t in sorted(at) for row in rows.rows(t, at[t])]
