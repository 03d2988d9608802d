"""The state low of windows, kept without a scan of the whole state at each
slice: ``OldestHead`` (keyed partitions over a monotone input) equals the
scan's answer; ``LowBound`` (any window over a non-monotone input) is never
newer than it and catches up with it."""

from __future__ import annotations

import random
from collections import deque

import pytest

from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.node.engine.operators.base import OldestHead, Operator
from semiactive.node.engine.operators.partition_aggregate import PartitionAggregateOp
from semiactive.node.engine.operators.windows import (
    PartitionRangeWindowOp,
    PartitionWindowOp,
    RangeWindowOp,
    RowsWindowOp,
    SlidingRangeWindowOp,
)


def _scan(parts: dict[object, deque[Element]] | dict[object, tuple[Element, ...]]) -> int | None:
    heads = [p[0][1] for p in parts.values() if p]
    return min(heads) if heads else None


def _batches(seed: int, keys: int, monotone: bool = True) -> list[list[Element]]:
    """Monotone lineage (a base input) or not (a derived stream: rows carry
    older lineage), a few rows per instant, keys drawn unevenly so that some
    partitions go quiet while holding old rows."""
    rng = random.Random(seed)
    lineage = 0
    batches = []
    for ts in range(1, 120):
        batch = []
        for _ in range(rng.randrange(0, 6)):
            lineage += rng.randrange(1, 3)
            key = min(int(rng.expovariate(0.3)), keys - 1)
            lin = lineage if monotone else max(0, lineage - rng.randrange(0, 40))
            batch.append((ts, lin, 1, key, rng.randrange(100)))
        batches.append(batch)
    return batches


@pytest.mark.parametrize("seed", range(40))
def test_the_kept_low_equals_a_scan(seed: int) -> None:
    rng = random.Random(seed)
    parts: dict[object, deque[Element]] = {}
    oldest = OldestHead()
    for batch in _batches(seed, keys=rng.choice([1, 3, 20])):
        for e in batch:
            part = parts.setdefault(e[3], deque())
            part.append(e)
            if len(part) > 2:
                part.popleft()
        assert oldest.low(parts) == _scan(parts)


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("rows", [1, 2, 5])
def test_partition_operators_report_the_scanned_low(seed: int, rows: int) -> None:
    window = PartitionWindowOp([0], rows, width=2, monotone=True)
    integer = plan.SqlType(plan.TypeName.INTEGER)
    total = plan.AggCall(plan.AggFunc.SUM, plan.ColRef(integer, 1), integer)
    aggregate = PartitionAggregateOp(rows, [plan.ColRef(integer, 0)], [total], monotone=True)
    for t_hi, batch in enumerate(_batches(seed, keys=8), start=1):
        window.process([batch], t_hi)
        aggregate.process([batch], t_hi)
        assert window.state_low() == _scan(window.parts)
        assert aggregate.state_low() == _scan(aggregate.parts)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("monotone", [True, False])
def test_a_partition_range_window_holds_only_keys_seen_within_its_range(seed: int, monotone: bool) -> None:
    """What it holds at t_hi: of each key, the last 2 rows with ts >= t_hi - 5;
    a key with none has no partition at all."""
    window = PartitionRangeWindowOp([0], 2, 5, width=2, monotone=monotone)
    seen: list[Element] = []
    for t_hi, batch in enumerate(_batches(seed, keys=30, monotone=monotone), start=1):
        window.process([batch], t_hi)
        seen += batch
        expected: dict[object, list[Element]] = {}
        for e in seen:
            if e[0] >= t_hi - 5:
                expected.setdefault(e[3], []).append(e)
        assert {k[0]: list(part) for k, part in window.parts.items()} == {
            k: rows[-2:] for k, rows in expected.items()
        }
        # One expiry entry per partition, however many rows came within the range.
        assert sorted(entry[3] for entry in window.heads) == sorted(window.parts)
        held = _held(window)
        low = window.state_low()
        if monotone:
            assert low == _scan(window.parts)
        elif held:
            assert low is not None and low <= min(held)


def _held(op: Operator) -> list[int]:
    if isinstance(op, PartitionWindowOp | PartitionRangeWindowOp | PartitionAggregateOp):
        return [e[1] for part in op.parts.values() for e in part]
    if isinstance(op, SlidingRangeWindowOp):
        return [e[1] for q in (op.waiting, op.active) for _, e in q]
    assert isinstance(op, RangeWindowOp | RowsWindowOp)
    return [e[1] for e in op.buf]


def _non_monotone_windows() -> list[Operator]:
    integer = plan.SqlType(plan.TypeName.INTEGER)
    total = plan.AggCall(plan.AggFunc.SUM, plan.ColRef(integer, 1), integer)
    return [
        PartitionWindowOp([0], 2, width=2, monotone=False),
        PartitionRangeWindowOp([0], 2, 9, width=2, monotone=False),
        PartitionAggregateOp(3, [plan.ColRef(integer, 0)], [total], monotone=False),
        PartitionAggregateOp(1, [plan.ColRef(integer, 0)], [total], monotone=False),
        RangeWindowOp(7, width=2, monotone=False),
        SlidingRangeWindowOp(6, 4, monotone=False),
        RowsWindowOp(5, 1, monotone=False),
        RowsWindowOp(6, 3, monotone=False),
    ]


@pytest.mark.parametrize("seed", range(20))
def test_the_bound_over_a_non_monotone_input_is_never_newer_and_catches_up(seed: int) -> None:
    for op in _non_monotone_windows():
        exact_answers = 0
        for t_hi, batch in enumerate(_batches(seed, keys=8, monotone=False), start=1):
            op.process([batch], t_hi)
            held = _held(op)
            bound = op.state_low()
            if not held:
                continue
            assert bound is not None and bound <= min(held), op
            exact_answers += bound == min(held)
        # Between scans the bound stays where the last one left it; scans
        # come after as many arrivals as they visited, so it is exact often.
        assert exact_answers >= 20, op
