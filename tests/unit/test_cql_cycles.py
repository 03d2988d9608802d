"""Graph analysis tests: strongly connected components, the delay rule for
cycles (errors and epsilon-delay insertion), and cycles among queries."""

from __future__ import annotations

import pytest

from semiactive.node.cql import CqlError, compile_program, plan
from semiactive.node.cql.cycles import (
    check_delays,
    is_cyclic,
    owners,
    query_cycles,
    strongly_connected_components,
)
from semiactive.node.cql.examples import FIG1, FIG1_DELAYED, fig7

EMPTY = plan.Schema(())
STREAM = plan.Kind.STREAM


def scan(name: str = "in") -> plan.Scan:
    return plan.Scan(EMPTY, STREAM, name)


def select(child: plan.PlanNode | None = None) -> plan.Select:
    return plan.Select(EMPTY, STREAM, child)  # type: ignore[arg-type]


def all_nodes(program: plan.Program) -> list[plan.PlanNode]:
    return [n for c in strongly_connected_components(program.queries.values()) for n in c]


def delays(program: plan.Program) -> list[plan.Delay]:
    return [n for n in all_nodes(program) if isinstance(n, plan.Delay)]


# ---- strongly connected components -------------------------------------------------


def test_chain_components_come_inputs_first() -> None:
    source = scan()
    first = select(source)
    second = select(first)
    assert strongly_connected_components([second]) == [[source], [first], [second]]


def test_cycle_is_one_component_in_discovery_order() -> None:
    source = scan()
    a = select()
    b = plan.Union(EMPTY, STREAM, source, a)
    a.child = b
    top = select(a)
    components = strongly_connected_components([top])
    assert components == [[source], [a, b], [top]]
    assert [is_cyclic(c) for c in components] == [False, True, False]


def test_self_loop_is_cyclic() -> None:
    node = select()
    node.child = node
    assert strongly_connected_components([node]) == [[node]]
    assert is_cyclic([node])
    assert not is_cyclic([scan()])


def test_order_is_deterministic_and_follows_roots_and_children() -> None:
    shared = scan("shared")
    left, right = select(shared), select(shared)
    join = plan.Join(EMPTY, plan.Kind.RELATION, left, right)
    expected = [[shared], [left], [right], [join]]
    for _ in range(3):
        assert strongly_connected_components([join]) == expected
    assert strongly_connected_components([right, left]) == [[shared], [right], [left]]
    # Roots already visited are skipped; duplicate edges are harmless.
    union = plan.Union(EMPTY, STREAM, left, left)
    assert strongly_connected_components([left, union]) == [[shared], [left], [union]]


def test_two_cycles_and_a_bridge() -> None:
    a, b, c, d = select(), select(), select(), select()
    a.child, b.child = b, a
    c.child = plan.Union(EMPTY, STREAM, a, d)
    d.child = c
    union = c.child
    components = strongly_connected_components([c])
    assert components == [[a, b], [c, union, d]]


def test_unresolved_query_reference_has_no_children() -> None:
    ref = plan.QueryRef(EMPTY, STREAM, "later")
    assert strongly_connected_components([ref]) == [[ref]]


def test_deep_plans_do_not_hit_the_recursion_limit() -> None:
    node: plan.PlanNode = scan()
    for _ in range(20_000):
        node = select(node)
    components = strongly_connected_components([node])
    assert len(components) == 20_001 and components[-1] == [node]
    # A 20 000-node cycle is one component.
    ring = [select() for _ in range(20_000)]
    for current, following in zip(ring, ring[1:] + ring[:1], strict=True):
        current.child = following
    (component,) = strongly_connected_components([ring[0]])
    assert component == ring


def test_custom_successors() -> None:
    a, b = select(), select()
    a.child, b.child = b, a
    cut = strongly_connected_components([a], lambda n: [c for c in n.children if c is not a])
    assert cut == [[b], [a]]


# ---- the delay rule ----------------------------------------------------------------


def test_fig1_without_delay_is_rejected_at_the_first_query_on_the_cycle() -> None:
    with pytest.raises(CqlError) as info:
        compile_program(FIG1, file="fig1.cql")
    assert str(info.value) == (
        "fig1.cql:4:1: cycle without a delay operator through queries buy_event -> "
        "resource_stream -> resource -> buy_event; end a stream query on the cycle with <Now> "
        "(e.g. ISTREAM(...)<Now>)"
    )


def test_fig1_with_delay_compiles() -> None:
    program = compile_program(FIG1_DELAYED)
    assert len(delays(program)) == 1
    cyclic = [c for c in strongly_connected_components(program.queries.values()) if is_cyclic(c)]
    assert len(cyclic) == 1
    members = cyclic[0]
    for name in ("buy_event", "resource", "resource_stream"):
        assert program.queries[name] in members
    assert program.queries["stock"] not in members
    assert not any(isinstance(n, plan.Scan) for n in members)


def test_insert_delays_puts_one_epsilon_delay_where_the_paper_does() -> None:
    program = compile_program(FIG1, insert_delays=True)
    (delay,) = delays(program)
    assert delay.delay_ms == plan.EPSILON_MS and delay.kind is plan.Kind.STREAM
    assert program.queries["resource_stream"] is delay
    assert isinstance(delay.child, plan.ToStream)
    assert delay.schema == delay.child.schema
    resource = program.queries["resource"]
    assert isinstance(resource, plan.Window)
    assert isinstance(resource.child, plan.QueryRef) and resource.child.target is delay
    assert isinstance(program.queries["buy_event"], plan.ToStream)
    check_delays(program)  # valid now


def test_insert_delays_leaves_valid_programs_alone() -> None:
    program = compile_program(FIG1_DELAYED, insert_delays=True)
    assert len(delays(program)) == 1


@pytest.mark.parametrize("subqueries", [1, 2, 4])
def test_fig7_passes_and_repairs(subqueries: int) -> None:
    assert len(delays(compile_program(fig7(subqueries)))) == subqueries + 1
    undelayed = fig7(subqueries).replace(")<Now>", ")")
    with pytest.raises(CqlError):
        compile_program(undelayed)
    repaired = compile_program(undelayed, insert_delays=True)
    assert len(delays(repaired)) == subqueries + 1
    check_delays(repaired)


def test_fig7_inner_loop_without_delay() -> None:
    text = fig7(2).replace("SELECT * FROM avg_1)<Now>", "SELECT * FROM avg_1)", 1)
    with pytest.raises(CqlError) as info:
        compile_program(text)
    assert (info.value.line, info.value.column) == (17, 1)
    assert "through queries avg_delay_1 -> avg_1 -> avg_delay_1;" in info.value.message
    both = fig7(2).replace("SELECT * FROM avg_1)<Now>", "SELECT * FROM avg_1)")
    with pytest.raises(CqlError) as info:
        compile_program(both)  # the outer loop's delay is gone too; it comes first
    assert (info.value.line, info.value.column) == (2, 1)
    assert "uni_input -> avg_0 -> all_avg_delay -> uni_input;" in info.value.message


def test_self_recursive_query() -> None:
    text = (
        "REGISTER STREAM s (a int)\n"
        "REGISTER QUERY p ISTREAM(SELECT a FROM s [Now] UNION ALL SELECT a FROM p [Now]){}"
    )
    with pytest.raises(CqlError) as info:
        compile_program(text.format(""))
    assert (info.value.line, info.value.column) == (2, 1)
    assert "through queries p -> p;" in info.value.message
    program = compile_program(text.format("<Now>"))
    assert isinstance(program.queries["p"], plan.Delay)


CYCLE_WITHOUT_STREAM_OPERATOR = (
    "REGISTER STREAM s (a int)\n"
    "REGISTER QUERY p SELECT a FROM s UNION ALL SELECT a FROM q\n"
    "REGISTER QUERY q SELECT a FROM p WHERE a > 0{}"
)


def test_cycle_without_stream_operator_cannot_be_repaired() -> None:
    with pytest.raises(CqlError) as info:
        compile_program(CYCLE_WITHOUT_STREAM_OPERATOR.format(""), insert_delays=True)
    error = info.value
    assert (error.line, error.column) == (2, 1)
    assert error.message == (
        "cycle without a delay operator through queries p -> q -> p; there is no ISTREAM, "
        "DSTREAM or RSTREAM on it after which a delay could be inserted; end a stream query "
        "on the cycle with <Now> (e.g. ISTREAM(...)<Now>)"
    )
    program = compile_program(CYCLE_WITHOUT_STREAM_OPERATOR.format(" <5 ms>"))
    (delay,) = delays(program)
    assert delay.delay_ms == 5 and program.queries["q"] is delay


def test_delay_is_inserted_inside_a_query_when_the_stream_operator_is_inner() -> None:
    program = compile_program(
        "REGISTER STREAM s (a int)\n"
        "REGISTER QUERY p ISTREAM(SELECT a FROM s [Now]) UNION ALL ISTREAM(SELECT a FROM q [Now])\n"
        "REGISTER QUERY q SELECT a FROM p WHERE a > 0",
        insert_delays=True,
    )
    union = program.queries["p"]
    assert isinstance(union, plan.Union)
    assert isinstance(union.left, plan.ToStream)
    assert isinstance(union.right, plan.Delay) and isinstance(union.right.child, plan.ToStream)
    assert len(delays(program)) == 1


def test_check_delays_without_positions_reports_line_one() -> None:
    a = plan.ToStream(EMPTY, STREAM, None, plan.StreamOp.ISTREAM)  # type: ignore[arg-type]
    ref = plan.QueryRef(EMPTY, STREAM, "a", a)
    a.child = plan.Window(EMPTY, plan.Kind.RELATION, ref, plan.NowWindow())
    program = plan.Program({}, {}, {"a": a})
    with pytest.raises(CqlError) as info:
        check_delays(program)
    assert (info.value.file, info.value.line, info.value.column) == ("<query>", 1, 1)
    assert "through queries a -> a;" in info.value.message
    check_delays(program, insert_delays=True)
    assert isinstance(program.queries["a"], plan.Delay)
    assert ref.target is program.queries["a"]


# ---- owners and cycles among queries ------------------------------------------------


def test_owners() -> None:
    program = compile_program(FIG1_DELAYED)
    owner = owners(program)
    assert all(not isinstance(n, plan.Scan) for n in owner)
    buy_event = program.queries["buy_event"]
    assert owner[buy_event] == "buy_event"
    refs = [n for n in owner if isinstance(n, plan.QueryRef)]
    assert sorted((owner[r], r.name) for r in refs) == [
        ("buy_event", "resource"),
        ("buy_event", "stock"),
        ("resource", "resource_stream"),
        ("resource_stream", "buy_event"),
        ("resource_stream", "resource"),
    ]


def test_query_cycles_of_fig1() -> None:
    program = compile_program(FIG1_DELAYED)
    cycles, truncated = query_cycles(program)
    assert not truncated
    assert [c.queries for c in cycles] == [
        ("buy_event", "resource_stream", "resource"),
        ("resource", "resource_stream"),
    ]
    inner = cycles[1]
    assert program.queries["resource"] in inner.nodes
    assert program.queries["resource_stream"] in inner.nodes
    assert program.queries["buy_event"] not in inner.nodes


def test_query_cycles_of_fig7_separate_inner_and_outer_loops() -> None:
    program = compile_program(fig7(2))
    cycles, _ = query_cycles(program)
    assert [c.queries for c in cycles] == [
        ("uni_input", "avg_0", "all_avg_delay"),
        ("uni_input", "avg_1", "all_avg_delay"),
        ("avg_delay_0", "avg_0"),
        ("avg_delay_1", "avg_1"),
    ]
    outer, _, inner, _ = cycles
    assert not any(isinstance(n, plan.Aggregate) for n in outer.nodes)
    assert any(isinstance(n, plan.Aggregate) for n in inner.nodes)
    assert [type(n) for n in outer.nodes if isinstance(n, plan.Delay)] == [plan.Delay]
    limited, truncated = query_cycles(program, limit=1)
    assert len(limited) == 1 and truncated
