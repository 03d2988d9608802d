"""Operator state snapshots in pieces: a state can be far larger than one
gRPC message (an L=3 Linear Road partition's tolls table alone is tens of
MB), so it travels as chunks ahead of the first point that refers to it.

:func:`chunks` cuts a :class:`~semiactive.ha.resync.StateSnapshot`;
:class:`StateAssembler` puts chunks from a peer back together, refusing
anything but one state's chunks in order, and remembers the few latest
complete states so that points can refer to them by position.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from semiactive.ha.resync import ResyncPoint, StateSnapshot

CHUNK_BYTES = 4 * 1024 * 1024
#: Complete states an assembler keeps: the one the newest point refers to and
#: the one before it (a point sent before the newer state was complete).
KEEP_STATES = 2


class StateTransferError(ValueError):
    """A chunk out of order, of the wrong size, or a point that refers to a
    state that never arrived."""


@dataclass(frozen=True)
class Chunk:
    position: int
    total: int
    offset: int
    data: bytes


def chunks(state: StateSnapshot, size: int = CHUNK_BYTES) -> Iterator[Chunk]:
    """The chunks of ``state``, in order (one, empty, for an empty state)."""
    data = state.data
    total = len(data)
    view = memoryview(data)
    offset = 0
    while True:
        piece = bytes(view[offset : offset + size])
        yield Chunk(state.position, total, offset, piece)
        offset += len(piece)
        if offset >= total:
            return


class StateAssembler:
    """Chunks from one peer session back into states."""

    def __init__(self) -> None:
        self._position: int | None = None
        self._total = 0
        self._buffer = bytearray()
        self.complete: dict[int, StateSnapshot] = {}

    def add(self, chunk: Chunk) -> StateSnapshot | None:
        """Take one chunk; return the state it completes, if it does."""
        if chunk.offset == 0:
            self._position, self._total, self._buffer = chunk.position, chunk.total, bytearray()
        elif (
            chunk.position != self._position
            or chunk.offset != len(self._buffer)
            or chunk.total != self._total
        ):
            self._position = None
            raise StateTransferError(
                f"state chunk at offset {chunk.offset} of position {chunk.position} does not continue "
                "the state being received"
            )
        if chunk.offset + len(chunk.data) > chunk.total:
            self._position = None
            raise StateTransferError(f"state chunk ends past the state's {chunk.total} bytes")
        self._buffer += chunk.data
        if len(self._buffer) < self._total:
            return None
        state = StateSnapshot(chunk.position, self._buffer)
        self._position, self._buffer = None, bytearray()
        self.complete[state.position] = state
        while len(self.complete) > KEEP_STATES:
            del self.complete[min(self.complete)]
        return state

    def resolve(self, point: ResyncPoint, state_position: int | None) -> ResyncPoint:
        """``point`` with the state it refers to (by ``state_position``)."""
        if state_position is None:
            return point
        state = self.complete.get(state_position)
        if state is None:
            raise StateTransferError(
                f"a resync point refers to the state at position {state_position}, never sent"
            )
        if point.cut_position != state_position + 1 or point.position < state_position:
            raise StateTransferError(
                f"a resync point with a state at position {state_position} must cut at {state_position + 1} "
                f"and be at or after it, not cut at {point.cut_position} at {point.position}"
            )
        return ResyncPoint(
            point.position,
            point.out_seq,
            point.cut_position,
            point.edge_cut,
            point.counters,
            point.time,
            state,
        )
