"""Moving a stage to another node while it runs (the placement paper's re-placement).

A migration reuses what failover already makes exact, so it loses and
repeats nothing for the same reasons:

1. ``joining``: the target (a free spare) becomes the stage's secondary,
   replacing any current one; it bootstraps from the producers' retained
   logs and a resync point, as re-protection does.
2. ``handing over``, once the target reports itself caught up (running,
   rebuilt from a point, little input backlog): the coordinator issues the
   view that makes it primary at epoch + 1 and pushes it to the target,
   which takes over as after a failure, without waiting for one. The old
   primary, refused for its stale epoch or told by the view, is fenced and
   becomes a spare; re-protection gives the stage a new secondary.
3. done when the target reports itself the stage's primary at that epoch.

A failover during a migration ends it: done if the target is the primary
that took over, aborted otherwise (the target stays a secondary, or is
replaced by re-protection if it died). Pure: the coordinator calls it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from semiactive.ha.views import StageView

if TYPE_CHECKING:
    from semiactive.coordinator.control import Coordinator

# A target with more received-but-unprocessed rows than this is not caught up.
CAUGHT_UP_BACKLOG = 1000
# Rows per input edge the target may trail the primary by, beyond two batches.
CAUGHT_UP_LAG = 100
# A migration that has not finished by then is abandoned (the stage keeps
# whatever views it has: both are safe).
TIMEOUT_S = 60.0


@dataclass
class Migration:
    stage: str
    target: str
    source: str  # the primary when it started
    started: float
    epoch: int  # the stage's epoch when it started
    phase: str = "joining"  # joining, handing-over
    handed_over_at: float | None = None


class Migrations:
    """The migrations in progress, one per stage at most."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        self.active: dict[str, Migration] = {}
        self.outbox: list[tuple[str, StageView]] = []  # views to push now: (node, view)
        self.done = 0

    def request(self, stage: str, target: str, now: float) -> str | None:
        """Start moving ``stage`` to ``target``; the reason it cannot, or None."""
        c = self.coordinator
        st = c.topology.stages.get(stage)
        if st is None or st.role != "stage":
            return f"{stage!r} is no stage of this cluster (sources and sinks stay where their data is)"
        if st.config is None or st.config.ha.mode == "none":
            return f"stage {stage} is not protected (ha.mode: none); only protected stages migrate"
        if stage in self.active:
            m = self.active[stage]
            return f"stage {stage} is already moving to {m.target} ({m.phase})"
        view = c.views.get(stage)
        if view is None:
            return f"stage {stage} has no view yet (the cluster is starting); try again"
        if not c.is_serving(view.primary, stage, now):
            return f"stage {stage}'s primary {view.primary} has not reported serving it lately; try again"
        if target == view.primary:
            return f"stage {stage} already runs on {target}"
        if target not in c.nodes:
            return f"no node named {target!r} in this cluster"
        if target != view.secondary and not c.is_free_spare(target, view, now):
            role = c.nodes[target].role or "unknown"
            return f"{target} is neither a free spare nor the stage's secondary (role {role})"
        self.active[stage] = Migration(stage, target, view.primary, now, view.epoch)
        if view.secondary != target:
            view = view.with_secondary(target)
            c.views[stage] = view
            self.outbox.append((target, view))
        c.events.emit(
            "migration_started", stage=stage, source=view.primary, target=target, version=view.version
        )
        return None

    def step(self, now: float) -> None:
        for m in list(self.active.values()):
            self._advance(m, now)

    def _advance(self, m: Migration, now: float) -> None:
        c = self.coordinator
        view = c.views[m.stage]
        if m.phase == "joining":
            if view.epoch != m.epoch or view.secondary != m.target:
                if view.primary == m.target:
                    return self._finish(m, now, "the target took over after a failure")
                return self._abort(
                    m, f"the stage's view changed (primary {view.primary}, epoch {view.epoch})"
                )
            if now - m.started > TIMEOUT_S:
                return self._abort(m, f"{m.target} did not catch up within {TIMEOUT_S:.0f} s")
            if self._caught_up(m, view, now):
                new = view.promoted(m.target)
                c.views[m.stage] = new
                m.phase, m.handed_over_at = "handing-over", now
                self.outbox.append((m.target, new))
                c.events.emit("migration_handover", stage=m.stage, target=m.target, epoch=new.epoch)
            return None
        if view.primary != m.target:
            return self._abort(m, f"{view.primary} serves the stage at epoch {view.epoch}")
        record = c.nodes[m.target]
        status = record.status
        serving = record.role == "primary" and record.stage == m.stage
        if serving and status is not None and status.epoch >= view.epoch:
            return self._finish(m, now, "")
        if now - m.started > TIMEOUT_S:
            self._abort(m, f"{m.target} did not report serving the stage within {TIMEOUT_S:.0f} s")
        return None

    def _caught_up(self, m: Migration, view: StageView, now: float) -> bool:
        """The target holds the view, has rebuilt its state, and has received
        on every input edge all but about two backup batches of what the
        primary has (SAS ships backups in batches; the takeover replays
        the rest from the producers' logs)."""
        c = self.coordinator
        record, primary = c.nodes[m.target], c.nodes[view.primary]
        status, ahead = record.status, primary.status
        if status is None or ahead is None or not c.is_serving(m.target, m.stage, now):
            return False
        held = record.held.get(m.stage)
        if (
            record.role != "secondary"
            or held is None
            or (held.epoch, held.version) < (view.epoch, view.version)
        ):
            return False
        if status.state == "warming-up" or status.input_backlog > CAUGHT_UP_BACKLOG:
            return False
        cfg = c.topology.stages[m.stage].config
        lag = 2 * (cfg.ha.batch_size if cfg is not None else 0) + CAUGHT_UP_LAG
        have = {e.edge: e.seq for e in status.inputs}
        return all(have.get(e.edge, 0) >= e.seq - lag for e in ahead.inputs)

    def abandon(self, reason: str) -> None:
        """End every migration in progress (the coordinator stops): each
        started migration gets its end in the events. The stage keeps the
        views it has, both safe, as after a timeout."""
        for m in list(self.active.values()):
            self._abort(m, reason)

    def _finish(self, m: Migration, now: float, note: str) -> None:
        del self.active[m.stage]
        self.done += 1
        handover_ms = round((now - m.handed_over_at) * 1000, 1) if m.handed_over_at is not None else None
        self.coordinator.events.emit(
            "migrated",
            stage=m.stage,
            source=m.source,
            target=m.target,
            seconds=round(now - m.started, 3),
            handover_ms=handover_ms,
            note=note,
        )

    def _abort(self, m: Migration, reason: str) -> None:
        del self.active[m.stage]
        self.coordinator.events.emit("migration_aborted", stage=m.stage, target=m.target, reason=reason)
