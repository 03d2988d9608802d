"""How a durable sink waits for its database or server (docs/connectors.md):
at start-up for a bounded time, then a one-line error; once running for as
long as it takes, reporting the outage once and the return once. Attempts
are spaced by a doubling delay, from 50 ms to 2 s."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

RETRY_FIRST_S = 0.05
RETRY_MAX_S = 2.0

Attempt = Callable[[], Awaitable[None]]


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


async def connect_within(
    attempt: Attempt,
    reset: Attempt,
    errors: tuple[type[BaseException], ...],
    timeout_s: float,
    unavailable: Callable[[BaseException], Exception],
) -> None:
    """``attempt`` until it succeeds, ``reset`` after each failure; past
    ``timeout_s``, raise ``unavailable(last error)``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    delay = RETRY_FIRST_S
    while True:
        try:
            await attempt()
            return
        except errors as exc:
            await reset()
            if loop.time() + delay > deadline:
                raise unavailable(exc) from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)


async def until_done(
    attempt: Attempt,
    reset: Attempt,
    errors: tuple[type[BaseException], ...],
    what: str,
    on_outage: Callable[[str | None], None] | None,
) -> None:
    """``attempt`` until it succeeds, however long: the first failure is
    logged and reported (``on_outage(error)``), and so is the success after
    it (``on_outage(None)``)."""
    delay = RETRY_FIRST_S
    down = False
    while True:
        try:
            await attempt()
        except errors as exc:
            if not down:
                down = True
                log.warning("%s: %s; retrying", what, first_line(exc))
                if on_outage is not None:
                    on_outage(first_line(exc))
            await reset()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)
            continue
        if down and on_outage is not None:
            on_outage(None)
        return
