"""Connection management's I/O (seed 004; node/sections/connections.py):
the pure :class:`~semiactive.node.sections.connections.ConnectionTable`
says which candidate edges of an ASSIGN are wanted or idle; this turns its
answers into Interest messages to the producers, rewinds of rows that came
elided but are wanted whole, and metrics and events."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from semiactive.ha.replica import StageReplica
from semiactive.node.engine.elements import Element
from semiactive.node.sections.connections import Candidate, ConnectionTable
from semiactive.node.sections.operator import OperatorSection
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.roles.inbound import InboundEdgeSession
from semiactive.runtime.events import EventLog
from semiactive.topology import Stage


class ConnectionManager:
    def __init__(
        self,
        stage: Stage,
        replica: StageReplica,
        metrics: NodeMetrics,
        events: EventLog,
        session: Callable[[str], InboundEdgeSession | None],
    ) -> None:
        """``session``: the inbound session of an input edge, if open."""
        self.stage = stage
        self.replica = replica
        self.metrics = metrics
        self.events = events
        self.session = session
        operator = replica.operator
        self.table = ConnectionTable(
            operator.engine.operators if isinstance(operator, OperatorSection) else [],
            {e.stream: e.id for e in stage.inputs},
        )
        self._planned = operator.engine
        for edge in self.table.candidates:
            metrics.candidate_connected.labels(edge).set(1)

    @property
    def active(self) -> bool:
        """Whether the stage's plan has candidate edges to manage at all."""
        return bool(self.table)

    def arrived(self, edge: str, rows: Sequence[Element]) -> None:
        """New rows of ``edge`` taken in: connect the candidates they name;
        rows that came elided but are wanted whole are asked for again."""
        for candidate in self.table.named(edge, rows):
            self._connect(candidate)
        if self.table.manages(edge):
            self._refill(edge, rows)

    def _connect(self, candidate: Candidate) -> None:
        """A row of R names an idle candidate: want its rows whole, and
        again those that came elided since the row's instant."""
        session = self.session(candidate.edge)
        if session is not None:
            session.send_interest(None)
        self._refill(candidate.edge, self.replica.inputs.by_name[candidate.edge].pending)
        self._changed(candidate, "connect")

    def _refill(self, edge: str, rows: Iterable[Element]) -> None:
        """Queued rows that came elided but are wanted whole: forget them
        and have the producer send them again."""
        row = self.table.unwanted_elision(edge, rows)
        if row is None:
            return
        self.replica.inputs.by_name[edge].truncate(row[1])
        session = self.session(edge)
        if session is not None:
            session.rewind()

    def disconnect_idle(self) -> None:
        """The engine has moved on: the candidates no row of R names any
        more may come elided from now on."""
        operator = self.replica.operator
        assert isinstance(operator, OperatorSection)  # only plans with an ASSIGN have candidates
        engine = operator.engine
        if engine is not self._planned:  # rebuilt by a resync
            self.table.rebind(engine.operators)
            self._planned = engine
        for candidate in self.table.idle(engine.time):
            session = self.session(candidate.edge)
            if session is not None:
                session.send_interest(candidate.idle_from)
            self._changed(candidate, "disconnect")

    def _changed(self, candidate: Candidate, change: str) -> None:
        self.metrics.candidate_connected.labels(candidate.edge).set(1 if candidate.connected else 0)
        self.metrics.connection_changes.labels(candidate.edge, change).inc()
        self.events.emit(
            "connection",
            stage=self.stage.name,
            edge=candidate.edge,
            change=change,
            instant=candidate.last_named if candidate.connected else candidate.idle_from,
        )
