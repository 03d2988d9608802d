"""The asyncio tasks of a stage replica's role: its long-running loops, a
failure of which ends the node, and fire-and-forget work kept referenced
until it ends (asyncio holds tasks weakly)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class RoleTasks:
    def __init__(self, stage: str, failures: asyncio.Queue[BaseException]) -> None:
        """``failures``: what the node daemon watches to exit 1
        (``Outbound.failures``)."""
        self.stage = stage
        self.failures = failures
        self.loops: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()

    def start_loop(self, name: str, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine, name=name)
        self.loops.append(task)
        task.add_done_callback(self._loop_done)

    def _loop_done(self, task: asyncio.Task[None]) -> None:
        """A loop that raised ends the node (exit 1, through the failures
        its daemon watches): a replica whose operator stopped must not live
        on as if it served its stage; its secondary takes over."""
        if not task.cancelled() and task.exception() is not None:
            error = task.exception()
            assert error is not None
            self.failures.put_nowait(RuntimeError(f"{self.stage}: {task.get_name()} failed: {error!r}"))

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """A fire-and-forget task, kept referenced until it ends."""
        task = asyncio.create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def cancel(self) -> None:
        for task in [*self.loops, *self._background]:
            task.cancel()
