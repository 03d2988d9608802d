"""When a replayed file's rows are due: the speed may change with the data's time.

A file source replays its rows at the pace of their timestamps divided by a
speed. A benchmark whose load grows with the data's time (Linear Road's
cars) can replay the light early part faster and the heavy part in real
time: ``steps`` change the speed from a given offset into the data. Both
directions are needed: the source asks when a row is due (wall offset of a
data offset), the benchmark when an answer was emitted in the data's time
(data offset of a wall offset). Offsets are milliseconds from the first
row (data) and from the start of the replay (wall). Pure: no clock is read
here.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence


class ReplayClock:
    def __init__(self, speed: float, steps: Sequence[tuple[float, float]] = ()) -> None:
        """``speed`` from the first row; each ``(from_ms, speed)`` of
        ``steps`` (increasing ``from_ms`` > 0) from that data offset on."""
        points = [(0.0, speed), *steps]
        for (before, _), (after, _) in itertools.pairwise(points):
            if after <= before:
                raise ValueError(f"speed steps must be at increasing data offsets > 0, got {after:g} ms")
        if any(s <= 0 for _, s in points):
            raise ValueError("every speed must be > 0")
        self.speeds = [s for _, s in points]
        self.data_starts = [float(d) for d, _ in points]
        # The wall offset at which each step starts.
        self.wall_starts = [0.0]
        for i in range(1, len(points)):
            span = self.data_starts[i] - self.data_starts[i - 1]
            self.wall_starts.append(self.wall_starts[-1] + span / self.speeds[i - 1])

    def wall_ms(self, data_ms: float) -> float:
        """When the row ``data_ms`` after the first is due, after the start."""
        i = max(0, bisect.bisect_right(self.data_starts, data_ms) - 1)
        return self.wall_starts[i] + (data_ms - self.data_starts[i]) / self.speeds[i]

    def data_ms(self, wall_ms: float) -> float:
        """How far into the data the replay is ``wall_ms`` after the start."""
        i = max(0, bisect.bisect_right(self.wall_starts, wall_ms) - 1)
        return self.data_starts[i] + (wall_ms - self.wall_starts[i]) * self.speeds[i]

    def describe(self) -> str:
        """``2.5x, 1.6x from 1200 s, 1x from 3600 s``."""
        parts = [f"{self.speeds[0]:g}x"]
        parts += [
            f"{s:g}x from {d / 1000:g} s" for d, s in zip(self.data_starts[1:], self.speeds[1:], strict=True)
        ]
        return ", ".join(parts)


def parse_speed(text: str) -> ReplayClock:
    """``S`` or ``S,T:S,...`` (T in seconds of data): a command line's speed."""
    first, *rest = text.split(",")
    try:
        steps = []
        for part in rest:
            at, _, speed = part.partition(":")
            steps.append((float(at) * 1000, float(speed)))
        return ReplayClock(float(first), steps)
    except ValueError as exc:
        raise ValueError(f"bad speed {text!r} (S or S,T:S,..., T in seconds of data): {exc}") from None
