"""Seed 002's Algorithm 3 (batch-size optimisation), as written.

Each call estimates BW* (eq. 2) and R* (eq. 3) at the current B and takes
exactly one of the paper's four branches:

====================  =====================  =================================
BW* vs bw_max          R* vs recovery_max     action
====================  =====================  =================================
over                   holds                  B + step          (lines 2-3)
holds                  over                   B - step          (lines 4-5)
over                   over                   for the priority  (lines 6-7):
                                              recovery: B - step,
                                              bandwidth: B + step
holds                  holds                  keep B            (lines 8-9)
====================  =====================  =================================

"over" is strictly greater than the limit; equal holds (:class:`semiactive.ha.tuning.Limits`).
The pseudo-code writes ``<`` and ``>`` on both sides and so assigns no
branch when a value equals its limit; the prose (5.1.2) defines the
branches by "exceeds the limit", which makes the four cases exhaustive.

B stays within ``[1, max_batch_size]``: a step that would leave the range
is clipped to its end. "Stop when both hold" (line 9) ends one round of
optimisation; the paper runs the procedure periodically (every 10 ms in
its experiments), so the next call starts a new round and a change in the
stream restarts the adjustment. There is no sticky "stopped" state.
"""

from __future__ import annotations

from semiactive.ha.cost_model import Measurements, estimated_bandwidth, estimated_recovery
from semiactive.ha.tuning import (
    DEFAULT_MAX_BATCH_SIZE,
    Branch,
    Decision,
    Limits,
    Priority,
    check_batch_bounds,
)


class Algorithm3Tuner:
    def __init__(
        self,
        bw_max_bytes_per_s: float,
        recovery_max_s: float,
        priority: Priority = Priority.RECOVERY,
        step: int = 5,
        initial_batch_size: int = 1,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    ) -> None:
        if step < 1:
            raise ValueError(f"step must be >= 1, got {step!r}")
        check_batch_bounds(initial_batch_size, max_batch_size)
        self.limits = Limits(bw_max_bytes_per_s, recovery_max_s)
        self.priority = priority
        self.step = step
        self.max_batch_size = max_batch_size
        self._batch_size = initial_batch_size

    @property
    def batch_size(self) -> int:
        return self._batch_size

    def next(self, m: Measurements) -> Decision:
        previous = self._batch_size
        bandwidth = estimated_bandwidth(m, previous)  # line 1
        recovery = estimated_recovery(m, previous)
        bw_over = self.limits.bandwidth_over(bandwidth)
        r_over = self.limits.recovery_over(recovery)
        if bw_over and not r_over:
            branch, delta = Branch.BANDWIDTH_OVER, self.step
        elif r_over and not bw_over:
            branch, delta = Branch.RECOVERY_OVER, -self.step
        elif bw_over and r_over:
            branch = Branch.BOTH_OVER
            delta = -self.step if self.priority is Priority.RECOVERY else self.step
        else:
            branch, delta = Branch.BOTH_HOLD, 0
        self._batch_size = min(self.max_batch_size, max(1, previous + delta))
        return Decision(self._batch_size, previous, branch, bandwidth, recovery)
