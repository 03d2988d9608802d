"""The A-SAS cost model: measurements and the SAS paper's eq. 2 and eq. 3.

Pure: the measuring (counting batches, timing sends and reprocessing) is
done elsewhere over some window; this module only validates what was
measured and turns it into the paper's estimates for a batch size B.

- eq. 2 (bandwidth):  ``BW* = B_send x sum_{i=1..B} |tuple_i| = B_send x B x mean tuple bytes``
- eq. 3 (recovery):   ``R*  = B x (S_time + R_ptime)``

See docs/asas.md for where each quantity is measured and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def check_measured(name: str, value: float) -> float:
    """``value`` if it is a finite number >= 0, else ValueError naming it."""
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def check_batch_size(batch_size: int) -> int:
    if batch_size < 1:
        raise ValueError(f"batch size must be >= 1, got {batch_size!r}")
    return batch_size


@dataclass(frozen=True)
class Costs:
    """Per-tuple recovery costs measured at one machine (the SAS paper, 5.1.1).

    ``send_time_s`` (S_time): seconds to move one row over the edge into
    this machine (a batch's transfer time / its rows). ``reprocess_time_s``
    (R_ptime): seconds this machine's operator section spends per row.
    """

    send_time_s: float
    reprocess_time_s: float

    def __post_init__(self) -> None:
        check_measured("send_time_s (S_time)", self.send_time_s)
        check_measured("reprocess_time_s (R_ptime)", self.reprocess_time_s)

    @property
    def per_tuple_s(self) -> float:
        """S_time + R_ptime: what eq. 3 multiplies by B."""
        return self.send_time_s + self.reprocess_time_s


@dataclass(frozen=True)
class Measurements:
    """What A-SAS measures over one window, for one protected edge Nu -> N.

    Everything here is measured, never derived from other fields. In
    particular ``backup_batches_per_s`` (B_send) is the number of backup
    batches Nu actually sent to N' per second, counted on the backup
    channel. It must not be computed as ``input_rate_per_s / B``: then
    eq. 2 gives ``BW* = (rate / B) x B x tuple_bytes = rate x tuple_bytes``
    whatever B is, so raising B never lowers BW* and Algorithm 3 keeps
    increasing B to its bound. The saving SAS is about, rows cut by a
    Level-1 acknowledgement before their batch filled and therefore never
    sent, shows only in the counted batches.

    Where each quantity comes from (docs/asas.md, "Measurements"):

    - at Nu (the producer): ``backup_batches_per_s``, ``tuple_bytes`` (mean
      bytes per row on the edge), ``input_rate_per_s`` (rows per second
      appended for the edge) and ``level1_delay_s`` (the longest a row stays
      uncut: ack interval + acknowledgement round trip + the cut's lag);
    - ``primary``: S_time and R_ptime measured at N, as in the paper;
    - ``secondary``: the same measured at N' from the backup batches it
      receives and processes, or None when it has none to report (no batch
      arrived in the window, e.g. B larger than the rows per Level-1 round).
    """

    backup_batches_per_s: float
    tuple_bytes: float
    input_rate_per_s: float
    level1_delay_s: float
    primary: Costs
    secondary: Costs | None = None

    def __post_init__(self) -> None:
        check_measured("backup_batches_per_s (B_send)", self.backup_batches_per_s)
        check_measured("tuple_bytes", self.tuple_bytes)
        check_measured("input_rate_per_s", self.input_rate_per_s)
        check_measured("level1_delay_s", self.level1_delay_s)

    @property
    def recovery_costs(self) -> Costs:
        """The costs eq. 3 uses: the secondary's when it reported them.

        After a takeover it is N' that receives the retransmitted rows and
        reprocesses them (Algorithm 2 lines 17-19), so its own S_time and
        R_ptime describe the recovery; the paper measures them at N only
        because it assumes symmetric machines (5.1.1), and names unequal
        machines as future work (section 7). The primary's costs stand in
        when the secondary has nothing to report.
        """
        return self.secondary if self.secondary is not None else self.primary


def estimated_bandwidth(m: Measurements, batch_size: int) -> float:
    """eq. 2: BW* in bytes/s = B_send x B x mean tuple bytes."""
    return m.backup_batches_per_s * check_batch_size(batch_size) * m.tuple_bytes


def estimated_recovery(m: Measurements, batch_size: int) -> float:
    """eq. 3: R* in seconds = B x (S_time + R_ptime), the worst case where
    B rows wait unsent in Nu's output queue when N fails."""
    return check_batch_size(batch_size) * m.recovery_costs.per_tuple_s
