"""The launcher's side of a warm interpreter
(:mod:`semiactive.node.service.warm_start`): one ``semiactive warm``
process kept waiting, handed to the next node that is restarted.

A restarted node then skips Python's start and its imports (about 1.3 s
here); it still reads its progress, opens its broker or database and is
reconnected by its peers. A fresh one is started a moment after each
hand-over (:data:`RESPAWN_DELAY_S`), not at once: its imports would take
the CPU from the node that just took over. Nodes the launcher starts in
network namespaces (``cluster lab``) are started cold: a warm process
cannot move into one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

RESPAWN_DELAY_S = 1.0


class WarmProcess:
    def __init__(self, config_path: str, run_dir: Path, env: Mapping[str, str]) -> None:
        """``run_dir``: the run's (on its command line, so that a waiting
        interpreter is known as the run's; it writes to ``logs/warm.log``
        until it is handed over); ``env``: a node's environment."""
        self.config_path = config_path
        self.run_dir = run_dir
        self.log = run_dir / "logs" / "warm.log"
        self.env = dict(env)
        self.popen: subprocess.Popen[bytes] | None = None
        self.taken_at = -RESPAWN_DELAY_S
        self.handed_over = 0

    def keep_ready(self) -> None:
        """Start a waiting interpreter if there is none (and the last one
        was handed over long enough ago)."""
        if self.popen is not None and self.popen.poll() is None:
            return
        if time.monotonic() - self.taken_at < RESPAWN_DELAY_S:
            return
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                [
                    *(sys.executable, "-m", "semiactive", "warm"),
                    *("--config", self.config_path, "--run-dir", str(self.run_dir)),
                ],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )

    def take(self, argv: list[str], log: Path) -> subprocess.Popen[bytes] | None:
        """Hand the waiting interpreter ``argv`` (a ``semiactive node``
        command line) and ``log``; its process is now that node's. None if
        no interpreter waits (start the node cold)."""
        popen, self.popen = self.popen, None
        if popen is None or popen.poll() is not None or popen.stdin is None:
            return None
        try:
            popen.stdin.write(json.dumps({"argv": argv, "log": str(log)}).encode() + b"\n")
            popen.stdin.close()
        except OSError:  # it died just now
            self._kill(popen)
            return None
        self.taken_at = time.monotonic()
        self.handed_over += 1
        return popen

    def close(self) -> None:
        popen, self.popen = self.popen, None
        if popen is not None:
            self._kill(popen)

    @staticmethod
    def _kill(popen: subprocess.Popen[bytes]) -> None:
        if popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=5)
        if popen.stdin is not None:
            with contextlib.suppress(OSError):
                popen.stdin.close()
