"""Incremental relation join.

Both inputs are kept as multisets (synopses) hashed on the equi-join key the
planner extracted from the WHERE clause (empty key: cross product). At an
instant, left changes are joined with the right synopsis as it was, then
right changes with the updated left synopsis; together they give exactly the
change of the join result (dJ = dL x R + L' x dR).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from semiactive.node.cql import plan
from semiactive.node.engine import expressions
from semiactive.node.engine.elements import Element, Row
from semiactive.node.engine.operators.base import Operator, instants2
from semiactive.node.engine.operators.relational import Multiset, load_multiset
from semiactive.node.engine.state_codec import Form, StateFormatError, plain_int, plain_row, state_form

NO_MATCH = object()  # the key of a row whose join key has a NULL


def _dump_synopsis(synopsis: dict[Any, Multiset]) -> list[Any]:
    """``key, n, row, count, lineage, ...`` (n rows per key), flat."""
    flat: list[Any] = []
    extend = flat.extend
    for key, multiset in synopsis.items():
        counts = multiset.counts
        flat.append(key)
        flat.append(len(counts))
        for row, (count, lin) in counts.items():
            extend((row, count, lin))
    return flat


def _load_synopsis(flat: list[Any]) -> dict[Any, Multiset]:
    out: dict[Any, Multiset] = {}
    i, end = 0, len(flat)
    try:
        while i < end:
            key = plain_row(flat[i])
            n = plain_int(flat[i + 1])
            last = i + 2 + 3 * n
            if n < 0 or last > end:
                raise StateFormatError("a join synopsis in a state snapshot with rows missing")
            out[key] = load_multiset(flat, i + 2, last)
            i = last
    except IndexError:
        raise StateFormatError("a join synopsis in a state snapshot cut short") from None
    return out


#: Millions of rows in Linear Road's historical tolls: written flat.
SYNOPSIS = state_form(Form("join synopsis", _dump_synopsis, _load_synopsis))


class JoinOp(Operator):
    STATE = ("left_syn", "right_syn")
    STATE_FORMS = {"left_syn": SYNOPSIS, "right_syn": SYNOPSIS}

    def __init__(
        self,
        left_key: Sequence[plan.Expr],
        right_key: Sequence[plan.Expr],
        residual: plan.Expr | None,
        label: str = "",
    ) -> None:
        super().__init__(label)
        self.left_key = self._key_fn(left_key)
        self.right_key = self._key_fn(right_key)
        # The residual predicate sees the combined row: left values, then right.
        self.residual: Callable[[Row], bool] | None = None
        if residual is not None:
            self.residual = expressions.build(f"lambda e: {expressions.source(residual, 'e', 0)}")
        self.left_syn: dict[Any, Multiset] = {}
        self.right_syn: dict[Any, Multiset] = {}

    @staticmethod
    def _key_fn(exprs: Sequence[plan.Expr]) -> Callable[[Element], Any]:
        if not exprs:
            return lambda e: ()
        function = expressions.row_function(tuple(exprs))
        if not any(expressions.may_be_null(x) for x in exprs):
            return function

        def key(e: Element) -> Any:
            # An equality with NULL is false: such a row joins nothing.
            k = function(e)
            return NO_MATCH if None in k else k

        return key

    def process(self, inputs: Sequence[list[Element]], t_hi: int) -> list[Element]:
        left, right = inputs
        if not left and not right:
            return []
        out: list[Element] = []
        for ts, lpart, rpart in instants2(left, right):
            self._apply(ts, lpart, self.left_key, self.left_syn, self.right_syn, True, out)
            self._apply(ts, rpart, self.right_key, self.right_syn, self.left_syn, False, out)
        return out

    def _apply(
        self,
        ts: int,
        part: list[Element],
        key: Callable[[Element], Any],
        own: dict[Any, Multiset],
        other: dict[Any, Multiset],
        is_left: bool,
        out: list[Element],
    ) -> None:
        residual = self.residual
        for e in part:
            k = key(e)
            if k is NO_MATCH:
                continue
            row = e[3:]
            sign = e[2]
            lin = e[1]
            matches = other.get(k)
            if matches is not None:
                for orow, (count, olin) in matches.counts.items():
                    combined = row + orow if is_left else orow + row
                    if residual is None or residual(combined):
                        item = (ts, lin if lin < olin else olin, sign, *combined)
                        if count == 1:
                            out.append(item)
                        else:
                            out.extend([item] * count)
            syn = own.get(k)
            if syn is None:
                if sign < 0:
                    continue
                syn = own[k] = Multiset()
            syn.add(row, sign, lin)
            if not syn:
                del own[k]
