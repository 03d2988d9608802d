"""Which member of a protected source or sink serves it: the one holding
an exclusive lock on ``<run-dir>/standby/<stage>.lock``.

A source or sink with ``ha: {secondary: ...}`` runs as two processes on
one run directory. Both try to take the lock; the one that holds it
serves (emits the stream, writes the table), the other waits as a
standby with everything imported and its peers known. The kernel releases
a lock the moment its holder dies (SIGKILL, a crash, the OOM killer), so
the standby takes over within one poll (:data:`POLL_S`); it then goes on
from the progress the holder left, as a restarted process would.

The lock is also the fence: it is *not* released while its holder is
frozen (SIGSTOP) or cut off, so two processes never write the same row
log, progress file or table. A frozen source or sink is not replaced: its
stream waits, as it would without a standby. Who held it last is counted
in ``<stage>.epoch`` (written under the lock): each new holder serves at
the next epoch, which is its view's, so that consumers fence the old one.

It needs the run directory on one machine's file system (or a network file
system with working ``flock``): ``cluster up``'s, or a volume every
container of the deployment mounts.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
from pathlib import Path

from semiactive.runtime.atomic_file import write_json

POLL_S = 0.005


class ServingLock:
    def __init__(self, run_dir: Path, stage: str) -> None:
        directory = run_dir / "standby"
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{stage}.lock"
        self.epoch_path = directory / f"{stage}.epoch"
        self._fd: int | None = None
        self._held = False

    @property
    def held(self) -> bool:
        return self._held

    def try_take(self) -> bool:
        """Take the lock if nobody holds it; True if this process holds it.
        The file is opened once: a standby polls every few milliseconds."""
        if self._held:
            return True
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self._held = True
        return True

    async def take(self) -> float:
        """Wait until this process holds the lock; return how long before
        taking it it last found it held (s; 0 if it was free at once): the
        most the lock can have been free unnoticed."""
        last_refused: float | None = None
        while not self.try_take():
            last_refused = time.monotonic()
            await asyncio.sleep(POLL_S)
        return 0.0 if last_refused is None else time.monotonic() - last_refused

    def release(self) -> None:
        fd, self._fd, self._held = self._fd, None, False
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def last_epoch(self) -> int | None:
        """The epoch the last holder served at (None: nobody served yet, or
        the file is unreadable)."""
        try:
            text = self.epoch_path.read_text()
            epoch = int(text.strip())
        except (OSError, ValueError):
            return None
        return epoch if epoch >= 0 else None

    def record(self, epoch: int) -> None:
        """Record the epoch this holder serves at (only while holding)."""
        assert self._held, "the epoch is written under the lock"
        write_json(self.epoch_path, epoch)
