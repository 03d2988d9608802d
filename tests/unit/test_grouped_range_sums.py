"""The incremental GROUP BY COUNT / SUM / AVG / MIN / MAX of a range window
(GroupedRangeSums) against the general algorithm it short-cuts
(GroupedWindowAggregate sorting every carried tuple): same queries in the
same order, same keys, values, previous-query links and lineage low, call
for call, including the calls where it gives up and hands its tuples over,
and the renumbering of groups once most of them are gone."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.node.cql import plan
from semiactive.node.engine.columnar.batch import Array
from semiactive.node.engine.columnar.group_numbers import numbered
from semiactive.node.engine.columnar.grouped_window_aggregate import GroupedEvaluated, GroupedWindowAggregate

CALLS = (
    plan.AggCall(plan.AggFunc.COUNT, None, plan.INTEGER),
    plan.AggCall(plan.AggFunc.SUM, plan.ColRef(plan.INTEGER, 0, "a"), plan.INTEGER),
    plan.AggCall(plan.AggFunc.AVG, plan.ColRef(plan.INTEGER, 1, "b"), plan.FLOAT),
    plan.AggCall(plan.AggFunc.MAX, plan.ColRef(plan.INTEGER, 0, "a"), plan.INTEGER),
    plan.AggCall(plan.AggFunc.MIN, plan.ColRef(plan.INTEGER, 1, "b"), plan.INTEGER),
)


def _pair(range_ms: int, slide: int, keys: int = 1) -> tuple[GroupedWindowAggregate, GroupedWindowAggregate]:
    fast = GroupedWindowAggregate(CALLS, keys, rows=None, range_ms=range_ms, slide=slide, lineage=True)
    general = GroupedWindowAggregate(CALLS, keys, rows=None, range_ms=range_ms, slide=slide, lineage=True)
    general.fast = None
    assert fast.fast is not None
    return fast, general


def _same(got: GroupedEvaluated, want: GroupedEvaluated) -> None:
    assert got.ts.tolist() == want.ts.tolist()
    assert [k.tolist() for k in got.keys] == [k.tolist() for k in want.keys]
    assert got.present.tolist() == want.present.tolist()
    assert got.previous.tolist() == want.previous.tolist()
    for x, y in zip(got.columns, want.columns, strict=True):
        assert x.tolist() == y.tolist()


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    range_ms=st.integers(0, 40),
    slide=st.integers(1, 12),
    keys=st.sampled_from(["int", "int int", "text", "int text", "str", "str int"]),
    groups=st.sampled_from([1, 3, 40]),
    calls=st.lists(
        st.tuples(
            st.integers(0, 30),  # watermark step
            st.integers(0, 300),  # rows
            st.integers(0, 3),  # ts spread per row: 0 repeats instants
            st.sampled_from([0, 7, 2**52, 2**61]),  # a value: the last ones give up
        ),
        min_size=1,
        max_size=12,
    ),
)
def test_grouped_range_sums_give_what_the_general_algorithm_gives(
    range_ms: int, slide: int, keys: str, groups: int, calls: list[tuple[int, int, int, int]]
) -> None:
    kinds = keys.split()
    fast, general = _pair(range_ms, slide, len(kinds))
    _feed(fast, general, kinds, groups, calls, seed=len(calls) * 1000 + range_ms + groups)
    if all(value < 2**52 for *_, value in calls):
        assert fast.fast is not None  # text keys and small sums keep the incremental path


def _feed(
    fast: GroupedWindowAggregate,
    general: GroupedWindowAggregate,
    kinds: list[str],
    groups: int,
    calls: list[tuple[int, int, int, int]],
    seed: int,
) -> None:
    """Both aggregates fed the same random calls (watermark step, rows, ts
    spread, value), compared call for call."""
    rnd = np.random.default_rng(seed)
    done, ts_next, seq = -1, 0, 1
    for step, n, spread, value in calls:
        ts = (ts_next + np.cumsum(rnd.integers(0, spread + 1, n))).astype(np.int64)
        watermark = max(done + 1 + step, int(ts[-1]) if n else done + 1)
        key_columns = [_key(rnd.integers(-groups, groups, n).astype(np.int64), kind) for kind in kinds]
        a = np.full(n, value, dtype=np.int64) - rnd.integers(0, 3, n)
        b = rnd.integers(-50, 50, n).astype(np.int64)
        lin = np.arange(seq, seq + n, dtype=np.int64)
        garbage, zeros = np.empty(n, dtype=np.int64), np.zeros(n, dtype=np.int64)  # COUNT's: never read
        got = fast.advance(ts, key_columns, [garbage, a, b, a, b], done, watermark, lin)
        want = general.advance(ts, key_columns, [zeros, a, b, a, b], done, watermark, lin)
        _same(got, want)
        assert fast.state_low() == general.state_low()
        done, ts_next, seq = watermark, watermark + 1, seq + n


def _key(numbers: Array, kind: str) -> Array:
    """A key column: the numbers; as text off the wire (bytes, of a length
    that differs from call to call, the empty one included); or as text in
    one process (Python strings, where ``'3'`` and ``'3\\0'`` are two keys
    that bytes would make one)."""
    if kind == "int":
        return numbers
    if kind == "str":
        out = np.empty(len(numbers), dtype=object)
        out[:] = [("€" * (v % 5 == 0)) + str(abs(v)) + ("\0" * (v < 0)) for v in numbers.tolist()]
        return out
    return np.array([b"k" * (int(v) % 3) + str(v).encode() for v in numbers.tolist()], dtype=bytes)


def test_only_numbers_bytes_and_strings_are_numbered() -> None:
    """The input layers make a text column's values strings; an engine fed
    anything else (a number beside strings, a NULL) keeps the general path,
    which the row engine's dict would not group the same way (1 == 1.0)."""
    strings = np.empty(2, dtype=object)
    strings[:] = ["a", "a\0"]
    assert numbered(strings) and numbered(np.array([b"a"])) and numbered(np.array([3]))
    for odd in (1, 1.0, None, b"a"):
        mixed = np.empty(2, dtype=object)
        mixed[:] = ["a", odd]
        assert not numbered(mixed)
    assert not numbered(np.array([1.5]))


def test_groups_gone_are_renumbered_and_keys_seen_again_are_new_groups() -> None:
    """A key per tuple (an id): the numbers of groups with no tuple left
    are dropped once they are most, and a key that comes back later is a
    group again, with its own window."""
    fast, general = _pair(range_ms=20, slide=5)
    for k in range(60):
        ts = np.arange(k * 50 + 1, k * 50 + 51, dtype=np.int64).repeat(4)
        ids = np.arange(k * 200, k * 200 + 200, dtype=np.int64)
        if k % 10 == 9:
            ids[:50] = np.arange(50)  # the first call's keys again
        values = (ids * 7) % 100
        lin = ids + 1
        got = fast.advance(ts, [ids], [ids, values, values, values, ids], k * 50, k * 50 + 50, lin)
        want = general.advance(ts, [ids], [ids, values, values, values, ids], k * 50, k * 50 + 50, lin)
        _same(got, want)
        assert fast.state_low() == general.state_low()
    assert fast.fast is not None
    assert len(fast.fast.groups) <= 2 * len(fast.fast.by_group) + 1024


def test_a_sum_past_int64_hands_the_tuples_to_the_general_algorithm() -> None:
    fast, general = _pair(range_ms=100, slide=10)
    for k, value in enumerate((5, 2**61, 3)):
        ts = np.full(8, k * 10 + 1, dtype=np.int64)
        ids = np.arange(8, dtype=np.int64) % 3
        values = np.full(8, value, dtype=np.int64)
        lin = np.arange(k * 8 + 1, k * 8 + 9, dtype=np.int64)
        got = fast.advance(ts, [ids], [ids, values, ids, values, ids], k * 10, k * 10 + 10, lin)
        want = general.advance(ts, [ids], [ids, values, ids, values, ids], k * 10, k * 10 + 10, lin)
        _same(got, want)
        assert fast.state_low() == general.state_low() == 1
        assert (fast.fast is None) == (k > 0)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    size=st.integers(1, 12),
    keys=st.sampled_from(["int", "text", "int text", "str", "int str"]),
    groups=st.sampled_from([1, 3, 40]),
    calls=st.lists(
        st.tuples(
            st.integers(0, 30),  # watermark step
            st.integers(0, 200),  # rows
            st.integers(0, 3),  # ts spread per row: 0 repeats instants
            st.sampled_from([0, 7, 2**52, 2**61]),  # a value: the last ones give up
        ),
        min_size=1,
        max_size=12,
    ),
)
def test_grouped_partition_rows_give_what_the_general_algorithm_gives(
    size: int, keys: str, groups: int, calls: list[tuple[int, int, int, int]]
) -> None:
    """[Partition By keys Rows N] grouped by the same keys, incremental
    (GroupedPartitionRows) against the general algorithm, call for call,
    through a give-up."""
    kinds = keys.split()
    fast = GroupedWindowAggregate(
        CALLS, len(kinds), rows=size, range_ms=0, slide=1, partition=True, lineage=True
    )
    general = GroupedWindowAggregate(
        CALLS, len(kinds), rows=size, range_ms=0, slide=1, partition=True, lineage=True
    )
    general.fast = None
    assert fast.fast is not None
    _feed(fast, general, kinds, groups, calls, seed=len(calls) * 1000 + size + groups)
    if all(value < 2**52 for *_, value in calls):
        assert fast.fast is not None
