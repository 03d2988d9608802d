"""Clock streams: virtual master streams that tick on a schedule.

``Clock_12`` is the seed's daily alarm at 12:00 (ticks are milliseconds
from midnight of day 0); any other clock is declared ``NAME=PERIOD[+PHASE]``
(milliseconds). A clock has no columns: it only triggers queries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from semiactive.errors import UserError

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
_DAILY = re.compile(r"Clock_(\d{1,2})$")


class ClockError(UserError):
    pass


@dataclass(frozen=True)
class Clock:
    name: str
    period: int
    phase: int = 0

    def ticks(self, start: int, end: int) -> range:
        """The tick times in ``(start, end]``."""
        first = start + 1 + (self.phase - start - 1) % self.period
        return range(first, end + 1, self.period)

    def fires_at(self, t: int) -> bool:
        return (t - self.phase) % self.period == 0


def daily_clock(name: str) -> Clock | None:
    """``Clock_H`` (H in 0..23): every day at H:00; None for other names."""
    m = _DAILY.match(name)
    if m is None or int(m.group(1)) > 23:
        return None
    return Clock(name, DAY_MS, int(m.group(1)) * HOUR_MS)


def parse_clock(spec: str) -> Clock:
    """``NAME=PERIOD[+PHASE]`` in milliseconds."""
    name, sep, rest = spec.partition("=")
    period, _, phase = rest.partition("+")
    try:
        clock = Clock(name.strip(), int(period), int(phase or 0))
    except ValueError:
        raise ClockError(f"--clock {spec!r}: expected NAME=PERIOD[+PHASE] in milliseconds") from None
    if not sep or not clock.name or clock.period <= 0 or not 0 <= clock.phase < clock.period:
        raise ClockError(f"--clock {spec!r}: expected NAME=PERIOD[+PHASE], 0 <= PHASE < PERIOD, PERIOD > 0")
    return clock
