"""An asyncio event loop with a virtual clock, and processes inside it.

Time moves only when nothing is ready to run: the loop then jumps to its
next timer instead of sleeping (like trio's autojump clock), so a 10 s
failure scenario runs in the milliseconds its callbacks take, and two runs
with the same inputs run the same callbacks in the same order.

Every simulated process (a node daemon, the coordinator) runs in a
:mod:`contextvars` context naming it (:data:`PROCESS`: a name and an
incarnation, ``node-2#1``, so that a restarted node is a new process and
its dead predecessor stays dead); every callback the
loop runs carries the context it was scheduled in, so the loop knows whose
it is. That gives the two process faults their real meaning:

- **kill** (SIGKILL): the process's callbacks are dropped, never run; no
  ``finally`` block, no goodbye message;
- **freeze** (SIGSTOP): its callbacks are parked, timers included, and run
  in their order when it is thawed (SIGCONT), its clock having jumped.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import heapq
import itertools
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, TypeVarTuple

PROCESS: contextvars.ContextVar[str | None] = contextvars.ContextVar("semiactive_sim_process", default=None)

_Ts = TypeVarTuple("_Ts")

# Virtual wall time of virtual monotonic 0: 2026-01-01 00:00:00 UTC.
EPOCH_UNIX_S = 1_767_225_600.0


class Stalled(RuntimeError):
    """Nothing can ever run again: every task waits for something that no
    timer and no other task will bring (a hang)."""


def _owner(handle: asyncio.Handle) -> str | None:
    context: contextvars.Context | None = getattr(handle, "_context", None)
    return context.get(PROCESS) if context is not None else None


class _Skipped(asyncio.Handle):
    """What the ready queue hands the loop instead of a handle that must
    not run now: an already cancelled handle, which the loop skips."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(lambda: None, (), loop)
        self._cancelled = True


class _ReadyQueue(collections.deque[asyncio.Handle]):
    """The loop's ready queue, filtering by process: a killed process's
    handles are dropped, a frozen one's parked."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.skipped = _Skipped(loop)
        self.dead: set[str] = set()
        self.frozen: set[str] = set()
        self.parked: dict[str, list[asyncio.Handle]] = collections.defaultdict(list)

    def popleft(self) -> asyncio.Handle:
        handle = super().popleft()
        if self.dead or self.frozen:
            owner = _owner(handle)
            if owner in self.dead:
                return self.skipped
            if owner in self.frozen:
                self.parked[owner].append(handle)
                return self.skipped
        return handle


class _SequencedTimer(asyncio.TimerHandle):
    """A timer ordered by (when, the order timers were set). asyncio's heap
    orders by ``when`` alone, so timers due at one instant run in an order
    that depends on the heap's history (which timers were cancelled, when
    cancelled ones were purged); two runs of one seed must not depend on
    that. heapq compares with ``<`` only."""

    __slots__ = ("_seq",)

    def __init__(self, seq: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._seq = seq

    def __lt__(self, other: object) -> bool:
        if isinstance(other, _SequencedTimer):
            return (self.when(), self._seq) < (other.when(), other._seq)
        return NotImplemented


class _VirtualSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """Where the loop would wait for I/O, advances the virtual clock by that
    long instead. Nothing in a simulation does I/O through the loop (the
    network is in memory), so the real selector is never polled."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        assert self.loop is not None
        if timeout is None:
            if not self.loop.is_stopping():
                raise Stalled("nothing is ready and no timer is set: every task waits forever")
        elif timeout > 0:
            self.loop.advance(timeout)
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    """A selector loop on virtual time, with per-process kill and freeze."""

    def __init__(self) -> None:
        selector = _VirtualSelector()
        super().__init__(selector)
        selector.loop = self
        self._now = 0.0
        self._timer_seq = itertools.count()
        self.ready = _ReadyQueue(self)
        self._ready = self.ready  # type: ignore[assignment]
        self.tasks: dict[str, set[asyncio.Task[Any]]] = collections.defaultdict(set)
        self.set_task_factory(self._new_task)  # type: ignore[arg-type]

    # -- clock -----------------------------------------------------------------------

    def time(self) -> float:
        return self._now

    def call_at(
        self,
        when: float,
        callback: Callable[[*_Ts], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        self._check_closed()  # type: ignore[attr-defined]
        timer = _SequencedTimer(next(self._timer_seq), when, callback, args, self, context)
        heapq.heappush(self._scheduled, timer)  # type: ignore[attr-defined]
        timer._scheduled = True  # type: ignore[attr-defined]
        return timer

    def wall_time(self) -> float:
        """Unix time, virtual (read by :func:`semiactive.runtime.clock.wall`)."""
        return EPOCH_UNIX_S + self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    def is_stopping(self) -> bool:
        return bool(getattr(self, "_stopping", False))

    # -- processes -------------------------------------------------------------------

    def _new_task(
        self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Task[Any]:
        """Every process's tasks are held until they finish: asyncio holds
        tasks weakly, and the collector would close a killed process's
        pending coroutines, running their ``finally`` blocks mid-run at a
        moment of its choosing."""
        task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **kwargs)
        context: contextvars.Context | None = kwargs.get("context")
        owner = context.get(PROCESS) if context is not None else PROCESS.get()
        if owner is not None:
            tasks = self.tasks[owner]
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        return task

    def spawn(self, process: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` as (part of) the process named ``process``."""
        context = contextvars.copy_context()
        context.run(PROCESS.set, process)
        return self.create_task(coro, name=f"{process}: main", context=context)

    def call_as(
        self, process: str | None, delay: float, callback: Callable[[], object]
    ) -> asyncio.TimerHandle:
        """``callback`` after ``delay`` s, on behalf of ``process`` (None: of
        nobody, like the network, which no process's fault stops)."""
        context = contextvars.Context()
        if process is not None:
            context.run(PROCESS.set, process)
        return self.call_later(delay, callback, context=context)

    def kill(self, process: str) -> None:
        """SIGKILL: nothing of the process runs again."""
        self.ready.dead.add(process)
        self.ready.frozen.discard(process)
        self.ready.parked.pop(process, None)

    def freeze(self, process: str) -> None:
        if process not in self.ready.dead:
            self.ready.frozen.add(process)

    def thaw(self, process: str) -> None:
        self.ready.frozen.discard(process)
        self.ready.extend(self.ready.parked.pop(process, []))
