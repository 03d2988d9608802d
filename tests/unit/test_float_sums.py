"""Float SUM / AVG (node/engine/operators/float_sums.py) and MIN / MAX
(float_order.py): every result is a function of the multiset in the window
alone (the exact sum rounded once, NaN or an infinity when the multiset
holds those, NaN beyond the float range; the least and greatest in one
total order where NaN is the greatest), whatever came in and went out
before. A secondary that rebuilt the window from a later point must read
the same bits as the primary."""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semiactive.node.engine.operators.float_order import float_key, key_float
from semiactive.node.engine.operators.float_sums import exact_add, exact_sum, odd_add
from tests.unit.engine_harness import run

HEAD = "REGISTER STREAM s (k integer, f float)\n"

# Values that cancel, overflow in pairs, underflow, are signed zeros or not finite.
SPECIAL = [math.inf, -math.inf, math.nan, 1e308, -1e308, 1.7e308, 5e307, 5e-324, -0.0, 0.0, 0.1, 1.0, -1.0]
VALUES = st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=False, allow_infinity=False))


def reference(values: list[float]) -> float:
    """The sum of the multiset, by the definition in float_sums's doc."""
    if any(v != v for v in values) or (math.inf in values and -math.inf in values):
        return math.nan
    if math.inf in values or -math.inf in values:
        return math.inf if math.inf in values else -math.inf
    try:
        return float(sum(map(Fraction, values), Fraction(0))) + 0.0
    except OverflowError:
        return math.nan


def _rows_at(rows: list[tuple[Any, ...]], ts: int, keyed: bool = False) -> dict[Any, tuple[Any, ...]]:
    """A relation output of one row per key (its first column if
    ``keyed``, else one row: ``None``) as it stands at instant ``ts``."""
    now: dict[Any, tuple[Any, ...]] = {}
    for t, op, *values in rows:
        if t <= ts and op == "+":
            now[values[0] if keyed else None] = tuple(values)
    return now


def _each_window(
    select: str, values: list[float], rows: int
) -> Iterator[tuple[list[float], tuple[Any, ...], bool]]:
    """``SELECT {select} FROM s [Rows rows]`` over ``values``, fused and
    not: each instant's window content and the relation's row there."""
    text = HEAD + f"REGISTER QUERY q AS SELECT {select} FROM s [Rows {rows}]"
    inputs = [(ts, 0, v) for ts, v in enumerate(values, start=1)]
    for fuse in (True, False):
        got = run(text, {"s": inputs}, fuse=fuse)
        for ts in range(1, len(values) + 1):
            yield values[max(0, ts - rows) : ts], _rows_at(got, ts)[None], fuse


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(VALUES, min_size=1, max_size=40), rows=st.integers(1, 5))
def test_a_window_sum_is_the_sum_of_what_the_window_holds(values: list[float], rows: int) -> None:
    for window, row, fuse in _each_window("SUM(f) AS t, AVG(f) AS m, COUNT(*) AS n", values, rows):
        total = reference(window)
        assert repr(row) == repr((total, total / len(window), len(window))), (window, fuse)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(st.tuples(st.integers(0, 2), VALUES), min_size=1, max_size=40), rows=st.integers(1, 3))
def test_a_group_sum_is_what_its_partition_holds(values: list[tuple[int, float]], rows: int) -> None:
    text = HEAD + (
        f"REGISTER QUERY q AS SELECT k, SUM(f) AS t FROM s [Partition By k Rows {rows}] GROUP BY k"
    )
    inputs = [(ts, k, v) for ts, (k, v) in enumerate(values, start=1)]
    for fuse in (True, False):
        got = run(text, {"s": inputs}, fuse=fuse)
        for ts, (k, _) in enumerate(values, start=1):
            window = [v for kk, v in values[:ts] if kk == k][-rows:]
            assert repr(_rows_at(got, ts, keyed=True)[k]) == repr((k, reference(window))), (ts, k, fuse)


def test_an_infinity_that_left_the_window_leaves_no_nan_behind() -> None:
    text = HEAD + "REGISTER QUERY q AS ISTREAM(SELECT SUM(f * 1e300) AS t FROM s [Rows 2])"
    rows = run(text, {"s": [(1, 0, 1e10), (2, 0, 1.0), (3, 0, 2.0), (4, 0, 1e8), (5, 0, 1e8), (6, 0, 1.0)]})
    assert repr([r[1] for r in rows]) == repr([math.inf, 3e300, 1.00000002e308, math.nan, 1.00000001e308])


def test_a_sum_rebuilt_from_a_later_point_reads_the_same_bits() -> None:
    """The primary saw an infinity and an overflow; a secondary rebuilding
    the window from after them did not."""
    history = [(1, 0, math.inf), (2, 0, 1.7e308), (3, 0, 1.7e308), (4, 0, -1.7e308)]
    tail = [(5, 0, 0.1), (6, 0, 0.2), (7, 0, 0.3)]
    text = HEAD + "REGISTER QUERY q AS SELECT SUM(f) AS t FROM s [Rows 3]"
    primary = _rows_at(run(text, {"s": history + tail}), 7)
    secondary = _rows_at(run(text, {"s": tail}), 7)
    assert repr(primary) == repr(secondary) == repr({None: (0.6,)})


def test_the_partials_fold_exactly_where_an_addition_could_overflow() -> None:
    partials: list[float] = []
    odd = None
    for x in (1.7e308, 1.7e308, 0.5, -1.7e308, 1e-300):
        odd = exact_add(partials, x, 1, odd) if partials else odd_add(odd, partials, x, 1)
    assert odd is not None and odd[:3] == [0, 0, 0]
    assert exact_sum(partials, odd) == 1.7e308
    odd = exact_add(partials, -1.7e308, -1, odd)
    assert exact_sum(partials, odd) == 0.5
    for x in (math.inf, math.nan):
        odd = odd_add(odd, partials, x, 1)
    assert math.isnan(exact_sum(partials, odd))
    odd = odd_add(odd, partials, math.nan, -1)
    assert exact_sum(partials, odd) == math.inf
    odd = odd_add(odd, partials, -math.inf, -1)  # +inf taken out
    assert exact_sum(partials, odd) == 0.5


def _same(a: Any, b: Any) -> bool:
    """Equal as a relation's rows are compared (-0.0 == 0.0), NaN as NaN."""
    return bool(a == b or (a != a and b != b))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(VALUES, min_size=1, max_size=40), rows=st.integers(1, 5))
def test_window_min_max_order_floats_in_one_total_order(values: list[float], rows: int) -> None:
    for window, (lo, hi), fuse in _each_window("MIN(f) AS lo, MAX(f) AS hi", values, rows):
        keys = [float_key(v) for v in window]
        assert _same(lo, key_float(min(keys))) and _same(hi, key_float(max(keys))), (window, fuse)


def test_a_nan_that_left_the_window_leaves_no_trace_in_min_max() -> None:
    """Python's heap answers by history once a NaN was in it."""
    history = [(1, 0, math.nan), (2, 0, 3.0), (3, 0, math.nan), (4, 0, 1.0)]
    tail = [(5, 0, 2.0), (6, 0, -0.0)]
    text = HEAD + "REGISTER QUERY q AS SELECT MIN(f) AS lo, MAX(f) AS hi FROM s [Rows 2]"
    primary = _rows_at(run(text, {"s": history + tail}), 6)
    secondary = _rows_at(run(text, {"s": tail}), 6)
    assert repr(primary) == repr(secondary) == repr({None: (-0.0, 2.0)})
    with_nan = _rows_at(run(text, {"s": history[:2]}), 2)[None]
    assert with_nan[0] == 3.0 and math.isnan(with_nan[1])
