"""The engine: runs a compiled CQL program with Delay-based Time-Splitting.

Inputs are pushed in timestamp order; :meth:`Engine.advance` says that every
input is complete up to a watermark, and the engine then runs every operator,
in DTS order, over the slice of instants up to it. An acyclic program runs
the whole range as one slice (each operator still finishes instant t before
t+1 internally, see ``operators.base``); a recursive program runs slices no
wider than its smallest cut delay, so a tuple fed back through a delay always
lands in a later slice. ``max_slice_ms=1`` gives strict instant-by-instant
execution, which tests use as the reference.

The DTS order runs as one generated function (``compiled``, the default;
see :mod:`semiactive.node.engine.compiled`); ``compiled=False`` interprets it step by
step, the reference the compiled code is tested against.

With ``lineage=True`` (HA stages) the engine also keeps the lineage floor of
each slice (see ``operators.base.SliceContext``), so that ``state_low`` is a
valid Level-1 cut.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence

from semiactive.node.cql import plan
from semiactive.node.cql.limits import recursion_headroom
from semiactive.node.engine import planner
from semiactive.node.engine.compiled import Compiled, compile_plan
from semiactive.node.engine.elements import Element
from semiactive.node.engine.operators.base import EMPTY, Operator, SliceContext
from semiactive.node.engine.ordering import Step, StepKind, dts_order

BEFORE_TIME = -(2**62)

_RUN, _EMIT, _ABSORB = 0, 1, 2


class InputOrderError(ValueError):
    """Input elements out of timestamp order: the engine would silently
    compute wrong windows and aggregates from them, so it refuses them."""


class LateInputError(InputOrderError):
    """An input element at or before an instant already processed."""


class UnsortedInputError(InputOrderError):
    """A batch whose timestamps decrease, or that starts before elements
    already queued for the same input."""


class EvaluationError(ValueError):
    """The program cannot compute a value from its inputs: an integer too
    large for a float (``a * a * ... * 1.0`` past 2**1024), where CPython
    raises. The engine's state is then undefined: it must not be used on."""


_TS = operator.itemgetter(0)


def check_order(name: str, elements: Sequence[Element], done: int, queued: int | None) -> None:
    """Raise :class:`InputOrderError` unless ``elements`` (non-empty) are in
    non-decreasing ts order, after instant ``done`` (processed) and not
    before ``queued`` (the last ts already waiting, if any). About 30 ns an
    element: two passes in C over the timestamps."""
    first = elements[0][0]
    if first <= done:
        raise LateInputError(f"input {name}: tuple at ts={first} arrived after instant {done} was processed")
    if queued is not None and first < queued:
        raise UnsortedInputError(f"input {name}: tuple at ts={first} arrived after one at ts={queued}")
    stamps = list(map(_TS, elements))
    if any(map(operator.gt, stamps, stamps[1:])):
        at = next(i for i in range(1, len(stamps)) if stamps[i] < stamps[i - 1])
        raise UnsortedInputError(
            f"input {name}: timestamps decrease within a batch (ts={stamps[at]} after ts={stamps[at - 1]})"
        )


class Engine:
    def __init__(
        self,
        program: plan.Program,
        outputs: Sequence[str] | None = None,
        *,
        max_slice_ms: int | None = None,
        fuse: bool = True,
        panes: bool = True,
        lineage: bool = False,
        compiled: bool = True,
    ) -> None:
        self.program = program
        physical = planner.build(program, fuse=fuse, panes=panes)
        self.operators = physical.operators
        self.scans = physical.scans
        names = list(outputs) if outputs else [program.last_query]
        unknown = [n for n in names if n not in physical.queries]
        if unknown:
            raise KeyError(f"no registered query named {', '.join(unknown)}")
        self.output_ops: dict[str, Operator] = {n: physical.queries[n] for n in names}
        steps, cut = dts_order(self.operators)
        self.steps = steps
        self.cut_delays = cut
        widths = [d.delay_ms for d in cut] + ([max_slice_ms] if max_slice_ms else [])
        self.slice_ms: int | None = min(widths) if widths else None
        index = {id(op): i for i, op in enumerate(self.operators)}
        kinds = {StepKind.RUN: _RUN, StepKind.EMIT: _EMIT, StepKind.ABSORB: _ABSORB}
        self._plan = [
            (kinds[s.kind], s.op, index[id(s.op)], tuple(index[id(c)] for c in s.op.children)) for s in steps
        ]
        self._outputs = [(n, index[id(op)]) for n, op in self.output_ops.items()]
        self._timed = [op for op in self.operators if op.timed]
        self._outs: list[list[Element]] = [EMPTY] * len(self.operators)
        self.time = BEFORE_TIME
        self.lineage = lineage
        self.ctx = SliceContext()
        for op in self.operators:
            op.ctx = self.ctx
        self._compiled = self._compile(steps, lineage) if compiled else None

    @property
    def generated_source(self) -> str | None:
        """The Python this engine runs its slices with (None: interpreted)."""
        return self._compiled.source if self._compiled is not None else None

    def _compile(self, steps: list[Step], lineage: bool) -> Compiled:
        try:
            with recursion_headroom():
                return compile_plan(
                    self.operators,
                    steps,
                    list(self.output_ops.values()),
                    self.slice_ms,
                    self.ctx,
                    self._floor if lineage else None,
                )
        except planner.GENERATION_ERRORS as exc:
            raise planner.generation_error(self.program, next(iter(self.output_ops)), exc) from exc

    # -- feeding -----------------------------------------------------------

    def push(self, name: str, elements: Sequence[Element]) -> None:
        """Queue input elements: sorted by ts, all after :attr:`time` and
        none before what this input already queued, else
        :class:`InputOrderError` (and nothing is queued)."""
        if not elements:
            return
        scan = self.scans.get(name)
        if scan is None:
            raise KeyError(f"the program has no input named {name!r}")
        check_order(name, elements, self.time, scan.pending[-1][0] if scan.pending else None)
        scan.push(elements)

    def advance(self, watermark: int) -> dict[str, list[Element]]:
        """Process every instant up to ``watermark``; return the outputs of
        the requested queries produced on the way."""
        results: dict[str, list[Element]] = {name: [] for name, _ in self._outputs}
        if watermark <= self.time:
            return results
        try:
            self._run(watermark, results)
        except (ArithmeticError, ValueError) as exc:
            raise EvaluationError(f"cannot evaluate the program up to instant {watermark}: {exc}") from exc
        self.time = watermark
        return results

    def _run(self, watermark: int, results: Mapping[str, list[Element]]) -> None:
        if self._compiled is not None:
            self._compiled.advance(watermark, *results.values())
        elif self.slice_ms is None:
            self._slice(watermark, results)
        else:
            width = self.slice_ms
            while True:
                t_lo = self.next_event()
                if t_lo is None or t_lo > watermark:
                    break
                self._slice(min(watermark, t_lo + width - 1), results)

    def next_event(self) -> int | None:
        """The earliest instant at which some fire point will produce."""
        if self._compiled is not None:
            return self._compiled.next_event()
        times = [t for t in (op.next_fire() for op in self._timed) if t is not None]
        return min(times) if times else None

    def _slice(self, t_hi: int, results: Mapping[str, list[Element]]) -> None:
        if self.lineage:
            self.ctx.floor = self._floor()
        outs = self._outs
        for kind, op, idx, kids in self._plan:
            if kind == _RUN:
                ins = [outs[c] for c in kids]
                if not any(ins) and not op.timed:
                    outs[idx] = EMPTY
                    continue
                if op.timed and not any(ins):
                    fire = op.next_fire()
                    if fire is None or fire > t_hi:
                        outs[idx] = EMPTY
                        continue
                outs[idx] = op.process(ins, t_hi)
            elif kind == _EMIT:
                outs[idx] = op.emit(t_hi)  # type: ignore[attr-defined]
            else:
                op.absorb(outs[kids[0]])  # type: ignore[attr-defined]
        for name, idx in self._outputs:
            if outs[idx]:
                results[name].extend(outs[idx])

    # -- what the HA layer asks ---------------------------------------------

    def _floor(self) -> int:
        lows = [scan.pending[0][1] for scan in self.scans.values() if scan.pending]
        low = self.state_low()
        if low is not None:
            lows.append(low)
        return min(lows) if lows else 0

    def state_low(self) -> int | None:
        """The oldest input position any operator's state depends on."""
        lows = [x for x in (op.state_low() for op in self.operators) if x is not None]
        return min(lows) if lows else None

    def counters(self) -> tuple[tuple[int, ...], ...]:
        """History-dependent counters of every operator, in operator order."""
        return tuple(op.counters() for op in self.operators)

    def restore_counters(self, values: Sequence[tuple[int, ...]]) -> dict[str, list[Element]]:
        """Adopt another replica's counters (after a warm-up) and propagate
        the corrections they cause, as a re-run of the current instant."""
        if len(values) != len(self.operators):
            raise ValueError("counter snapshot does not match this program")
        injected = {
            i: fix
            for i, (op, v) in enumerate(zip(self.operators, values, strict=True))
            if v and (fix := op.restore_counters(tuple(v), self.time))
        }
        results: dict[str, list[Element]] = {name: [] for name, _ in self._outputs}
        if not injected:
            return results
        outs = self._outs
        for kind, op, idx, kids in self._plan:
            if idx in injected:
                outs[idx] = injected[idx]
            elif kind == _RUN and any(outs[c] for c in kids):
                outs[idx] = op.process([outs[c] for c in kids], self.time)
            elif kind != _ABSORB:
                outs[idx] = EMPTY
        for name, idx in self._outputs:
            results[name].extend(outs[idx])
        return results
