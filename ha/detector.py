"""Failure detection by heartbeats (the SAS paper, Algorithm 2 lines 1-2).

The secondary pings its primary every ``interval`` and declares it dead
when no answer came for ``timeout``, or at once when the connection breaks
and cannot be re-established (a killed process's port refuses connections).
Pure: the caller passes the clock.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FailureDetector:
    interval: float  # seconds between pings
    timeout: float  # seconds without a pong before declaring failure
    last_pong: float | None = None
    started: float | None = None
    suspected_at: float | None = None

    def start(self, now: float) -> None:
        self.started = now
        self.last_pong = None
        self.suspected_at = None

    def on_pong(self, now: float) -> None:
        self.last_pong = now

    def expired(self, now: float) -> bool:
        """No pong for ``timeout`` (counting from the first pong, or from the
        start with a grace of one timeout for the first connection)."""
        reference = self.last_pong if self.last_pong is not None else self.started
        if reference is None:
            return False
        return now - reference > self.timeout

    def silent_for(self, now: float) -> float:
        reference = self.last_pong if self.last_pong is not None else self.started
        return 0.0 if reference is None else now - reference


def becoming_primary(
    name: str, role: str, stage: str, epoch: int, held_primary: str, watched_stage: str, watched_epoch: int
) -> bool:
    """Whether node ``name``, answering Status with (``role``, ``stage``,
    ``epoch``, and its view of the stage naming ``held_primary``) but not
    ponging, is the primary a secondary watches at ``watched_epoch``, only
    still behind or inside the switch to the view that names it: a
    migration's target handed the stage while the coordinator, at once,
    made the watcher its secondary. It is alive; taking over would replace
    it before it ever served. (At an equal epoch its view must name itself:
    one epoch has one primary.)"""
    if role != "secondary" or stage != watched_stage:
        return False
    return epoch < watched_epoch or (epoch == watched_epoch and held_primary == name)


def may_be_starting(reached: bool, assigned: bool, watched_for: float, grace: float) -> bool:
    """Whether a primary that does not answer may only be still starting:
    never reached by this secondary, which watches it since the cluster's
    start (not assigned to it later), for less than ``grace`` seconds (how
    long peers wait for each other to come up). Past that, or once it had
    answered, silence is a failure: a primary killed while starting, and
    never restarted, must not leave its stage without one for ever."""
    return not reached and not assigned and watched_for < grace
