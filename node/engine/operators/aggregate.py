"""GROUP BY with COUNT / SUM / AVG / MIN / MAX over a relation's changes.

Per instant, the operator applies every change to its group's accumulators
and then emits, for each group whose result row changed, ``-old`` and
``+new``. The loop is generated per query (accumulators inline, as in
``fused``): per change it costs a few list-slot updates, not method calls.
Accumulators are exact, so a result depends only on the multiset
in the group, never on the order changes arrived in: a secondary that rebuilt
the same window from a later starting point gets bit-identical floats. Float
sums keep Shewchuk's non-overlapping partials (as ``math.fsum`` does) and
round once when read.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import Any

from node.cql import plan
from node.engine import expressions
from node.engine.elements import Element, Row
from node.engine.operators.base import Operator


def exact_add(partials: list[float], x: float) -> None:
    """Add ``x`` to a sum kept as Shewchuk's non-overlapping partials (as
    ``math.fsum`` keeps them); ``math.fsum(partials)`` reads it, rounded
    once. The sum of at most one partial, the common case, is unrolled."""
    if not partials:
        partials.append(x)
        return
    if len(partials) == 1:
        y = partials[0]
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            partials[0] = lo
            partials.append(hi)
        else:
            partials[0] = hi
        return
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


class _Reversed:
    """Orders values descending, for a max-heap of any comparable type."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: _Reversed) -> bool:
        return bool(self.v > other.v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and self.v == other.v


class MinMaxAcc:
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


_PROCESS = """
def process(self, batch, t_hi):
    if not batch:
        return batch
    groups = self.groups
    get = groups.get
    ctx = self.ctx
    out = []
    append = out.append
    changed = {{}}
    cur = batch[0][0]
    for e in batch:
        if e[0] != cur:
{flush8}
            changed = {{}}
            cur = e[0]
        k = {key}
        g = get(k)
        if g is None:
            g = groups[k] = [0, None, 0{init}]
            changed[k] = None
        elif k not in changed:
            changed[k] = g[1]
        s = e[2]
        g[0] += s
{update}
{flush0}
    return out
"""

# Emits, for every group touched at instant ``cur``, -old and +new if its row changed.
_FLUSH = """
lin = ctx.floor
for k, old in changed.items():
    g = groups[k]
    new = (*k, {results}) if g[0] > 0 else None
    if new != old:
        if old is not None:
            append((cur, g[2], -1, *old))
        if new is not None:
            g[2] = lin
            append((cur, lin, 1, *new))
        g[1] = new
    if g[0] <= 0:
        del groups[k]
"""


def _indent(code: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line for line in code.strip("\n").splitlines())


class AggregateOp(Operator):
    """GROUP BY as one generated loop (see the module doc). A group is a
    list ``[n, row, lin, accumulator slots...]``: ``n`` counts the group's
    rows, ``row`` is the result row last emitted and ``lin`` its lineage."""

    def __init__(
        self,
        group_by: Sequence[plan.Expr],
        aggregates: Sequence[plan.AggCall],
        label: str = "",
    ) -> None:
        super().__init__(label)
        self.groups: dict[Row, list[Any]] = {}
        key = "".join(f"{expressions.source(x, 'e')}, " for x in group_by)
        init: list[str] = []
        update: list[str] = []
        results: list[str] = []
        for call in aggregates:
            slot = 3 + len(init)
            g = f"g[{slot}]"
            if call.arg is None:
                results.append("g[0]")
                continue
            update.append(f"v = {expressions.source(call.arg, 'e')}")
            if call.func is plan.AggFunc.COUNT:
                init.append("0")
                update.append(f"if v is not None: {g} += s")
                results.append(g)
            elif call.func in (plan.AggFunc.MIN, plan.AggFunc.MAX):
                init.append(f"_MinMaxAcc({call.func is plan.AggFunc.MAX})")
                update.append(f"{g}.add(v, s)")
                results.append(f"{g}.result()")
            else:
                total = f"g[{slot + 1}]"
                floating = call.arg.type.name is plan.TypeName.FLOAT or (
                    call.func is plan.AggFunc.SUM and call.type.name is plan.TypeName.FLOAT
                )
                init += ["0", "[]" if floating else "0"]
                add = (
                    f"_exact_add({total}, v if s > 0 else -v)"
                    if floating
                    else f"{total} += v if s > 0 else -v"
                )
                update.append(f"if v is not None: {g} += s; {add}")
                value = f"_fsum({total})" if floating else total
                if call.func is plan.AggFunc.AVG:
                    value = f"{value} / {g}"
                results.append(f"({value} if {g} > 0 else None)")
        flush = _FLUSH.format(results=", ".join(results))
        code = _PROCESS.format(
            key=f"({key})",
            init="".join(f", {x}" for x in init),
            update=_indent("\n".join(update) or "pass", 8),
            flush8=_indent(flush, 12),
            flush0=_indent(flush, 4),
        )
        namespace: dict[str, Any] = dict(expressions.RUNTIME)
        namespace.update(_exact_add=exact_add, _fsum=math.fsum, _MinMaxAcc=MinMaxAcc)
        exec(compile(code, "<semiactive-aggregate>", "exec"), namespace)  # noqa: S102
        self._process = namespace["process"]
        self.source = code

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        return self._process(self, inputs[0], t_hi)  # type: ignore[no-any-return]
