"""Seed 004's ASSIGN (eq. 1) as one operator.

For each row r of R, the candidate relation whose name is r's selector
value, projected on the attributes r names (constants, or values of r's
columns), joined with r. Inputs: R, then every candidate, all relations.

It is a join whose right side is chosen per row, kept incrementally like
:class:`~semiactive.node.engine.operators.join.JoinOp`: at an instant each candidate's
changes meet R as it was, then R's changes meet the candidates as they now
are; together that is exactly the change of the result. Candidates first,
so that a candidate's rows at an instant matter only if some row of R names
it at that instant (before or after R's changes): what connection
management (:mod:`semiactive.node.sections.connections`) relies on to leave the rest unsent. A row of R that
names no candidate, or an attribute its candidate lacks, can never produce
and is not kept; a candidate row whose value does not fit the declared type
gives no row with it. None of these is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element, Row
from semiactive.node.engine.operators.base import Operator
from semiactive.node.engine.operators.relational import Multiset

NO_FIT = object()  # what a converter returns for a value outside its type

Convert = Callable[[Any], Any]


def converter(declared: plan.SqlType) -> Convert:
    """The value as one of ``declared`` (an integer widened to a float), or
    :data:`NO_FIT`. NULL is a value of every type."""
    name = declared.name
    if name is plan.TypeName.INTEGER:
        return lambda v: v if v is None or type(v) is int else NO_FIT
    if name is plan.TypeName.FLOAT:
        return lambda v: float(v) if type(v) in (int, float) else v if v is None else NO_FIT
    if name is plan.TypeName.BYTE:
        return lambda v: v if v is None or (type(v) is str and len(v) == 1 and ord(v) < 256) else NO_FIT
    length = declared.length
    return lambda v: v if v is None or (type(v) is str and len(v.encode()) <= length) else NO_FIT


def instants_of(inputs: Sequence[list[Element]]) -> Iterator[tuple[int, list[list[Element]]]]:
    """``(ts, each input's elements at ts)`` for every instant present in any
    of the ts-sorted ``inputs``, in time order."""
    positions = [0] * len(inputs)
    for ts in sorted({e[0] for part in inputs for e in part}):
        parts = []
        for n, part in enumerate(inputs):
            i = j = positions[n]
            while j < len(part) and part[j][0] == ts:
                j += 1
            parts.append(part[i:j])
            positions[n] = j
        yield ts, parts


class AssignOp(Operator):
    """``candidates``: (name, attribute names) of each candidate, in the
    order of the inputs after R."""

    STATE = ("rows", "picks", "content")

    def __init__(
        self,
        selector: int,
        takes: Sequence[plan.AssignTake],
        candidates: Sequence[tuple[str, tuple[str, ...]]],
        label: str = "",
    ) -> None:
        super().__init__(label)
        self.selector = selector
        self.takes = tuple(takes)
        self.convert = tuple(converter(t.type) for t in takes)
        self.position = {name: k for k, (name, _) in enumerate(candidates)}
        self.attributes: list[dict[Any, int]] = [{a: i for i, a in enumerate(n)} for _, n in candidates]
        # R's rows that can produce, by candidate, and the candidate columns each takes.
        self.rows = [Multiset() for _ in candidates]
        self.picks: dict[Row, tuple[int, ...]] = {}
        self.content = [Multiset() for _ in candidates]

    def _choose(self, r: Row) -> tuple[int, tuple[int, ...]] | None:
        """The candidate r names and the positions of the attributes it takes."""
        k = self.position.get(r[self.selector])
        if k is None:
            return None
        attributes = self.attributes[k]
        picks = []
        for take in self.takes:
            index = attributes.get(take.attribute if take.column is None else r[take.column])
            if index is None:
                return None
            picks.append(index)
        return k, tuple(picks)

    def _values(self, picks: tuple[int, ...], s: Row) -> tuple[Any, ...] | None:
        values = tuple(convert(s[i]) for i, convert in zip(picks, self.convert, strict=True))
        return None if NO_FIT in values else values

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        if not any(inputs):
            return []
        out: list[Element] = []
        for ts, (r_part, *c_parts) in instants_of(inputs):
            for k, part in enumerate(c_parts):
                for e in part:
                    self._c_change(ts, k, e, out)
            for e in r_part:
                self._r_change(ts, e, out)
        return out

    def _r_change(self, ts: int, e: Element, out: list[Element]) -> None:
        r = e[3:]
        choice = self._choose(r)
        if choice is None:
            return
        k, picks = choice
        sign, lin = e[2], e[1]
        for s, (count, s_lin) in self.content[k].counts.items():
            values = self._values(picks, s)
            if values is not None:
                out.extend([(ts, lin if lin < s_lin else s_lin, sign, *r, *values)] * count)
        if self.rows[k].add(r, sign, lin) > 0:
            self.picks[r] = picks
        else:
            self.picks.pop(r, None)

    def _c_change(self, ts: int, k: int, e: Element, out: list[Element]) -> None:
        s = e[3:]
        sign, lin = e[2], e[1]
        for r, (count, r_lin) in self.rows[k].counts.items():
            values = self._values(self.picks[r], s)
            if values is not None:
                out.extend([(ts, lin if lin < r_lin else r_lin, sign, *r, *values)] * count)
        self.content[k].add(s, sign, lin)
