"""CQL semantics of the engine, checked against results worked out by hand.

Time is integer ms; a relation at instant t holds what its window holds
after every tuple with ts <= t. ISTREAM emits R(t) - R(t-1), DSTREAM
R(t-1) - R(t), RSTREAM all of R(t) at each instant in which R changed.
"""

from __future__ import annotations

import pytest

from tests.unit.engine_harness import run

S = "REGISTER STREAM S (a integer);\n"
KV = "REGISTER STREAM S (k char(4), v integer);\n"


# -- windows and the three stream operators -------------------------------------------


def test_now_window_istream_follows_cql_difference() -> None:
    rows = [(1, 1), (1, 2), (2, 1), (4, 3)]
    # R(1)={1,2}, R(2)={1}: 1 is not new at t=2, so it is not emitted again.
    assert run(S + "ISTREAM(SELECT a FROM S [Now])", {"S": rows}) == [(1, 1), (1, 2), (4, 3)]


def test_now_window_dstream_and_rstream() -> None:
    rows = [(1, 1), (1, 2), (2, 1), (4, 3)]
    assert run(S + "DSTREAM(SELECT a FROM S [Now])", {"S": rows}, end=10) == [(2, 2), (3, 1), (5, 3)]
    # RSTREAM: the whole relation at every instant it changed (t=3, t=5 empty).
    assert run(S + "RSTREAM(SELECT a FROM S [Now])", {"S": rows}, end=10) == [(1, 1), (1, 2), (2, 1), (4, 3)]


def test_range_window_counts() -> None:
    # R(t) holds ts in [t-2, t]: counts 1,2,2,1,1,1,1 then empty at t=8.
    rows = [(1, 1), (2, 2), (5, 3)]
    q = "SELECT COUNT(*) AS n FROM S [Range 2]"
    assert run(S + q, {"S": rows}, end=10) == [
        (1, "+", 1),
        (2, "-", 1),
        (2, "+", 2),
        (4, "-", 2),
        (4, "+", 1),
        (8, "-", 1),
    ]
    assert run(S + f"ISTREAM({q})", {"S": rows}, end=10) == [(1, 1), (2, 2), (4, 1)]
    assert run(S + f"DSTREAM({q})", {"S": rows}, end=10) == [(2, 1), (4, 2), (8, 1)]


def test_range_window_with_time_units() -> None:
    rows = [(0, 1), (999, 2), (1000, 3), (2500, 4)]
    out = run(S + "ISTREAM(SELECT COUNT(*) AS n FROM S [Range 1 second])", {"S": rows}, end=5000)
    # At 1000 the tuple at 0 is still in [0, 1000]; it leaves at 1001. The
    # tuples at 999 and 1000 leave at 2000 and 2001 (empty: no row), so the
    # one at 2500 makes the count 1 again.
    assert out == [(0, 1), (999, 2), (1000, 3), (1001, 2), (2000, 1), (2500, 1)]


def test_range_slide_window() -> None:
    # b = floor(t/2)*2, R(t) = ts in [b-4, b]. Enter/leave at multiples of 2.
    rows = [(1, 1), (2, 2), (3, 3), (7, 7)]
    assert run(S + "ISTREAM(SELECT a FROM S [Range 4 Slide 2])", {"S": rows}, end=20) == [
        (2, 1),
        (2, 2),
        (4, 3),
        (8, 7),
    ]


def test_unbounded_window_and_default_for_aggregates() -> None:
    rows = [(1, 5), (3, 7), (9, 1)]
    explicit = run(S + "ISTREAM(SELECT SUM(a) AS s FROM S [Range Unbounded])", {"S": rows})
    default = run(S + "ISTREAM(SELECT SUM(a) AS s FROM S)", {"S": rows})
    assert explicit == default == [(1, 5), (3, 12), (9, 13)]


def test_rows_window_keeps_last_n_within_an_instant() -> None:
    rows = [(1, 1), (1, 2), (1, 3), (2, 4)]
    assert run(S + "ISTREAM(SELECT a FROM S [Rows 2])", {"S": rows}) == [(1, 2), (1, 3), (2, 4)]


def test_rows_slide_window_changes_every_m_tuples() -> None:
    rows = [(t, v) for t, v in zip(range(1, 8), [5, 7, 2, 10, 1, 4, 8], strict=True)]
    # Count 2 at t=2: last 3 of first 2 = {5,7}; count 4 at t=4: {7,2,10};
    # count 6 at t=6: {10,1,4}.
    out = run(S + "ISTREAM(SELECT SUM(a) AS s FROM S [Rows 3 Slide 2])", {"S": rows})
    assert out == [(2, 12), (4, 19), (6, 15)]


def test_slide_larger_than_rows() -> None:
    rows = [(t, t) for t in range(1, 8)]
    # At count 3 (t=3): last 2 of first 3 = {2,3}; at count 6: {5,6}.
    assert run(S + "ISTREAM(SELECT a FROM S [Rows 2 Slide 3])", {"S": rows}) == [
        (3, 2),
        (3, 3),
        (6, 5),
        (6, 6),
    ]


def test_partition_window() -> None:
    rows = [(1, "a", 1), (2, "b", 2), (3, "a", 3), (4, "a", 4)]
    q = "ISTREAM(SELECT k, v FROM S [Partition By k Rows 1])"
    assert run(KV + q, {"S": rows}) == [(1, "a", 1), (2, "b", 2), (3, "a", 3), (4, "a", 4)]
    agg = "ISTREAM(SELECT COUNT(*) AS n, SUM(v) AS s FROM S [Partition By k Rows 2])"
    # Partitions: a keeps its last 2 (1,3 then 3,4), b keeps 2.
    assert run(KV + agg, {"S": rows}) == [(1, 1, 1), (2, 2, 3), (3, 3, 6), (4, 3, 9)]


def test_partition_window_with_range_expires_and_drops_partitions() -> None:
    rows = [(1, "a", 1), (2, "b", 2), (3, "a", 3), (4, "a", 4), (9, "b", 5)]
    q = "DSTREAM(SELECT k, v FROM S [Partition By k Rows 2 Range 2])"
    # a:1 is in at 1..3 and leaves at 4, pushed out by a:4 and expiring at the
    # same instant; b:2 leaves at 5 (Range), a:3 at 6, a:4 at 7, b:5 at 12.
    assert run(KV + q, {"S": rows}, end=13) == [
        (4, "a", 1),
        (5, "b", 2),
        (6, "a", 3),
        (7, "a", 4),
        (12, "b", 5),
    ]
    # Rows 1 Range 3: a:1 at 1..2 (pushed out at 3), b:2 at 2..5, a:3 at 3,
    # a:4 at 4..7, b:5 at 9..12; an empty relation's COUNT has no row.
    counts = "DSTREAM(SELECT COUNT(*) AS n FROM S [Partition By k Rows 1 Range 3])"
    assert run(KV + counts, {"S": rows}, end=13) == [(2, 1), (6, 2), (8, 1), (13, 1)]


# -- relational operators ----------------------------------------------------------------


def test_group_by_aggregates() -> None:
    rows = [(1, "x", 4), (2, "y", 10), (3, "x", 2), (4, "x", 6)]
    q = (
        "ISTREAM(SELECT k, COUNT(*) AS n, AVG(v) AS mean, MIN(v) AS lo, MAX(v) AS hi "
        "FROM S [Rows 3] GROUP BY k)"
    )
    assert run(KV + q, {"S": rows}) == [
        (1, "x", 1, 4.0, 4, 4),
        (2, "y", 1, 10.0, 10, 10),
        (3, "x", 2, 3.0, 2, 4),
        (4, "x", 2, 4.0, 2, 6),
    ]


def test_having_and_expressions_over_aggregates() -> None:
    rows = [(1, "x", 4), (2, "x", 6), (3, "y", 1)]
    q = "ISTREAM(SELECT k, SUM(v) * 2 AS twice FROM S [Range Unbounded] GROUP BY k HAVING SUM(v) > 5)"
    assert run(KV + q, {"S": rows}) == [(2, "x", 20)]


def test_windowed_join() -> None:
    text = (
        "REGISTER STREAM R (k integer, a char(4));\n"
        "REGISTER STREAM T (k integer, b char(4));\n"
        "ISTREAM(SELECT R.k, a, b FROM R [Range 2], T [Now] WHERE R.k = T.k)"
    )
    r = [(1, 1, "r1"), (3, 2, "r2")]
    t = [(2, 1, "t1"), (4, 1, "t2"), (4, 2, "t3"), (6, 2, "t4")]
    # r1 lives 1..3, r2 3..5: t1 meets r1, t3 meets r2, the others nobody.
    assert run(text, {"R": r, "T": t}) == [(2, 1, "r1", "t1"), (4, 2, "r2", "t3")]


def test_join_with_relation_input_and_residual_predicate() -> None:
    text = (
        "REGISTER STREAM Q (k integer, qty integer);\n"
        "REGISTER RELATION P (k integer, price integer);\n"
        "ISTREAM(SELECT Q.k, qty * price AS cost FROM Q [Now], P WHERE Q.k = P.k AND qty * price > 10)"
    )
    prices = [(1, "+", 1, 5), (1, "+", 2, 1), (5, "-", 1, 5), (5, "+", 1, 7)]
    orders = [(2, 1, 3), (3, 2, 4), (6, 1, 2), (7, 2, 20)]
    assert run(text, {"Q": orders, "P": prices}) == [(2, 1, 15), (6, 1, 14), (7, 2, 20)]


def test_union_all_of_streams_merges_by_time() -> None:
    text = "REGISTER STREAM A (x integer);\nREGISTER STREAM B (x integer);\n"
    text += "SELECT x FROM A UNION ALL SELECT x FROM B"
    assert run(text, {"A": [(1, 1), (3, 3)], "B": [(1, 10), (2, 20)]}) == [(1, 1), (1, 10), (2, 20), (3, 3)]


def test_union_of_relations_removes_duplicates_and_widens() -> None:
    text = (
        "REGISTER STREAM A (x integer);\nREGISTER STREAM B (x float);\n"
        "ISTREAM(SELECT x FROM A [Now] UNION SELECT x FROM B [Now])"
    )
    assert run(text, {"A": [(1, 1), (2, 2)], "B": [(1, 1.0), (2, 2.5)]}) == [(1, 1.0), (2, 2.0), (2, 2.5)]


def test_distinct_and_except() -> None:
    assert run(S + "ISTREAM(SELECT DISTINCT a FROM S [Rows 2])", {"S": [(1, 1), (2, 1), (3, 2), (4, 3)]}) == [
        (1, 1),
        (3, 2),
        (4, 3),
    ]
    text = (
        "REGISTER STREAM A (x integer);\nREGISTER STREAM B (x integer);\n"
        "ISTREAM(SELECT x FROM A [Rows 3] EXCEPT SELECT x FROM B [Rows 3])"
    )
    assert run(text, {"A": [(1, 1), (1, 2), (2, 3)], "B": [(2, 2)]}) == [(1, 1), (1, 2), (2, 3)]


def test_select_over_unwindowed_stream_is_a_stream() -> None:
    rows = [(1, 1), (1, 1), (2, -4)]
    # Duplicates survive: no relation, no ISTREAM difference.
    assert run(S + "SELECT a * 10 AS b FROM S WHERE a > 0", {"S": rows}) == [(1, 10), (1, 10)]


def test_integer_arithmetic_truncates_and_division_by_zero_is_null() -> None:
    rows = [(1, 7), (2, -7), (3, 0)]
    q = "SELECT a / 2 AS q, a % 3 AS r, 10 / a AS inv, a / 2.0 AS f FROM S"
    assert run(S + q, {"S": rows}) == [(1, 3, 1, 1, 3.5), (2, -3, -1, -1, -3.5), (3, 0, 0, None, 0.0)]
    # A comparison with NULL is false: the row with a = 0 is filtered out.
    assert run(S + "SELECT a FROM S WHERE 10 / a > -100", {"S": rows}) == [(1, 7), (2, -7)]


def test_delay_moves_every_timestamp_by_exactly_d() -> None:
    text = S + "REGISTER QUERY d AS ISTREAM(SELECT a FROM S [Now])<5 ms>\nREGISTER QUERY e AS SELECT a FROM d"
    rows = [(1, 1), (3, 2), (3, 3), (10, 4)]
    assert run(text, {"S": rows}, output="d", end=100) == [(6, 1), (8, 2), (8, 3), (15, 4)]
    assert run(text, {"S": rows}, output="e", end=12) == [(6, 1), (8, 2), (8, 3)]


# -- execution strategies agree --------------------------------------------------------------

QUERIES = [
    "ISTREAM(SELECT SUM(a) AS s, COUNT(*) AS n FROM S [Rows 5 Slide 2])",
    "ISTREAM(SELECT SUM(a) AS s, AVG(a) AS m FROM S [Range 3])",
    "ISTREAM(SELECT COUNT(*) AS n FROM S [Now])",
    "DSTREAM(SELECT a FROM S [Range 2 Slide 3])",
    "RSTREAM(SELECT MAX(a) AS hi FROM S [Rows 3])",
    "ISTREAM(SELECT a, COUNT(*) AS n FROM S [Range 4] GROUP BY a)",
    "ISTREAM(SELECT X.a, Y.a AS b FROM S [Rows 2] AS X, S [Now] AS Y WHERE X.a = Y.a)",
]


def _stream(seed: int, n: int = 300) -> list[tuple[int, int]]:
    import random

    rnd = random.Random(seed)
    t = 0
    rows = []
    for _ in range(n):
        t += rnd.choice([0, 0, 1, 1, 2, 5])
        rows.append((t, rnd.randrange(6)))
    return rows


@pytest.mark.parametrize("query", QUERIES)
def test_slices_instants_heartbeats_and_fusion_agree(query: str) -> None:
    for seed in range(3):
        rows = _stream(seed)
        reference = run(S + query, {"S": rows}, max_slice_ms=1, fuse=False, end=rows[-1][0] + 10)
        assert run(S + query, {"S": rows}, end=rows[-1][0] + 10) == reference
        assert run(S + query, {"S": rows}, end=rows[-1][0] + 10, batches=7) == reference
        assert run(S + query, {"S": rows}, end=rows[-1][0] + 10, executor="hb", run_limit=3) == reference
