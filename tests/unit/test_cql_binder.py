"""Binder tests: AST -> logical plan (shapes, kinds, schemas, types) and
semantic errors (message fragment and exact position)."""

from __future__ import annotations

import pytest

from semiactive.node.cql import CqlError, compile_program, plan
from semiactive.node.cql.examples import FIG1_DELAYED, fig7

INPUTS = (
    "REGISTER STREAM s (a integer, b float, c char(4))\n"
    "REGISTER RELATION r (a integer, d char(8))\n"
    "REGISTER STREAM t (a integer, e byte)\n"
)
HEADER_LINES = 3


def compile_one(query: str) -> plan.PlanNode:
    program = compile_program(INPUTS + query)
    return program.queries[program.last_query]


def columns(node: plan.PlanNode) -> list[tuple[str, str]]:
    return [(c.name, str(c.type)) for c in node.schema.columns]


def col(index: int, sql_type: plan.SqlType, name: str) -> plan.ColRef:
    return plan.ColRef(sql_type, index, name)


def error_of(query: str, inputs: str = INPUTS) -> CqlError:
    with pytest.raises(CqlError) as info:
        compile_program(inputs + query, file="q.cql")
    return info.value


# ---- inputs -------------------------------------------------------------------------


def test_inputs_get_one_shared_scan() -> None:
    program = compile_program(INPUTS + "SELECT a FROM s; SELECT b FROM s WHERE a > 1")
    assert list(program.inputs) == ["s", "r", "t"]
    assert list(program.scans) == ["s", "r", "t"]
    scan = program.scans["s"]
    assert scan.name == "s" and scan.kind is plan.Kind.STREAM
    assert columns(scan) == [("a", "integer"), ("b", "float"), ("c", "char(4)")]
    assert {c.source for c in scan.schema.columns} == {"s"}
    first = program.queries["query1"]
    second = program.queries["query2"]
    assert isinstance(first, plan.Project) and first.child is scan
    assert isinstance(second, plan.Project)
    assert isinstance(second.child, plan.Select) and second.child.child is scan
    assert program.scans["r"].kind is plan.Kind.RELATION
    assert program.inputs["r"].schema.types == (plan.INTEGER, plan.char(8))


def test_stage_inputs_from_the_argument() -> None:
    decl = plan.InputDecl("up", plan.Kind.STREAM, plan.Schema((plan.Column("x", plan.INTEGER),)))
    program = compile_program("SELECT x FROM up [Now]", inputs={"up": decl})
    assert program.inputs == {"up": decl}
    scan = program.scans["up"]
    assert scan.schema.columns == (plan.Column("x", plan.INTEGER, "up"),)
    root = program.queries["query1"]
    assert isinstance(root, plan.Window) and root.child is scan


# ---- single-item SELECT -------------------------------------------------------------


def test_select_star_over_a_stream_is_the_stream_itself() -> None:
    program = compile_program(INPUTS + "REGISTER QUERY q SELECT * FROM s")
    assert program.queries["q"] is program.scans["s"]


def test_filter_and_projection_over_a_stream_stay_streams() -> None:
    root = compile_one("SELECT a, b * 2 AS twice FROM s WHERE b > 1.5")
    assert isinstance(root, plan.Project) and root.kind is plan.Kind.STREAM
    assert columns(root) == [("a", "integer"), ("twice", "float")]
    assert [c.source for c in root.schema.columns] == ["s", ""]
    assert root.exprs == (
        col(0, plan.INTEGER, "a"),
        plan.Arith(plan.FLOAT, "*", col(1, plan.FLOAT, "b"), plan.Literal(plan.INTEGER, 2)),
    )
    select = root.child
    assert isinstance(select, plan.Select) and select.kind is plan.Kind.STREAM
    assert select.predicate == plan.Compare(
        plan.BOOLEAN, ">", col(1, plan.FLOAT, "b"), plan.Literal(plan.FLOAT, 1.5)
    )
    assert isinstance(select.child, plan.Scan)


def test_windowed_stream_is_a_relation_and_identity_project_is_omitted() -> None:
    root = compile_one("SELECT * FROM s [Range 10 seconds Slide 2 seconds] AS x")
    assert isinstance(root, plan.Window)
    assert root.kind is plan.Kind.RELATION
    assert root.spec == plan.RangeWindow(10_000, 2000)
    assert [c.source for c in root.schema.columns] == ["x", "x", "x"]
    assert isinstance(root.child, plan.Scan)


def test_renaming_keeps_the_project() -> None:
    root = compile_one("SELECT a AS z, b, c FROM s [Now]")
    assert isinstance(root, plan.Project)
    assert columns(root) == [("z", "integer"), ("b", "float"), ("c", "char(4)")]
    assert isinstance(root.child, plan.Window) and root.child.spec == plan.NowWindow()


@pytest.mark.parametrize(
    ("window", "spec"),
    [
        ("[Now]", plan.NowWindow()),
        ("[Range 0]", plan.NowWindow()),
        ("[Range 5 Slide 1]", plan.RangeWindow(5, 1)),
        ("[Range Unbounded]", plan.UnboundedWindow()),
        ("[Rows 3 Slide 2]", plan.RowsWindow(3, 2)),
        ("[Partition By c, s.a Rows 2]", plan.PartitionWindow((2, 0), 2)),
    ],
)
def test_window_specs(window: str, spec: plan.WindowSpec) -> None:
    root = compile_one(f"SELECT * FROM s {window}")
    assert isinstance(root, plan.Window) and root.spec == spec


def test_partition_key_qualified_by_stream_name_under_an_alias() -> None:
    root = compile_one("SELECT * FROM s [Partition By s.b Rows 1] AS x")
    assert isinstance(root, plan.Window) and root.spec == plan.PartitionWindow((1,), 1)


def test_relation_in_from_is_used_directly() -> None:
    program = compile_program(INPUTS + "SELECT d FROM r WHERE a = 1")
    root = program.queries["query1"]
    assert isinstance(root, plan.Project) and root.kind is plan.Kind.RELATION
    assert isinstance(root.child, plan.Select) and root.child.child is program.scans["r"]


def test_distinct_windows_the_stream() -> None:
    root = compile_one("SELECT DISTINCT c FROM s")
    assert isinstance(root, plan.Distinct) and root.kind is plan.Kind.RELATION
    assert columns(root) == [("c", "char(4)")]
    project = root.child
    assert isinstance(project, plan.Project) and project.kind is plan.Kind.RELATION
    assert isinstance(project.child, plan.Window)
    assert project.child.spec == plan.UnboundedWindow()


# ---- expressions --------------------------------------------------------------------


def test_expression_types_and_nullability() -> None:
    root = compile_one("SELECT a + 1, a / 2, a % 2, b - a, -a, -1, -2.5, 'x''y', a * 1.0 FROM s")
    assert isinstance(root, plan.Project)
    assert columns(root) == [
        ("expr1", "integer"),
        ("expr2", "integer"),
        ("expr3", "integer"),
        ("expr4", "float"),
        ("expr5", "integer"),
        ("expr6", "integer"),
        ("expr7", "float"),
        ("expr8", "char(3)"),
        ("expr9", "float"),
    ]
    a = col(0, plan.INTEGER, "a")
    two = plan.Literal(plan.INTEGER, 2)
    # By a non-zero integer literal, NULL only where the dividend is.
    assert root.exprs[1] == plan.Arith(plan.INTEGER, "/", a, two)
    assert root.exprs[2] == plan.Arith(plan.INTEGER, "%", a, two)
    assert isinstance(root.exprs[0], plan.Arith) and not root.exprs[0].nullable
    assert root.exprs[4] == plan.Negate(plan.INTEGER, a)
    assert root.exprs[5] == plan.Literal(plan.INTEGER, -1)
    assert root.exprs[6] == plan.Literal(plan.FLOAT, -2.5)
    assert root.exprs[7] == plan.Literal(plan.char(3), "x'y")


def test_division_can_be_null_unless_by_a_non_zero_integer_literal() -> None:
    root = compile_one("SELECT a / a, a % 0, a / -3, a % 2.0, (a / a) % 2, (a * 2) % 5 FROM s")
    assert isinstance(root, plan.Project)
    nullable = [plan.can_be_null(x) for x in root.exprs]
    assert nullable == [True, True, False, True, True, False]


def test_boolean_operators_are_flattened_and_typed() -> None:
    root = compile_one("SELECT a FROM s WHERE a > 1 AND b < 2 AND NOT c = 'ab' OR c <> 'xyz'")
    assert isinstance(root, plan.Project)
    select = root.child
    assert isinstance(select, plan.Select)
    predicate = select.predicate
    assert isinstance(predicate, plan.BoolOp) and predicate.op == "OR"
    assert predicate.type == plan.BOOLEAN
    conjunction, comparison = predicate.operands
    assert isinstance(conjunction, plan.BoolOp) and conjunction.op == "AND"
    assert len(conjunction.operands) == 3
    assert isinstance(conjunction.operands[2], plan.Not)
    assert comparison == plan.Compare(
        plan.BOOLEAN, "!=", col(2, plan.char(4), "c"), plan.Literal(plan.char(3), "xyz")
    )


def test_char_and_byte_compare() -> None:
    root = compile_one("SELECT a FROM t WHERE e = 'x' AND e < e")
    assert isinstance(root, plan.Project) and isinstance(root.child, plan.Select)


# ---- joins ----------------------------------------------------------------------------


def test_joins_are_left_deep_with_where_above() -> None:
    root = compile_one("SELECT s.a, d, e FROM s [Rows 5], r, t [Now] WHERE s.a = r.a AND r.a = t.a")
    assert isinstance(root, plan.Project) and root.kind is plan.Kind.RELATION
    assert columns(root) == [("a", "integer"), ("d", "char(8)"), ("e", "byte")]
    assert [c.source for c in root.schema.columns] == ["s", "r", "t"]
    assert root.exprs == (
        col(0, plan.INTEGER, "a"),
        col(4, plan.char(8), "d"),
        col(6, plan.BYTE, "e"),
    )
    select = root.child
    assert isinstance(select, plan.Select)
    assert select.predicate == plan.BoolOp(
        plan.BOOLEAN,
        "AND",
        (
            plan.Compare(plan.BOOLEAN, "=", col(0, plan.INTEGER, "a"), col(3, plan.INTEGER, "a")),
            plan.Compare(plan.BOOLEAN, "=", col(3, plan.INTEGER, "a"), col(5, plan.INTEGER, "a")),
        ),
    )
    outer = select.child
    assert isinstance(outer, plan.Join) and outer.predicate is None
    inner = outer.left
    assert isinstance(inner, plan.Join)
    assert isinstance(inner.left, plan.Window) and inner.left.spec == plan.RowsWindow(5, 1)
    assert isinstance(inner.right, plan.Scan) and inner.right.name == "r"
    assert isinstance(outer.right, plan.Window) and outer.right.spec == plan.NowWindow()
    assert [c.source for c in outer.schema.columns] == ["s", "s", "s", "r", "r", "t", "t"]
    assert [c.source for c in inner.schema.columns] == ["s", "s", "s", "r", "r"]


def test_unwindowed_streams_in_joins_get_unbounded_windows() -> None:
    root = compile_one("SELECT s.a FROM s, t WHERE s.a = t.a")
    assert isinstance(root, plan.Project)
    assert isinstance(root.child, plan.Select)
    join = root.child.child
    assert isinstance(join, plan.Join)
    for side in (join.left, join.right):
        assert isinstance(side, plan.Window) and side.spec == plan.UnboundedWindow()


def test_self_join_with_aliases() -> None:
    root = compile_one("SELECT x.a, y.b AS b2 FROM s [Now] x, s [Now] AS y WHERE x.a = y.a")
    assert isinstance(root, plan.Project)
    assert root.exprs == (col(0, plan.INTEGER, "a"), col(4, plan.FLOAT, "b"))


def test_select_star_over_a_join_is_the_join() -> None:
    program = compile_program(
        "REGISTER STREAM p (x int); REGISTER RELATION q (y int); SELECT * FROM p [Now], q"
    )
    root = program.queries["query1"]
    assert isinstance(root, plan.Join)
    assert columns(root) == [("x", "integer"), ("y", "integer")]
    assert isinstance(root.left, plan.Window) and root.right is program.scans["q"]


# ---- aggregation -----------------------------------------------------------------------


def test_group_by_aggregate_having_and_project() -> None:
    root = compile_one(
        "SELECT a, count(*), sum(b), avg(a), min(c), max(c), count(b) AS n "
        "FROM s [Range 1 minute] GROUP BY a HAVING count(*) > 1 AND sum(b) < 10"
    )
    assert isinstance(root, plan.Project) and root.kind is plan.Kind.RELATION
    assert columns(root) == [
        ("a", "integer"),
        ("count", "integer"),
        ("sum_b", "float"),
        ("avg_a", "float"),
        ("min_c", "char(4)"),
        ("max_c", "char(4)"),
        ("n", "integer"),
    ]
    assert root.exprs == (
        col(0, plan.INTEGER, "a"),
        col(1, plan.INTEGER, "count(*)"),
        col(2, plan.FLOAT, "sum(b)"),
        col(3, plan.FLOAT, "avg(a)"),
        col(4, plan.char(4), "min(c)"),
        col(5, plan.char(4), "max(c)"),
        col(6, plan.INTEGER, "count(b)"),
    )
    having = root.child
    assert isinstance(having, plan.Select)
    count_star, sum_b = col(1, plan.INTEGER, "count(*)"), col(2, plan.FLOAT, "sum(b)")
    more = plan.Compare(plan.BOOLEAN, ">", count_star, plan.Literal(plan.INTEGER, 1))
    less = plan.Compare(plan.BOOLEAN, "<", sum_b, plan.Literal(plan.INTEGER, 10))
    assert having.predicate == plan.BoolOp(plan.BOOLEAN, "AND", (more, less))
    aggregate = having.child
    assert isinstance(aggregate, plan.Aggregate) and aggregate.kind is plan.Kind.RELATION
    assert aggregate.group_by == (col(0, plan.INTEGER, "a"),)
    a, b, c = col(0, plan.INTEGER, "a"), col(1, plan.FLOAT, "b"), col(2, plan.char(4), "c")
    assert aggregate.aggregates == (
        plan.AggCall(plan.AggFunc.COUNT, None, plan.INTEGER),
        plan.AggCall(plan.AggFunc.SUM, b, plan.FLOAT),
        plan.AggCall(plan.AggFunc.AVG, a, plan.FLOAT),
        plan.AggCall(plan.AggFunc.MIN, c, plan.char(4)),
        plan.AggCall(plan.AggFunc.MAX, c, plan.char(4)),
        plan.AggCall(plan.AggFunc.COUNT, b, plan.INTEGER),
    )
    assert columns(aggregate)[0] == ("a", "integer")
    window = aggregate.child
    assert isinstance(window, plan.Window) and window.spec == plan.RangeWindow(60_000, 1)


def test_aggregate_without_group_by_is_one_group_over_an_unbounded_window() -> None:
    root = compile_one("SELECT count(*) FROM s WHERE a > 0")
    assert isinstance(root, plan.Project)
    assert columns(root) == [("count", "integer")]
    aggregate = root.child
    assert isinstance(aggregate, plan.Aggregate)
    assert aggregate.group_by == ()
    assert isinstance(aggregate.child, plan.Select)
    window = aggregate.child.child
    assert isinstance(window, plan.Window) and window.spec == plan.UnboundedWindow()


def test_integer_sum_stays_integer() -> None:
    root = compile_one("SELECT sum(a) AS total, avg(a) FROM s [Rows 10]")
    assert columns(root) == [("total", "integer"), ("avg_a", "float")]


def test_group_by_expression_is_matched_in_select() -> None:
    root = compile_one("SELECT (a + 1) * 2 AS z, a + 1, count(*) FROM s [Now] GROUP BY a + 1")
    assert isinstance(root, plan.Project)
    key = col(0, plan.INTEGER, "a + 1")
    assert root.exprs[0] == plan.Arith(plan.INTEGER, "*", key, plan.Literal(plan.INTEGER, 2))
    assert root.exprs[1] == key
    assert columns(root) == [("z", "integer"), ("expr2", "integer"), ("count", "integer")]
    aggregate = root.child
    assert isinstance(aggregate, plan.Aggregate)
    assert aggregate.group_by == (
        plan.Arith(plan.INTEGER, "+", col(0, plan.INTEGER, "a"), plan.Literal(plan.INTEGER, 1)),
    )


def test_qualified_and_unqualified_group_keys_match() -> None:
    root = compile_one("SELECT s.a, sum(b) FROM s [Now] GROUP BY a")
    assert isinstance(root, plan.Project)
    assert root.exprs[0] == col(0, plan.INTEGER, "a")
    assert columns(root) == [("a", "integer"), ("sum_b", "float")]


def test_identical_aggregates_are_computed_once() -> None:
    root = compile_one("SELECT max(b) AS hi FROM s [Now] HAVING max(b) > 1")
    assert isinstance(root, plan.Project)
    assert isinstance(root.child, plan.Select)
    aggregate = root.child.child
    assert isinstance(aggregate, plan.Aggregate) and len(aggregate.aggregates) == 1


def test_group_by_star_of_grouped_columns_is_the_aggregate() -> None:
    root = compile_one("SELECT * FROM r GROUP BY a, d")
    assert isinstance(root, plan.Aggregate) and root.aggregates == ()
    assert columns(root) == [("a", "integer"), ("d", "char(8)")]


# ---- set operations and stream operators ------------------------------------------------


def test_union_all_of_streams_widens_types() -> None:
    root = compile_one("SELECT a, c FROM s UNION ALL SELECT b, c FROM s")
    assert isinstance(root, plan.Union) and root.all and root.kind is plan.Kind.STREAM
    assert columns(root) == [("a", "float"), ("c", "char(4)")]
    assert isinstance(root.left, plan.Project) and isinstance(root.right, plan.Project)


def test_union_of_relations_and_char_widening() -> None:
    root = compile_one("SELECT c FROM s [Now] UNION SELECT d FROM r")
    assert isinstance(root, plan.Union) and not root.all
    assert root.kind is plan.Kind.RELATION
    assert columns(root) == [("c", "char(8)")]


def test_except_of_relations() -> None:
    root = compile_one("SELECT a FROM s [Now] EXCEPT SELECT a FROM r")
    assert isinstance(root, plan.Except) and root.kind is plan.Kind.RELATION
    assert columns(root) == [("a", "integer")]


def test_set_operations_are_left_associative() -> None:
    root = compile_one("SELECT a FROM s [Now] UNION ALL SELECT a FROM r EXCEPT SELECT a FROM r")
    assert isinstance(root, plan.Except) and isinstance(root.left, plan.Union)


@pytest.mark.parametrize("op", ["ISTREAM", "DSTREAM", "RSTREAM"])
def test_stream_operators_over_relations(op: str) -> None:
    root = compile_one(f"{op}(SELECT a FROM s [Range 5 seconds])")
    assert isinstance(root, plan.ToStream) and root.op is plan.StreamOp(op.lower())
    assert root.kind is plan.Kind.STREAM
    assert columns(root) == [("a", "integer")]
    assert isinstance(root.child, plan.Project) and root.child.kind is plan.Kind.RELATION


def test_istream_of_a_stream_is_the_stream() -> None:
    program = compile_program(INPUTS + "ISTREAM(SELECT * FROM s)")
    assert program.queries["query1"] is program.scans["s"]


@pytest.mark.parametrize("op", ["DSTREAM", "RSTREAM"])
def test_dstream_and_rstream_of_a_stream_window_it(op: str) -> None:
    root = compile_one(f"{op}(SELECT a FROM s)")
    assert isinstance(root, plan.ToStream) and root.op is plan.StreamOp(op.lower())
    window = root.child
    assert isinstance(window, plan.Window) and window.spec == plan.UnboundedWindow()
    assert isinstance(window.child, plan.Project) and window.child.kind is plan.Kind.STREAM


@pytest.mark.parametrize(("delay", "ms"), [("<Now>", 1), ("<5 ms>", 5), ("<2 seconds>", 2000)])
def test_delays(delay: str, ms: int) -> None:
    root = compile_one(f"ISTREAM(SELECT a FROM s [Now]){delay}")
    assert isinstance(root, plan.Delay) and root.delay_ms == ms
    assert root.kind is plan.Kind.STREAM and columns(root) == [("a", "integer")]
    assert isinstance(root.child, plan.ToStream)


def test_delay_directly_on_a_stream_query() -> None:
    root = compile_one("SELECT a FROM s WHERE a > 0 <Now>")
    assert isinstance(root, plan.Delay) and isinstance(root.child, plan.Project)


def test_subquery_in_from() -> None:
    root = compile_one("SELECT x.a FROM (SELECT a FROM s WHERE a > 1) [Range 1 minute] AS x")
    assert isinstance(root, plan.Window) and root.spec == plan.RangeWindow(60_000, 1)
    assert [c.source for c in root.schema.columns] == ["x"]
    assert isinstance(root.child, plan.Project) and root.child.kind is plan.Kind.STREAM


def test_subquery_relation_joined() -> None:
    root = compile_one(
        "SELECT x.a, n FROM (SELECT a, count(*) AS n FROM s [Now] GROUP BY a) x, r WHERE x.a = r.a"
    )
    assert isinstance(root, plan.Project)
    assert columns(root) == [("a", "integer"), ("n", "integer")]


# ---- registered queries ------------------------------------------------------------------


def test_query_references_share_the_target_node() -> None:
    program = compile_program(
        INPUTS + "REGISTER QUERY w SELECT a FROM s [Rows 2]\n"
        "REGISTER QUERY u SELECT * FROM w WHERE a > 1\n"
        "REGISTER QUERY v ISTREAM(SELECT * FROM w)"
    )
    w = program.queries["w"]
    u = program.queries["u"]
    assert isinstance(u, plan.Select) and u.kind is plan.Kind.RELATION
    ref = u.child
    assert isinstance(ref, plan.QueryRef) and ref.name == "w" and ref.target is w
    assert ref.schema == w.schema and ref.kind is w.kind
    v = program.queries["v"]
    assert isinstance(v, plan.ToStream)
    assert isinstance(v.child, plan.QueryRef) and v.child.target is w


def test_stream_query_in_from_keeps_its_kind() -> None:
    program = compile_program(
        INPUTS + "REGISTER QUERY st SELECT a FROM s WHERE a > 0\n"
        "REGISTER QUERY f SELECT a FROM st WHERE a < 9\n"
        "REGISTER QUERY g SELECT * FROM st [Now]"
    )
    assert program.queries["st"].kind is plan.Kind.STREAM
    assert program.queries["f"].kind is plan.Kind.STREAM
    g = program.queries["g"]
    assert isinstance(g, plan.Window) and isinstance(g.child, plan.QueryRef)


def test_forward_references() -> None:
    program = compile_program(
        INPUTS + "REGISTER QUERY first SELECT a FROM second [Now]\n"
        "REGISTER QUERY second ISTREAM(SELECT a FROM s [Now])"
    )
    first = program.queries["first"]
    assert isinstance(first, plan.Window)
    assert isinstance(first.child, plan.QueryRef)
    assert first.child.target is program.queries["second"]
    assert list(program.queries) == ["first", "second"]


def test_fig1_schemas_kinds_and_references() -> None:
    program = compile_program(FIG1_DELAYED)
    kinds = {name: root.kind for name, root in program.queries.items()}
    assert kinds == {
        "buy_event": plan.Kind.STREAM,
        "resource": plan.Kind.RELATION,
        "resource_stream": plan.Kind.STREAM,
        "stock": plan.Kind.RELATION,
    }
    assert columns(program.queries["buy_event"]) == [
        ("id", "integer"),
        ("num", "integer"),
        ("price", "integer"),
    ]
    assert columns(program.queries["resource"]) == [("val", "integer")]
    assert columns(program.queries["stock"]) == [
        ("id", "integer"),
        ("num", "integer"),
        ("price", "integer"),
    ]
    buy_event = program.queries["buy_event"]
    assert isinstance(buy_event, plan.ToStream)
    project = buy_event.child
    assert isinstance(project, plan.Project)
    assert project.exprs[1] == plan.Literal(plan.INTEGER, 1000)
    select = project.child
    assert isinstance(select, plan.Select)
    assert isinstance(select.predicate, plan.BoolOp) and len(select.predicate.operands) == 4
    outer = select.child
    assert isinstance(outer, plan.Join) and isinstance(outer.left, plan.Join)
    stock, resource = outer.left.left, outer.left.right
    assert isinstance(stock, plan.QueryRef) and stock.target is program.queries["stock"]
    assert isinstance(resource, plan.QueryRef) and resource.target is program.queries["resource"]
    resource_stream = program.queries["resource_stream"]
    assert isinstance(resource_stream, plan.Delay) and resource_stream.delay_ms == 1
    union = resource_stream.child
    assert isinstance(union, plan.ToStream) and isinstance(union.child, plan.Union)
    stock_window = program.queries["stock"]
    assert isinstance(stock_window, plan.Window)
    assert stock_window.spec == plan.PartitionWindow((0,), 1)
    assert stock_window.child is program.scans["stock_stream"]


@pytest.mark.parametrize("subqueries", [1, 2, 4])
def test_fig7_widens_the_recursive_union_to_float(subqueries: int) -> None:
    program = compile_program(fig7(subqueries))
    assert len(program.queries) == 2 * subqueries + 2
    for name, root in program.queries.items():
        assert columns(root) == [("id", "integer"), ("val", "float")], name
    uni_input = program.queries["uni_input"]
    assert isinstance(uni_input, plan.Union) and uni_input.kind is plan.Kind.RELATION
    avg_0 = program.queries["avg_0"]
    assert isinstance(avg_0, plan.Union)
    assert isinstance(avg_0.left, plan.Select)
    assert avg_0.left.predicate == plan.Compare(
        plan.BOOLEAN,
        "=",
        plan.Arith(
            plan.INTEGER,
            "%",
            col(0, plan.INTEGER, "id"),
            plan.Literal(plan.INTEGER, subqueries),
        ),
        plan.Literal(plan.INTEGER, 0),
    )
    project = avg_0.right
    assert isinstance(project, plan.Project)
    aggregate = project.child
    assert isinstance(aggregate, plan.Aggregate)
    average = plan.AggCall(plan.AggFunc.AVG, col(1, plan.FLOAT, "val"), plan.FLOAT)
    assert aggregate.aggregates == (average,)
    window = aggregate.child
    assert isinstance(window, plan.Window) and window.spec == plan.PartitionWindow((0,), 1)
    ref = window.child
    assert isinstance(ref, plan.QueryRef) and ref.target is program.queries["avg_delay_0"]
    delay = program.queries["all_avg_delay"]
    assert isinstance(delay, plan.Delay)
    # Every QueryRef points at the root of the query it names.
    todo: list[plan.PlanNode] = list(program.queries.values())
    seen: set[int] = set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, plan.QueryRef):
            assert node.target is program.queries[node.name]
            assert node.schema == node.target.schema
        todo.extend(node.children)


def test_union_names_come_from_the_left() -> None:
    root = compile_one("SELECT a AS x FROM s UNION ALL SELECT a FROM t")
    assert columns(root) == [("x", "integer")]


def test_recursive_union_schema_from_the_known_side() -> None:
    loop = "REGISTER QUERY loop SELECT x FROM later [Now] UNION ALL SELECT b AS x FROM s [Now]\n"
    later = "REGISTER QUERY later ISTREAM(SELECT * FROM loop)<Now>"
    program = compile_program(INPUTS + loop + later)
    assert columns(program.queries["loop"]) == [("x", "float")]
    assert columns(program.queries["later"]) == [("x", "float")]


def test_anonymous_queries_can_be_referenced() -> None:
    program = compile_program(INPUTS + "SELECT a FROM s [Now]; SELECT * FROM query1")
    second = program.queries["query2"]
    assert isinstance(second, plan.QueryRef) and second.target is program.queries["query1"]


# ---- errors -----------------------------------------------------------------------------

ERRORS = [
    # unknown names
    ("SELECT a FROM nosuch", 1, 15, "unknown stream, relation or query 'nosuch'"),
    ("SELECT x FROM s", 1, 8, "unknown column 'x'; known columns: a, b, c"),
    ("SELECT s.x FROM s", 1, 8, "unknown column 's.x'"),
    ("SELECT z.a FROM s", 1, 8, "unknown stream or alias 'z' in z.a"),
    ("SELECT s.a FROM s AS y", 1, 8, "unknown stream or alias 's'"),
    ("SELECT z.* FROM s", 1, 8, "unknown stream or alias 'z' in SELECT"),
    ("SELECT a FROM s [Partition By zz Rows 1]", 1, 31, "unknown column 'zz' in PARTITION BY"),
    ("SELECT a FROM s [Partition By q.a Rows 1]", 1, 31, "unknown stream or alias 'q'"),
    ("SELECT a FROM s [Now], r", 1, 8, "ambiguous column 'a': it is in s and r; qualify it"),
    ("SELECT b FROM s, s", 1, 18, "'s' appears twice in FROM"),
    # types
    ("SELECT a FROM s WHERE c = 1", 1, 25, "type mismatch: cannot compare char(4) with integer"),
    ("SELECT a FROM s WHERE\n  a = 'x'", 2, 5, "cannot compare integer with char(1)"),
    ("SELECT c + 1 FROM s", 1, 10, "type mismatch: cannot apply '+' to char(4) and integer"),
    ("SELECT a * e FROM t", 1, 10, "cannot apply '*' to integer and byte"),
    ("SELECT -c FROM s", 1, 8, "unary minus needs a number, got char(4)"),
    ("SELECT a FROM s WHERE a", 1, 23, "WHERE needs a condition, got integer"),
    ("SELECT a FROM s WHERE a > 1 AND b", 1, 33, "AND needs conditions, got float"),
    ("SELECT a FROM s WHERE b OR a > 1", 1, 23, "OR needs conditions, got float"),
    ("SELECT a FROM s WHERE NOT a", 1, 27, "NOT needs conditions, got integer"),
    ("SELECT a > 1 AS big FROM s", 1, 8, "a condition cannot be an output column"),
    ("SELECT a FROM s WHERE (a > 1) = (b > 1)", 1, 31, "cannot compare boolean with boolean"),
    ("SELECT sum(c) FROM s", 1, 12, "type mismatch: SUM needs a number, got char(4)"),
    ("SELECT avg(e) FROM t", 1, 12, "AVG needs a number, got byte"),
    ("SELECT max(a > 1) FROM s", 1, 12, "MAX of a condition"),
    ("SELECT count(*) FROM s HAVING count(*)", 1, 31, "HAVING needs a condition, got integer"),
    ("SELECT a, count(*) FROM s GROUP BY a > 1", 1, 36, "cannot group by a condition"),
    # aggregates
    (
        "SELECT a FROM s WHERE count(*) > 1",
        1,
        23,
        "aggregate function COUNT() is not allowed in WHERE",
    ),
    (
        "SELECT a FROM s GROUP BY sum(a)",
        1,
        26,
        "aggregate function SUM() is not allowed in GROUP BY",
    ),
    ("SELECT sum(max(a)) FROM s", 1, 12, "nested aggregate function MAX() is not allowed"),
    ("SELECT a, count(*) FROM s", 1, 8, "column 'a' must appear in GROUP BY or be used in an"),
    ("SELECT b, count(*) FROM s GROUP BY a", 1, 8, "column 'b' must appear in GROUP BY"),
    ("SELECT a + b FROM s GROUP BY a", 1, 12, "column 'b' must appear in GROUP BY"),
    ("SELECT a FROM s GROUP BY a HAVING b > 1", 1, 35, "column 'b' must appear in GROUP BY"),
    ("SELECT * FROM s GROUP BY a", 1, 8, "column 's.b' must appear in GROUP BY"),
    # windows, delays, kinds
    ("SELECT a FROM r [Now]", 1, 17, "window [Now] on relation 'r'; windows apply only to streams"),
    ("SELECT a FROM r [Rows 2] x", 1, 17, "window [Rows 2] on relation 'r'"),
    ("SELECT a FROM (SELECT a FROM r) [Now] x", 1, 33, "window [Now] on relation subquery"),
    ("SELECT a FROM s [Now] <Now>", 1, 23, "delay <Now> on a relation-valued query"),
    (
        "ISTREAM(SELECT a FROM s [Now]) UNION ALL SELECT a FROM r",
        1,
        32,
        "UNION ALL of a stream with a relation",
    ),
    ("SELECT a FROM s [Now] UNION SELECT a FROM t", 1, 23, "UNION of a relation with a stream"),
    (
        "SELECT a FROM s UNION ALL SELECT a, b FROM s",
        1,
        17,
        "UNION ALL inputs have different numbers of columns (1 and 2)",
    ),
    (
        "SELECT a FROM s UNION ALL SELECT c FROM s",
        1,
        17,
        "type mismatch: UNION ALL column 1 (a) is integer on the left and char(4) on the right",
    ),
    (
        "SELECT a FROM s EXCEPT SELECT a FROM r",
        1,
        17,
        "EXCEPT needs relations, but its left input is a stream",
    ),
    (
        "SELECT a FROM r EXCEPT SELECT a FROM s",
        1,
        17,
        "EXCEPT needs relations, but its right input is a stream",
    ),
    (
        "SELECT a FROM r EXCEPT SELECT d FROM r",
        1,
        17,
        "EXCEPT column 1 (a) is integer on the left and char(8)",
    ),
    # output names
    (
        "SELECT a, a FROM s",
        1,
        11,
        "duplicate output column name 'a' (also at line 4, column 8); give the columns distinct",
    ),
    ("SELECT a, b AS a FROM s", 1, 11, "duplicate output column name 'a'"),
    ("SELECT a + 1, 2 AS expr1 FROM s", 1, 15, "duplicate output column name 'expr1'"),
    ("SELECT sum(a), sum(a) FROM s", 1, 16, "duplicate output column name 'sum_a'"),
    # registration
    ("REGISTER STREAM s (x int)", 1, 1, "'s' is already registered (line 1, column 1)"),
    ("REGISTER STREAM n (x int, x float)", 1, 27, "duplicate attribute 'x'"),
    (
        "REGISTER QUERY q SELECT a FROM s\nREGISTER QUERY q SELECT b FROM s",
        2,
        1,
        "'q' is already registered (line 4, column 1)",
    ),
    ("REGISTER QUERY r SELECT a FROM s", 1, 1, "'r' is already registered (line 2, column 1)"),
    (
        "SELECT a FROM s; REGISTER QUERY query1 SELECT b FROM s",
        1,
        18,
        "'query1' is already registered (the unnamed query at line 4, column 1)",
    ),
    (
        "REGISTER QUERY query1 SELECT a FROM s; SELECT b FROM s",
        1,
        40,
        "this unnamed query would be called 'query1', which is already taken",
    ),
    # recursion without a schema
    (
        "REGISTER QUERY q SELECT * FROM q",
        1,
        1,
        "cannot determine the schema of query 'q' (it depends only on itself through q -> q)",
    ),
    (
        "REGISTER QUERY p SELECT * FROM q [Now]\nREGISTER QUERY q ISTREAM(SELECT * FROM p)",
        1,
        1,
        "cannot determine the schema of query 'p' (it depends only on itself through p -> q -> p)",
    ),
    (
        "REGISTER QUERY z SELECT * FROM s\nREGISTER QUERY p SELECT * FROM q\n"
        "REGISTER QUERY q SELECT * FROM o; REGISTER QUERY o SELECT * FROM p",
        2,
        1,
        "query 'p' (it depends only on itself through p -> o -> q -> p)",
    ),
]


@pytest.mark.parametrize(("query", "line", "column", "fragment"), ERRORS)
def test_semantic_errors(query: str, line: int, column: int, fragment: str) -> None:
    error = error_of(query)
    assert fragment in error.message, error
    assert (error.line - HEADER_LINES, error.column) == (line, column), error
    assert error.file == "q.cql"


def test_a_stage_input_may_be_declared_as_it_is() -> None:
    """One program file runs embedded (declaring its inputs) and as a
    cluster stage (given its producers' schemas): a declaration that says
    what the producer sends is accepted, any other is refused, named."""
    decl = plan.InputDecl("s", plan.Kind.STREAM, plan.Schema((plan.Column("x", plan.INTEGER),)))
    program = compile_program(
        "REGISTER STREAM s (x integer)\nREGISTER QUERY q AS SELECT x FROM s", inputs={"s": decl}
    )
    assert program.inputs["s"].schema.names == ("x",)
    for text, shown in [
        ("REGISTER STREAM s (a int)", "a stream (a integer)"),
        ("REGISTER STREAM s (x float)", "a stream (x float)"),
        ("REGISTER RELATION s (x integer)", "a relation (x integer)"),
    ]:
        with pytest.raises(CqlError) as info:
            compile_program(text, inputs={"s": decl})
        assert (
            info.value.message == f"'s' is declared as {shown}, but the stage input is a stream (x integer)"
        )
        assert (info.value.line, info.value.column) == (1, 1)
    with pytest.raises(CqlError) as info:
        compile_program("REGISTER STREAM s (x integer)\nREGISTER STREAM s (x integer)", inputs={"s": decl})
    assert info.value.message == "'s' is already registered (line 1, column 1)"


def test_real_errors_win_over_undetermined_schemas() -> None:
    error = error_of("REGISTER QUERY p SELECT * FROM q\nREGISTER QUERY q SELECT zz FROM s")
    assert "unknown column 'zz'" in error.message
    assert error.line - HEADER_LINES == 2


def test_error_in_a_forward_reference_is_found() -> None:
    error = error_of(
        "REGISTER QUERY p SELECT nope FROM q [Now]\nREGISTER QUERY q ISTREAM(SELECT a FROM s [Now])"
    )
    assert "unknown column 'nope'" in error.message
    assert (error.line - HEADER_LINES, error.column) == (1, 25)


def test_case_types_and_nullability() -> None:
    node = compile_one(
        "REGISTER QUERY q AS SELECT CASE WHEN b > 1 THEN 'dear' ELSE 'cheap' END AS a, "
        "CASE WHEN b > 1 THEN b ELSE 0 END AS b, CASE WHEN b > 1 THEN 1 END AS c FROM s"
    )
    a, b, c = node.schema.columns
    assert (str(a.type), a.nullable) == ("char(5)", False)
    assert (str(b.type), b.nullable) == ("float", False)
    assert (str(c.type), c.nullable) == ("integer", True)  # no ELSE: NULL when nothing matches


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("SELECT CASE WHEN b THEN 1 END FROM s", "type mismatch: WHEN needs conditions"),
        ("SELECT CASE WHEN b > 1 THEN 1 ELSE 'x' END FROM s", "CASE values must all be numbers or"),
        ("SELECT CASE WHEN b > 1 THEN b > 2 END FROM s", "a CASE value cannot be a condition"),
        ("SELECT CASE b WHEN 1 THEN 2 END FROM s", "unexpected"),
        ("SELECT CASE ELSE 1 END FROM s", "unexpected"),
        ("SELECT b AS end FROM s", "unexpected"),
    ],
)
def test_case_errors_are_located(query: str, message: str) -> None:
    error = error_of(query)
    assert message in error.message
    assert error.line == HEADER_LINES + 1
