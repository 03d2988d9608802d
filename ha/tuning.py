"""What every A-SAS batch-size tuner shares: limits, priority, decisions.

A tuner is called once per optimisation interval (``interval_ms``) with
fresh :class:`~semiactive.ha.cost_model.Measurements` and answers with a
:class:`Decision`: the batch size B to use from now on and why. Tuners are
pure: no clock, no I/O; the caller measures, calls and applies B.

Two tuners implement :class:`BatchSizeTuner`: ``Algorithm3Tuner``
(``ha/algorithm3.py``, the paper's) and ``ModelTuner``
(``ha/model_tuner.py``). See docs/asas.md.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Protocol

from semiactive.ha.cost_model import Measurements

# Large enough to mean "UB" at any rate this engine runs (rows per Level-1
# round stay far below it); a B above the output log's capacity could never
# fill anyway.
DEFAULT_MAX_BATCH_SIZE = 100_000


class Priority(enum.Enum):
    """Which limit wins when no B satisfies both (``priority:`` in config)."""

    RECOVERY = "recovery"
    BANDWIDTH = "bandwidth"


class Branch(enum.Enum):
    """Why a tuner chose its B."""

    # Algorithm 3, by its line numbers.
    BOTH_HOLD = "both_hold"  # lines 8-9: both limits hold, B kept
    BANDWIDTH_OVER = "bandwidth_over"  # lines 2-3: only BW* over, B + step
    RECOVERY_OVER = "recovery_over"  # lines 4-5: only R* over, B - step
    BOTH_OVER = "both_over"  # lines 6-7: both over, moved for the priority
    # ModelTuner.
    HOLD = "hold"  # B predicted to satisfy both; no material gain in moving
    TO_FEASIBLE = "to_feasible"  # moved to the B predicted to satisfy both
    BY_PRIORITY = "by_priority"  # no B satisfies both: best for the priority


def _check_limit(name: str, value: float) -> None:
    if math.isnan(value) or math.isinf(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


@dataclass(frozen=True)
class Limits:
    """The user's borderlines (BW borderline, R_time borderline).

    Inclusive maxima: a value *equal* to its limit holds; only a value
    strictly greater is "over" (the paper's prose: 上限値を超える, exceeds
    the upper limit). Both tuners compare through these two methods.
    """

    bw_max_bytes_per_s: float
    recovery_max_s: float

    def __post_init__(self) -> None:
        _check_limit("bw_max_bytes_per_s", self.bw_max_bytes_per_s)
        _check_limit("recovery_max_s", self.recovery_max_s)

    def bandwidth_over(self, bandwidth_bytes_per_s: float) -> bool:
        return bandwidth_bytes_per_s > self.bw_max_bytes_per_s

    def recovery_over(self, recovery_s: float) -> bool:
        return recovery_s > self.recovery_max_s


def check_batch_bounds(initial_batch_size: int, max_batch_size: int) -> None:
    if max_batch_size < 1:
        raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size!r}")
    if not 1 <= initial_batch_size <= max_batch_size:
        raise ValueError(f"initial_batch_size must be in [1, {max_batch_size}], got {initial_batch_size!r}")


@dataclass(frozen=True)
class Decision:
    """One tuner step.

    ``bandwidth_bytes_per_s`` and ``recovery_s`` are the estimates at
    ``previous_batch_size`` that the tuner acted on; ``predicted_*`` are its
    predictions at the new ``batch_size`` when it has a model (None for
    Algorithm 3, whose eq. 2 needs a B_send measured under the new B).
    """

    batch_size: int
    previous_batch_size: int
    branch: Branch
    bandwidth_bytes_per_s: float
    recovery_s: float
    predicted_bandwidth_bytes_per_s: float | None = None
    predicted_recovery_s: float | None = None

    @property
    def changed(self) -> bool:
        return self.batch_size != self.previous_batch_size


class BatchSizeTuner(Protocol):
    """``tuner: algorithm3|model``: one call per optimisation interval."""

    @property
    def batch_size(self) -> int:
        """The B in force (the last decision's, or the initial one)."""
        ...

    def next(self, m: Measurements) -> Decision:
        """Decide the B for the next interval from this interval's measurements."""
        ...
