"""When an assigned secondary re-protects its stage: a secondary the
coordinator assigned in a running cluster (not one configured at startup)
protects its stage once it holds the primary's state. That moment is
reported as a ``reprotected`` event with the warm-up time (telemetry)."""

from __future__ import annotations

from semiactive.ha.replica import Mode, StageReplica
from semiactive.runtime import clock
from semiactive.runtime.events import EventLog
from semiactive.topology import Stage


class ReprotectionWatch:
    def __init__(
        self, stage: Stage, replica: StageReplica, events: EventLog, assigned_at: float | None
    ) -> None:
        """``assigned_at``: when the coordinator assigned this secondary (None:
        configured at startup, or promoted since)."""
        self.stage = stage
        self.replica = replica
        self.events = events
        self.assigned_at = assigned_at
        self._catch_up_to: int | None = None

    def check(self) -> None:
        """After each operator run: report the re-protection once."""
        if self.assigned_at is not None and self.replica.mode is not Mode.SECONDARY:
            self.assigned_at = None  # promoted first: nothing re-protected
        if self.assigned_at is not None and self._caught_up():
            self.events.emit(
                "reprotected",
                stage=self.stage.name,
                warmup_ms=round((clock.wall() - self.assigned_at) * 1000, 1),
            )
            self.assigned_at = None

    def _caught_up(self) -> bool:
        """Whether an assigned secondary holds the primary's state: rebuilt
        from a resync point, or, fed from the first row (its producers kept
        them all, so no point was needed), past the output its consumers
        had from the primary when their acknowledgements first reached it."""
        replica = self.replica
        if replica.warming_up:
            return False
        if replica.resyncs:
            return True
        if self._catch_up_to is None:
            acked = max((cursors.acked for cursors in replica.log.edges.values()), default=0)
            if not acked:
                return False
            self._catch_up_to = acked
        return replica.log.head >= self._catch_up_to
