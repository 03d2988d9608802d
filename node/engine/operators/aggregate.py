"""GROUP BY with COUNT / SUM / AVG / MIN / MAX over a relation's changes.

Per instant, the operator applies every change to its group's accumulators
and then emits, for each group whose result row changed, ``-old`` and
``+new``. The loop is generated per query (accumulators inline, as in
``fused``): per change it costs a few list-slot updates, not method calls.
Accumulators are exact, so a result depends only on the multiset
in the group, never on the order changes arrived in: a secondary that rebuilt
the same window from a later starting point gets bit-identical floats. Float
sums are :mod:`float_sums`: Shewchuk's non-overlapping partials, rounded once
when read, with infinities, NaN and overflows kept apart.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from semiactive.node.cql import plan
from semiactive.node.engine import expressions
from semiactive.node.engine.elements import Element
from semiactive.node.engine.operators.base import Operator
from semiactive.node.engine.operators.float_order import float_key, key_float
from semiactive.node.engine.operators.float_sums import exact_add, exact_sum, odd_add
from semiactive.node.engine.state_codec import state_class


@state_class("v")
class _Reversed:
    """Orders values descending, for a max-heap of any comparable type."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: _Reversed) -> bool:
        return bool(self.v > other.v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and self.v == other.v


@state_class("largest", "counts", "heap")
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


# The loop of every generated GROUP BY (here and in the fused partition
# aggregate): changes in instant order, each applied to the group of its key
# by ``arrival``, and at the end of each instant the changed groups' rows
# emitted by ``flush``.
_GROUP_LOOP = """
def process(self, batch, t_hi):
    if not batch:
        return batch
{setup}
    groups = self.groups
    get = groups.get
    ctx = self.ctx
    out = []
    append = out.append
    changed = {{}}
    cur = batch[0][0]
    for e in batch:
        if e[0] != cur:
{flush12}
            changed = {{}}
            cur = e[0]
        k = {key}
{arrival}
{flush4}
    return out
"""


def group_loop(key: str, arrival: str, flush: str, setup: str = "") -> str:
    """The source of a generated ``process(self, batch, t_hi)``."""
    return _GROUP_LOOP.format(
        setup=indent(setup, 4),
        key=key,
        arrival=indent(arrival, 8),
        flush12=indent(flush, 12),
        flush4=indent(flush, 4),
    )


# The group ``g`` of key ``k``, made if new; the row it showed before this
# instant's first change to it is kept in ``changed`` for the flush.
_GROUP_OF_KEY = """
g = get(k)
if g is None:
    g = groups[k] = [0, None, 0{init}]
    changed[k] = None
elif k not in changed:
    changed[k] = g[1]
"""

# Element ``e`` (sign ``s``) joins the group ``g`` of its key ``k``.
_ARRIVAL = """
s = e[2]
g[0] += s
{update}
"""

# exact_add(partials, +-v) with the sums of at most one partial unrolled;
# infinities, NaN and additions that overflow go to ``odd`` (float_sums).
_EXACT_ADD = """
p = {partials}
x = v if s > 0 else -v
if not p:
    if x - x:
        {odd} = _odd_add({odd}, p, x, s)
    else:
        p.append(x)
elif len(p) == 1:
    y = p[0]
    if (x if x >= 0 else -x) < (y if y >= 0 else -y):
        x, y = y, x
    hi = x + y
    if hi - hi:
        {odd} = _odd_add({odd}, p, v if s > 0 else -v, s)
    else:
        lo = y - (hi - x)
        if lo:
            p[0] = lo
            p.append(hi)
        else:
            p[0] = hi
else:
    {odd} = _exact_add(p, x, s, {odd})
"""

# Emits, for every group touched at instant ``cur``, -old and +new if its row changed.
_FLUSH = """
lin = ctx.floor
for k, old in changed.items():
    g = groups[k]
    new = ({head}{results}) if g[0] > 0 else None
    if new != old:
        if old is not None:
            append((cur, g[2], -1) + old)
        if new is not None:
            g[2] = lin
            append((cur, lin, 1) + new)
        g[1] = new
    if g[0] <= 0:
        del groups[k]
"""


def indent(code: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line for line in code.strip("\n").splitlines())


class GroupCode:
    """The generated pieces of a GROUP BY, shared with the fused partition
    aggregate: ``key`` (source over element ``e``), ``init`` (a new group's
    accumulator slots), :meth:`update` (apply element ``var`` with sign
    ``s`` to group ``g``), ``flush`` (emit the changed groups' rows) and the
    ``namespace`` the code runs in."""

    def __init__(self, group_by: Sequence[plan.Expr], aggregates: Sequence[plan.AggCall]) -> None:
        # A group's key: the value of a single GROUP BY column, else a tuple.
        keys = [expressions.source(x, "e") for x in group_by]
        self.key, head = (
            (keys[0], "k, ") if len(keys) == 1 else ("(" + "".join(f"{k}, " for k in keys) + ")", "*k, ")
        )
        self.aggregates = list(aggregates)
        init: list[str] = []
        results: list[str] = []
        for call in aggregates:
            slot = 3 + len(init)
            g = f"g[{slot}]"
            if call.arg is None:
                results.append("g[0]")
            elif call.func is plan.AggFunc.COUNT:
                init.append("0")
                results.append(g)
            elif call.func in (plan.AggFunc.MIN, plan.AggFunc.MAX):
                init.append(f"_MinMaxAcc({call.func is plan.AggFunc.MAX})")
                results.append(f"_key_float({g}.result())" if _float_order(call) else f"{g}.result()")
            else:
                # A float sum's slots: count, partials, odd (see float_sums).
                if _floating(call):
                    init += ["0", "[]", "None"]
                    value = f"_fsum(g[{slot + 1}], g[{slot + 2}])"
                else:
                    init += ["0", "0"]
                    value = f"g[{slot + 1}]"
                if call.func is plan.AggFunc.AVG:
                    value = f"{value} / {g}"
                results.append(f"({value} if {g} > 0 else None)")
        self.head = head
        self.init = "".join(f", {x}" for x in init)
        self.flush = _FLUSH.format(head=head, results=", ".join(results))
        self.namespace: dict[str, Any] = dict(expressions.RUNTIME)
        self.namespace.update(_exact_add=exact_add, _odd_add=odd_add, _fsum=exact_sum, _MinMaxAcc=MinMaxAcc)
        self.namespace.update(_float_key=float_key, _key_float=key_float)

    def group_of_key(self) -> str:
        """Bind ``g`` to the group of key ``k`` (made if new) and note it in
        ``changed``."""
        return _GROUP_OF_KEY.format(init=self.init)

    def arrival(self) -> str:
        """Apply element ``e`` to the group of key ``k`` (leaves it in ``g``)."""
        return self.group_of_key() + _ARRIVAL.format(update=self.update("e"))

    def single(self, var: str) -> str:
        """Source of the result row of a group holding the one element
        ``var``: what the accumulators would give, without them (a sum of
        one float is ``fsum`` of it, an average of one value that value
        divided by 1, so the bits are the same)."""
        results: list[str] = []
        for n, call in enumerate(self.aggregates):
            if call.arg is None:
                results.append("1")
                continue
            v = f"v{n}"
            bind = f"({v} := {expressions.source(call.arg, var)})"
            if call.func is plan.AggFunc.COUNT:
                results.append(f"(0 if {bind} is None else 1)")
            elif call.func in (plan.AggFunc.MIN, plan.AggFunc.MAX):
                results.append(
                    f"(None if {bind} is None else _key_float(_float_key({v})))"
                    if _float_order(call)
                    else bind
                )
            else:
                value = f"_fsum(({v},))" if _floating(call) else v
                if call.func is plan.AggFunc.AVG:
                    value = f"{value} / 1"
                results.append(f"(None if {bind} is None else {value})")
        return f"({self.head}{', '.join(results)})"

    def update(self, var: str) -> str:
        lines: list[str] = []
        slot = 3
        for call in self.aggregates:
            if call.arg is None:
                continue
            g = f"g[{slot}]"
            lines.append(f"v = {expressions.source(call.arg, var)}")
            if call.func is plan.AggFunc.COUNT:
                lines.append(f"if v is not None: {g} += s")
                slot += 1
            elif call.func in (plan.AggFunc.MIN, plan.AggFunc.MAX):
                lines.append(
                    f"{g}.add(None if v is None else _float_key(v), s)"
                    if _float_order(call)
                    else f"{g}.add(v, s)"
                )
                slot += 1
            else:
                total = f"g[{slot + 1}]"
                lines.append(f"if v is not None:\n    {g} += s")
                if _floating(call):
                    lines.append(indent(_EXACT_ADD.format(partials=total, odd=f"g[{slot + 2}]"), 4))
                    slot += 3
                else:
                    lines.append(f"    {total} += v if s > 0 else -v")
                    slot += 2
        return "\n".join(lines) or "pass"


def _float_order(call: plan.AggCall) -> bool:
    """Whether a MIN / MAX orders floats (by float_order's keys)."""
    assert call.arg is not None
    return call.arg.type.name is plan.TypeName.FLOAT


def _floating(call: plan.AggCall) -> bool:
    """Whether a SUM / AVG adds floats (exactly, as partials)."""
    assert call.arg is not None
    return call.arg.type.name is plan.TypeName.FLOAT or (
        call.func is plan.AggFunc.SUM and call.type.name is plan.TypeName.FLOAT
    )


class AggregateOp(Operator):
    """GROUP BY as one generated loop (see the module doc). A group is a
    list ``[n, row, lin, accumulator slots...]``: ``n`` counts the group's
    rows, ``row`` is the result row last emitted and ``lin`` its lineage."""

    STATE = ("groups",)

    def __init__(
        self,
        group_by: Sequence[plan.Expr],
        aggregates: Sequence[plan.AggCall],
        label: str = "",
    ) -> None:
        super().__init__(label)
        self.groups: dict[Any, list[Any]] = {}
        gen = GroupCode(group_by, aggregates)
        code = group_loop(gen.key, gen.arrival(), gen.flush)
        namespace = dict(gen.namespace)
        exec(compile(code, "<semiactive-aggregate>", "exec"), namespace)  # noqa: S102
        self._process = namespace["process"]
        self.source = code

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        return self._process(self, inputs[0], t_hi)  # type: ignore[no-any-return]
