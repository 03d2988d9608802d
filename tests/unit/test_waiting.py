"""The tests' one way to wait for a condition (tests/waiting.py): it returns
what the probe saw as soon as the condition holds, lets the errors it was
told to expect pass as "not yet", and on timeout names what it waited for
and what it saw last. The async twin waits on the loop's clock: on the
simulation's virtual loop, in virtual time."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator

import pytest

from semiactive.simulation.virtual_loop import VirtualLoop
from tests.waiting import wait_until, wait_until_async


def test_returns_what_the_probe_saw_once_the_condition_holds() -> None:
    counter = itertools.count()
    assert wait_until(lambda: next(counter), until=lambda n: n >= 3, what="3", interval=0.001) == 3
    seen = iter([None, [], ["x"]])
    assert wait_until(lambda: next(seen), what="a non-empty list", interval=0.001) == ["x"]


def test_expected_errors_are_not_yet_and_others_end_the_wait() -> None:
    attempts: Iterator[Exception | str] = iter([FileNotFoundError("x"), FileNotFoundError("x"), "ready"])

    def probe() -> str:
        got = next(attempts)
        if isinstance(got, Exception):
            raise got
        return got

    assert wait_until(probe, what="the file", ignoring=OSError, interval=0.001) == "ready"
    with pytest.raises(ZeroDivisionError):
        wait_until(lambda: 1 // 0, what="anything", ignoring=OSError, timeout=5)


def test_a_timeout_names_what_was_awaited_and_what_was_seen_last() -> None:
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"^timed out after 0\.2 s waiting for the sink; last seen: 41$"):
        wait_until(lambda: 41, until=lambda n: n == 42, what="the sink", timeout=0.2)
    assert 0.2 <= time.monotonic() - started < 2
    with pytest.raises(AssertionError, match=r"waiting for node-1 \(its log: boom\); last seen: OSError"):
        wait_until(_refused, what=lambda: "node-1 (its log: boom)", ignoring=OSError, timeout=0.05)
    with pytest.raises(AssertionError, match=r"last seen: 'xxx+\.\.\. \(\d+ characters\)$"):
        wait_until(lambda: "x" * 10_000, until=lambda s: False, what="nothing", timeout=0)


def _refused() -> None:
    raise OSError("connection refused")


def test_the_async_twin_awaits_probes_and_waits_on_the_loops_clock() -> None:
    loop = VirtualLoop()
    state = {"n": 0}

    async def rpc() -> int:
        await asyncio.sleep(1.0)  # virtual
        state["n"] += 1
        return state["n"]

    async def main() -> tuple[int, float]:
        got = await wait_until_async(
            rpc, until=lambda n: n == 5, what="five answers", interval=10.0, timeout=3600
        )
        return got, loop.time()

    try:
        got, at = loop.run_until_complete(main())
        assert got == 5 and at == pytest.approx(4 * 11.0 + 1.0)  # a virtual minute, at once
        never = wait_until_async(lambda: False, what="a thing that never comes", timeout=3600, interval=60)
        with pytest.raises(AssertionError, match="after 3600 s waiting for a thing that never comes"):
            loop.run_until_complete(never)
        assert loop.time() == pytest.approx(45.0 + 3600)
    finally:
        loop.close()


async def test_the_async_twin_takes_plain_probes_on_a_real_loop() -> None:
    done = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.05, done.set_result, "yes")
    assert await wait_until_async(lambda: done.done() and done.result(), what="the future") == "yes"
    with pytest.raises(AssertionError, match="last seen: ConnectionError"):
        await wait_until_async(_connection_refused, what="a peer", ignoring=ConnectionError, timeout=0.05)


async def _connection_refused() -> None:
    raise ConnectionError("refused")
