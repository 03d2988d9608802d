"""explain() tests: the exact text for the paper's programs and for every
operator, plus the monotonicity classification of the recursive CQL paper's Table 1."""

from __future__ import annotations

import pytest

from semiactive.node.cql import compile_program, explain, plan
from semiactive.node.cql.examples import FIG1, FIG1_DELAYED, fig7
from semiactive.node.cql.explain import format_duration, format_expr, monotone

FIG1_EXPLAINED = "\n".join(
    [
        "input market: stream (stock_id integer, price integer)",
        "input initial_resource: stream (val integer)",
        "input stock_stream: stream (id integer, num integer, price integer)",
        "",
        "query buy_event: stream (id integer, num integer, price integer)",
        "  monotone: yes",
        "  IStream",
        "    Project stock.id, 1000 AS num, market.price",
        "      Select stock.id = market.stock_id AND stock.num = 0 AND market.price < 500 "
        "AND resource.val > market.price * 1000",
        "        Join",
        "          Join",
        "            QueryRef stock",
        "            QueryRef resource",
        "          Window [Now]",
        "            Scan market",
        "",
        "query resource: relation (val integer)",
        "  monotone: no (Window [Rows 1])",
        "  Window [Rows 1]  [non-monotone]",
        "    QueryRef resource_stream",
        "",
        "query resource_stream: stream (val integer)",
        "  monotone: yes",
        "  Delay <Now>",
        "    IStream",
        "      Union ALL",
        "        Window [Now]",
        "          Scan initial_resource",
        "        Project resource.val - buy_event.price * buy_event.num AS val",
        "          Join",
        "            QueryRef resource",
        "            Window [Now]",
        "              QueryRef buy_event",
        "",
        "query stock: relation (id integer, num integer, price integer)",
        "  monotone: no (Window [Partition By id Rows 1])",
        "  Window [Partition By id Rows 1]  [non-monotone]",
        "    Scan stock_stream",
        "",
        "cycle buy_event -> resource_stream -> resource -> buy_event: delays: <Now> in "
        "resource_stream; non-monotone operators: Window [Rows 1] in resource",
        "cycle resource -> resource_stream -> resource: delays: <Now> in resource_stream; "
        "non-monotone operators: Window [Rows 1] in resource",
        "",
    ]
)

FIG7_EXPLAINED = "\n".join(
    [
        "input input: stream (id integer, val integer)",
        "",
        "query uni_input: relation (id integer, val float)",
        "  monotone: yes",
        "  Union ALL",
        "    Window [Now]",
        "      Scan input",
        "    Window [Now]",
        "      QueryRef all_avg_delay",
        "",
        "query avg_delay_0: stream (id integer, val float)",
        "  monotone: yes",
        "  Delay <Now>",
        "    IStream",
        "      QueryRef avg_0",
        "",
        "query avg_0: relation (id integer, val float)",
        "  monotone: no (Aggregate, Window [Partition By id Rows 1])",
        "  Union ALL",
        "    Select id % 1 = 0",
        "      QueryRef uni_input",
        "    Project id, avg(val) AS val",
        "      Aggregate GROUP BY id: avg(val)  [non-monotone]",
        "        Window [Partition By id Rows 1]  [non-monotone]",
        "          QueryRef avg_delay_0",
        "",
        "query all_avg_delay: stream (id integer, val float)",
        "  monotone: yes",
        "  Delay <Now>",
        "    IStream",
        "      QueryRef avg_0",
        "",
        "cycle uni_input -> avg_0 -> all_avg_delay -> uni_input: delays: <Now> in "
        "all_avg_delay; non-monotone operators: none",
        "cycle avg_delay_0 -> avg_0 -> avg_delay_0: delays: <Now> in avg_delay_0; "
        "non-monotone operators: Aggregate in avg_0, Window [Partition By id Rows 1] in avg_0",
        "",
    ]
)

MIXED = """\
REGISTER STREAM s (a int, b float, name char(5))
REGISTER RELATION r (a int, d char(8))
REGISTER QUERY j
  SELECT s.a, d, b / 2 AS half FROM s [Range 2 minutes Slide 30 seconds], r
  WHERE s.a = r.a AND (b > 1 OR name = 'it''s') AND NOT s.a - (r.a - 1) > -3
REGISTER QUERY g
  DSTREAM(SELECT DISTINCT (a + 1) * 2 AS k, count(*) AS n FROM s [Rows 10 Slide 2]
          GROUP BY a + 1 HAVING max(b) > 0.5)
REGISTER QUERY e RSTREAM(SELECT a FROM r EXCEPT SELECT a FROM s [Range Unbounded])<1 hour>
SELECT * FROM j UNION SELECT s.a, d, b FROM s [Partition By name Rows 3], r WHERE s.a = r.a
"""

MIXED_EXPLAINED = "\n".join(
    [
        "input s: stream (a integer, b float, name char(5))",
        "input r: relation (a integer, d char(8))",
        "",
        "query j: relation (a integer, d char(8), half float)",
        "  monotone: yes",
        "  Project s.a, r.d, s.b / 2 AS half",
        "    Select s.a = r.a AND (s.b > 1 OR s.name = 'it''s') AND NOT s.a - (r.a - 1) > -3",
        "      Join",
        "        Window [Range 2 minutes Slide 30 seconds]",
        "          Scan s",
        "        Scan r",
        "",
        "query g: stream (k integer, n integer)",
        "  monotone: no (DStream, Distinct, Aggregate, Window [Rows 10 Slide 2])",
        "  DStream  [non-monotone]",
        "    Distinct  [non-monotone]",
        "      Project (a + 1) * 2 AS k, count(*) AS n",
        "        Select max(b) > 0.5",
        "          Aggregate GROUP BY a + 1: count(*), max(b)  [non-monotone]",
        "            Window [Rows 10 Slide 2]  [non-monotone]",
        "              Scan s",
        "",
        "query e: stream (a integer)",
        "  monotone: no (Except)",
        "  Delay <1 hour>",
        "    RStream",
        "      Except  [non-monotone]",
        "        Project a",
        "          Scan r",
        "        Project a",
        "          Window [Range Unbounded]",
        "            Scan s",
        "",
        "query query1: relation (a integer, d char(8), half float)",
        "  monotone: no (Window [Partition By name Rows 3])",
        "  Union",
        "    QueryRef j",
        "    Project s.a, r.d, s.b",
        "      Select s.a = r.a",
        "        Join",
        "          Window [Partition By name Rows 3]  [non-monotone]",
        "            Scan s",
        "          Scan r",
        "",
    ]
)


def test_fig1() -> None:
    assert explain(compile_program(FIG1_DELAYED)) == FIG1_EXPLAINED


def test_fig1_with_inserted_delay_reads_the_same() -> None:
    assert explain(compile_program(FIG1, insert_delays=True)) == FIG1_EXPLAINED


def test_fig7_with_one_subquery() -> None:
    assert explain(compile_program(fig7(1))) == FIG7_EXPLAINED


@pytest.mark.parametrize("subqueries", [2, 4])
def test_fig7_lists_inner_and_outer_cycles(subqueries: int) -> None:
    text = explain(compile_program(fig7(subqueries)))
    cycles = [line for line in text.splitlines() if line.startswith("cycle ")]
    assert len(cycles) == 2 * subqueries
    assert cycles[0].startswith("cycle uni_input -> avg_0 -> all_avg_delay -> uni_input:")
    assert cycles[-1] == (
        f"cycle avg_delay_{subqueries - 1} -> avg_{subqueries - 1} -> "
        f"avg_delay_{subqueries - 1}: delays: <Now> in avg_delay_{subqueries - 1}; "
        f"non-monotone operators: Aggregate in avg_{subqueries - 1}, "
        f"Window [Partition By id Rows 1] in avg_{subqueries - 1}"
    )


def test_every_operator() -> None:
    assert explain(compile_program(MIXED)) == MIXED_EXPLAINED


def test_shared_query_is_shown_once_and_referenced_by_name() -> None:
    text = explain(
        compile_program(
            "REGISTER STREAM s (a int)\n"
            "REGISTER QUERY w SELECT a FROM s [Rows 2]\n"
            "REGISTER QUERY x SELECT * FROM w WHERE a > 1\n"
            "REGISTER QUERY y ISTREAM(SELECT * FROM w)\n"
            "REGISTER QUERY z SELECT * FROM s\n"
        )
    )
    assert text.count("Window [Rows 2]") == 2  # the tree line and w's monotone line
    assert text.count("QueryRef w") == 2
    assert "query z: stream (a integer)\n  monotone: yes\n  Scan s\n" in text
    assert "cycle" not in text


def test_inputs_from_the_argument_are_listed() -> None:
    decl = plan.InputDecl("up", plan.Kind.RELATION, plan.Schema((plan.Column("x", plan.char(3)),)))
    text = explain(compile_program("SELECT x FROM up", inputs={"up": decl}))
    assert text.startswith("input up: relation (x char(3))\n\nquery query1: relation")


def test_hand_built_shared_node_is_shown_once() -> None:
    schema = plan.Schema((plan.Column("a", plan.INTEGER, "s"),))
    scan = plan.Scan(schema, plan.Kind.STREAM, "s")
    window = plan.Window(schema, plan.Kind.RELATION, scan, plan.NowWindow())
    first = plan.Distinct(schema, plan.Kind.RELATION, window)
    second = plan.Except(schema, plan.Kind.RELATION, window, window)
    program = plan.Program({}, {"s": scan}, {"first": first, "second": second})
    lines = explain(program).splitlines()
    assert "    Window [Now]  (shared, shown under query first)" in lines


# ---- monotonicity (the recursive CQL paper, Table 1) -------------------------------------------------

S = plan.Schema((plan.Column("a", plan.INTEGER),))
R = plan.Kind.RELATION
SCAN = plan.Scan(S, plan.Kind.STREAM, "s")


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (plan.Select(S, R, SCAN, plan.Literal(plan.BOOLEAN, 1)), True),
        (plan.Project(S, R, SCAN, ()), True),
        (plan.Join(S, R, SCAN, SCAN), True),
        (plan.Union(S, R, SCAN, SCAN, all=True), True),
        (plan.Union(S, R, SCAN, SCAN, all=False), True),
        (plan.Window(S, R, SCAN, plan.NowWindow()), True),
        (plan.Window(S, R, SCAN, plan.RangeWindow(10, 1)), True),
        (plan.Window(S, R, SCAN, plan.RangeWindow(10, 5)), True),
        (plan.Window(S, R, SCAN, plan.UnboundedWindow()), True),
        (plan.ToStream(S, plan.Kind.STREAM, SCAN, plan.StreamOp.ISTREAM), True),
        (plan.ToStream(S, plan.Kind.STREAM, SCAN, plan.StreamOp.RSTREAM), True),
        (plan.Delay(S, plan.Kind.STREAM, SCAN, 1), True),
        (SCAN, True),
        (plan.Aggregate(S, R, SCAN), False),
        (plan.Except(S, R, SCAN, SCAN), False),
        (plan.Distinct(S, R, SCAN), False),
        (plan.Window(S, R, SCAN, plan.RowsWindow(1, 1)), False),
        (plan.Window(S, R, SCAN, plan.PartitionWindow((0,), 1)), False),
        (plan.ToStream(S, plan.Kind.STREAM, SCAN, plan.StreamOp.DSTREAM), False),
    ],
)
def test_monotone(node: plan.PlanNode, expected: bool) -> None:
    assert monotone(node) is expected


# ---- formatting helpers ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (1, "1 ms"),
        (999, "999 ms"),
        (1000, "1 second"),
        (1500, "1500 ms"),
        (30_000, "30 seconds"),
        (60_000, "1 minute"),
        (90_000, "90 seconds"),
        (7_200_000, "2 hours"),
        (86_400_000, "1 day"),
    ],
)
def test_format_duration(ms: int, text: str) -> None:
    assert format_duration(ms) == text


def test_format_expr_qualifies_only_across_sources() -> None:
    one = plan.Schema((plan.Column("a", plan.INTEGER, "s"), plan.Column("b", plan.INTEGER, "s")))
    two = plan.Schema((plan.Column("a", plan.INTEGER, "s"), plan.Column("a", plan.INTEGER, "t")))
    a = plan.ColRef(plan.INTEGER, 0, "a")
    other = plan.ColRef(plan.INTEGER, 1, "x")
    expr = plan.Compare(plan.BOOLEAN, "=", a, other)
    assert format_expr(expr, one) == "a = b"
    assert format_expr(expr, two) == "s.a = t.a"


def test_format_expr_parenthesises_by_precedence() -> None:
    a, b = plan.ColRef(plan.INTEGER, 0, "a"), plan.ColRef(plan.INTEGER, 1, "b")
    schema = plan.Schema((plan.Column("a", plan.INTEGER), plan.Column("b", plan.INTEGER)))
    one = plan.Literal(plan.INTEGER, 1)
    minus = plan.Arith(plan.INTEGER, "-", a, plan.Arith(plan.INTEGER, "-", b, one))
    assert format_expr(minus, schema) == "a - (b - 1)"
    left = plan.Arith(plan.INTEGER, "*", plan.Arith(plan.INTEGER, "+", a, b), one)
    assert format_expr(left, schema) == "(a + b) * 1"
    cond = plan.Compare(plan.BOOLEAN, ">", a, one)
    either = plan.BoolOp(plan.BOOLEAN, "or", (cond, cond))
    both = plan.BoolOp(plan.BOOLEAN, "AND", (either, plan.Not(plan.BOOLEAN, either)))
    assert format_expr(both, schema) == "(a > 1 OR a > 1) AND NOT (a > 1 OR a > 1)"
    assert format_expr(plan.Negate(plan.INTEGER, minus), schema) == "-(a - (b - 1))"
    assert format_expr(plan.Literal(plan.char(3), "o'k"), schema) == "'o''k'"
    negative = plan.Negate(plan.INTEGER, plan.Literal(plan.INTEGER, -5))
    assert format_expr(negative, schema) == "-(-5)"
    assert format_expr(plan.ColRef(plan.INTEGER, 7, "gone"), schema) == "#7"
