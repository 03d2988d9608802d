"""An MQO stage of a cluster: many queries, one output stream.

What the topology knows of a stage that runs the MQO paper's shared execution
instead of a CQL program, and the one order its output rows take: at each
instant, the queries that fired by name, each query's results by the input
positions of their rows. That order depends on the semantics alone, not on
the clusters, the plans or when re-clustering happened, so a secondary (or a
replica rebuilt from a cut) emits the primary's rows at the primary's output
seqs whatever its own clustering history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from semiactive.mqo.clocks import Clock
from semiactive.mqo.executor import Method, MqoError
from semiactive.mqo.query import Column, ContinuousQuery, parse_query
from semiactive.mqo.relations import Combo, Layout
from semiactive.node.cql.errors import CqlError

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
    registry: str | None = None  # the stream of registrations, if queries come and go

    @property
    def inputs(self) -> list[str]:
        """Every stream the stage reads (sources, master streams, the registry), sorted."""
        names = set(self.schemas) | ({self.registry} if self.registry else set())
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


def check_registration(
    spec: MqoStageSpec, live: Set[str], op: str, name: str, text: str
) -> tuple[ContinuousQuery | None, str | None]:
    """A registration row judged as every replica judges it: the query to
    add (None for a removal), or why it is refused."""
    if op == "remove":
        return (None, None) if name in live else (None, f"no registered query {name!r}")
    if op != "add":
        return None, f"unknown operation {op!r} (add, remove)"
    try:
        q = parse_query(text, "<registration>")
    except CqlError as exc:
        return None, str(exc)
    if q.name != name:
        return None, f"the text defines {q.name!r}, not {name!r}"
    if name in live:
        return None, f"query {name!r} is registered already"
    if len(name) > MAX_QUERY_NAME:
        return None, f"names in a cluster stage have at most {MAX_QUERY_NAME} characters"
    for stream in (*q.sources, *(m for m in q.masters if m not in spec.clocks)):
        if stream not in spec.schemas:
            return None, f"{stream!r} is no stream this stage reads ({', '.join(spec.schemas)})"
    columns = [*(q.select or ()), *(o for p in q.where for o in (p.left, p.right) if isinstance(o, Column))]
    for col in columns:
        if col.name != "ts" and col.name not in spec.schemas[col.source]:
            return None, f"{col}: {col.source} has no column {col.name!r}"
    if output_columns([q], spec.schemas) != spec.columns:
        return None, "it selects other columns than the stage's output"
    return q, None


class OutputRows:
    """Output rows ``(ts, lin, +1, query, columns...)`` from results whose
    rows are elements (values from index ``value_offset``)."""

    def __init__(
        self, spec: MqoStageSpec, value_offset: int = 3, queries: Sequence[ContinuousQuery] = ()
    ) -> None:
        self.spec = spec
        self.schemas = {
            s: {"ts": 0, **{c: i + value_offset for i, c in enumerate(cols)}}
            for s, cols in spec.schemas.items()
        }
        self.getters: dict[tuple[str, ...], list[Callable[[Combo], Any]]] = {}
        self.sources: dict[str, tuple[str, ...]] = {}
        for q in (*spec.queries, *queries):
            self.track(q)

    def track(self, query: ContinuousQuery) -> None:
        """Know how to read the results of ``query`` (one registered later too)."""
        sources = tuple(sorted(query.sources))
        self.sources[query.name] = sources
        if sources not in self.getters:
            layout = Layout(sources, self.schemas)
            self.getters[sources] = [layout.getter(c) for c in self.spec.columns]

    def rows(self, t: int, results: Mapping[str, list[Combo]]) -> list[tuple[Any, ...]]:
        getters, sources = self.getters, self.sources
        return [
            (t, min(r[1] for r in combo), 1, name, *(get(combo) for get in getters[sources[name]]))
            for name, combo in canonical(results)
        ]
