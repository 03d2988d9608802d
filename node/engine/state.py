"""An engine's state as bytes, and an engine rebuilt from them.

Why: a replica rebuilds by replaying every input row since the Level-1
cut, and a program whose state keeps some row for the whole run (Linear
Road's accounts) pins that cut at its first row. With the state at
position p in hand, a rebuild starts at p + 1 instead (docs/ha.md,
"Retention and state snapshots").

What is captured: the engine's time and, per operator in plan order, the
attributes it lists in ``STATE`` (windows' buffers, groups, multisets,
queued inputs and delayed tuples, lineage bounds). The compiled code and
expressions are not shipped: the receiver builds the same program and
operators from the same plan (the operators' kinds and labels are in the
snapshot and must match) and only their data is set.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from semiactive.node.engine.engine import BEFORE_TIME, Engine
from semiactive.node.engine.state_codec import (
    STATE_CLASSES,
    Formed,
    StateFormatError,
    decode_state,
    encode_state,
)

FORMAT = 1

_CONTAINERS = (list, dict, tuple, deque)


def capture(engine: Engine) -> bytes:
    """The engine's state now (between two ``advance`` calls)."""
    return encode_state(
        {
            "format": FORMAT,
            "operators": [[type(op).__name__, op.label] for op in engine.operators],
            "time": engine.time,
            "state": [
                [
                    Formed(op.STATE_FORMS[name], getattr(op, name))
                    if name in op.STATE_FORMS
                    else getattr(op, name)
                    for name in op.STATE
                ]
                for op in engine.operators
            ],
        }
    )


def restore(engine: Engine, data: bytes | bytearray) -> None:
    """Give a freshly built engine (nothing pushed, never advanced) the state
    ``data`` holds. Raises :class:`StateFormatError` (and leaves the engine
    untouched) if ``data`` is not a state of this program."""
    if engine.time != BEFORE_TIME or any(getattr(op, "pending", None) for op in engine.operators):
        raise ValueError("a state snapshot can only be restored into an engine that has not run")
    snapshot = decode_state(data)
    if not isinstance(snapshot, dict) or snapshot.get("format") != FORMAT:
        raise StateFormatError(f"not a state snapshot of format {FORMAT}")
    kinds = [[type(op).__name__, op.label] for op in engine.operators]
    if snapshot.get("operators") != kinds:
        raise StateFormatError("the state snapshot is of another program (its operators differ)")
    time, states = snapshot.get("time"), snapshot.get("state")
    if type(time) is not int or not isinstance(states, list) or len(states) != len(engine.operators):
        raise StateFormatError("a state snapshot without its time or its operators' state")
    updates = []
    for op, values in zip(engine.operators, states, strict=True):
        if not isinstance(values, list) or len(values) != len(op.STATE):
            raise StateFormatError(f"the state snapshot of {op.label} has the wrong fields")
        for name, value in zip(op.STATE, values, strict=True):
            if not _same_shape(getattr(op, name), value):
                raise StateFormatError(f"the state snapshot of {op.label} has a malformed {name}")
            updates.append((op, name, value))
    before = [(op, name, getattr(op, name)) for op, name, _ in updates]
    for op, name, value in updates:
        setattr(op, name, value)
    try:
        for op in engine.operators:
            op.check_state()
    except StateFormatError:
        for op, name, value in before:
            setattr(op, name, value)
        raise
    engine.time = time


def _same_shape(fresh: Any, value: Any) -> bool:
    """Whether ``value`` can stand where a fresh operator holds ``fresh``:
    a container or engine object of the same type, or a scalar (or None)
    where the fresh operator holds a scalar or None."""
    if isinstance(fresh, _CONTAINERS) or STATE_CLASSES.knows(type(fresh)):
        return type(value) is type(fresh)
    return value is None or isinstance(value, (int, float, str, tuple))
