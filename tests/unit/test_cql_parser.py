"""Parser tests: CQL text -> AST (semiactive.node.cql.parser), and syntax errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.node.cql import CqlError, ast, plan
from semiactive.node.cql.examples import FIG1, FIG1_DELAYED, fig7
from semiactive.node.cql.parser import parse


def only_query(text: str) -> ast.Query:
    statements = parse(text).statements
    assert len(statements) == 1
    statement = statements[0]
    assert isinstance(statement, ast.RegisterQuery)
    return statement.query


def only_select(text: str) -> ast.Select:
    body = only_query(text).body
    assert isinstance(body, ast.Select)
    return body


def where_of(condition: str) -> ast.Expr:
    where = only_select(f"SELECT * FROM s WHERE {condition}").where
    assert where is not None
    return where


def window_of(text: str) -> ast.WindowAst:
    item = only_select(f"SELECT * FROM s {text}").from_items[0]
    assert item.window is not None
    return item.window


def syntax_error(text: str) -> CqlError:
    with pytest.raises(CqlError) as info:
        parse(text, "prog.cql")
    return info.value


# ---- the paper's programs -------------------------------------------------------


def test_fig1_parses_into_inputs_and_four_queries() -> None:
    program = parse(FIG1)
    names = [s.name for s in program.statements]
    assert names == [
        "market",
        "initial_resource",
        "stock_stream",
        "buy_event",
        "resource",
        "resource_stream",
        "stock",
    ]
    buy_event = program.statements[3]
    assert isinstance(buy_event, ast.RegisterQuery)
    assert (buy_event.line, buy_event.column) == (4, 1)
    body = buy_event.query.body
    assert isinstance(body, ast.StreamOp) and body.op == "ISTREAM"
    select = body.query
    assert isinstance(select, ast.Select)
    assert [f.name for f in select.from_items if isinstance(f, ast.FromName)] == [
        "stock",
        "resource",
        "market",
    ]
    assert isinstance(select.where, ast.BoolExpr) and select.where.op == "AND"
    assert len(select.where.operands) == 4
    assert buy_event.query.delay is None


def test_fig1_delayed_has_now_delay_on_resource_stream() -> None:
    statement = parse(FIG1_DELAYED).statements[5]
    assert isinstance(statement, ast.RegisterQuery) and statement.name == "resource_stream"
    delay = statement.query.delay
    assert delay is not None
    assert delay.ms == plan.EPSILON_MS and delay.text == "<Now>"
    assert (delay.line, delay.column) == (20, 32)
    union = statement.query.body
    assert isinstance(union, ast.StreamOp)
    assert isinstance(union.query, ast.SetOp) and union.query.op == "UNION ALL"


def test_fig1_partition_window_keeps_qualified_key() -> None:
    stock = parse(FIG1).statements[6]
    assert isinstance(stock, ast.RegisterQuery)
    assert isinstance(stock.query.body, ast.Select)
    window = stock.query.body.from_items[0].window
    assert window is not None
    assert window.spec == plan.PartitionWindow((), 1)
    assert [(k.qualifier, k.name) for k in window.keys] == [("stock_stream", "id")]


@pytest.mark.parametrize("subqueries", [1, 2, 4])
def test_fig7_parses(subqueries: int) -> None:
    program = parse(fig7(subqueries))
    names = [s.name for s in program.statements]
    expected = ["input", "uni_input"]
    for i in range(subqueries):
        expected += [f"avg_delay_{i}", f"avg_{i}"]
    assert names == [*expected, "all_avg_delay"]
    avg_0 = program.statements[3]
    assert isinstance(avg_0, ast.RegisterQuery)
    body = avg_0.query.body
    assert isinstance(body, ast.SetOp) and body.op == "UNION ALL"
    right = body.right
    assert isinstance(right, ast.Select)
    assert right.group_by == (ast.ColumnRef(None, "id", line=16, column=10),)
    item = right.items[1]
    assert isinstance(item, ast.ExprItem) and item.alias == "val"
    assert isinstance(item.expr, ast.Call) and item.expr.name == "avg"


def test_fig7_as_printed_has_an_unbalanced_parenthesis() -> None:
    printed = fig7(1).replace("GROUP BY id\n", "GROUP BY id)\n")
    error = syntax_error(printed)
    assert (error.line, error.column) == (16, 12)
    assert "unexpected ')' (no matching '(')" in error.message


# ---- statements -----------------------------------------------------------------


def test_register_input_types_are_case_insensitive() -> None:
    program = parse("register Stream s (a INTEGER, b int, c Float, d byte, e CHAR(12))")
    statement = program.statements[0]
    assert isinstance(statement, ast.RegisterInput)
    assert statement.kind is plan.Kind.STREAM
    assert [(a.name, a.type) for a in statement.attributes] == [
        ("a", plan.INTEGER),
        ("b", plan.INTEGER),
        ("c", plan.FLOAT),
        ("d", plan.BYTE),
        ("e", plan.char(12)),
    ]
    relation = parse("REGISTER RELATION r (x int)").statements[0]
    assert isinstance(relation, ast.RegisterInput) and relation.kind is plan.Kind.RELATION


def test_bare_queries_are_numbered_separately_from_named_ones() -> None:
    program = parse(
        "SELECT * FROM s; REGISTER QUERY named AS SELECT * FROM s\nSELECT * FROM t SELECT * FROM u"
    )
    assert [(s.name, getattr(s, "anonymous", None)) for s in program.statements] == [
        ("query1", True),
        ("named", False),
        ("query2", True),
        ("query3", True),
    ]


def test_statements_need_no_semicolons_and_allow_many() -> None:
    program = parse(";;REGISTER STREAM s (a int);;; REGISTER QUERY q SELECT a FROM s;")
    assert [s.name for s in program.statements] == ["s", "q"]
    assert parse("").statements == ()
    assert parse("  -- nothing\n").statements == ()


def test_comments_are_ignored() -> None:
    text = """\
-- a line comment
SELECT /* a block
 comment */ a -- trailing
FROM s /* another */ WHERE a > 1"""
    select = only_select(text)
    assert select.items == (
        ast.ExprItem(ast.ColumnRef(None, "a", line=3, column=13), None, line=3, column=13),
    )


def test_keywords_are_case_insensitive_identifiers_are_not() -> None:
    lower = only_select("select Price as P from Market [Now] m where m.Price > 1 group by Price")
    upper = only_select("SELECT Price AS P FROM Market [Now] m WHERE m.Price > 1 GROUP BY Price")
    assert lower == upper
    item = lower.items[0]
    assert isinstance(item, ast.ExprItem) and item.alias == "P"
    from_item = lower.from_items[0]
    assert isinstance(from_item, ast.FromName)
    assert (from_item.name, from_item.alias) == ("Market", "m")


def test_function_names_are_not_reserved() -> None:
    select = only_select("SELECT count, MIN(count) FROM s GROUP BY count")
    first, second = select.items
    assert isinstance(first, ast.ExprItem)
    assert first.expr == ast.ColumnRef(None, "count", line=1, column=8)
    assert isinstance(second, ast.ExprItem) and isinstance(second.expr, ast.Call)
    assert second.expr.name == "min"


# ---- queries --------------------------------------------------------------------


def test_set_operations_are_left_associative() -> None:
    body = only_query("SELECT a FROM s UNION ALL SELECT a FROM t EXCEPT SELECT a FROM u").body
    assert isinstance(body, ast.SetOp) and body.op == "EXCEPT"
    assert (body.line, body.column) == (1, 43)
    assert isinstance(body.left, ast.SetOp) and body.left.op == "UNION ALL"
    assert isinstance(body.right, ast.Select)


def test_parentheses_group_set_operations() -> None:
    body = only_query("SELECT a FROM s UNION (SELECT a FROM t EXCEPT SELECT a FROM u)").body
    assert isinstance(body, ast.SetOp) and body.op == "UNION"
    assert isinstance(body.right, ast.SetOp) and body.right.op == "EXCEPT"


@pytest.mark.parametrize("op", ["ISTREAM", "DSTREAM", "RSTREAM"])
def test_stream_operators(op: str) -> None:
    body = only_query(f"{op.lower()}(SELECT * FROM s [Now])").body
    assert isinstance(body, ast.StreamOp) and body.op == op
    assert isinstance(body.query, ast.Select)


@pytest.mark.parametrize(
    ("delay", "ms"),
    [
        ("<Now>", 1),
        ("< now >", 1),
        ("<5>", 5),
        ("<5 ms>", 5),
        ("<5msec>", 5),
        ("<2 seconds>", 2000),
        ("<1 second>", 1000),
        ("<3 s>", 3000),
        ("<1 min>", 60_000),
        ("<2 minutes>", 120_000),
        ("<1 hour>", 3_600_000),
        ("<2 DAYS>", 172_800_000),
    ],
)
def test_delays(delay: str, ms: int) -> None:
    query = only_query(f"ISTREAM(SELECT * FROM s [Now]){delay}")
    assert query.delay is not None and query.delay.ms == ms


def test_delay_after_a_bare_select() -> None:
    query = only_query("SELECT * FROM s WHERE a > 0 <Now>")
    assert query.delay is not None and query.delay.ms == 1


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("[Now]", plan.NowWindow()),
        ("[Range 0]", plan.NowWindow()),
        ("[Range 0 Slide 1]", plan.NowWindow()),
        ("[Range 5]", plan.RangeWindow(5, 1)),
        ("[Range 5 Slide 1]", plan.RangeWindow(5, 1)),
        ("[Range 10 seconds]", plan.RangeWindow(10_000, 1)),
        ("[Range 1 hour Slide 10 minutes]", plan.RangeWindow(3_600_000, 600_000)),
        ("[Range 2 min Slide 30 secs]", plan.RangeWindow(120_000, 30_000)),
        ("[Range 1 day]", plan.RangeWindow(86_400_000, 1)),
        ("[Range 3 milliseconds]", plan.RangeWindow(3, 1)),
        ("[Range 0 Slide 5]", plan.RangeWindow(0, 5)),
        ("[Range Unbounded]", plan.UnboundedWindow()),
        ("[Rows 3]", plan.RowsWindow(3, 1)),
        ("[Rows 10 Slide 5]", plan.RowsWindow(10, 5)),
        ("[Partition By a, b Rows 2]", plan.PartitionWindow((), 2)),
        ("[Partition By a Rows 1 Range 2 minutes]", plan.PartitionWindow((), 1, 120_000)),
        ("[Partition By a Rows 3 Range 0]", plan.PartitionWindow((), 3, 0)),
    ],
)
def test_windows(text: str, spec: plan.WindowSpec) -> None:
    window = window_of(text)
    assert window.spec == spec
    assert window.text == text
    assert (window.line, window.column) == (1, 17)


def test_partition_keys_may_be_qualified() -> None:
    window = window_of("[Partition By s.a, b Rows 1]")
    assert [(k.qualifier, k.name) for k in window.keys] == [("s", "a"), (None, "b")]


def test_from_items_aliases_and_subqueries() -> None:
    select = only_select(
        "SELECT * FROM s [Now] AS x, t y, u, (SELECT a FROM s) AS sub, (SELECT a FROM s) [Rows 2] w"
    )
    first, second, third, fourth, fifth = select.from_items
    assert isinstance(first, ast.FromName) and first.alias == "x" and first.window is not None
    assert isinstance(second, ast.FromName) and second.alias == "y" and second.window is None
    assert isinstance(third, ast.FromName) and third.alias is None
    assert isinstance(fourth, ast.FromSubquery) and fourth.alias == "sub"
    assert isinstance(fourth.query.body, ast.Select)
    assert isinstance(fifth, ast.FromSubquery) and fifth.window is not None
    assert fifth.window.spec == plan.RowsWindow(2, 1)


def test_select_items_and_clauses() -> None:
    select = only_select(
        "SELECT DISTINCT *, s.*, a + 1 AS b, count(*) FROM s GROUP BY a, b HAVING count(*) > 2"
    )
    assert select.distinct
    star, qualified, expr, count = select.items
    assert star == ast.StarItem(None, line=1, column=17)
    assert qualified == ast.StarItem("s", line=1, column=20)
    assert isinstance(expr, ast.ExprItem) and expr.alias == "b"
    assert isinstance(count, ast.ExprItem)
    assert count.expr == ast.Call("count", (), True, line=1, column=37)
    assert select.group_by is not None and len(select.group_by) == 2
    assert isinstance(select.having, ast.Binary) and select.having.op == ">"
    assert not only_select("SELECT a FROM s").distinct


# ---- expressions ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("a + b * c", "a + b * c"),
        ("(a + b) * c", "(a + b) * c"),
        ("a - (b - c)", "a - (b - c)"),
        ("a - b - c", "a - b - c"),
        ("a / b % c", "a / b % c"),
        ("-a * -(b + 1)", "-a * -(b + 1)"),
        ("- -a = a - -1", "-(-a) = a - -1"),
        ("a = 1 OR b = 2 AND c = 3", "a = 1 OR b = 2 AND c = 3"),
        ("(a = 1 OR b = 2) AND c = 3", "(a = 1 OR b = 2) AND c = 3"),
        ("NOT a = 1 AND b <> 2", "NOT a = 1 AND b != 2"),
        ("NOT (a = 1 AND b = 2)", "NOT (a = 1 AND b = 2)"),
        ("s.a >= 1.5", "s.a >= 1.5"),
        ("a <= .5e1", "a <= 5.0"),
        ("a < 2E3", "a < 2000.0"),
        ("name = 'it''s'", "name = 'it''s'"),
        ("sum(a * 2) > avg(b)", "sum(a * 2) > avg(b)"),
    ],
)
def test_expression_precedence_round_trips(text: str, canonical: str) -> None:
    assert ast.render(where_of(text)) == canonical


def test_and_or_chains_are_flattened() -> None:
    expr = where_of("a = 1 AND b = 2 AND (c = 3 AND d = 4) OR e = 5 OR f = 6")
    assert isinstance(expr, ast.BoolExpr) and expr.op == "OR"
    assert len(expr.operands) == 3
    first = expr.operands[0]
    assert isinstance(first, ast.BoolExpr) and first.op == "AND" and len(first.operands) == 4


def test_comparison_operators_are_normalised() -> None:
    for text, op in [("=", "="), ("!=", "!="), ("<>", "!="), ("<", "<"), ("<=", "<=")]:
        expr = where_of(f"a {text} 1")
        assert isinstance(expr, ast.Binary) and expr.op == op
    expr = where_of("a>=1")
    assert isinstance(expr, ast.Binary) and expr.op == ">="


def test_literals() -> None:
    expr = where_of("a = 'x''y' AND b = 12 AND c = 1.25 AND d = ''")
    assert isinstance(expr, ast.BoolExpr)
    values = [o.right for o in expr.operands if isinstance(o, ast.Binary)]
    assert values == [
        ast.StrLit("x'y", line=1, column=27),
        ast.IntLit(12, line=1, column=42),
        ast.FloatLit(1.25, line=1, column=53),
        ast.StrLit("", line=1, column=66),
    ]


def test_expression_positions() -> None:
    expr = where_of("a +\n  b * 2 > 3")
    assert isinstance(expr, ast.Binary) and expr.op == ">"
    assert (expr.line, expr.column, expr.op_line, expr.op_column) == (1, 23, 2, 9)
    left = expr.left
    assert isinstance(left, ast.Binary) and left.op == "+"
    assert (left.op_line, left.op_column) == (1, 25)
    assert isinstance(left.right, ast.Binary)
    assert (left.right.line, left.right.column) == (2, 3)


def test_comparisons_do_not_chain() -> None:
    error = syntax_error("SELECT * FROM s WHERE a < b < c")
    assert (error.line, error.column) == (1, 29)
    assert "unexpected '<'" in error.message


# ---- errors ------------------------------------------------------------------------


def test_error_string_has_file_line_and_column() -> None:
    error = syntax_error("SELECT a\nFROM")
    assert str(error) == (
        "prog.cql:2:5: syntax error: unexpected end of input; expected one of '(', ASSIGN, identifier"
    )
    assert (error.file, error.line, error.column) == ("prog.cql", 2, 5)


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("SELECT a FROM s WHERE", 1, 22, "unexpected end of input; expected one of '(', '-', CASE, NOT"),
        ("SELECT a s FROM t", 1, 10, "unexpected 's'; expected one of"),
        ("SELECT a FROM s # x", 1, 17, "unexpected character '#'"),
        ("SELECT a FROM s WHERE a = = 1", 1, 27, "unexpected '='"),
        ("SELECT * FROM s GROUP a", 1, 23, "unexpected 'a'; expected BY"),
        ("SELECT * FROM s)", 1, 16, "unexpected ')' (no matching '(')"),
        ("ISTREAM(SELECT * FROM s", 1, 24, "unexpected end of input"),
        ("REGISTER QUERY", 1, 15, "expected identifier"),
        ("REGISTER STREAM s (a int b int)", 1, 26, "unexpected 'b'; expected one of '(', ')', ','"),
        ("REGISTER STREAM s ()", 1, 20, "unexpected ')'; expected identifier"),
        ("SELECT * FROM s [Rows]", 1, 22, "expected integer"),
        ("SELECT * FROM s [Range -1]", 1, 24, "unexpected '-'"),
        ("SELECT FROM s", 1, 8, "unexpected 'FROM'"),
        ("SELECT * FROM s UNION ALL", 1, 26, "unexpected end of input"),
    ],
)
def test_syntax_errors(text: str, line: int, column: int, fragment: str) -> None:
    error = syntax_error(text)
    assert (error.line, error.column) == (line, column), error
    assert error.message.startswith("syntax error: "), error
    assert fragment in error.message, error


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("REGISTER STREAM s (a foo)", 1, 22, "unknown type 'foo'; expected integer, int, float"),
        ("REGISTER STREAM s (a char)", 1, 22, "type char needs a length, e.g. char(10)"),
        ("REGISTER STREAM s (a char(0))", 1, 27, "char length must be at least 1"),
        ("REGISTER STREAM s (a int(4))", 1, 26, "type int takes no length"),
        ("SELECT * FROM s [Rows 0]", 1, 23, "window row count must be at least 1"),
        ("SELECT * FROM s [Rows 2 Slide 0]", 1, 31, "window slide must be at least 1"),
        ("SELECT * FROM s [Partition By a Rows 0]", 1, 38, "window row count must be at least 1"),
        ("SELECT * FROM s [Range 5 Slide 0]", 1, 32, "window slide must be at least 1 ms"),
        ("SELECT * FROM s [Range 5 weeks]", 1, 26, "unknown time unit 'weeks'"),
        ("ISTREAM(SELECT * FROM s [Now])<0>", 1, 31, "delay <0> must be at least 1 ms"),
        ("ISTREAM(SELECT * FROM s [Now])<2 fortnights>", 1, 31, "unknown time unit 'fortnights'"),
        ("SELECT median(a) FROM s", 1, 8, "unknown function 'median'; the functions are COUNT"),
        ("SELECT sum(*) FROM s", 1, 8, "SUM(*) is not allowed; only COUNT(*)"),
        ("SELECT count(a, b) FROM s", 1, 8, "COUNT takes exactly one argument, got 2"),
        ("SELECT max() FROM s", 1, 8, "MAX takes exactly one argument, got 0"),
    ],
)
def test_malformed_constructs(text: str, line: int, column: int, fragment: str) -> None:
    error = syntax_error(text)
    assert (error.line, error.column) == (line, column), error
    assert fragment in error.message, error


@pytest.mark.parametrize(
    ("text", "line", "column", "construct"),
    [
        ("SELECT * FROM s [Range 1]\nWHERE a = 1\nORDER BY a DESC", 3, 1, "ORDER BY"),
        ("SELECT * FROM s ORDER BY a", 1, 17, "ORDER BY"),
        ("SELECT a, COUNT(*) FROM s GROUP BY a ORDER BY a", 1, 38, "ORDER BY"),
        ("SELECT * FROM s [Now] WHERE c LIKE 'a%'", 1, 31, "LIKE"),
        ("SELECT * FROM s [Now] WHERE c NOT LIKE 'a%'", 1, 31, "NOT LIKE"),
        ("SELECT * FROM s [Rows 9] LIMIT 5", 1, 26, "LIMIT"),
        ("SELECT * FROM s [Rows 9] OFFSET 5", 1, 26, "OFFSET"),
        ("SELECT * FROM s FETCH FIRST 5 ROWS ONLY", 1, 17, "FETCH FIRST"),
        ("SELECT TOP 5 * FROM s", 1, 8, "TOP"),
        ("SELECT * FROM s [Now] WHERE a IN (1, 2)", 1, 31, "IN"),
        ("SELECT * FROM s [Now] WHERE a NOT IN (1, 2)", 1, 31, "NOT IN"),
        ("SELECT * FROM s [Now] WHERE a BETWEEN 1 AND 2", 1, 31, "BETWEEN"),
        ("SELECT * FROM s [Now] WHERE a IS NULL", 1, 31, "IS NULL"),
        ("SELECT * FROM s [Now] WHERE a IS NOT NULL", 1, 31, "IS NOT NULL"),
        ("SELECT * FROM s [Now] JOIN t [Now] ON s.a = t.a", 1, 23, "JOIN"),
        ("SELECT * FROM s x LEFT OUTER JOIN t y ON x.a = y.a", 1, 19, "LEFT OUTER JOIN"),
        ("SELECT * FROM s [Now] INTERSECT SELECT * FROM t [Now]", 1, 23, "INTERSECT"),
        ("WITH x AS (SELECT * FROM s) SELECT * FROM x", 1, 1, "WITH"),
        ("SELECT CAST(a AS float) FROM s", 1, 8, "CAST"),
        ("SELECT * FROM s [Now] WHERE EXISTS (SELECT * FROM t [Now])", 1, 29, "EXISTS"),
        ("SELECT COUNT(DISTINCT a) FROM s", 1, 8, "COUNT(DISTINCT ...)"),
        ("INSERT INTO s VALUES (1, 2)", 1, 1, "INSERT INTO"),
        ("CREATE TABLE t (a int)", 1, 1, "CREATE TABLE"),
    ],
)
def test_sql_that_cql_lacks_is_named(text: str, line: int, column: int, construct: str) -> None:
    """Not "unexpected 'BY'": the construct, where it starts (some of them,
    such as INTERSECT after an alias-like word, would even parse as
    something else)."""
    error = syntax_error(text)
    assert error.message.startswith(f"`{construct}` is not supported in CQL"), error
    assert (error.line, error.column) == (line, column), error


def test_sql_words_stay_identifiers_elsewhere() -> None:
    """The words are no keywords: columns and aliases may have these names."""
    select = only_select("SELECT limit, order AS o, is FROM s join WHERE like = 1 AND in > offset")
    assert [i.alias for i in select.items if isinstance(i, ast.ExprItem)] == [None, "o", None]
    with pytest.raises(CqlError, match="syntax error: unexpected"):
        parse("SELECT * FROM s WHERE a = = 1 ORDER BY a")  # the first mistake comes first


def test_cql_error_is_picklable_and_has_a_repr() -> None:
    import pickle

    error = CqlError("boom", 3, 4, "f.cql")
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == "f.cql:3:4: boom"
    assert repr(error) == "CqlError('boom', 3, 4, 'f.cql')"


# ---- round trip (property) -----------------------------------------------------------

_NAMES = st.sampled_from(["a", "b", "price", "count", "s_1", "Stock"])


def _leaves() -> st.SearchStrategy[ast.Expr]:
    return st.one_of(
        st.builds(lambda n: ast.ColumnRef(None, n, line=1, column=1), _NAMES),
        st.builds(lambda q, n: ast.ColumnRef(q, n, line=1, column=1), _NAMES, _NAMES),
        st.builds(lambda v: ast.IntLit(v, line=1, column=1), st.integers(0, 10**12)),
        st.builds(
            lambda v: ast.FloatLit(v, line=1, column=1),
            st.floats(0, 1e30, allow_nan=False, allow_infinity=False),
        ),
        st.builds(lambda v: ast.StrLit(v, line=1, column=1), st.text(max_size=5)),
    )


def _extend(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    ops = sorted(ast.ARITHMETIC | ast.COMPARISONS)
    return st.one_of(
        st.builds(
            lambda op, left, right: ast.Binary(op, left, right, 1, 1, line=1, column=1),
            st.sampled_from(ops),
            children,
            children,
        ),
        st.builds(
            lambda op, items: ast.BoolExpr(op, tuple(items), line=1, column=1),
            st.sampled_from(["AND", "OR"]),
            st.lists(children, min_size=2, max_size=3),
        ),
        st.builds(lambda e: ast.Not(e, line=1, column=1), children),
        st.builds(lambda e: ast.Negate(e, line=1, column=1), children),
        st.builds(
            lambda f, e: ast.Call(f, (e,), line=1, column=1),
            st.sampled_from(sorted(ast.AGGREGATES)),
            children,
        ),
    )


@settings(max_examples=300, deadline=None, database=None)
@given(st.recursive(_leaves(), _extend, max_leaves=12))
def test_rendered_expressions_parse_back(expr: ast.Expr) -> None:
    text = ast.render(expr)
    once = ast.render(where_of(text))
    # Chains of AND / OR flatten and literals may be respelled; after one
    # round trip the text is stable.
    assert ast.render(where_of(once)) == once
    if not _has_nested_bool(expr):
        assert once == text


def _has_nested_bool(expr: ast.Expr) -> bool:
    if isinstance(expr, ast.BoolExpr):
        same = [isinstance(o, ast.BoolExpr) and o.op == expr.op for o in expr.operands]
        return any(same) or any(_has_nested_bool(o) for o in expr.operands)
    if isinstance(expr, ast.Binary):
        return _has_nested_bool(expr.left) or _has_nested_bool(expr.right)
    if isinstance(expr, ast.Not | ast.Negate):
        return _has_nested_bool(expr.operand)
    if isinstance(expr, ast.Call):
        return any(_has_nested_bool(a) for a in expr.args)
    return False
