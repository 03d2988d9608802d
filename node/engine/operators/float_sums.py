"""Exact float sums whose result depends only on the multiset summed.

A float ``SUM`` / ``AVG`` accumulator takes values in and out in any order
(a window's arrivals and expiries), and a secondary that rebuilds the same
window from a later starting point must read the same bits as the primary.
So the result is a function of the multiset alone:

- NaN if the multiset holds a NaN or infinities of both signs; else
  an infinity if it holds one; else
- the exact sum of its finite values rounded once, NaN if that is beyond
  the float range, and ``0.0`` (never ``-0.0``) when it is zero.

The finite values are kept as Shewchuk's non-overlapping partials (as
``math.fsum`` does): ``partials``, a list. Adding two finite partials can
overflow although the multiset's sum is in range (``1e308 + 1e308``, then
``-1e308``), and an infinity taken in and out again would leave ``inf -
inf`` behind, so neither goes into the partials. They go into ``odd``, the
accumulator's other slot, ``None`` until then: ``[+inf count, -inf count,
NaN count, big]``, where ``big`` holds exactly (in units of 2**-1074) the
finite values that were moved out of the partials when an addition could
have overflowed. Both slots are plain lists, so state snapshots carry them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: A float is ``n * 2**-1074`` for an integer ``n``: exact sums as integers.
UNIT = 1 << 1074

Odd = list[int]


def exact_add(partials: list[float], x: float, sign: int, odd: Odd | None) -> Odd | None:
    """Adds ``x`` (a value taken in, ``sign`` 1, or out, -1, already
    signed) to ``partials``; returns the new ``odd``. The generated loops
    unroll the case of at most one partial and call this for the rest."""
    before = partials[:]
    given = x
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
    if x - x:
        # Not finite: ``given`` was not, or an addition overflowed (and
        # left infinities or NaN in the partials).
        partials[:] = before
        return odd_add(odd, partials, given, sign)
    partials[i:] = [x]
    return odd


def odd_add(odd: Odd | None, partials: list[float], x: float, sign: int) -> Odd:
    """Takes what the partials must not: an infinity or NaN (``x`` as
    :func:`exact_add` has it), or a finite ``x`` whose addition to
    ``partials`` could overflow, which folds them into ``odd``'s integer."""
    if x - x == 0:
        return _fold(partials, x, odd)
    if odd is None:
        odd = [0, 0, 0, 0]
    v = x if sign > 0 else -x
    odd[2 if v != v else 0 if v > 0 else 1] += sign
    return odd


def _fold(partials: list[float], x: float, odd: Odd | None) -> Odd:
    if odd is None:
        odd = [0, 0, 0, 0]
    odd[3] += _units(x) + sum(map(_units, partials))
    partials.clear()
    return odd


def _units(x: float) -> int:
    n, d = x.as_integer_ratio()
    return n * (UNIT // d)


def exact_sum(partials: Sequence[float], odd: Odd | None = None) -> float:
    """The sum of the multiset kept as ``partials`` and ``odd`` (see the
    module doc). ``partials`` alone may be any finite floats, or a single
    value of any kind (the sum of one element)."""
    if odd is not None:
        pinf, ninf, nan, big = odd
        if nan or (pinf and ninf):
            return _nan()
        if pinf or ninf:
            return math.inf if pinf else -math.inf
        if big:
            try:
                return (big + sum(map(_units, partials))) / UNIT + 0.0
            except OverflowError:
                return _nan()
    try:
        return math.fsum(partials) + 0.0
    except (OverflowError, ValueError):
        return _nan()


def _nan() -> float:
    """A new NaN each time: a NaN is equal to nothing, itself included, but
    Python compares the same object as equal (tuples, dicts), so a reused
    one would make a row holding it look unchanged (and the columnar
    engine, comparing values, would not agree)."""
    return float("nan")
