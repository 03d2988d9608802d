"""The window-bound setting: ``closed`` (the default) or ``half-open``.

CQL (Arasu et al.) defines ``[Range T]`` at instant t as the tuples with
``t - T <= ts <= t``: a tuple stays until ts + T + 1. Stanford STREAM drops
it at ts + T (``t - T < ts <= t``). With reports exactly T apart, as in
Linear Road, the two give different answers, so a program (``query check``
/ ``query run --window-bounds``, a cluster's ``window_bounds``) chooses.
Over integer milliseconds half-open ``[Range T]`` is closed ``[Range T-1]``;
the plan keeps what was written and says it is half-open
(:attr:`~semiactive.node.cql.plan.RangeWindow.closed_range_ms` is what the engine and
the SQL oracle use).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, TypeVar

from semiactive.node.cql import plan

WindowBounds = Literal["closed", "half-open"]
BOUNDS: tuple[WindowBounds, ...] = ("closed", "half-open")

T = TypeVar("T")


def with_bounds(tree: T, bounds: WindowBounds) -> T:
    """``tree`` (a syntax tree) with its ``[Range ...]`` windows under
    ``bounds``."""
    if bounds == "closed":
        return tree
    return _half_open(tree)  # type: ignore[no-any-return]


def _half_open(node: Any) -> Any:
    if isinstance(node, plan.RangeWindow) or (
        isinstance(node, plan.PartitionWindow) and node.range_ms is not None
    ):
        return dataclasses.replace(node, half_open=True)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {}
        for f in dataclasses.fields(node):
            value = getattr(node, f.name)
            new = _half_open(value)
            if new is not value:
                changes[f.name] = new
        return dataclasses.replace(node, **changes) if changes else node
    if isinstance(node, tuple | list):
        items = [_half_open(item) for item in node]
        if any(a is not b for a, b in zip(items, node, strict=True)):
            return type(node)(items)
    return node
