"""The model tuner (``tuner: model``): B chosen in one move from a model.

Algorithm 3 walks B by a fixed step and sees the effect of each step only
once B_send has been re-measured under the new B. This tuner instead
predicts BW(B) and R(B) for every candidate B with
:class:`~semiactive.ha.round_model.RoundModel` (rows per Level-1 round) and jumps to
the best one:

- if some B is predicted to satisfy both limits, the one that leaves the
  most room to the nearer limit (the largest ``min(1 - BW/bw_max,
  1 - R/recovery_max)``), so that noise and model error do not push it
  straight out again; ties go to the priority metric, then the smaller B;
- otherwise the B that satisfies (or least exceeds) the priority limit,
  and among those the one with the smallest other metric.

Hysteresis: a B predicted to satisfy both limits is kept while its room
is at least ``hysteresis`` (a fraction of each limit: 0.15 = 15% below
both), or while the best B's room exceeds it by no more than
``hysteresis``; so B moves when it is over a limit, or close to one with
a materially better B available. (A dead band alone moves on every
interval when no B has that much room; the margin test alone moves with
every noisy shift of the optimum.) When no B satisfies both, a B over the
priority limit is left for any B less over it; otherwise a move must cut
the other metric by more than ``hysteresis`` of its limit.

Search: the candidates are every B from 1 up to the first B at which no
batch can fill (all larger B predict the same), scanned on a grid of
``grid`` points and refined around the best point down to single steps,
plus the current B and the largest B within the recovery limit.

Correction: the model does not use B_send, but when eq. 2 (measured B_send
at the current B) stays over ``bw_max x (1 + hysteresis)`` for
``settle_intervals`` intervals in a row with B unchanged, while the model
predicts B within the limit, the measured Level-1 delay is taken to be too
short and is stretched (x1.1 steps, up to x4) until the model agrees. The
stretch is forgotten when the rows per round change by more than a factor
of 2 (a new regime). Waiting for B to settle matters: right after a move,
B_send still counts batches of the old B.

Limits are inclusive, as for Algorithm 3 (:class:`semiactive.ha.tuning.Limits`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from semiactive.ha.cost_model import Measurements, estimated_bandwidth
from semiactive.ha.round_model import RoundModel
from semiactive.ha.tuning import (
    DEFAULT_MAX_BATCH_SIZE,
    Branch,
    Decision,
    Limits,
    Priority,
    check_batch_bounds,
)

MAX_DELAY_SCALE = 4.0
DELAY_SCALE_STEP = 1.1
REGIME_CHANGE = 2.0  # rows per round changing by this factor resets the correction


class _Score(NamedTuple):
    batch_size: int
    bandwidth: float
    recovery: float
    feasible: bool
    room: float  # min of the two slacks, as fractions of their limits
    priority_room: float  # 1 - priority metric / its limit
    priority_excess: float  # max(0, priority metric / its limit - 1)
    other_load: float  # the other metric / its limit


class ModelTuner:
    def __init__(
        self,
        bw_max_bytes_per_s: float,
        recovery_max_s: float,
        priority: Priority = Priority.RECOVERY,
        initial_batch_size: int = 1,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        hysteresis: float = 0.15,
        jitter: float = 0.25,
        settle_intervals: int = 50,
        grid: int = 64,
    ) -> None:
        check_batch_bounds(initial_batch_size, max_batch_size)
        if math.isnan(hysteresis) or not 0 <= hysteresis < 1:
            raise ValueError(f"hysteresis must be in [0, 1), got {hysteresis!r}")
        if settle_intervals < 1:
            raise ValueError(f"settle_intervals must be >= 1, got {settle_intervals!r}")
        if grid < 4:  # below 4 the refinement's stride may stop shrinking
            raise ValueError(f"grid must be >= 4, got {grid!r}")
        RoundModel(0.0, 0.0, 0.0, 0.0, jitter)  # validates jitter
        self.limits = Limits(bw_max_bytes_per_s, recovery_max_s)
        self.priority = priority
        self.max_batch_size = max_batch_size
        self.hysteresis = hysteresis
        self.jitter = jitter
        self.settle_intervals = settle_intervals
        self.grid = grid
        self._batch_size = initial_batch_size
        self._delay_scale = 1.0
        self._scaled_at_rows = 0.0  # unscaled rows per round when the stretch was learned
        self._contradicted_for = 0  # intervals in a row: measured over, model under, B unchanged

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def delay_scale(self) -> float:
        """The learned stretch of the measured Level-1 delay (1 = none)."""
        return self._delay_scale

    def model(self, m: Measurements) -> RoundModel:
        """The model as this tuner currently sees it (correction applied)."""
        return RoundModel.from_measurements(m, self.jitter, self._delay_scale)

    def next(self, m: Measurements) -> Decision:
        previous = self._batch_size
        self._forget_stale_correction(m)
        model = self._corrected(self.model(m), m, previous)
        current = self._score(model, previous)
        best = self._best(model, previous)
        if best.feasible:
            if current.feasible and (
                current.room >= self.hysteresis or best.room - current.room <= self.hysteresis
            ):
                branch, chosen = Branch.HOLD, current
            else:
                branch, chosen = Branch.TO_FEASIBLE, best
        else:
            branch = Branch.BY_PRIORITY
            chosen = best if self._worth_moving_by_priority(current, best) else current
        if chosen.batch_size != previous:
            self._contradicted_for = 0  # B_send must be re-measured under the new B
        self._batch_size = chosen.batch_size
        return Decision(
            chosen.batch_size,
            previous,
            branch,
            current.bandwidth,
            current.recovery,
            chosen.bandwidth,
            chosen.recovery,
        )

    # -- the model's correction -----------------------------------------------

    def _forget_stale_correction(self, m: Measurements) -> None:
        if self._delay_scale == 1.0:
            return
        rows = m.input_rate_per_s * m.level1_delay_s
        if not self._scaled_at_rows / REGIME_CHANGE <= rows <= self._scaled_at_rows * REGIME_CHANGE:
            self._delay_scale = 1.0

    def _corrected(self, model: RoundModel, m: Measurements, batch_size: int) -> RoundModel:
        """Stretch the Level-1 delay once measured bandwidth has contradicted
        the model for ``settle_intervals`` intervals at an unchanged B."""
        measured = estimated_bandwidth(m, batch_size)
        contradicted = measured > self.limits.bw_max_bytes_per_s * (
            1 + self.hysteresis
        ) and not self.limits.bandwidth_over(model.bandwidth(batch_size))
        self._contradicted_for = self._contradicted_for + 1 if contradicted else 0
        if self._contradicted_for < self.settle_intervals:
            return model
        self._contradicted_for = 0
        scale = self._delay_scale
        while scale * DELAY_SCALE_STEP <= MAX_DELAY_SCALE:
            scale *= DELAY_SCALE_STEP
            stretched = RoundModel.from_measurements(m, self.jitter, scale)
            if self.limits.bandwidth_over(stretched.bandwidth(batch_size)):
                self._delay_scale = scale
                self._scaled_at_rows = m.input_rate_per_s * m.level1_delay_s
                return stretched
        return model  # the delay cannot explain it (e.g. B = 1): keep the model

    # -- choosing B -----------------------------------------------------------

    def _score(self, model: RoundModel, batch_size: int) -> _Score:
        bandwidth = model.bandwidth(batch_size)
        recovery = model.recovery(batch_size)
        bw_load = bandwidth / self.limits.bw_max_bytes_per_s
        r_load = recovery / self.limits.recovery_max_s
        recovery_first = self.priority is Priority.RECOVERY
        priority_load, other_load = (r_load, bw_load) if recovery_first else (bw_load, r_load)
        return _Score(
            batch_size,
            bandwidth,
            recovery,
            feasible=not (self.limits.bandwidth_over(bandwidth) or self.limits.recovery_over(recovery)),
            room=min(1 - bw_load, 1 - r_load),
            priority_room=1 - priority_load,
            priority_excess=max(0.0, priority_load - 1),
            other_load=other_load,
        )

    def _best(self, model: RoundModel, current: int) -> _Score:
        top = min(self.max_batch_size, model.never_sent_from)
        extra = {top, min(current, self.max_batch_size)}
        if model.recovery_s_per_tuple > 0:
            within_recovery = math.floor(self.limits.recovery_max_s / model.recovery_s_per_tuple)
            extra.add(min(top, max(1, within_recovery)))
        low, high = 1, top
        while True:
            stride = max(1, math.ceil((high - low) / self.grid))
            best = self._pick(model, set(range(low, high + 1, stride)) | {high} | extra)
            if stride == 1:
                return best
            low, high = max(1, best.batch_size - stride), min(top, best.batch_size + stride)
            extra = {best.batch_size}

    def _pick(self, model: RoundModel, candidates: set[int]) -> _Score:
        scores = [self._score(model, b) for b in sorted(candidates)]
        feasible = [s for s in scores if s.feasible]
        if feasible:
            return max(feasible, key=lambda s: (s.room, s.priority_room, -s.batch_size))
        return min(scores, key=lambda s: (s.priority_excess, s.other_load, s.batch_size))

    def _worth_moving_by_priority(self, current: _Score, best: _Score) -> bool:
        """No B satisfies both: any reduction of an exceeded priority limit is
        taken at once; otherwise only a material cut of the other metric."""
        if current.priority_excess > best.priority_excess:
            return True
        if current.priority_excess < best.priority_excess:
            return False
        return current.other_load - best.other_load > self.hysteresis
