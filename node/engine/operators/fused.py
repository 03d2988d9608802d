"""A window and an aggregate over it, fused into one generated loop.

``SELECT SUM(val) FROM s [Rows 100 Slide 10]`` as two operators materialises
every window change as a delta and applies it to a group: about 2 deltas per
tuple. Fused, a tuple costs an append, an add and (when the window is full)
a subtract. The result is the same relation change stream as
:class:`~semiactive.node.engine.operators.aggregate.AggregateOp` over the window would
produce (tests compare the two), so the rewrite is invisible.

Fused only where the arithmetic is exact incrementally: COUNT, and SUM / AVG
of non-NULL integer expressions, with no GROUP BY, over a Rows window or a
Range window without slide, on a stream whose lineage only grows.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from semiactive.node.cql import plan
from semiactive.node.engine import expressions
from semiactive.node.engine.elements import Element
from semiactive.node.engine.operators.base import Operator


def fusable(node: plan.Aggregate) -> bool:
    if node.group_by or not node.aggregates:
        return False
    window = plan.resolve(node.child)
    if not isinstance(window, plan.Window):
        return False
    spec = window.spec
    if isinstance(spec, plan.RangeWindow) and spec.slide_ms > 1:
        return False
    if not isinstance(spec, plan.RowsWindow | plan.RangeWindow | plan.NowWindow):
        return False
    for call in node.aggregates:
        if call.func is plan.AggFunc.COUNT and call.arg is None:
            continue
        if call.func not in (plan.AggFunc.COUNT, plan.AggFunc.SUM, plan.AggFunc.AVG):
            return False
        arg = call.arg
        if arg is None or arg.type.name is not plan.TypeName.INTEGER or expressions.may_be_null(arg):
            return False
    return True


_ROWS = """
def process(self, batch, t_hi):
    if not batch:
        return batch
    buf = self.buf
    popleft = buf.popleft
    pending = self.pending
    n = self.n
    {load}
    last = self.last
    last_lin = self.last_lin
    out = []
    append = out.append
    cur = batch[0][0]
    dirty = False
    for e in batch:
        ts = e[0]
        if ts != cur:
            if dirty:
{flush16}
            cur = ts
        buf.append(e)
{arrive}
    if dirty:
{flush8}
    self.pending = pending
    self.n = n
    {store}
    self.last = last
    self.last_lin = last_lin
    return out
"""

_ROWS_ARRIVE_NOSLIDE = """
        n += 1
        x = e
        {add}
        if n > {rows}:
            x = popleft()
            n -= 1
            {sub}
        dirty = True
"""

_ROWS_ARRIVE_SLIDE = """
        pending += 1
        if pending == {slide}:
            pending = 0
            nb = len(buf)
            for i in range(nb - {slide}, nb):
                x = buf[i]
                {add}
            n += {slide}
            while n > {rows}:
                x = popleft()
                self.gone.append(x)
                n -= 1
                {sub}
            dirty = True
"""

_RANGE = """
def process(self, batch, t_hi):
    buf = self.buf
    popleft = buf.popleft
    n = self.n
    {load}
    last = self.last
    last_lin = self.last_lin
    out = []
    append = out.append
    cur = None
    dirty = False
    for e in batch:
        ts = e[0]
        while buf and buf[0][0] + {life} <= ts:
            xt = buf[0][0] + {life}
            if xt != cur:
                if dirty:
{flush20}
                cur = xt
            x = popleft()
            n -= 1
            {sub}
            dirty = True
        if ts != cur:
            if dirty:
{flush16}
            cur = ts
        buf.append(e)
        n += 1
        x = e
        {add}
        dirty = True
    while buf and buf[0][0] + {life} <= t_hi:
        xt = buf[0][0] + {life}
        if xt != cur:
            if dirty:
{flush16}
            cur = xt
        x = popleft()
        n -= 1
        {sub}
        dirty = True
    if dirty:
{flush8}
    self.n = n
    {store}
    self.last = last
    self.last_lin = last_lin
    return out
"""

# Emits the change of the result row at instant ``cur``.
_FLUSH = """
row = ({result},) if n > 0 else None
if row != last:
    if last is not None:
        append((cur, last_lin, -1, *last))
    if row is not None:
        last_lin = buf[0][1]
        append((cur, last_lin, 1, *row))
    last = row
dirty = False
"""


def _indent(code: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line for line in code.strip("\n").splitlines())


class WindowAggregateOp(Operator):
    """The fused operator. State: the window buffer, the element count, one
    running sum per SUM/AVG, the last emitted row; with a Rows slide, the
    last slide - 1 tuples that left (see RowsWindowOp)."""

    STATE = ("buf", "gone", "n", "pending", "last", "last_lin", "life", "sums")

    timed = True

    def __init__(self, spec: plan.WindowSpec, aggregates: Sequence[plan.AggCall], label: str = "") -> None:
        super().__init__(label or "window aggregate")
        self.buf: deque[Element] = deque()
        self.gone: deque[Element] = deque(maxlen=0)
        self.n = 0
        self.pending = 0
        self.last: tuple[Any, ...] | None = None
        self.last_lin = 0
        self.life: int | None = None
        sums: list[str] = []  # source of each SUM/AVG argument, evaluated on x
        result: list[str] = []  # source of each output column, over n, s0, s1, ...
        self._sum_args = []
        for call in aggregates:
            if call.func is plan.AggFunc.COUNT:
                result.append("n")
                continue
            assert call.arg is not None
            name = f"s{len(sums)}"
            sums.append(expressions.source(call.arg, "x"))
            self._sum_args.append(expressions.scalar_function(call.arg))
            result.append(name if call.func is plan.AggFunc.SUM else f"{name} / n")
        self.sums = [0] * len(sums)
        names = [f"s{i}" for i in range(len(sums))]
        load = "; ".join(f"{nm} = self.sums[{i}]" for i, nm in enumerate(names)) or "pass"
        store = "self.sums = [" + ", ".join(names) + "]" if names else "pass"
        add = "; ".join(f"{nm} += {src}" for nm, src in zip(names, sums, strict=True)) or "pass"
        sub = "; ".join(f"{nm} -= {src}" for nm, src in zip(names, sums, strict=True)) or "pass"
        row_source = ", ".join(result)
        flush = _FLUSH.format(result=row_source)
        indents = {f"flush{k}": _indent(flush, k) for k in (8, 16, 20)}
        if isinstance(spec, plan.RowsWindow):
            arrive = (_ROWS_ARRIVE_SLIDE if spec.slide > 1 else _ROWS_ARRIVE_NOSLIDE).format(
                add=add, sub=sub, rows=spec.rows, slide=spec.slide
            )
            code = _ROWS.format(load=load, store=store, arrive=arrive.strip("\n"), **indents)
            self.rows, self.rows_slide = spec.rows, spec.slide
            self.gone = deque(maxlen=spec.slide - 1)
        else:
            self.life = (spec.range_ms if isinstance(spec, plan.RangeWindow) else 0) + 1
            code = _RANGE.format(load=load, store=store, add=add, sub=sub, life=self.life, **indents)
            self.rows, self.rows_slide = 0, 1
        unpack = "".join(f"{nm} = sums[{i}]; " for i, nm in enumerate(names))
        generated: dict[str, Any] = dict(expressions.RUNTIME)
        exec(f"def result(n, sums):\n    {unpack}return ({row_source},)", generated)  # noqa: S102
        exec(compile(code, "<semiactive-fused>", "exec"), generated)  # noqa: S102
        self._result = generated["result"]
        self._process = generated["process"]
        self.source = code

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        return self._process(self, inputs[0], t_hi)  # type: ignore[no-any-return]

    def next_fire(self) -> int | None:
        if self.life is None or not self.buf:
            return None
        return int(self.buf[0][0]) + self.life

    def state_low(self) -> int | None:
        held = self.gone or self.buf
        return int(held[0][1]) if held else None

    def counters(self) -> tuple[int, ...]:
        return (self.pending,) if self.rows_slide > 1 else ()

    def restore_counters(self, values: tuple[int, ...], ts: int) -> list[Element]:
        """Adopt the primary's slide phase (see RowsWindowOp.restore_counters)
        and emit the resulting change of the aggregate row."""
        if self.rows_slide <= 1 or not values:
            return []
        pending = values[0]
        history = [*self.gone, *self.buf]
        cut = max(0, len(history) - (self.rows + pending))
        keep = history[cut:]
        visible = keep[: max(0, len(keep) - pending)]
        self.buf = deque(keep)
        self.gone = deque(history[:cut], maxlen=self.gone.maxlen)
        self.pending = min(pending, len(keep))
        self.n = len(visible)
        self.sums = [sum(f(e) for e in visible) for f in self._sum_args]
        row = self._result(self.n, self.sums) if self.n > 0 else None
        out: list[Element] = []
        if row != self.last:
            if self.last is not None:
                out.append((ts, self.last_lin, -1, *self.last))
            if row is not None:
                self.last_lin = int(self.buf[0][1])
                out.append((ts, self.last_lin, 1, *row))
            self.last = row
        return out
