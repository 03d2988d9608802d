"""Operator states in chunks (ha/state_transfer.py): any state comes back
whole from its chunks; chunks out of order, past the state's size or a
point that refers to a state never sent are refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from semiactive.ha.resync import ResyncPoint, StateSnapshot
from semiactive.ha.state_transfer import KEEP_STATES, StateAssembler, StateTransferError, chunks


@given(st.binary(max_size=5000), st.integers(1, 700), st.integers(1, 10**9))
def test_a_state_comes_back_whole_from_its_chunks(data: bytes, size: int, position: int) -> None:
    state = StateSnapshot(position, data)
    pieces = list(chunks(state, size))
    assert all(len(p.data) <= size for p in pieces)
    assembler = StateAssembler()
    done = [assembler.add(p) for p in pieces]
    assert done[-1] == state and all(d is None for d in done[:-1])
    point = ResyncPoint(position + 5, 3, position + 1, {"e": 9})
    assert assembler.resolve(point, position).state == state


def test_bad_chunks_and_references_are_refused() -> None:
    a, b, c = chunks(StateSnapshot(10, b"x" * 30), 10)
    assembler = StateAssembler()
    assembler.add(a)
    with pytest.raises(StateTransferError, match="does not continue"):
        assembler.add(c)
    with pytest.raises(StateTransferError, match="does not continue"):
        assembler.add(b)  # the state being received was dropped
    forged = type(a)(10, 30, 0, b"y" * 31)
    with pytest.raises(StateTransferError, match="past"):
        assembler.add(forged)
    point = ResyncPoint(12, 3, 11, {"e": 9})
    with pytest.raises(StateTransferError, match="never sent"):
        assembler.resolve(point, 10)
    for piece in (a, b, c):
        assembler.add(piece)
    assert assembler.resolve(point, 10).state is not None
    with pytest.raises(StateTransferError, match="must cut at 11"):
        assembler.resolve(ResyncPoint(12, 3, 5, {"e": 9}), 10)
    with pytest.raises(StateTransferError, match="must cut at 11"):
        assembler.resolve(ResyncPoint(9, 3, 11, {"e": 9}), 10)


def test_an_assembler_keeps_the_latest_states_only() -> None:
    assembler = StateAssembler()
    for position in range(1, 6):
        for piece in chunks(StateSnapshot(position, b"s"), 10):
            assembler.add(piece)
    assert sorted(assembler.complete) == list(range(6 - KEEP_STATES, 6))
