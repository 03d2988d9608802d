"""The incremental COUNT / SUM / AVG of a range window (RangeSums) against
the general algorithm it short-cuts (WindowAggregate re-deriving every
carried tuple): same instants, windows, values and lineage low, call for
call, including the calls where its prefix sums are rebased or it gives
up to the general algorithm."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.node.cql import plan
from semiactive.node.engine.columnar.range_sums import Tail
from semiactive.node.engine.columnar.window_aggregate import WindowAggregate

CALLS = (
    plan.AggCall(plan.AggFunc.COUNT, None, plan.INTEGER),
    plan.AggCall(plan.AggFunc.SUM, plan.ColRef(plan.INTEGER, 0, "a"), plan.INTEGER),
    plan.AggCall(plan.AggFunc.AVG, plan.ColRef(plan.INTEGER, 1, "b"), plan.FLOAT),
)

# Small values; values that make prefix sums rebase (600 rows of 2**52
# pass 2**61); values past what a rebase can help.
VALUES = st.one_of(
    st.integers(-1000, 1000),
    st.integers(2**50, 2**52),
    st.integers(-(2**62), 2**62),
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    range_ms=st.integers(0, 40),
    slide=st.integers(1, 12),
    calls=st.lists(
        st.tuples(
            st.integers(0, 30),  # watermark step
            st.integers(0, 600),  # rows
            st.integers(0, 3),  # ts spread per row: 0 repeats instants
            VALUES,
        ),
        min_size=1,
        max_size=12,
    ),
)
def test_range_sums_give_what_the_general_algorithm_gives(
    range_ms: int, slide: int, calls: list[tuple[int, int, int, int]]
) -> None:
    fast = WindowAggregate(CALLS, rows=None, range_ms=range_ms, slide=slide, lineage=True)
    general = WindowAggregate(CALLS, rows=None, range_ms=range_ms, slide=slide, lineage=True)
    general.fast = None
    assert fast.fast is not None
    rnd = np.random.default_rng(len(calls) * 1000 + range_ms)
    done, ts_next, seq = -1, 0, 1
    for step, n, spread, value in calls:
        ts = (ts_next + np.cumsum(rnd.integers(0, spread + 1, n))).astype(np.int64)
        watermark = max(done + 1 + step, int(ts[-1]) if n else done + 1)
        a = np.full(n, value, dtype=np.int64) - rnd.integers(0, 3, n)
        b = rnd.integers(-50, 50, n).astype(np.int64)
        garbage = np.empty(n, dtype=np.int64)  # COUNT's argument is never read
        lin = np.arange(seq, seq + n, dtype=np.int64)
        got = fast.advance(ts, [garbage, a, b], done, watermark, lin)
        want = general.advance(ts, [garbage.copy(), a, b], done, watermark, lin)
        assert got.ts.tolist() == want.ts.tolist()
        assert got.present.tolist() == want.present.tolist()
        for x, y in zip(got.columns, want.columns, strict=True):
            assert x.tolist() == y.tolist()
        assert fast.state_low() == general.state_low()
        done, ts_next, seq = watermark, watermark + 1, seq + n


def test_a_tail_appends_and_cuts_in_place() -> None:
    tail = Tail(np.int64)
    expected: list[int] = []
    for i in range(200):
        chunk = np.arange(i * 100, i * 100 + 37 * (i % 5), dtype=np.int64)
        tail.append(chunk)
        expected += chunk.tolist()
        cut = min(len(expected), 23 * (i % 4))
        tail.cut(cut)
        expected = expected[cut:]
        assert tail.view.tolist() == expected
    assert len(tail.data) <= 4 * max(1024, len(expected))


def test_prefix_sums_rebase_and_then_give_up() -> None:
    """40 calls of 256 rows of 2**50 sum to 2**63.3, past int64: the prefix
    sums are rebased to the carried rows (five calls' worth) on the way,
    windows reaching back to the first carried row included, and stay equal
    to the general algorithm; 2**61 per row cannot be summed in int64."""
    fast = WindowAggregate(CALLS[:2], rows=None, range_ms=100, slide=1)
    general = WindowAggregate(CALLS[:2], rows=None, range_ms=100, slide=1)
    general.fast = None
    for k in range(40):
        ts = np.full(256, k * 20 + 1, dtype=np.int64)
        values = np.full(256, 2**50, dtype=np.int64) + np.arange(256)
        got = fast.advance(ts, [ts, values], k * 20, k * 20 + 20)
        want = general.advance(ts, [ts, values], k * 20, k * 20 + 20)
        assert [c.tolist() for c in got.columns] == [c.tolist() for c in want.columns]
        assert got.ts.tolist() == want.ts.tolist()
    assert fast.fast is not None and fast.fast.bound < 2**62
    big = np.full(4, 2**61, dtype=np.int64)
    assert fast.fast.advance(big * 0 + 900, [big, big], 800, 900, None) is None
