"""The DTS execution order (the recursive CQL paper, 3.2 and Fig. 6).

Operators run inputs-first. A recursive program has cycles; each is cut at a
delay operator: the delay's output is produced first in every slice (it can
only hold tuples from earlier slices) and its input is absorbed last.
Cutting one delay may leave inner cycles; those are cut in turn, recursively,
so nested loops stay contiguous in the order, as in Fig. 6.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from semiactive.node.engine.operators.base import Operator
from semiactive.node.engine.operators.streaming import DelayOp

T = TypeVar("T", bound=Hashable)


def strongly_connected(nodes: Sequence[T], successors: Callable[[T], Iterable[T]]) -> list[list[T]]:
    """Strongly connected components in topological order (a component comes
    before every component it reaches). Iterative Tarjan; deterministic for a
    given node order and successor order."""
    index: dict[T, int] = {}
    low: dict[T, int] = {}
    on_stack: set[T] = set()
    stack: list[T] = []
    result: list[list[T]] = []
    counter = 0
    position = {n: i for i, n in enumerate(nodes)}
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[T, Iterable[T]]] = [(root, iter(successors(root)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(successors(nxt))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[T] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                component.sort(key=lambda n: position.get(n, len(position)))
                result.append(component)
    result.reverse()
    return result


class StepKind(enum.Enum):
    RUN = "run"  # process the children's outputs of this slice
    EMIT = "emit"  # a cut delay releases tuples due in this slice
    ABSORB = "absorb"  # a cut delay takes this slice's input for later


@dataclass(frozen=True)
class Step:
    kind: StepKind
    op: Operator


class CycleWithoutDelay(ValueError):
    def __init__(self, ops: list[Operator]) -> None:
        self.ops = ops
        super().__init__("cycle without a delay operator through " + " -> ".join(o.label for o in ops))


def dts_order(operators: Sequence[Operator]) -> tuple[list[Step], list[DelayOp]]:
    """The execution order and the delays cut to obtain it."""
    consumers: dict[int, list[Operator]] = {id(o): [] for o in operators}
    for op in operators:
        for child in op.children:
            consumers[id(child)].append(op)
    steps: list[Step] = []
    cut: list[DelayOp] = []
    _order(list(operators), consumers, set(), steps, cut)
    return steps, cut


def _order(
    ops: list[Operator],
    consumers: dict[int, list[Operator]],
    removed: set[int],
    steps: list[Step],
    cut: list[DelayOp],
) -> None:
    members = {id(o) for o in ops}

    def successors(op: Operator) -> list[Operator]:
        if id(op) in removed:
            return []
        return [c for c in consumers[id(op)] if id(c) in members]

    for component in strongly_connected(ops, successors):
        single = component[0]
        if len(component) == 1 and single not in successors(single):
            kind = StepKind.ABSORB if id(single) in removed else StepKind.RUN
            steps.append(Step(kind, single))
            continue
        delay = next((o for o in component if isinstance(o, DelayOp)), None)
        if delay is None:
            raise CycleWithoutDelay(component)
        cut.append(delay)
        steps.append(Step(StepKind.EMIT, delay))
        _order(component, consumers, removed | {id(delay)}, steps, cut)
