"""Relation-to-relation operators that need no join or grouping state:
selection, projection, duplicate elimination, union and difference.

Selection and projection work the same on streams and relations (a deletion
is filtered or projected like an insertion), so they are one generated list
comprehension per batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from semiactive.node.cql import plan
from semiactive.node.engine import expressions
from semiactive.node.engine.elements import Element, Row
from semiactive.node.engine.operators.base import Operator, instants2, merge_by_ts
from semiactive.node.engine.state_codec import Form, StateFormatError, plain_int, plain_row, state_class


class SelectOp(Operator):
    def __init__(self, predicate: plan.Expr, label: str = "") -> None:
        super().__init__(label)
        #: The predicate as Python source over element ``e`` (the compiled
        #: slice inlines it).
        self.condition = expressions.source(predicate, "e")
        self._run = expressions.build(f"lambda b: [e for e in b if {self.condition}]")

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        batch = inputs[0]
        return self._run(batch) if batch else batch  # type: ignore[no-any-return]


class ProjectOp(Operator):
    """``identity``: the expressions are the input's columns in order (as in
    ``SELECT id, avg(val)`` over its own aggregate), so elements pass as
    they are."""

    def __init__(self, exprs: Sequence[plan.Expr], identity: bool = False, label: str = "") -> None:
        super().__init__(label)
        self.identity = identity
        items = "".join(f", {expressions.source(x, 'e')}" for x in exprs)
        #: The output element as Python source over element ``e``.
        self.element = f"(e[0], e[1], e[2]{items})"
        self._run = expressions.build(f"lambda b: [{self.element} for e in b]")

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        batch = inputs[0]
        if self.identity or not batch:
            return batch
        return self._run(batch)  # type: ignore[no-any-return]


def _dump_multiset(multiset: Multiset) -> list[Any]:
    return [x for row, (count, lin) in multiset.counts.items() for x in (row, count, lin)]


def load_multiset(flat: list[Any], start: int = 0, stop: int | None = None) -> Multiset:
    """The multiset of ``flat[start:stop]``, (row, count, lineage) triples
    as :func:`_dump_multiset` wrote them (also inside a join's synopsis)."""
    stop = len(flat) if stop is None else stop
    if (stop - start) % 3:
        raise StateFormatError("a multiset in a state snapshot is not (row, count, lineage) triples")
    out = Multiset()
    counts = out.counts
    for i in range(start, stop, 3):
        counts[plain_row(flat[i])] = [plain_int(flat[i + 1]), plain_int(flat[i + 2])]
    return out


@state_class(form=Form("multiset", _dump_multiset, load_multiset))
class Multiset:
    """Counts of rows with the lineage of their oldest live copy. A dict keeps
    insertion order, so iterating it is deterministic across processes (a set
    of strings would not be: hash randomisation)."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[Row, list[int]] = {}

    def add(self, row: Row, sign: int, lin: int) -> int:
        """Apply one change; return the row's new count."""
        entry = self.counts.get(row)
        if entry is None:
            if sign < 0:
                return 0  # deleting what is not there: ignore (defensive)
            self.counts[row] = [sign, lin]
            return sign
        entry[0] += sign
        if entry[0] <= 0:
            del self.counts[row]
            return 0
        if lin < entry[1]:
            entry[1] = lin
        return entry[0]

    def count(self, row: Row) -> int:
        entry = self.counts.get(row)
        return entry[0] if entry else 0

    def low(self) -> int | None:
        return min((v[1] for v in self.counts.values()), default=None)

    def __len__(self) -> int:
        return len(self.counts)


class DistinctOp(Operator):
    """Set semantics: a row is present once while any copy is present."""

    STATE = ("seen",)

    def __init__(self, label: str = "") -> None:
        super().__init__(label)
        self.seen = Multiset()

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        out: list[Element] = []
        for e in inputs[0]:
            row = e[3:]
            before = self.seen.count(row)
            after = self.seen.add(row, e[2], e[1])
            if before == 0 and after > 0:
                out.append((e[0], e[1], 1, *row))
            elif before > 0 and after == 0:
                out.append((e[0], e[1], -1, *row))
        return out


def widening(columns: Sequence[bool]) -> tuple[str | None, Any]:
    """For one input of UNION or EXCEPT, with ``columns`` saying which
    integer columns widen to float: the widened element as Python source
    over ``e`` and a function widening a batch (both None when none do)."""
    if not any(columns):
        return None, None
    items = "".join(
        f", (None if (v := e[{i + 3}]) is None else float(v))" if w else f", e[{i + 3}]"
        for i, w in enumerate(columns)
    )
    return f"(e[0], e[1], e[2]{items})", expressions.build(
        f"lambda b: [(e[0], e[1], e[2]{items}) for e in b]"
    )


def widened(
    converters: Sequence[Any], inputs: Sequence[list[Element]]
) -> tuple[list[Element], list[Element]]:
    """Both inputs, each through its converter from :func:`widening` (if any)."""
    left, right = inputs
    if converters[0] is not None and left:
        left = converters[0](left)
    if converters[1] is not None and right:
        right = converters[1](right)
    return left, right


class UnionOp(Operator):
    """UNION ALL merges the two inputs (left first within an instant); UNION
    on relations adds duplicate elimination. Integer columns that widen to
    float are converted so equal values compare equal downstream: ``widen``
    says, per input and column, which to convert (a float stays as it is)."""

    STATE = ("seen",)

    def __init__(
        self, keep_all: bool, widen: Sequence[Sequence[bool]], kind: plan.Kind, label: str = ""
    ) -> None:
        super().__init__(label)
        self.keep_all = keep_all or kind is plan.Kind.STREAM
        self.seen = Multiset()
        #: Per input: the widened element as Python source over ``e``, or None.
        self.elements: list[str | None] = [None, None]
        self._widen: list[Any] = [None, None]
        for side, columns in enumerate(widen):
            self.elements[side], self._widen[side] = widening(columns)

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        left, right = widened(self._widen, inputs)
        merged = merge_by_ts(left, right)
        if self.keep_all:
            return merged
        out: list[Element] = []
        for e in merged:
            row = e[3:]
            before = self.seen.count(row)
            after = self.seen.add(row, e[2], e[1])
            if (before == 0) != (after == 0):
                out.append((e[0], e[1], 1 if after else -1, *row))
        return out


class ExceptOp(Operator):
    """Multiset difference: a row occurs max(0, left count - right count)
    times. Integer columns that widen to float are converted first, as for
    UNION, so that 2 and 2.0 are the same row."""

    STATE = ("left_rows", "right_rows")

    def __init__(self, widen: Sequence[Sequence[bool]] = ((), ()), label: str = "") -> None:
        super().__init__(label)
        self.left_rows = Multiset()
        self.right_rows = Multiset()
        self._widen = [widening(columns)[1] for columns in widen]

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        out: list[Element] = []
        left, right = widened(self._widen, inputs)
        for ts, lpart, rpart in instants2(left, right):
            touched: dict[Row, int] = {}
            for side, part in ((self.left_rows, lpart), (self.right_rows, rpart)):
                for e in part:
                    row = e[3:]
                    if row not in touched:
                        touched[row] = self._visible(row)
                    side.add(row, e[2], e[1])
            for row, before in touched.items():
                diff = self._visible(row) - before
                if diff:
                    lin = self.ctx.floor
                    sign = 1 if diff > 0 else -1
                    out.extend([(ts, lin, sign, *row)] * abs(diff))
        return out

    def _visible(self, row: Row) -> int:
        return max(0, self.left_rows.count(row) - self.right_rows.count(row))
