"""An MQO stage of a cluster: many queries, one output stream.

What the topology knows of a stage that runs seed 003's shared execution
instead of a CQL program, and the one order its output rows take: at each
instant, the queries that fired by name, each query's results by the input
positions of their rows. That order depends on the semantics alone, not on
the clusters, the plans or when re-clustering happened, so a secondary (or a
replica rebuilt from a cut) emits the primary's rows at the primary's output
seqs whatever its own clustering history.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mqo.clocks import Clock
from mqo.executor import Method, MqoError
from mqo.query import Column, ContinuousQuery
from mqo.reference import reference_results
from mqo.relations import Combo, Layout

MAX_QUERY_NAME = 64


@dataclass(frozen=True)
class MqoStageSpec:
    queries: tuple[ContinuousQuery, ...]
    schemas: Mapping[str, tuple[str, ...]]  # input stream -> its value columns
    columns: tuple[Column, ...]  # output columns after ``query``
    clocks: Mapping[str, Clock] = field(default_factory=dict)
    method: Method = Method.DYNAMIC
    theta: float = 0.5
    log_period: int = 10_000
    check_every: int | None = None
    patience: int = 1

    @property
    def inputs(self) -> list[str]:
        """Every stream the stage reads (sources and master streams), sorted."""
        names = {s for q in self.queries for s in (*q.sources, *q.masters) if s not in self.clocks}
        return sorted(names)


def output_columns(
    queries: Sequence[ContinuousQuery], schemas: Mapping[str, Sequence[str]]
) -> tuple[Column, ...]:
    """The stage's output columns: every query must select the same ones
    (one stream carries them all; put differently shaped queries in
    different stages)."""
    shapes: dict[tuple[Column, ...], str] = {}
    for q in queries:
        columns = q.select or tuple(Column(s, c) for s in q.sources for c in ("ts", *schemas.get(s, ())))
        shapes.setdefault(tuple(columns), q.name)
        if len(q.name) > MAX_QUERY_NAME:
            raise MqoError(
                f"query {q.name[:20]}...: names in a cluster stage have at most {MAX_QUERY_NAME} characters"
            )
    if len(shapes) > 1:
        (a, qa), (b, qb) = list(shapes.items())[:2]
        raise MqoError(
            f"queries {qa} and {qb} select different columns ({', '.join(map(str, a))} vs "
            f"{', '.join(map(str, b))}): one stage's queries must select the same columns"
        )
    return next(iter(shapes)) if shapes else ()


def canonical(results: Mapping[str, list[Combo]]) -> list[tuple[str, Combo]]:
    """Results of one instant in the stage's output order."""
    out: list[tuple[str, Combo]] = []
    for name in sorted(results):
        combos = results[name]
        combos.sort(key=lambda combo: tuple(r[1] for r in combo))
        out.extend((name, c) for c in combos)
    return out


class OutputRows:
    """Output rows ``(ts, lin, +1, query, columns...)`` from results whose
    rows are elements (values from index ``value_offset``)."""

    def __init__(self, spec: MqoStageSpec, value_offset: int = 3) -> None:
        self.schemas = {
            s: {"ts": 0, **{c: i + value_offset for i, c in enumerate(cols)}}
            for s, cols in spec.schemas.items()
        }
        self.getters = {}
        for q in spec.queries:
            layout = Layout(tuple(sorted(q.sources)), self.schemas)
            self.getters[q.name] = [layout.getter(c) for c in spec.columns]

    def rows(self, t: int, results: Mapping[str, list[Combo]]) -> list[tuple[Any, ...]]:
        return [
            (t, min(r[1] for r in combo), 1, name, *(get(combo) for get in self.getters[name]))
            for name, combo in canonical(results)
        ]


def reference_output(
    spec: MqoStageSpec, streams: Mapping[str, Sequence[Combo]], end: int
) -> list[tuple[Any, ...]]:
    """The stage's output computed by :mod:`mqo.reference` from complete
    input streams of elements: what a sink of the stage must hold."""
    rows = OutputRows(spec)
    at: dict[int, dict[str, list[Combo]]] = defaultdict(dict)
    for q in spec.queries:
        for s, combos in reference_results(q, streams, rows.schemas, spec.clocks, end):
            if combos:
                at[s][q.name] = combos
    return [row for t in sorted(at) for row in rows.rows(t, at[t])]
