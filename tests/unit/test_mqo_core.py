"""Seed 003's core: the query language, the worked example of Figs. 6/7,
the clustering and base-group properties, and the central property: every
method, re-clustering at any instant and registration at any instant give
every query exactly what the plain reference gives it alone."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.mqo.clocks import HOUR_MS, Clock, ClockError, daily_clock, parse_clock
from semiactive.mqo.executor import Method, SharedExecutor
from semiactive.mqo.grouping import base_groups, cluster, may_share_base_group, window_ratio
from semiactive.mqo.query import (
    Column,
    Comparison,
    ContinuousQuery,
    Literal,
    parse_queries,
    parse_query,
    parse_query_file,
)
from semiactive.mqo.similarity import ArrivalLog, similarity_matrix, usage, use_bitmap
from semiactive.node.cql import plan
from semiactive.node.cql.errors import CqlError
from semiactive.oracle.mqo_reference import reference_results
from tests.processes import ROOT

TEMPLATE = "SELECT * FROM Quote, News WHERE Quote.name = News.company"


# -- the language ------------------------------------------------------------------


def test_the_seeds_query_parses() -> None:
    q = parse_query(f"CREATE Example_1 MASTER Clock_12 WINDOW SIZE 8 * hour {TEMPLATE}")
    assert q.name == "Example_1" and q.masters == ("Clock_12",) and q.window == 8 * HOUR_MS
    assert q.sources == ("Quote", "News") and q.select is None
    assert q.where == (Comparison(Column("Quote", "name"), "=", Column("News", "company")),)
    assert q.join_predicates == frozenset(q.where) and q.filters == ()


def test_every_form() -> None:
    text = """
    -- several statements, with and without ;
    CREATE a MASTER M1, M2 WINDOW SIZE 4 SELECT Quote.price, News.id FROM Quote, News
      WHERE Quote.name = News.company AND Quote.price >= 10.5 AND News.title <> 'it''s';
    CREATE b MASTER M1 WINDOW SIZE second * 3 SELECT price FROM Quote WHERE price < 3
    CREATE c MASTER Clock_0 SELECT * FROM Quote
    """
    a, b, c = parse_queries(text)
    assert a.masters == ("M1", "M2") and a.window == 4
    assert a.select == (Column("Quote", "price"), Column("News", "id"))
    assert Comparison(Column("News", "title"), "!=", Literal("it's")) in a.where
    assert Comparison(Column("Quote", "price"), ">=", Literal(10.5)) in a.filters
    assert b.window == 3000 and b.select == (Column("Quote", "price"),)
    assert c.window is None and c.text.startswith("CREATE c")


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("CREATE q WINDOW SIZE 3 SELECT * FROM A", 1, 10, "expected 'MASTER'"),
        ("CREATE q MASTER M\n WINDOW SIZE 3 * fortnight SELECT * FROM A", 2, 18, "time unit"),
        ("CREATE q MASTER M WINDOW SIZE 0 SELECT * FROM A", 1, 31, "positive"),
        ("CREATE q MASTER M SELECT * FROM A, A", 1, 33, "twice"),
        ("CREATE q MASTER M SELECT B.x FROM A", 1, 26, "not in FROM"),
        ("CREATE q MASTER M SELECT x FROM A, B", 1, 26, "qualify"),
        ("CREATE q MASTER M SELECT * FROM A WHERE 1 = 2", 1, 41, "two constants"),
        ("CREATE q MASTER M SELECT * FROM A WHERE A.x # 2", 1, 45, "unexpected character"),
        ("CREATE q MASTER M SELECT * FROM A\nCREATE q MASTER M SELECT * FROM A", 1, 1, "defined twice"),
        ("CREATE " + "x" * 200 + " MASTER M SELECT * FROM A", 1, 8, "longer than"),
        ("CREATE q MASTER M SELECT * FROM A WHERE A.x = 1 OR A.y = 2", 1, 49, "expected AND"),
    ],
)
def test_errors_are_located(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(CqlError) as info:
        parse_queries(text, "q.cql")
    err = info.value
    assert message in err.message, str(err)
    assert (err.file, err.line, err.column) == ("q.cql", line, column), str(err)


def test_register_stream_and_clock_declarations() -> None:
    """A CQL file's ``REGISTER STREAM`` header is accepted (it was "1:23:
    unexpected character '('") and declares the stream's columns; ``REGISTER
    CLOCK`` declares a master clock."""
    text = """\
REGISTER STREAM Quote (name char(8), price integer);
REGISTER STREAM News (company char(8), rate float)
REGISTER CLOCK C3 PERIOD 10 * second PHASE 3 * second;
REGISTER CLOCK Tick PERIOD 500
CREATE a MASTER C3 WINDOW SIZE 4 * second
  SELECT Quote.ts, News.rate FROM Quote, News WHERE Quote.name = News.company AND Quote.price > 2;
CREATE b MASTER Tick, Quote SELECT * FROM Quote WHERE Quote.name <> 'x'
"""
    loaded = parse_query_file(text, "q.cql")
    assert [q.name for q in loaded.queries] == ["a", "b"] == [q.name for q in parse_queries(text)]
    quote = loaded.streams["Quote"]
    assert [(c.name, str(c.type)) for c in quote.columns] == [("name", "char(8)"), ("price", "integer")]
    assert (quote.line, quote.column) == (1, 17)
    assert loaded.streams["News"].type_of("rate") == plan.FLOAT and quote.type_of("ts") == plan.INTEGER
    assert loaded.clocks == {"C3": Clock("C3", 10_000, 3000), "Tick": Clock("Tick", 500, 0)}
    assert loaded.queries[0].text.startswith("CREATE a MASTER C3") and loaded.queries[0].text.endswith("> 2")


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        (
            "REGISTER STREAM Q (a int)\nCREATE q MASTER M SELECT * FROM Q WHERE Q.b = 1",
            2,
            41,
            "Q has no column 'b'",
        ),
        (
            "REGISTER STREAM Q (a int)\nCREATE q MASTER M SELECT Q.ts, Q.x FROM Q",
            2,
            32,
            "Q has no column 'x'",
        ),
        (
            "REGISTER STREAM Q (a int)\nCREATE q MASTER M SELECT * FROM Q WHERE Q.a = 'x'",
            2,
            41,
            "never holds",
        ),
        (
            "REGISTER STREAM Q (a int)\nREGISTER STREAM R (b char(2))\n"
            "CREATE q MASTER M SELECT * FROM Q, R WHERE Q.a = R.b",
            3,
            44,
            "compares number with text",
        ),
        ("REGISTER STREAM Q (a char)", 1, 22, "char needs a length"),
        ("REGISTER STREAM Q (a text)", 1, 22, "unknown type 'text'"),
        ("REGISTER STREAM Q (ts int)", 1, 20, "ts is every stream's timestamp"),
        ("REGISTER STREAM Q (a int, a float)", 1, 27, "declared twice"),
        ("REGISTER STREAM Q (a int)\nREGISTER CLOCK Q PERIOD 5", 2, 16, "'Q' is declared twice"),
        ("REGISTER STREAM Q a int", 1, 19, "expected '('"),
        ("REGISTER CLOCK C PERIOD 5 * second PHASE 5 * second", 1, 42, "less than the period"),
        ("REGISTER CLOCK C PERIOD 0", 1, 25, "clock period 0: must be a positive"),
        ("REGISTER CLOCK Clock_12 PERIOD 5", 1, 16, "Clock_12 is built in"),
        ("REGISTER CLOCK C PHASE 5", 1, 18, "expected 'PERIOD'"),
        ("REGISTER CLOCK C PERIOD 10\nCREATE q MASTER C SELECT * FROM C", 2, 33, "C is a clock"),
        ("REGISTER RELATION R (a int)", 1, 10, "REGISTER RELATION is not supported"),
        ("REGISTER QUERY q AS SELECT * FROM s", 1, 10, "REGISTER QUERY is CQL"),
        ("SELECT * FROM s", 1, 1, "expected CREATE (a query) or REGISTER STREAM"),
    ],
)
def test_declaration_errors_are_located(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(CqlError) as info:
        parse_query_file(text, "q.cql")
    err = info.value
    assert message in err.message, str(err)
    assert (err.file, err.line, err.column) == ("q.cql", line, column), str(err)


def test_the_example_declares_its_streams_and_clocks() -> None:
    loaded = parse_query_file((ROOT / "examples" / "mqo-queries.cql").read_text())
    assert len(loaded.queries) == 300 and set(loaded.streams) == {"Quote", "News"}
    assert loaded.clocks == {f"C{j}": Clock(f"C{j}", 10_000, 1000 * j) for j in range(10)}


def test_clocks() -> None:
    noon = daily_clock("Clock_12")
    assert noon is not None and noon.fires_at(12 * HOUR_MS) and not noon.fires_at(13 * HOUR_MS)
    assert daily_clock("Clock_24") is None and daily_clock("Clocks") is None
    assert list(Clock("c", 10, 3).ticks(-1, 30)) == [3, 13, 23]
    assert parse_clock("C=1000+500") == Clock("C", 1000, 500)
    for bad in ("C", "C=x", "C=10+10", "=10", "C=0"):
        with pytest.raises(ClockError):
            parse_clock(bad)


# -- the worked example (Figs. 6 and 7) ---------------------------------------------


def test_the_worked_example() -> None:
    """Example 1 at noon, 2 at 13:00, 3 at midnight, 8-hour windows. Quote's
    t2 is in [5h, 12h] (both), t4 in [4h, 5h) (Example 1 only), t3 and t5 in
    [16h, 24h] (Example 3); News' t6 and t8 in [5h, 12h], t7 and t9 in [16h, 24h]."""
    queries = [
        parse_query(f"CREATE Example{i} MASTER {clock} WINDOW SIZE 8 * hour {TEMPLATE}")
        for i, clock in ((1, "Clock_12"), (2, "Clock_13"), (3, "Clock_0"))
    ]
    h = HOUR_MS
    quote = np.array([int(4.5 * h), 6 * h, 17 * h, 20 * h], dtype=np.int64)  # t4, t2, t3, t5
    news = np.array([6 * h, 10 * h, 18 * h, 22 * h], dtype=np.int64)  # t6, t8, t7, t9
    clocks = {name: c for name in ("Clock_12", "Clock_13", "Clock_0") if (c := daily_clock(name))}
    log = ArrivalLog(0, 24 * h, {"Quote": quote, "News": news}, clocks)
    uses = [usage(q.masters, q.window, q.sources, log) for q in queries]
    assert [list(u["Quote"]) for u in uses] == [
        [True, True, False, False],  # {t4, t2}
        [False, True, False, False],  # {t2}
        [False, False, True, True],  # {t3, t5}
    ]
    assert [list(u["News"]) for u in uses] == [[True, True, False, False]] * 2 + [[False, False, True, True]]
    sim = similarity_matrix(uses)
    assert np.allclose(sim, [[1.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert cluster(sim, 0.4) == [[0, 1], [2]]
    assert cluster(sim, 0.6) == [[0], [1], [2]]


def test_no_shared_source_means_no_similarity() -> None:
    log = ArrivalLog(0, 10, {"A": np.array([1, 2]), "B": np.array([3])}, {})
    a = usage(["A"], 5, ["A"], log)
    b = usage(["A"], 5, ["B"], log)
    assert similarity_matrix([a, b])[0, 1] == 0.0


@given(
    st.lists(st.integers(0, 100), max_size=30).map(sorted),
    st.lists(st.integers(0, 100), max_size=8),
    st.one_of(st.none(), st.integers(0, 40)),
)
def test_use_bitmap_is_the_set_definition(times: list[int], masters: list[int], window: int | None) -> None:
    bits = use_bitmap(np.array(times, dtype=np.int64), np.array(sorted(set(masters)), dtype=np.int64), window)
    for i, t in enumerate(times):
        inside = any(t <= s and (window is None or t >= s - window) for s in masters)
        assert bool(bits[i]) == inside


# -- clusters and base groups --------------------------------------------------------


@given(st.integers(2, 25), st.floats(0.05, 1.0), st.randoms(use_true_random=False))
@settings(max_examples=60, deadline=None)
def test_clusters_respect_theta_pairwise(n: int, theta: float, rng: random.Random) -> None:
    sim = np.array([[rng.random() for _ in range(n)] for _ in range(n)])
    sim = (sim + sim.T) / 2
    np.fill_diagonal(sim, 1.0)
    clusters = cluster(sim, theta)
    assert sorted(i for c in clusters for i in c) == list(range(n))
    for c in clusters:
        for a in c:
            for b in c:
                assert sim[a, b] >= theta - 1e-6


def _random_query(rng: random.Random, name: str) -> ContinuousQuery:
    masters = rng.sample(["M0", "M1", "M2"], rng.choice([1, 1, 2]))
    sources = rng.sample(["A", "B", "C"], rng.choice([1, 2, 2, 3]))
    window = rng.choice([None, 2, 3, 4, 5, 8, 10])
    text = f"CREATE {name} MASTER {', '.join(masters)}"
    text += f" WINDOW SIZE {window}" if window else ""
    return parse_query(text + f" SELECT * FROM {', '.join(sources)}")


@given(st.randoms(use_true_random=False), st.floats(0.1, 1.0))
@settings(max_examples=60, deadline=None)
def test_base_groups_respect_all_three_conditions(rng: random.Random, theta: float) -> None:
    queries = [_random_query(rng, f"q{i}") for i in range(rng.randrange(1, 40))]
    groups = base_groups(queries, theta)
    assert sorted(i for g in groups for i in g) == list(range(len(queries)))
    for g in groups:
        for a in g:
            for b in g:
                qa, qb = queries[a], queries[b]
                assert set(qa.masters) == set(qb.masters)
                assert set(qa.sources) & set(qb.sources)
                assert window_ratio(qa.window, qb.window) >= theta
    # a query that fits an earlier group with every member joins it (first fit)
    for k, g in enumerate(groups):
        first = queries[g[0]]
        for earlier in groups[:k]:
            members = [queries[i] for i in earlier if i < g[0]]
            assert not all(may_share_base_group(first, m, theta) for m in members) or not members


# -- the central property ------------------------------------------------------------

SCHEMAS = {"A": ["x", "y"], "B": ["x", "z"], "C": ["y", "w"], "M0": [], "M1": []}
CLOCKS = {"T": Clock("T", 7, 3)}


def _query(rng: random.Random, name: str) -> ContinuousQuery:
    sources = sorted(rng.sample(["A", "B", "C"], rng.choice([1, 2, 2, 2, 3])))
    where = []
    if "A" in sources and "B" in sources:
        where.append(rng.choice(["A.x = B.x", "A.x < B.z", "A.y = B.z"]))
    if "C" in sources and len(sources) > 1:
        other = next(s for s in sources if s != "C")
        where.append(f"C.y = {other}.{'y' if other == 'A' else 'z'}")
    if rng.random() < 0.3:
        where.append(f"{sources[0]}.{SCHEMAS[sources[0]][0]} > {rng.randrange(3)}")
    masters = rng.sample(["M0", "M1", "T"], rng.choice([1, 1, 2]))
    window = rng.choice([None, 2, 3, 5, 8])
    text = f"CREATE {name} MASTER {', '.join(masters)}" + (f" WINDOW SIZE {window}" if window else "")
    text += f" SELECT * FROM {', '.join(sources)}" + (" WHERE " + " AND ".join(where) if where else "")
    return parse_query(text)


def _streams(rng: random.Random, end: int) -> dict[str, list[tuple[Any, ...]]]:
    streams: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for t in range(1, end):
        for s in ("A", "B", "C"):
            for _ in range(rng.choice([0, 0, 1, 2])):
                streams[s].append((t, len(streams[s]) + 1, rng.randrange(4), rng.randrange(4)))
        for m in ("M0", "M1"):
            if rng.random() < 0.25:
                streams[m].append((t, len(streams[m]) + 1))
    return streams


def _instants(streams: dict[str, list[tuple[Any, ...]]], end: int) -> list[tuple[int, dict[str, list[Any]]]]:
    at: dict[int, dict[str, list[Any]]] = defaultdict(dict)
    for s, rows in streams.items():
        for r in rows:
            at[r[0]].setdefault(s, []).append(r)
    for t in CLOCKS["T"].ticks(0, end):
        at.setdefault(t, {})
    return sorted(at.items())


@pytest.mark.parametrize("seed", range(12))
def test_every_method_gives_every_query_its_own_results(seed: int) -> None:
    rng = random.Random(seed)
    end = 60
    queries = [_query(rng, f"q{i}") for i in range(rng.randrange(3, 14))]
    extra = [_query(rng, f"late{i}") for i in range(2)]
    streams = _streams(rng, end)
    steps = _instants(streams, end)
    add_at = {rng.randrange(5, end - 5): q for q in extra}
    remove = (rng.randrange(5, end - 5), queries[0].name)
    recluster_at = rng.randrange(5, end - 5)
    for method in Method:
        ex = SharedExecutor(
            queries, SCHEMAS, CLOCKS, method=method, theta=rng.choice([0.3, 0.5, 0.8]),
            log_period=15, check_every=rng.choice([None, 6]), recluster_at=[rng.randrange(5, end)],
        )  # fmt: skip
        got: dict[str, list[tuple[int, list[Any]]]] = defaultdict(list)
        registered: dict[str, int] = {}
        removed: dict[str, int] = {}
        for t, arrivals in steps:
            for at, q in add_at.items():
                if at == t:
                    registered[q.name] = ex.now
                    ex.add(q)
            if t == remove[0]:
                removed[remove[1]] = ex.now
                ex.remove(remove[1])
            if t == recluster_at:
                ex.recluster()
            for name, combos in ex.process(t, arrivals).items():
                if combos:
                    got[name].append((t, sorted(combos)))
        for q in [*queries, *extra]:
            want = reference_results(
                q, streams, ex.schemas, CLOCKS, end, registered.get(q.name), removed.get(q.name)
            )
            assert got[q.name] == [(s, sorted(c)) for s, c in want if c], f"{method} {q.text}"
