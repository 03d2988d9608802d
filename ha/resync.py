"""Level-1 acknowledgements and resync points (ha-protocol.md, "Identifiers
and determinism" 3 and "Level-1").

After each run of its operator section a live replica records a
:class:`Snapshot`: how far it had read (stage-local input position), how
far it had written (output seq), the oldest input its operator state still
depends on (the engine's ``state_low``), the few history-dependent counters
and the engine time. When the consumers have acknowledged output seq Y, the
newest snapshot with ``out_seq <= Y`` gives the Level-1 cut: a replica that
starts from an empty state at the cut, processes up to the snapshot's
position without emitting, adopts its counters and output seq, emits
exactly what the primary emits after Y.

A snapshot taken later than Y would skip outputs the consumers do not have
yet, so it is not usable; one taken earlier is usable but keeps more input
retained upstream.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

#: A state's bytes. A bytearray where they were put together piece by piece
#: (read from a capture's pipe, or from a peer's chunks): handed on as they
#: are, since copying a state of hundreds of MB into a ``bytes`` would stop
#: the node's event loop for as long as the copy takes.
StateBytes = bytes | bytearray


@dataclass(frozen=True)
class StateSnapshot:
    """The operator state after input position ``position``, as the bytes of
    ``semiactive.node.engine.state.capture``. A point that carries one lets a rebuild
    start from its state with rows from ``position + 1`` on, however old the
    rows the state depends on: the cut of a program that keeps some row for
    the whole run can move on."""

    position: int
    data: StateBytes


@dataclass(frozen=True)
class ResyncPoint:
    position: int  # stage-local input position of the snapshot
    out_seq: int  # output seq reached after processing up to position
    cut_position: int  # oldest stage-local input position still needed
    edge_cut: dict[str, int] = field(default_factory=dict)  # per input edge: first seq needed
    counters: tuple[tuple[int, ...], ...] = ()
    time: int = 0  # engine time (instant) of the snapshot
    state: StateSnapshot | None = None  # restored first; then cut_position == state.position + 1


@dataclass(frozen=True)
class Snapshot:
    position: int
    out_seq: int
    low: int  # cut position: min(state_low, position + 1), or past the state's position
    counters: tuple[tuple[int, ...], ...]
    time: int
    state: StateSnapshot | None = None
    # A capture still being taken (its token; 0: none): until it completes,
    # this snapshot and every later one are not usable.
    pending: int = 0


class SnapshotLog:
    """The snapshots of one replica, oldest first, bounded in number: when
    full, every other old snapshot is dropped (cuts stay valid, they only
    get coarser)."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._items: deque[Snapshot] = deque()

    def record(self, snapshot: Snapshot) -> None:
        items = self._items
        if items and items[-1].position == snapshot.position and items[-1].out_seq == snapshot.out_seq:
            items[-1] = snapshot
            return
        items.append(snapshot)
        if len(items) > self.limit:
            kept = list(items)
            half = len(kept) // 2
            self._items = deque(kept[:half:2] + kept[half:])

    def usable(self, acked_out_seq: int) -> Snapshot | None:
        """The newest snapshot whose outputs the consumers all have, and
        forget the older ones (they would only give older cuts)."""
        items = self._items
        chosen = None
        while items and items[0].out_seq <= acked_out_seq and not items[0].pending:
            chosen = items.popleft()
        if chosen is not None:
            items.appendleft(chosen)
        return chosen

    def fill(self, token: int, state: StateSnapshot) -> None:
        """The capture ``token`` completed: the snapshots waiting for it
        hold ``state`` and become usable."""
        self._items = deque(
            replace(s, state=state, pending=0) if s.pending == token else s for s in self._items
        )

    def abandon(self, token: int) -> None:
        """The capture ``token`` was lost: forget the snapshots waiting for
        it (their cuts needed its state); the older ones stay usable."""
        self._items = deque(s for s in self._items if s.pending != token)

    def __len__(self) -> int:
        return len(self._items)

    def latest(self) -> Snapshot | None:
        return self._items[-1] if self._items else None
