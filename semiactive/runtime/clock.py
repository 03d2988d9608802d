"""Time as node code sees it: the running event loop's clock.

Nothing in a node reads ``time.monotonic()`` or ``time.time()`` directly,
so that the deterministic simulation can run the real node code on a loop
with a virtual clock (``semiactive.simulation``). Under uvloop or asyncio,
``loop.time()`` is the monotonic clock and wall time is ``time.time()``;
a loop that defines ``wall_time()`` (the simulation's) supplies both.
Measurements of CPU time (``perf_counter``) stay real: they measure work,
not schedule it.
"""

from __future__ import annotations

import asyncio
import time


def _loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def monotonic() -> float:
    """Seconds on the loop's monotonic clock (``time.monotonic`` outside a loop)."""
    loop = _loop()
    return loop.time() if loop is not None else time.monotonic()


def wall() -> float:
    """Unix time in seconds, as the loop sees it."""
    loop = _loop()
    wall_time = getattr(loop, "wall_time", None)
    if wall_time is not None:
        result: float = wall_time()
        return result
    return time.time()
