"""Vectorized exact float window sums (node/engine/columnar/float_window_sums.py)
against the definition (Fractions, rounded once) and the row engine's own
accumulator, over every path: limbs, Python integers, and the windows
left to the accumulator (infinities, NaN, results at the float range's ends)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.node.engine.columnar import float_window_sums
from semiactive.node.engine.columnar.float_window_sums import MAX_LIMBS, sum_of, window_sums
from tests.unit.test_float_sums import SPECIAL, reference

narrow = st.builds(lambda m, e: m * 2.0**e, st.integers(-(2**53), 2**53), st.integers(-80, 10))
wide = st.builds(lambda m, e: m * 2.0**e, st.integers(-(2**53), 2**53), st.integers(-1074, 970))
decimals = st.builds(lambda cents: cents / 100, st.integers(-(10**9), 10**9))


@st.composite
def windows(draw: st.DrawFn, values: st.SearchStrategy[float]) -> tuple[list[float], list[int], list[int]]:
    items = draw(st.lists(values, max_size=40))
    bounds = [
        sorted(draw(st.tuples(*[st.integers(0, len(items))] * 2))) for _ in range(draw(st.integers(0, 12)))
    ]
    return items, [lo for lo, _ in bounds], [hi for _, hi in bounds]


def _check(items: list[float], lo: list[int], hi: list[int]) -> None:
    got = window_sums(
        np.array(items, dtype=np.float64), np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64)
    )
    for k, (a, b) in enumerate(zip(lo, hi, strict=True)):
        part = items[a:b]
        expected = reference(part) if part else 0.0
        assert repr(float(got[k])) == repr(expected), (part, got[k])
        if part:
            assert repr(sum_of(part)) == repr(expected)


@settings(max_examples=400, deadline=None)
@given(windows(st.one_of(narrow, decimals, st.sampled_from(SPECIAL))))
def test_narrow_values_and_specials(case: tuple[list[float], list[int], list[int]]) -> None:
    _check(*case)


@settings(max_examples=300, deadline=None)
@given(windows(st.one_of(wide, st.floats(allow_nan=False), st.sampled_from(SPECIAL))))
def test_values_over_the_whole_float_range(case: tuple[list[float], list[int], list[int]]) -> None:
    _check(*case)


@settings(max_examples=500, deadline=None)
@given(
    mantissa=st.integers(2**52, 2**53 - 1),
    exponent=st.integers(-900, 900),
    half=st.sampled_from([1, -1, 3, -3]),
    below=st.sampled_from([0, 60, 100, 130, 200, 250]),
    sign=st.sampled_from([1, -1]),
)
def test_near_ties_round_once_to_even(mantissa: int, exponent: int, half: int, below: int, sign: int) -> None:
    """A value, half its last bit (a tie), and a far smaller value that
    breaks the tie: the bits below the ones kept must count."""
    a = math.ldexp(mantissa, exponent)
    items = [a, math.ldexp(half, exponent - 1)]
    if below:
        items.append(sign * math.ldexp(1.0, exponent - below))
    _check(items, [0, 0, 1], [len(items), 2, len(items)])


def test_narrow_values_take_the_limbs() -> None:
    """The tests above reach the vectorized path, not only the fallbacks."""
    values = np.array([0.1, 1e3, -7.25, 1e-5], dtype=np.float64)
    bounds = np.array([0]), np.array([4])
    assert float_window_sums._limb_sums(*float_window_sums._as_integers(values), *bounds) is not None
    spread = np.array([1e-300, 1e300])
    assert (
        float_window_sums._limb_sums(*float_window_sums._as_integers(spread), bounds[0], np.array([2]))
        is None
    )
    assert MAX_LIMBS * float_window_sums.LIMB < 600


def test_more_values_than_a_limbs_prefix_holds_go_through_integers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(float_window_sums, "MAX_VALUES", 3)
    items = [0.1, 0.2, 0.3, 1e16, 1.0, -1e16, 2.5, math.inf, 7.0]
    _check(items, [0, 0, 2, 3, 5, 8], [9, 3, 6, 6, 7, 9])
