"""Operator states captured in a forked child, as Redis saves.

Why: a capture walks the whole state (about 1 µs a row of it), and on the
event loop it stops the node for that long: heartbeats, acknowledgements
and rows all wait. Linear Road's state grows for hours, and its captures
came to block a node for over 10 s, long enough to be taken for a failure.

How: ``fork()`` gives a child the parent's memory as it is at that instant
(copy-on-write), between two runs of the operator, so a consistent state.
The child encodes it and writes it to a pipe, length first, then exits
without running any of the parent's clean-up; the parent reads the pipe
from its event loop, a chunk at a time, and hands the bytes on. The child
touches no socket or thread of the parent (gRPC's threads do not exist in
it, and gRPC's fork handlers are turned off: node/__init__.py), and dies
with the parent (``PR_SET_PDEATHSIG``) so that a SIGKILLed node leaves no
child behind. Before it forks, the parent freezes the cyclic collector's
generations (``gc.freeze()``, as CPython's documentation advises before a
fork): the long-lived state is then never traversed again. The child runs
at the lowest priority (nice 19): it must not slow the live path.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import signal
import struct
from collections.abc import Callable

from semiactive.ha.replica import CaptureLost
from semiactive.ha.resync import StateBytes
from semiactive.node.engine import state
from semiactive.node.engine.engine import Engine

log = logging.getLogger(__name__)

_LENGTH = struct.Struct("!Q")
_CHUNK = 1 << 20
_PR_SET_PDEATHSIG = 1


def forking_is_safe() -> bool:
    """Whether gRPC's fork handlers are off (node/__init__.py), without
    which a child can crash in them."""
    return os.environ.get("GRPC_ENABLE_FORK_SUPPORT", "").lower() in ("0", "false", "no")


#: A child still running after this long is killed, and its capture taken
#: again (CaptureLost): one stopped (SIGSTOP) or stuck would otherwise hold
#: its replica's cut, and its producers' logs, for good. Linear Road's
#: 135 MB states took 12 s on an idle machine.
CAPTURE_TIMEOUT_S = 600.0


class ForkedCapture:
    """A :data:`semiactive.ha.replica.StateCapture` that forks, called from a running
    event loop. One per replica; the replica takes one capture at a time."""

    def __init__(self, timeout_s: float = CAPTURE_TIMEOUT_S) -> None:
        self.readers: dict[int, _PipeReader] = {}  # by child pid
        self.timeout_s = timeout_s

    def __call__(self, engine: Engine, done: Callable[[StateBytes | BaseException], None]) -> None:
        read_fd, write_fd = os.pipe()
        parent = os.getpid()
        # Every object alive now leaves the cyclic collector's reach: the
        # state is most of them, long-lived and acyclic, and full
        # collections over it grow with it; nor do the parent's collections
        # then copy the pages the child shares. What it costs: a cycle
        # alive now and garbage later is never freed.
        gc.freeze()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            os.close(read_fd)
            _child(engine, write_fd, parent)
        os.close(write_fd)
        reader = self.readers[pid] = _PipeReader(self, pid, read_fd, done)
        reader.start()

    def close(self) -> None:
        """Kill the captures still being taken (the node is stopping); their
        callbacks are not called."""
        for pid, reader in list(self.readers.items()):
            reader.stop()
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self.reap(pid)

    def reap(self, pid: int) -> int | None:
        """Wait for a child that has closed its pipe; its exit status, or
        None if another waiter (an event loop's child watcher) took it."""
        self.readers.pop(pid, None)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return None
        return os.waitstatus_to_exitcode(status)


def _child(engine: Engine, fd: int, parent: int) -> None:  # pragma: no cover - runs in the child
    status = 1
    try:
        gc.disable()  # collecting would only copy pages; the child lives seconds
        # Off the live path: the node and its peers on the machine first. At
        # Linear Road's 3-hour rates, both replicas' children competing at
        # the same priority slowed the replicas' runs to 4-5 s stalls.
        with contextlib.suppress(OSError):
            os.nice(19)
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)  # the parent died before the signal was set
        data = state.capture(engine)
        for part in (_LENGTH.pack(len(data)), data):
            view = memoryview(part)
            while view:
                view = view[os.write(fd, view[:_CHUNK]) :]
        status = 0
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            os.write(2, f"state capture failed: {type(exc).__name__}: {exc}\n".encode())
    finally:
        os._exit(status)


class _PipeReader:
    def __init__(
        self, capture: ForkedCapture, pid: int, fd: int, done: Callable[[StateBytes | BaseException], None]
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.capture = capture
        self.pid = pid
        self.fd = fd
        self.done = done
        self.header = b""
        # Grown in place (a large bytearray is extended by remapping, not
        # copied) and handed on as it is: joining the chunks at the end
        # would copy the whole state at once, on the event loop.
        self.data = bytearray()
        self.deadline: asyncio.TimerHandle | None = None

    def start(self) -> None:
        os.set_blocking(self.fd, False)
        self.loop.add_reader(self.fd, self._readable)
        self.deadline = self.loop.call_later(self.capture.timeout_s, self._overdue)

    def stop(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
        self.loop.remove_reader(self.fd)
        os.close(self.fd)

    def _overdue(self) -> None:
        """Killed: its pipe closes, and the capture ends as lost."""
        log.warning(
            "a state capture's child (pid %d) still runs after %.0f s: killing it",
            self.pid,
            self.capture.timeout_s,
        )
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def _readable(self) -> None:
        try:
            chunk = os.read(self.fd, _CHUNK)
        except BlockingIOError:
            return
        if chunk:
            if len(self.header) < _LENGTH.size:
                need = _LENGTH.size - len(self.header)
                self.header, chunk = self.header + chunk[:need], chunk[need:]
            self.data += chunk
            return
        self.stop()
        code = self.capture.reap(self.pid)
        data, self.data = self.data, bytearray()
        self.done(self._result(data, code))

    def _result(self, data: bytearray, code: int | None) -> StateBytes | BaseException:
        # The length says whether the child wrote all of it, also when its
        # exit status went to another waiter.
        if len(self.header) == _LENGTH.size and code in (0, None):
            (length,) = _LENGTH.unpack(self.header)
            if len(data) == length:
                return data
        if code is not None and code < 0:
            log.warning(
                "a state capture's child (pid %d) was killed by signal %d; taken again later", self.pid, -code
            )
            return CaptureLost(f"a state capture's child (pid {self.pid}) was killed by signal {-code}")
        return RuntimeError(
            f"a state capture's child (pid {self.pid}) ended with status {code} after "
            f"writing {len(self.header) + len(data)} bytes (its error, if any, is on the node's stderr)"
        )
