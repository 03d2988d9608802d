"""What the HA protocol needs to know of a stage and its edges.

``ha/`` runs on these descriptions, not on the configuration layer
(pydantic, YAML): :class:`semiactive.topology.Stage` and ``Edge`` satisfy
them, and so can any test's or tool's own description.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Protocol

from semiactive.mqo.stage import MqoStageSpec
from semiactive.node.cql import plan


class HaMode(enum.StrEnum):
    """How a stage is protected (docs/ha.md)."""

    NONE = "none"
    UB = "ub"  # upstream backup: producers keep, nothing shipped
    AS = "as"  # active standby: every row to the secondary
    SAS = "sas"  # semi-active standby: batches of B rows
    ASAS = "asas"  # adaptive SAS: B tuned by the coordinator

    @property
    def ships_backups(self) -> bool:
        return self in (HaMode.AS, HaMode.SAS, HaMode.ASAS)


class EdgeSpec(Protocol):
    """``producer -> consumer`` carrying ``stream``; ``index`` orders a
    consumer's inputs."""

    @property
    def id(self) -> str: ...

    @property
    def producer(self) -> str: ...

    @property
    def consumer(self) -> str: ...

    @property
    def stream(self) -> str: ...

    @property
    def schema(self) -> plan.Schema: ...

    @property
    def kind(self) -> plan.Kind: ...

    @property
    def index(self) -> int: ...

    @property
    def routing(self) -> object | None:
        """Not None when the consumer is one partition of a partitioned
        stage: rows of other partitions arrive elided and feed nothing."""
        ...


class StageSpec(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def primary(self) -> str: ...

    @property
    def secondary(self) -> str | None: ...

    @property
    def program(self) -> plan.Program | None: ...

    @property
    def mqo(self) -> MqoStageSpec | None:
        """Instead of a program: the MQO paper's shared execution of many queries."""
        ...

    @property
    def output(self) -> str | None: ...

    @property
    def inputs(self) -> Sequence[EdgeSpec]: ...

    @property
    def outputs(self) -> Sequence[EdgeSpec]: ...

    @property
    def ha_mode(self) -> HaMode: ...

    @property
    def ha_batch_size(self) -> int:
        """The B this stage asks of its producers' backups (A-SAS: the initial one)."""
        ...

    @property
    def cost_ms(self) -> float:
        """Extra processing cost per row, ms (experiments)."""
        ...

    @property
    def cost_schedule(self) -> Sequence[tuple[float, float]]:
        """(event time s, cost ms) steps of that cost."""
        ...


class StageGraph(Protocol):
    """Every stage by name."""

    @property
    def stages(self) -> Mapping[str, StageSpec]: ...
