"""What is placed: operators, the edges between them and their data rates.

A plan file (YAML) lists ``operators`` (``name``; ``pinned: NODE`` for
sources and sinks, which stay where their data is; ``assign: true`` for an
ASSIGN whose sources are chosen at run time; ``rate`` for a source an ASSIGN
may read) and ``edges`` (``from``, ``to``, ``rate`` in bytes/s). One
operator's output is one stream: its edges carry the same rate. The plan is
a DAG. ``interests`` maps an ASSIGN to the sources it reads now (the placement paper,
Fig. 7); an ASSIGN without interests reads the dummy source (Fig. 6).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from semiactive.config import ConfigError, TopologyNode, locate_field, read_yaml, validate_model
from semiactive.placement.network import Network

DUMMY = "(dummy)"  # a name no topology node has


@dataclass(frozen=True)
class Operator:
    name: str
    pinned: str | None = None
    assign: bool = False
    rate: float | None = None


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    rate: float


@dataclass(frozen=True)
class OperatorPlan:
    """A validated DAG of operators (see the module's docstring)."""

    operators: tuple[Operator, ...]
    edges: tuple[Edge, ...]
    interests: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_plan(self)

    def operator(self, name: str) -> Operator:
        return next(o for o in self.operators if o.name == name)

    def consumers(self, name: str) -> list[str]:
        return [e.target for e in self.edges if e.source == name]

    def rate_of(self, name: str) -> float:
        """The rate of an operator's output stream."""
        for e in self.edges:
            if e.source == name:
                return e.rate
        return self.operator(name).rate or 0.0

    def with_sources(self, network_has_dummy: bool) -> OperatorPlan:
        """The plan the optimiser solves: each ASSIGN joined to its current
        interests (Fig. 7) or, without any, to the dummy source whose rate is
        the mean of the sources' rates (Fig. 6)."""
        extra_ops: list[Operator] = []
        extra_edges: list[Edge] = []
        rates = [self.rate_of(o.name) for o in self.operators if o.pinned and self.consumers(o.name)]
        rates += [o.rate for o in self.operators if o.rate is not None and not self.consumers(o.name)]
        mean_rate = sum(rates) / len(rates) if rates else 0.0
        names = {o.name for o in self.operators}
        for op in self.operators:
            if not op.assign:
                continue
            sources = self.interests.get(op.name, ())
            if sources:
                extra_edges += [Edge(s, op.name, self.rate_of(s)) for s in sources]
            elif network_has_dummy:
                dummy = _fresh(f"{DUMMY}:{op.name}", names)
                names.add(dummy)
                extra_ops.append(Operator(dummy, pinned=DUMMY))
                extra_edges.append(Edge(dummy, op.name, mean_rate))
        return dataclasses.replace(
            self,
            operators=self.operators + tuple(extra_ops),
            edges=self.edges + tuple(extra_edges),
            interests={},
        )

    def needs_dummy(self) -> bool:
        return any(o.assign and not self.interests.get(o.name) for o in self.operators)


def _fresh(name: str, taken: set[str]) -> str:
    k = 1
    out = name
    while out in taken:
        k += 1
        out = f"{name}#{k}"
    return out


class PlanError(ConfigError):
    """A plan file (or plan) that cannot be placed, located."""


def check_plan(plan: OperatorPlan) -> None:
    """Names unique, edges between known operators, one rate per stream, no cycle."""
    names: dict[str, int] = {}
    for i, op in enumerate(plan.operators):
        if op.name in names:
            raise PlanError(f"operator {op.name!r} is listed twice", field=f"operators[{i}].name")
        names[op.name] = i
    rates: dict[str, float] = {}
    seen: set[tuple[str, str]] = set()
    for i, e in enumerate(plan.edges):
        for end, name in (("from", e.source), ("to", e.target)):
            if name not in names:
                raise PlanError(f"no operator {name!r}", field=f"edges[{i}].{end}")
        if e.source == e.target:
            raise PlanError("an edge from an operator to itself", field=f"edges[{i}]")
        if (e.source, e.target) in seen:
            raise PlanError(f"edge {e.source} -> {e.target} is listed twice", field=f"edges[{i}]")
        seen.add((e.source, e.target))
        if not e.rate >= 0:
            raise PlanError("the rate must be >= 0 bytes/s", field=f"edges[{i}].rate")
        if rates.setdefault(e.source, e.rate) != e.rate:
            raise PlanError(
                f"{e.source}'s edges carry {rates[e.source]} and {e.rate} bytes/s: one operator's output "
                "is one stream, so its edges carry one rate",
                field=f"edges[{i}].rate",
            )
    for op_name, sources in plan.interests.items():
        if op_name not in names or not plan.operators[names[op_name]].assign:
            raise PlanError(f"{op_name!r} is no ASSIGN operator (assign: true)", field=f"interests.{op_name}")
        for s in sources:
            src = plan.operators[names[s]] if s in names else None
            if src is None or src.pinned is None:
                raise PlanError(f"{s!r} is no pinned source", field=f"interests.{op_name}")
            if src.rate is None and not plan.consumers(s):
                raise PlanError(f"source {s!r} has no rate (give it one)", field=f"interests.{op_name}")
    for i, op in enumerate(plan.operators):
        joined = any(op.name in (e.source, e.target) for e in plan.edges)
        if op.pinned is None and not op.assign and not joined:
            raise PlanError(
                f"operator {op.name!r} is neither pinned nor joined by an edge", field=f"operators[{i}]"
            )
    order = topological(plan.operators, plan.edges)
    if order is None:
        raise PlanError("the edges form a cycle; a plan is a DAG", field="edges")


def topological(operators: Sequence[Operator], edges: Sequence[Edge]) -> list[str] | None:
    """Operators in an order where every edge goes forward, or None on a cycle."""
    indegree = {o.name: 0 for o in operators}
    for e in edges:
        indegree[e.target] += 1
    ready = [o.name for o in operators if indegree[o.name] == 0]
    order: list[str] = []
    while ready:
        name = ready.pop()
        order.append(name)
        for e in edges:
            if e.source == name:
                indegree[e.target] -= 1
                if indegree[e.target] == 0:
                    ready.append(e.target)
    return order if len(order) == len(operators) else None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class _OperatorModel(_Model):
    name: Annotated[str, Field(min_length=1, max_length=200)]
    pinned: TopologyNode | None = None  # a node's name or id
    assign: bool = False
    rate: Annotated[float, Field(ge=0)] | None = None


class _EdgeModel(_Model):
    source: str = Field(alias="from")
    target: str = Field(alias="to")
    rate: Annotated[float, Field(ge=0, allow_inf_nan=False)]


class PlanFile(_Model):
    operators: Annotated[list[_OperatorModel], Field(min_length=1)]
    edges: list[_EdgeModel] = []
    interests: dict[str, list[str]] = {}


def plan_from_model(model: PlanFile) -> OperatorPlan:
    return OperatorPlan(
        tuple(Operator(o.name, o.pinned, o.assign, o.rate) for o in model.operators),
        tuple(Edge(e.source, e.target, e.rate) for e in model.edges),
        {k: tuple(v) for k, v in model.interests.items()},
    )


def load_plan(path: str | Path, network: Network | None = None) -> OperatorPlan:
    """Read and check a plan file; errors name the file, line and field.
    Given the ``network``, every ``pinned`` must be one of its nodes, by
    name or by id."""
    data, lines = read_yaml(path, what="plan")
    model = validate_model(PlanFile, data, path, lines)
    try:
        plan = plan_from_model(model)
        if network is not None:
            check_pins(plan, network)
        return plan
    except PlanError as exc:
        loc = _field_path(exc.field)
        raise PlanError(exc.message, str(path), locate_field(lines, *loc), exc.field) from None


def check_pins(plan: OperatorPlan, network: Network) -> None:
    """Every pinned operator stands on a node of ``network`` (by name or id)."""
    for i, op in enumerate(plan.operators):
        if op.pinned is not None and op.pinned != DUMMY and network.find(op.pinned) is None:
            raise PlanError(network.not_found(op.pinned), field=f"operators[{i}].pinned")


def _field_path(dotted: str) -> tuple[Any, ...]:
    out: list[Any] = []
    for part in dotted.replace("[", ".[").split("."):
        if part.startswith("[") and part.endswith("]"):
            out.append(int(part[1:-1]))
        elif part:
            out.append("from" if part == "source" else part)
    return tuple(out)
