"""GROUP BY with COUNT / SUM / AVG / MIN / MAX over a relation's changes.

Per instant, the operator applies every change to its group's accumulators
and then emits, for each group whose result row changed, ``-old`` and
``+new``. Accumulators are exact, so a result depends only on the multiset
in the group, never on the order changes arrived in: a secondary that rebuilt
the same window from a later starting point gets bit-identical floats. Float
sums keep Shewchuk's non-overlapping partials (as ``math.fsum`` does) and
round once when read.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from typing import Any

from node.cql import plan
from node.engine import expressions
from node.engine.elements import Element, Row
from node.engine.operators.base import Operator, instants


class ExactFloatSum:
    __slots__ = ("partials",)

    def __init__(self) -> None:
        self.partials: list[float] = []

    def add(self, x: float) -> None:
        partials = self.partials
        i = 0
        for y in partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo:
                partials[i] = lo
                i += 1
            x = hi
        partials[i:] = [x]

    def value(self) -> float:
        return math.fsum(self.partials)


class _Reversed:
    """Orders values descending, for a max-heap of any comparable type."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: _Reversed) -> bool:
        return bool(self.v > other.v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and self.v == other.v


class Accumulator:
    def add(self, value: Any, sign: int) -> None:
        raise NotImplementedError

    def result(self) -> Any:
        raise NotImplementedError


class CountAcc(Accumulator):
    """COUNT(*) when ``star``; COUNT(e) counts non-NULL values."""

    def __init__(self, star: bool) -> None:
        self.star = star
        self.n = 0

    def add(self, value: Any, sign: int) -> None:
        if self.star or value is not None:
            self.n += sign

    def result(self) -> Any:
        return self.n


class SumAcc(Accumulator):
    def __init__(self, floating: bool, average: bool) -> None:
        self.floating = floating
        self.average = average
        self.n = 0
        self.total: int = 0
        self.exact = ExactFloatSum() if floating else None

    def add(self, value: Any, sign: int) -> None:
        if value is None:
            return
        self.n += sign
        if self.exact is not None:
            self.exact.add(value if sign > 0 else -value)
        else:
            self.total += value if sign > 0 else -value

    def result(self) -> Any:
        if self.n <= 0:
            return None
        total = self.exact.value() if self.exact is not None else self.total
        return total / self.n if self.average else total


class MinMaxAcc(Accumulator):
    """A multiset with a lazily cleaned heap: deletions may come in any order."""

    def __init__(self, largest: bool) -> None:
        self.largest = largest
        self.counts: dict[Any, int] = {}
        self.heap: list[Any] = []

    def add(self, value: Any, sign: int) -> None:
        if value is None:
            return
        n = self.counts.get(value, 0) + sign
        if n > 0:
            if value not in self.counts:
                heapq.heappush(self.heap, _Reversed(value) if self.largest else value)
            self.counts[value] = n
        else:
            self.counts.pop(value, None)

    def result(self) -> Any:
        heap, counts = self.heap, self.counts
        while heap:
            top = heap[0].v if self.largest else heap[0]
            if top in counts:
                return top
            heapq.heappop(heap)
        return None


def accumulator_factory(call: plan.AggCall) -> Callable[[], Accumulator]:
    floating = call.type.name is plan.TypeName.FLOAT or (
        call.arg is not None and call.arg.type.name is plan.TypeName.FLOAT
    )
    if call.func is plan.AggFunc.COUNT:
        star = call.arg is None
        return lambda: CountAcc(star)
    if call.func in (plan.AggFunc.SUM, plan.AggFunc.AVG):
        average = call.func is plan.AggFunc.AVG
        arg_float = call.arg is not None and call.arg.type.name is plan.TypeName.FLOAT
        return lambda: SumAcc(arg_float or (floating and not average), average)
    largest = call.func is plan.AggFunc.MAX
    return lambda: MinMaxAcc(largest)


class _Group:
    __slots__ = ("accs", "lin", "n", "row")

    def __init__(self, accs: list[Accumulator]) -> None:
        self.n = 0
        self.accs = accs
        self.row: Row | None = None
        self.lin = 0


class AggregateOp(Operator):
    def __init__(
        self,
        group_by: Sequence[plan.Expr],
        aggregates: Sequence[plan.AggCall],
        label: str = "",
    ) -> None:
        super().__init__(label)
        self.key: Callable[[Element], Row] = (
            expressions.row_function(tuple(group_by)) if group_by else (lambda e: ())
        )
        args = tuple(a.arg if a.arg is not None else plan.Literal(plan.INTEGER, 1) for a in aggregates)
        self.args: Callable[[Element], Row] = expressions.row_function(args) if args else (lambda e: ())
        self.factories = [accumulator_factory(a) for a in aggregates]
        self.groups: dict[Row, _Group] = {}

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        batch = inputs[0]
        if not batch:
            return batch
        out: list[Element] = []
        groups, key, args = self.groups, self.key, self.args
        for ts, part in instants(batch):
            changed: dict[Row, Row | None] = {}
            for e in part:
                k = key(e)
                g = groups.get(k)
                if g is None:
                    g = groups[k] = _Group([f() for f in self.factories])
                if k not in changed:
                    changed[k] = g.row
                sign = e[2]
                g.n += sign
                for acc, value in zip(g.accs, args(e), strict=True):
                    acc.add(value, sign)
            lin = self.ctx.floor
            for k, old in changed.items():
                g = groups[k]
                new = (*k, *(a.result() for a in g.accs)) if g.n > 0 else None
                if new != old:
                    if old is not None:
                        out.append((ts, g.lin, -1, *old))
                    if new is not None:
                        g.lin = lin
                        out.append((ts, lin, 1, *new))
                    g.row = new
                if g.n <= 0:
                    del groups[k]
        return out
