"""Exact float sums of windows, vectorized: the row engine's bits.

The row engine sums floats exactly and rounds once
(:mod:`semiactive.node.engine.operators.float_sums`), so a float prefix sum
(``cumsum`` and a difference) would not give its results. Here every
finite value is an integer times ``2**m``, for the smallest ``m`` among the
values, and that integer is cut into limbs of :data:`LIMB` bits, each
small enough that the prefix sums of a limb stay exact in int64. A window's
sum is then, limb by limb, a difference of prefix sums: exact. It is
rounded once as the row engine rounds (to nearest, ties to even) by taking
its top 55 bits, rounded to odd (the bits below them OR-ed into the last),
and converting those to float: rounding to odd at two bits more than the
53 kept and then to nearest gives the correctly rounded result.

Windows that hold an infinity or a NaN, and sums that land in the lowest
or the highest binade (subnormal results, and those near the overflow
that ``math.fsum`` and the row engine reject), are summed by the row
engine's own accumulator instead, one window at a time. Values that span
more bits than :data:`MAX_LIMBS` limbs hold are summed as Python integers.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from semiactive.node.engine.columnar.batch import Int64s
from semiactive.node.engine.operators.float_sums import exact_add, exact_sum

#: Bits per limb: prefix sums of up to MAX_VALUES values sum a limb exactly
#: (more go through Python integers).
LIMB = 40
MASK = (1 << LIMB) - 1
#: Values whose integers need more limbs are summed as Python integers.
MAX_LIMBS = 8
MAX_VALUES = 1 << 22
#: Results from here up, or below the normal range, are left to the row
#: engine's accumulator (see the module doc).
TOP_BINADE = 2.0**1023
LOWEST_NORMAL = 2.0**-1022


def window_sums(values: np.ndarray, lo: Int64s, hi: Int64s) -> np.ndarray:
    """``SUM(values[lo:hi])`` of float64 ``values`` for each window, as the
    row engine computes it (0.0 for an empty window)."""
    out = np.zeros(len(lo), dtype=np.float64)
    if not len(lo) or not len(values):
        return out
    finite = np.isfinite(values)
    odd = _prefix(~finite)
    slow = odd[hi] > odd[lo]
    fast = ~slow
    if fast.any():
        n, shift, m = _as_integers(np.where(finite, values, 0.0))
        n[values < 0] *= -1
        exact = _limb_sums(n, shift, m, lo[fast], hi[fast]) if len(values) <= MAX_VALUES else None
        if exact is None:
            exact = _integer_sums(n, shift, m, lo[fast], hi[fast])
        out[fast] = exact
        size = np.abs(exact)
        slow[fast] = (size >= TOP_BINADE) | ((size < LOWEST_NORMAL) & (size > 0)) | np.isnan(exact)
    for i in np.flatnonzero(slow & (hi > lo)).tolist():
        out[i] = sum_of(values[int(lo[i]) : int(hi[i])].tolist())
    return out


def sum_of(values: list[float]) -> float:
    """The row engine's accumulator over ``values``, read once."""
    partials: list[float] = []
    odd = None
    for x in values:
        odd = exact_add(partials, x, 1, odd)
    return exact_sum(partials, odd)


def _as_integers(values: np.ndarray) -> tuple[Int64s, Int64s, int]:
    """Finite ``values`` as ``|value| = n * 2**(m + shift)``: ``n`` below
    2**53 without its trailing zero bits (values such as 1.5 then span few
    bits), ``shift`` >= 0 (0 for a zero) and ``m`` the least exponent."""
    fraction, exponent = np.frexp(values)
    n = np.abs(np.ldexp(fraction, 53)).astype(np.int64)
    shift = exponent.astype(np.int64) - 53
    nonzero = n != 0
    if not nonzero.any():
        return n, np.zeros_like(n), 0
    zeros = np.where(nonzero, np.frexp((n & -n).astype(np.float64))[1] - 1, 0)
    n >>= zeros
    shift += zeros
    m = int(shift[nonzero].min())
    return n, np.where(nonzero, shift - m, 0), m


def _integer_sums(n: Int64s, shift: Int64s, m: int, lo: Int64s, hi: Int64s) -> np.ndarray:
    """As :func:`_limb_sums`, on Python integers: for values spread over
    more bits than the limbs hold (NaN where the sum is out of range)."""
    integers = [v << s for v, s in zip(n.tolist(), shift.tolist(), strict=True)]
    prefix = [0, *itertools.accumulate(integers)]
    out = []
    for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
        total = prefix[b] - prefix[a]
        try:
            out.append(total / (1 << -m) if m < 0 else float(total << m))
        except OverflowError:
            out.append(math.nan)
    return np.array(out, dtype=np.float64)


def _prefix(flags: np.ndarray) -> Int64s:
    out = np.zeros(len(flags) + 1, dtype=np.int64)
    np.cumsum(flags, out=out[1:])
    return out


def _limb_sums(n: Int64s, shift: Int64s, m: int, lo: Int64s, hi: Int64s) -> np.ndarray | None:
    """The correctly rounded exact sums of the values ``n * 2**(m + shift)``
    (:func:`_as_integers`, ``n`` signed) over the windows, or None when
    they need more than MAX_LIMBS limbs."""
    limbs = (int(shift.max()) + 53) // LIMB + 2  # one spare on top for the carries
    if limbs > MAX_LIMBS:
        return None
    negative = n < 0
    n = np.abs(n)
    # n << shift touches three limbs at most: from `first`, its bits at
    # `offset` and up.
    first, offset = np.divmod(shift, LIMB)
    parts = (
        np.left_shift(n & (np.left_shift(1, LIMB - offset) - 1), offset),
        np.right_shift(n, LIMB - offset) & MASK,
        np.right_shift(n, 2 * LIMB - offset),
    )
    table = np.zeros((limbs + 2, len(n)), dtype=np.int64)
    column = np.arange(len(n))
    for k, part in enumerate(parts):
        part[negative] *= -1
        table[first + k, column] = part
    prefix = np.zeros((limbs, len(n) + 1), dtype=np.int64)
    np.cumsum(table[:limbs], axis=1, out=prefix[:, 1:])
    sums = prefix[:, hi] - prefix[:, lo]
    return _rounded(list(sums), m)


def _rounded(limbs: list[Int64s], m: int) -> np.ndarray:
    """``sum(limbs[j] * 2**(LIMB*j)) * 2**m`` rounded to nearest float."""
    _carry(limbs)
    sign = np.where(limbs[-1] < 0, -1, 1)
    for limb in limbs:
        limb *= sign
    _carry(limbs)
    # The top limb that is not zero, the two below it (zero when there are
    # none) and whether anything below those is not zero.
    count = len(limbs)
    padded = [np.zeros_like(limbs[0])] * 2 + limbs
    top = np.zeros(len(limbs[0]), dtype=np.int64)
    for j in range(count):
        top = np.where(limbs[j] != 0, j, top)
    stack = np.stack(padded)
    at = np.arange(len(top))
    a, b, c = stack[top + 2, at], stack[top + 1, at], stack[top, at]
    below = np.zeros(len(top), dtype=bool)
    for j in range(count):
        below |= (limbs[j] != 0) & (j < top - 2)
    # X = a * 2**80 + b * 2**40 + c has `bits` + 80 bits; keep its top 55.
    bits = np.frexp(a.astype(np.float64))[1].astype(np.int64)  # bit length of a (a < 2**40)
    drop = bits + 2 * LIMB - 55
    kept = (
        np.left_shift(a, 2 * LIMB - drop) + _shifted(b, LIMB - drop) + np.right_shift(c, np.clip(drop, 0, 63))
    )
    lost_b = np.where(drop > LIMB, b & (np.left_shift(1, np.clip(drop - LIMB, 0, LIMB)) - 1), 0)
    lost_c = c & (np.left_shift(1, np.clip(drop, 0, LIMB)) - 1)
    sticky = (lost_b != 0) | (lost_c != 0) | below
    scale = drop + LIMB * (top - 2) + m
    with np.errstate(over="ignore"):  # an infinity here goes to the accumulator (window_sums)
        out = np.ldexp((kept | sticky).astype(np.float64), scale.astype(np.int32)) * sign
    return out  # type: ignore[no-any-return]


def _shifted(x: Int64s, by: Int64s) -> Int64s:
    """``x << by`` where ``by`` >= 0, else ``x >> -by``."""
    return np.where(by >= 0, np.left_shift(x, np.clip(by, 0, 63)), np.right_shift(x, np.clip(-by, 0, 63)))


def _carry(limbs: list[Int64s]) -> None:
    """Moves each limb's bits beyond LIMB up: every limb but the top then
    lies in [0, 2**LIMB), and the top one has the sum's sign."""
    for j in range(len(limbs) - 1):
        carry = limbs[j] >> LIMB
        limbs[j] -= carry << LIMB
        limbs[j + 1] += carry
