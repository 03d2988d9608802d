"""Who serves a stage: views, epochs and fencing.

A :class:`StageView` says which node is a stage's primary and which its
secondary. ``epoch`` changes only when the primary changes (a takeover);
``version`` changes on every change, a new secondary included. A node acts on
the newest version it has seen; a receiver refuses rows stamped with an
epoch older than the stage's current one, so a primary that was only frozen
or cut off cannot deliver anything once it has been replaced (fencing).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class StageView:
    stage: str
    epoch: int
    version: int
    primary: str
    secondary: str | None = None

    def promoted(self, node: str) -> StageView:
        """The view after ``node`` (the secondary) took over."""
        return StageView(self.stage, self.epoch + 1, self.version + 1, node, None)

    def with_secondary(self, node: str | None) -> StageView:
        return dataclasses.replace(self, version=self.version + 1, secondary=node)

    def role_of(self, node: str) -> str:
        if node == self.primary:
            return "primary"
        if node == self.secondary:
            return "secondary"
        return "none"


class ViewTable:
    """The views a node knows, one per stage."""

    def __init__(self, views: Iterable[StageView] = ()) -> None:
        self._views: dict[str, StageView] = {v.stage: v for v in views}

    def __getitem__(self, stage: str) -> StageView:
        return self._views[stage]

    def __contains__(self, stage: str) -> bool:
        return stage in self._views

    def __iter__(self) -> Iterator[StageView]:
        return iter(self._views.values())

    def apply(self, view: StageView) -> bool:
        """Adopt ``view`` if it is newer (epoch first, then version); return
        whether anything changed."""
        current = self._views.get(view.stage)
        if current is not None and (view.epoch, view.version) <= (current.epoch, current.version):
            return False
        self._views[view.stage] = view
        return True

    def witness(self, stage: str, epoch: int, primary: str) -> bool:
        """A producer stamped ``epoch``: if that is newer than the view we
        hold, its sender took over; adopt that until the full view arrives
        (which has a higher version)."""
        current = self._views.get(stage)
        if current is None or epoch <= current.epoch:
            return False
        self._views[stage] = StageView(stage, epoch, current.version, primary, None)
        return True

    def stale(self, stage: str, epoch: int) -> bool:
        """Rows of ``stage`` stamped ``epoch`` come from a replaced primary."""
        current = self._views.get(stage)
        return current is not None and epoch < current.epoch
