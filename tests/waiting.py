"""Waiting for a condition, not for a time: how a test waits until
something has happened (a port serves, a file appears, a node took over, an
event is logged).

A condition wait returns as soon as the thing happened, so it is faster
than a sleep long enough for a loaded CI machine, and it cannot be too
short; on timeout it fails naming what it waited for and what it saw last.
:func:`wait_until` polls on the wall clock; :func:`wait_until_async` polls
on the running loop's clock, so on the simulation's virtual loop
(semiactive/simulation/virtual_loop.py) it waits in virtual time.

In-process async code can also run on that loop (:func:`on_virtual_clock`):
its sleeps, timeouts and retries then take no real time at all.

A sleep that is part of what a test does (a run left to produce data, a
freeze held past a detector's timeout, a fault at a chosen moment, the grace
period of a check that something does *not* happen) stays a sleep, with a
comment saying so.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar, overload

from semiactive.simulation.virtual_loop import VirtualLoop

T = TypeVar("T")
P = ParamSpec("P")

Ignored = type[BaseException] | tuple[type[BaseException], ...]

__all__ = ["on_virtual_clock", "wait_until", "wait_until_async"]


# Without ``until`` the probe's value must be true to be returned: never
# None, whatever the probe's type says (a pid, or None while unknown).
@overload
def wait_until(
    probe: Callable[[], T | None],
    *,
    what: str | Callable[[], str],
    timeout: float = ...,
    interval: float = ...,
    ignoring: Ignored = ...,
) -> T: ...


@overload
def wait_until(
    probe: Callable[[], T],
    *,
    what: str | Callable[[], str],
    until: Callable[[T], object],
    timeout: float = ...,
    interval: float = ...,
    ignoring: Ignored = ...,
) -> T: ...


def wait_until(
    probe: Callable[[], Any],
    *,
    what: str | Callable[[], str],
    until: Callable[[Any], object] = bool,
    timeout: float = 30.0,
    interval: float = 0.05,
    ignoring: Ignored = (),
) -> Any:
    """Call ``probe`` every ``interval`` seconds until ``until`` holds for
    what it returns (by default: until it returns something true), and
    return that value.

    A probe raising one of ``ignoring`` (the file is not there yet, the
    port refuses) has not seen it yet; any other exception ends the wait at
    once (a probe may assert that the process it waits on is alive).
    Past ``timeout`` seconds (the probe is called once more at the
    deadline): :class:`AssertionError` "timed out after T s waiting for
    WHAT; last seen: ..." (``what`` may be a function, called only then,
    to add a log's tail, say).
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = probe()
        except ignoring as exc:
            last = exc
        else:
            if until(value):
                return value
            last = value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(_timed_out(what, timeout, last))
        time.sleep(min(interval, remaining))


@overload
async def wait_until_async(
    probe: Callable[[], Awaitable[T | None]],
    *,
    what: str | Callable[[], str],
    timeout: float = ...,
    interval: float = ...,
    ignoring: Ignored = ...,
) -> T: ...


@overload
async def wait_until_async(
    probe: Callable[[], Awaitable[T]],
    *,
    what: str | Callable[[], str],
    until: Callable[[T], object],
    timeout: float = ...,
    interval: float = ...,
    ignoring: Ignored = ...,
) -> T: ...


@overload
async def wait_until_async(
    probe: Callable[[], T | None],
    *,
    what: str | Callable[[], str],
    timeout: float = ...,
    interval: float = ...,
    ignoring: Ignored = ...,
) -> T: ...


@overload
async def wait_until_async(
    probe: Callable[[], T],
    *,
    what: str | Callable[[], str],
    until: Callable[[T], object],
    timeout: float = ...,
    interval: float = ...,
    ignoring: Ignored = ...,
) -> T: ...


async def wait_until_async(
    probe: Callable[[], Any],
    *,
    what: str | Callable[[], str],
    until: Callable[[Any], object] = bool,
    timeout: float = 30.0,
    interval: float = 0.05,
    ignoring: Ignored = (),
) -> Any:
    """:func:`wait_until` in a coroutine: ``probe`` may be a plain function
    or return an awaitable (an RPC, say); the time is the running loop's
    (virtual on the simulation's loop)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: object = None
    while True:
        try:
            got = probe()
            value = await got if inspect.isawaitable(got) else got
        except ignoring as exc:
            last = exc
        else:
            if until(value):
                return value
            last = value
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise AssertionError(_timed_out(what, timeout, last))
        await asyncio.sleep(min(interval, remaining))


def on_virtual_clock(test: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    """An async test run on the simulation's virtual-clock loop instead of
    a real one: time jumps to the next timer whenever nothing is ready, so
    a wait of seconds passes at once, always the same way. Only for code
    that does no real I/O (the simulation's in-memory network does none)."""

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        loop = VirtualLoop()
        try:
            loop.run_until_complete(test(*args, **kwargs))
        finally:
            loop.close()

    return run


_SHOWN = 2000  # characters of the last value a timeout shows


def _timed_out(what: str | Callable[[], str], timeout: float, last: object) -> str:
    shown = repr(last)
    if len(shown) > _SHOWN:
        shown = shown[:_SHOWN] + f"... ({len(shown)} characters)"
    described = what() if callable(what) else what
    return f"timed out after {timeout:g} s waiting for {described}; last seen: {shown}"
