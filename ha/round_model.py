"""What SAS sends and replays at batch size B, from rows per Level-1 round.

Eq. 2 describes the bandwidth at the *current* B only (it needs B_send
measured under that B). To choose B in one move the model tuner needs
BW(B) and R(B) for every candidate B, predicted from quantities that do not
depend on B: the input rate, the Level-1 delay, the tuple size and the
per-tuple recovery costs. Derivation (docs/asas.md, "The model tuner"):

- Rows wait in Nu's output queue until a Level-1 cut passes them; the
  longest wait is the Level-1 delay D (ack interval + acknowledgement round
  trip + the cut's lag). So ``n = rate x D`` rows accumulate per Level-1
  round.
- A batch goes to N' when B rows are unsent; the cut drops unsent rows.
  Starting each round empty, floor(n / B) batches fill and are sent and
  the remaining ``n mod B`` rows are cut unsent: the sent fraction is
  ``B x floor(n / B) / n`` (exact for a cut without lag, checked against
  a row-by-row simulation).
- Rounds are not all alike (ack timers drift, the cut's lag varies), and
  the exact fraction's teeth are an artefact of one fixed n. The model
  takes n uniform in ``[n(1 - j), n(1 + j)]`` and uses the expected
  fraction ``E[B floor(n/B)] / E[n]``, in closed form. With j = 0.25 and
  n = 320 it predicts 92, 82, 62, 59, 0% at B = 50, 100, 200, 300, 400;
  the sweep in docs/ha.md measured 80, 79, 65, 62, 0.3%.
- ``BW(B) = rate x tuple_bytes x sent_fraction(B)``; B = 1 is AS: every
  row is sent at once, fraction 1.
- At a failure N' lacks the unsent rows (fewer than B) and, when rows were
  cut unsent, replays from the cut (at most n(1 + j) rows), so
  ``R(B) = min(B, n(1 + j)) x (S_time + R_ptime)``: eq. 3 bounded by the
  rows retained since the cut.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from semiactive.ha.cost_model import Measurements, check_batch_size, check_measured


def _integral_of_floor(x: float, batch_size: int) -> float:
    """The integral of floor(t / B) dt from 0 to x (x >= 0)."""
    k = math.floor(x / batch_size)
    return batch_size * k * (k - 1) / 2 + k * (x - k * batch_size)


@dataclass(frozen=True)
class RoundModel:
    input_rate_per_s: float
    tuple_bytes: float
    level1_delay_s: float
    recovery_s_per_tuple: float  # S_time + R_ptime of the machine that recovers
    jitter: float = 0.25  # relative spread j of the rows per round

    def __post_init__(self) -> None:
        check_measured("input_rate_per_s", self.input_rate_per_s)
        check_measured("tuple_bytes", self.tuple_bytes)
        check_measured("level1_delay_s", self.level1_delay_s)
        check_measured("recovery_s_per_tuple", self.recovery_s_per_tuple)
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must be in [0, 1), got {self.jitter!r}")

    @classmethod
    def from_measurements(cls, m: Measurements, jitter: float = 0.25, delay_scale: float = 1.0) -> RoundModel:
        """``delay_scale`` stretches the measured Level-1 delay (the model
        tuner's correction when measured bandwidth contradicts the model)."""
        return cls(
            m.input_rate_per_s,
            m.tuple_bytes,
            m.level1_delay_s * delay_scale,
            m.recovery_costs.per_tuple_s,
            jitter,
        )

    @cached_property
    def rows_per_round(self) -> float:
        """n: rows appended while a row waits for the Level-1 cut."""
        return self.input_rate_per_s * self.level1_delay_s

    @cached_property
    def max_rows_per_round(self) -> float:
        return self.rows_per_round * (1 + self.jitter)

    @property
    def never_sent_from(self) -> int:
        """The smallest B at which no batch can fill within a round: every
        larger B predicts the same (nothing sent, replay from the cut)."""
        return math.floor(self.max_rows_per_round) + 1

    def sent_fraction(self, batch_size: int) -> float:
        """The expected fraction of rows that reach N' in full batches."""
        check_batch_size(batch_size)
        if batch_size == 1:
            return 1.0
        n = self.rows_per_round
        if n <= 0:
            return 0.0
        low, high = n * (1 - self.jitter), n * (1 + self.jitter)
        if high - low < 1e-9 * n:
            return batch_size * math.floor(n / batch_size) / n
        # E[floor(n / B)] for n uniform in [low, high]
        full_batches = _integral_of_floor(high, batch_size) - _integral_of_floor(low, batch_size)
        return min(1.0, batch_size * full_batches / (high - low) / n)

    def bandwidth(self, batch_size: int) -> float:
        """BW(B) in bytes/s on the backup channel."""
        return self.input_rate_per_s * self.tuple_bytes * self.sent_fraction(batch_size)

    def recovery(self, batch_size: int) -> float:
        """R(B) in seconds: eq. 3 with B bounded by the rows since the cut."""
        rows = min(float(check_batch_size(batch_size)), self.max_rows_per_round)
        return rows * self.recovery_s_per_tuple
