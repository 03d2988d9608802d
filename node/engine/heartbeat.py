"""The heartbeat (HB) executor: the baseline the recursive CQL paper compares DTS against.

Operators have input queues and advance on heartbeats: each input carries
how far in time it is complete (a scan: the watermark; an operator: the
instant it has processed through). An operator may run once every input is
past an instant; it takes at most ``run_limit`` queued tuples (rounded up to
a whole instant), and when it produces results, execution moves to the
operators it feeds, stacking them (the recursive CQL paper, 4.2). A recursive program would
deadlock here (2.3): the executor refuses programs with cycles.

It drives the same operator objects as :class:`~semiactive.node.engine.engine.Engine`,
so both give identical results; tests check it.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Sequence

from semiactive.node.cql import plan
from semiactive.node.engine import planner
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import BEFORE_TIME, EvaluationError, check_order
from semiactive.node.engine.operators.base import Operator
from semiactive.node.engine.operators.streaming import ScanOp
from semiactive.node.engine.ordering import dts_order


class RecursiveProgramError(ValueError):
    pass


class _Node:
    __slots__ = ("consumers", "index", "op", "progress", "queues")

    def __init__(self, op: Operator, index: int) -> None:
        self.op = op
        self.index = index
        self.queues: list[deque[Element]] = [deque() for _ in op.children]
        self.consumers: list[tuple[_Node, int]] = []  # (consumer, which of its inputs)
        self.progress = BEFORE_TIME


class HeartbeatEngine:
    def __init__(
        self, program: plan.Program, outputs: Sequence[str] | None = None, *, run_limit: int = 100
    ) -> None:
        physical = planner.build(program)
        _, cut = dts_order(physical.operators)
        if cut:
            raise RecursiveProgramError(
                "the heartbeat executor runs non-recursive programs only (cycles stall it); use DTS"
            )
        self.run_limit = max(1, run_limit)
        self.nodes = [_Node(op, i) for i, op in enumerate(physical.operators)]
        by_op = {id(n.op): n for n in self.nodes}
        for node in self.nodes:
            for slot, child in enumerate(node.op.children):
                by_op[id(child)].consumers.append((node, slot))
        self._node_of = by_op
        self.scans = {name: by_op[id(op)] for name, op in physical.scans.items()}
        names = list(outputs) if outputs else [program.last_query]
        self.outputs = {name: by_op[id(physical.queries[name])] for name in names}
        self.watermark = BEFORE_TIME
        self.runs = 0

    def push(self, name: str, elements: Sequence[Element]) -> None:
        node = self.scans[name]
        assert isinstance(node.op, ScanOp)
        if elements:
            pending = node.op.pending
            check_order(name, elements, self.watermark, pending[-1][0] if pending else None)
        node.op.push(elements)

    def _eligible(self, node: _Node) -> int:
        if isinstance(node.op, ScanOp):
            return self.watermark
        return min(child.progress for child in self._children(node))

    def _children(self, node: _Node) -> list[_Node]:
        return [self._node_of[id(c)] for c in node.op.children]

    def _has_work(self, node: _Node) -> bool:
        limit = self._eligible(node)
        if limit > node.progress:
            return True
        return any(q and q[0][0] <= limit for q in node.queues)

    def advance(self, watermark: int) -> dict[str, list[Element]]:
        try:
            return self._advance(watermark)
        except (ArithmeticError, ValueError) as exc:
            raise EvaluationError(f"cannot evaluate the program up to instant {watermark}: {exc}") from exc

    def _advance(self, watermark: int) -> dict[str, list[Element]]:
        results: dict[str, list[Element]] = {name: [] for name in self.outputs}
        if watermark <= self.watermark:
            return results
        self.watermark = watermark
        want: dict[int, list[str]] = {}  # two outputs may be one shared operator
        for name, n in self.outputs.items():
            want.setdefault(id(n), []).append(name)
        stack: list[_Node] = [n for n in reversed(self.nodes) if isinstance(n.op, ScanOp)]
        while True:
            while stack:
                node = stack.pop()
                if not self._has_work(node):
                    continue
                out = self._run(node)
                if out:
                    for name in want.get(id(node), ()):
                        results[name].extend(out)
                if self._has_work(node):
                    stack.append(node)
                for consumer, slot in reversed(node.consumers):
                    if out:
                        consumer.queues[slot].extend(out)
                    stack.append(consumer)
            leftover = [n for n in self.nodes if self._has_work(n)]
            if not leftover:
                return results
            stack.extend(reversed(leftover))

    def _run(self, node: _Node) -> list[Element]:
        """One run: at most ``run_limit`` tuples, whole instants only."""
        limit = self._eligible(node)
        op = node.op
        self.runs += 1
        if isinstance(op, ScanOp):
            pending = op.pending
            t_hi = limit
            if len(pending) > self.run_limit and pending[self.run_limit - 1][0] < limit:
                t_hi = _instant_end(pending, self.run_limit)
            out = op.process([], t_hi)
            node.progress = t_hi
            return out
        t_hi = limit
        if sum(len(q) for q in node.queues) > self.run_limit:
            times = heapq.merge(*[(e[0] for e in q) for q in node.queues])
            t_hi = min(limit, next(itertools.islice(times, self.run_limit - 1, None)))
        inputs: list[list[Element]] = []
        for q in node.queues:
            part: list[Element] = []
            while q and q[0][0] <= t_hi:
                part.append(q.popleft())
            inputs.append(part)
        out = op.process(inputs, t_hi)
        node.progress = t_hi
        return out


def _instant_end(pending: deque[Element], count: int) -> int:
    """The instant of the ``count``-th pending tuple: a run takes whole
    instants, so it ends there."""
    return int(pending[count - 1][0])
