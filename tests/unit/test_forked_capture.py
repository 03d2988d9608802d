"""Operator states captured in a forked child (node/service/forked_capture.py): the
bytes are the state at the instant of the call, whatever the parent does
next; a child that fails is an error, not a state; a stopping node kills
its children, and a SIGKILLed node leaves none behind."""

from __future__ import annotations

import asyncio
import gc
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from semiactive.ha.replica import CaptureLost
from semiactive.ha.resync import StateBytes
from semiactive.launcher.supervision import process_state
from semiactive.node.engine import state
from semiactive.node.engine.engine import Engine
from semiactive.node.service.forked_capture import ForkedCapture
from tests.unit.test_engine_state import RELATIONAL, _engine, _relational, _step
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    """A capture freezes the collector's generations: not the test process's."""
    yield
    gc.unfreeze()


def _running(pid: int) -> bool:
    return process_state(pid) not in (None, "Z")


async def _capture(capture: ForkedCapture, engine: Engine) -> StateBytes | BaseException:
    result: asyncio.Future[StateBytes | BaseException] = asyncio.get_running_loop().create_future()
    capture(engine, result.set_result)
    return await asyncio.wait_for(result, 30)


async def test_the_bytes_are_the_state_at_the_call_whatever_the_parent_does_next() -> None:
    inputs = _relational(random.Random(3))
    engine = _engine(RELATIONAL, lineage=True)
    _step(engine, inputs, -1, 40)
    expected = state.capture(engine)
    capture = ForkedCapture()
    result: asyncio.Future[StateBytes | BaseException] = asyncio.get_running_loop().create_future()
    capture(engine, result.set_result)
    _step(engine, inputs, 40, 10_000)  # the parent runs on before the child has written
    assert state.capture(engine) != expected
    assert await asyncio.wait_for(result, 30) == expected
    assert not capture.readers
    assert gc.get_freeze_count() > 0  # the state alive at the fork is left to reference counting


async def test_a_child_that_fails_gives_an_error_and_leaves_the_parent_as_it_was() -> None:
    engine = _engine(RELATIONAL, lineage=True)
    _step(engine, _relational(random.Random(4)), -1, 40)
    expected = state.capture(engine)
    op = next(op for op in engine.operators if op.STATE)
    saved = getattr(op, op.STATE[0])
    setattr(op, op.STATE[0], object())  # nothing the codec can write
    result = await _capture(ForkedCapture(), engine)
    assert isinstance(result, RuntimeError)
    assert "status 1" in str(result)
    setattr(op, op.STATE[0], saved)
    assert await _capture(ForkedCapture(), engine) == expected


async def _signalled(sig: signal.Signals, capture: ForkedCapture) -> tuple[int, StateBytes | BaseException]:
    """A capture whose child would run for a minute, sent ``sig`` at once:
    the child's pid and what the capture ended with."""
    result: asyncio.Future[StateBytes | BaseException] = asyncio.get_running_loop().create_future()
    capture(_engine(RELATIONAL), result.set_result)
    (pid,) = capture.readers
    os.kill(pid, sig)
    return pid, await asyncio.wait_for(result, 30)


async def test_a_child_killed_from_outside_is_a_lost_capture_not_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The OOM killer or an operator may kill a child: the replica takes
    the capture again later (semiactive.ha.replica.CaptureLost) instead of failing."""
    monkeypatch.setattr(state, "capture", lambda engine: time.sleep(60))  # the child inherits it
    capture = ForkedCapture()
    pid, lost = await _signalled(signal.SIGKILL, capture)
    assert isinstance(lost, CaptureLost) and "signal 9" in str(lost)
    assert not capture.readers and not _running(pid)


async def test_a_stopped_child_is_killed_after_the_timeout_and_its_capture_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A child stopped from outside (SIGSTOP) would hold its replica's cut
    for good: past the timeout it is killed, and the capture taken again."""
    monkeypatch.setattr(state, "capture", lambda engine: time.sleep(60))
    pid, lost = await _signalled(signal.SIGSTOP, ForkedCapture(timeout_s=0.5))
    assert isinstance(lost, CaptureLost) and "signal 9" in str(lost)
    assert not _running(pid)


async def test_closing_kills_a_capture_being_taken_and_drops_its_callback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(state, "capture", lambda engine: time.sleep(60))  # the child inherits it
    capture = ForkedCapture()
    results: list[StateBytes | BaseException] = []
    capture(_engine(RELATIONAL), results.append)
    (pid,) = capture.readers
    assert _running(pid)
    capture.close()
    assert not _running(pid) and not capture.readers
    await asyncio.sleep(0.05)  # a grace period for the callback that must not come
    assert results == []


async def test_the_child_runs_at_the_lowest_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state, "capture", lambda engine: str(os.nice(0)).encode())  # run in the child
    assert await _capture(ForkedCapture(), _engine(RELATIONAL)) == b"19"


def test_a_sigkilled_node_leaves_no_capture_child() -> None:
    parent = textwrap.dedent(
        """
        import asyncio, time
        from semiactive.node.engine import state
        from semiactive.node.service.forked_capture import ForkedCapture
        from tests.unit.test_engine_state import RELATIONAL, _engine

        async def main():
            state.capture = lambda engine: time.sleep(60)
            capture = ForkedCapture()
            capture(_engine(RELATIONAL), print)
            print(*capture.readers, flush=True)
            await asyncio.sleep(60)

        asyncio.run(main())
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        assert _running(child)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        wait_until(lambda: not _running(child), what=f"the capture child {child} to end", timeout=10)
    finally:
        proc.kill()
        proc.wait()


def test_captures_taken_during_grpc_calls_all_complete() -> None:
    """gRPC's fork handlers crash a child forked during calls (node/__init__.py)."""
    script = textwrap.dedent(
        """
        import asyncio
        from semiactive.node.engine import state
        from semiactive.node.service.forked_capture import ForkedCapture
        import grpc
        from tests.unit.test_engine_state import RELATIONAL, _engine

        async def main():
            server = grpc.aio.server()
            echo = grpc.unary_unary_rpc_method_handler(lambda request, context: request)
            server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.T", {"E": echo})])
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
            call, running = channel.unary_unary("/t.T/E"), True

            async def calls():
                while running:
                    await call(b"x" * 100)

            busy = asyncio.create_task(calls())
            engine, capture, failed = _engine(RELATIONAL), ForkedCapture(), 0
            for _ in range(60):
                done = asyncio.get_running_loop().create_future()
                capture(engine, done.set_result)
                failed += not isinstance(await done, bytearray)
            running = False
            await busy
            await channel.close()
            await server.stop(None)
            print(failed)

        asyncio.run(main())
        """
    )
    command = [sys.executable, "-c", script]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0"], out.stderr[-2000:]
