"""``OldestHead``: the state low of keyed partition windows, kept without a
scan of every key at each slice, equals the scan's answer."""

from __future__ import annotations

import random
from collections import deque

import pytest

from node.cql import plan
from node.engine.elements import Element
from node.engine.operators.base import OldestHead
from node.engine.operators.partition_aggregate import PartitionAggregateOp
from node.engine.operators.windows import PartitionWindowOp


def _scan(parts: dict[object, deque[Element]] | dict[object, tuple[Element, ...]]) -> int | None:
    heads = [p[0][1] for p in parts.values() if p]
    return min(heads) if heads else None


def _batches(seed: int, keys: int) -> list[list[Element]]:
    """Monotone lineage (a base input), a few rows per instant, keys drawn
    unevenly so that some partitions go quiet while holding old rows."""
    rng = random.Random(seed)
    lineage = 0
    batches = []
    for ts in range(1, 120):
        batch = []
        for _ in range(rng.randrange(0, 6)):
            lineage += rng.randrange(1, 3)
            key = min(int(rng.expovariate(0.3)), keys - 1)
            batch.append((ts, lineage, 1, key, rng.randrange(100)))
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
