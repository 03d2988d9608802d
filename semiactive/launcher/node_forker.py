"""The launcher's side of the run's fork server
(:mod:`semiactive.launcher.fork_server`): start it, order a process, and
supervise what it forked as a child of the launcher's own.

The forked process's parent is the launcher because the launcher is the
subreaper of its descendants (``PR_SET_CHILD_SUBREAPER``): the server
forks twice and the process between exits, so the kernel hands the
process to the launcher, which then waits for it, signals it and reads
its exit status as for one it started with :mod:`subprocess`. Where that
cannot be (no ``prctl``, or the server does not answer in time) the
launcher starts processes cold, as before the fork server.

Nodes the launcher starts in network namespaces (``cluster lab``) are
started cold: a forked process cannot move into one.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

from semiactive.runtime.launcher_env import launched_env

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
READY_TIMEOUT_S = 60.0  # its imports, on a loaded machine
ANSWER_TIMEOUT_S = 5.0  # a fork takes milliseconds; a stopped server would hang the launcher


def become_subreaper(on: bool = True) -> bool:
    """Make this process the parent of its descendants' orphans (``on``
    false: no longer); whether it could."""
    try:
        return int(_libc().prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


@cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


class ForkedProcess:
    """A process the fork server forked, now a child of this one: what the
    launcher uses of :class:`subprocess.Popen`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                # Not (or no longer) this process's child: nothing else here
                # waits for processes, so it can only be gone unseen.
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            time.sleep(0.01)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class NodeForker:
    """The run's fork server, started by :meth:`start`; :meth:`spawn` has it
    fork a process, or says it cannot (start that process cold)."""

    def __init__(self, config_path: str, run_dir: Path) -> None:
        """``run_dir``: the run's (on the server's command line, so that it
        and every process it forks is known as the run's; it may not exist
        yet). The server's own errors (bad orders, a crash) go to this
        process's stderr."""
        self.config_path = config_path
        self.run_dir = run_dir
        self.popen: subprocess.Popen[bytes] | None = None
        self.ready = False
        self.forked = 0
        self.answer_timeout_s = ANSWER_TIMEOUT_S

    def start(self) -> None:
        """Start a server if none runs (one that died is replaced). Does not
        wait for its imports: the first :meth:`spawn` does."""
        if self.popen is not None and self.popen.poll() is None:
            return
        self.close()
        if not become_subreaper():
            return
        self.popen = subprocess.Popen(
            [
                *(sys.executable, "-m", "semiactive", "fork-server"),
                *("--config", self.config_path, "--run-dir", str(self.run_dir)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,  # its answers are read a line at a time, after select() says one is there
            env=launched_env(),
            start_new_session=True,
        )
        self.ready = False

    def spawn(self, argv: list[str], log: Path, wait_ready: bool = True) -> ForkedProcess | None:
        """Have the server fork ``argv`` (a ``semiactive node`` or
        ``coordinator`` command line) with its output appended to ``log``.
        None if there is no server, it is still importing and
        ``wait_ready`` is false (a restart during the run must not wait),
        it could not fork, or it does not answer in time or answers
        nonsense (it is then killed; the next :meth:`start` replaces it)."""
        popen = self.popen
        if popen is None or popen.poll() is not None or popen.stdin is None or popen.stdout is None:
            return None
        if not self.ready:
            if not wait_ready and not _readable(popen.stdout.fileno(), 0.0):
                return None
            if self._answer(READY_TIMEOUT_S) != b"ready":
                self.close()
                return None
            self.ready = True
        try:
            popen.stdin.write(json.dumps({"argv": argv, "log": str(log)}).encode() + b"\n")
            popen.stdin.flush()
        except OSError:  # it died just now
            self.close()
            return None
        try:
            reply = json.loads(self._answer(self.answer_timeout_s) or b"null")
        except ValueError:
            reply = None
        pid = reply.get("pid") if isinstance(reply, dict) else None
        if not isinstance(pid, int):
            if not (isinstance(reply, dict) and "error" in reply):
                self.close()
            return None
        self.forked += 1
        return ForkedProcess(pid)

    def _answer(self, timeout: float) -> bytes:
        """The server's next line, stripped; b"" if none came in ``timeout``
        seconds or it ended."""
        assert self.popen is not None and self.popen.stdout is not None
        if not _readable(self.popen.stdout.fileno(), timeout):
            return b""
        return self.popen.stdout.readline(1 << 12).strip()

    def close(self) -> None:
        """Kill the server (what it forked lives on, still this process's
        children) and stop adopting orphans: a process running several
        clusters in turn, or a test, must not collect others' zombies."""
        become_subreaper(False)
        popen, self.popen = self.popen, None
        if popen is None:
            return
        if popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=5)
        for stream in (popen.stdin, popen.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _readable(fd: int, timeout: float) -> bool:
    ready, _, _ = select.select([fd], [], [], timeout)
    return bool(ready)
