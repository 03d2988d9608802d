"""Placement (the placement paper): network usage by hand, the exact methods against
brute force, the heuristics never below the optimum, the dummy source,
located errors in plan and topology files."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import numpy as np
import pytest

from semiactive.config import ConfigError
from semiactive.placement.exact import ilp_optimum, is_forest, tree_optimum
from semiactive.placement.network import Link, Network, NetworkError, from_node_link, load_network
from semiactive.placement.plan import DUMMY, Edge, Operator, OperatorPlan, PlanError, load_plan
from semiactive.placement.problem import Problem
from semiactive.placement.solve import METHODS, problem_for, solve
from semiactive.placement.usage import link_rates, network_usage


def fig4_network() -> Network:
    # Seed 004 Fig. 4: sources A, B, C; processing nodes D..G; users H, I, J.
    names = ["A", "B", "C", "D", "E", "H", "I"]
    i = {n: k for k, n in enumerate(names)}
    links = [("A", "D", 2), ("B", "D", 4), ("D", "I", 3), ("C", "E", 5), ("E", "H", 1), ("D", "E", 2)]
    return Network("fig4", names, [Link(i[a], i[b], lat) for a, b, lat in links])


def user_i_query() -> OperatorPlan:
    return OperatorPlan(
        (
            Operator("a", pinned="A"),
            Operator("b", pinned="B"),
            Operator("d", pinned="D"),
            Operator("i", pinned="I"),
        ),
        (Edge("a", "d", 3), Edge("b", "d", 1), Edge("d", "i", 2)),
    )


def test_fig4_usage_is_the_sum_of_its_terms() -> None:
    # The seed prints 3x2 + 1x4 + 2x3 = 18; the terms sum to 16, and u is the terms.
    net = fig4_network()
    plan = user_i_query()
    where = {o.name: net.node(o.pinned or "") for o in plan.operators}
    assert network_usage(plan, net, where) == 16


def test_one_stream_between_two_nodes_is_counted_once() -> None:
    net = fig4_network()
    base = user_i_query()
    # user H's query reads source a too, through an operator on D: a's stream to D is shared.
    shared = OperatorPlan(
        (*base.operators, Operator("d2", pinned="D"), Operator("h", pinned="H")),
        (*base.edges, Edge("a", "d2", 3), Edge("d2", "h", 1)),
    )
    where = {o.name: net.node(o.pinned or "") for o in shared.operators}
    # d2 -> h goes D-E-H: 1 x (2 + 1); a -> D adds nothing.
    assert network_usage(shared, net, where) == 16 + 3
    # A second stream (b) to the same node pair is a second transfer.
    rates = link_rates(shared, net, where)
    assert rates[(net.node("A"), net.node("D"))] == 3
    assert rates[(net.node("D"), net.node("E"))] == 1


def test_shortest_path_latency_and_path() -> None:
    net = fig4_network()
    assert net.latency_ms[net.node("A"), net.node("H")] == 2 + 2 + 1
    hops = net.path(net.node("A"), net.node("H"))
    assert [(net.nodes[a], net.nodes[b]) for a, b in hops] == [("A", "D"), ("D", "E"), ("E", "H")]


def random_network(rng: random.Random, size: int) -> Network:
    names = [f"n{k}" for k in range(size)]
    links = [Link(k, rng.randrange(k), rng.uniform(1, 10)) for k in range(1, size)]
    links += [Link(rng.randrange(size), rng.randrange(size), rng.uniform(1, 10)) for _ in range(size)]
    return Network("random", names, [lk for lk in links if lk.a != lk.b])


def random_plan(rng: random.Random, net: Network, free: int, shared: bool) -> OperatorPlan:
    ops = [Operator("sink", pinned=rng.choice(net.nodes))]
    edges: list[tuple[str, str]] = []
    for k in range(free):
        name = f"op{k}"
        ops.append(Operator(name))
        edges.append((name, rng.choice([o.name for o in ops[:-1]])))
    sources = []
    for k in range(rng.randint(1, 3)):
        name = f"src{k}"
        sources.append(Operator(name, pinned=rng.choice(net.nodes)))
        targets = [o.name for o in ops if o.name != "sink"] or ["sink"]
        edges.append((name, rng.choice(targets)))
    if shared:  # a source or an operator feeding a second consumer
        producers = [s.name for s in sources] + [o.name for o in ops[1:]]
        for _ in range(2):
            p = rng.choice(producers)
            c = rng.choice([o.name for o in ops if o.name != p])
            candidate = (p, c)
            order = [o.name for o in ops]
            forward = p.startswith("src") or order.index(c) < order.index(p)
            if forward and candidate not in edges:
                edges.append(candidate)
    rates = {name: rng.choice([0.5, 1.0, 2.0, 5.0]) for name in sorted({a for a, _ in edges})}
    return OperatorPlan(tuple(ops + sources), tuple(Edge(a, b, rates[a]) for a, b in edges))


def brute_force(problem: Problem) -> float:
    free = [o for o in range(len(problem.names)) if problem.pinned[o] < 0]
    best = np.inf
    for choice in itertools.product(range(len(problem.network)), repeat=len(free)):
        where = problem.pinned.copy()
        where[free] = choice
        best = min(best, problem.usage(where))
    return float(best)


@pytest.mark.parametrize("shared", [False, True])
def test_exact_equals_brute_force_and_heuristics_never_beat_it(shared: bool) -> None:
    rng = random.Random(4 + shared)
    for _ in range(25):
        net = random_network(rng, rng.randint(3, 5))
        plan = random_plan(rng, net, rng.randint(1, 4), shared)
        problem = problem_for(plan, net)
        optimum = brute_force(problem)
        exact = solve(problem, "exact").network_usage
        assert exact == pytest.approx(optimum)
        if not is_forest(problem):  # the ILP answers shared plans
            assert problem.usage(ilp_optimum(problem)) == pytest.approx(optimum)
        else:
            assert problem.usage(tree_optimum(problem)) == pytest.approx(optimum)
            assert problem.usage(ilp_optimum(problem)) == pytest.approx(optimum)
        for method in METHODS:
            assert solve(problem, method).network_usage >= optimum - 1e-9, method


def test_shared_plans_reach_the_ilp() -> None:
    rng = random.Random(1)
    net = random_network(rng, 4)
    plans = [random_plan(rng, net, 3, True) for _ in range(20)]
    assert any(not is_forest(problem_for(p, net)) for p in plans)


def test_search_improves_on_relaxation_on_germany50() -> None:
    net = load_network("topohub:sndlib/germany50")
    rng = random.Random(7)
    relaxed_ratios, searched_ratios = [], []
    for _ in range(10):
        problem = problem_for(random_plan(rng, net, 8, False), net)
        optimum = solve(problem, "exact").network_usage
        relaxed = solve(problem, "relaxation").network_usage
        searched = solve(problem, "search").network_usage
        assert optimum - 1e-9 <= searched <= relaxed + 1e-9
        relaxed_ratios.append(relaxed / optimum)
        searched_ratios.append(searched / optimum)
    assert sum(searched_ratios) < sum(relaxed_ratios)


def test_assign_without_interests_reads_the_dummy_source() -> None:
    net = fig4_network()
    plan = OperatorPlan(
        (
            Operator("cam1", pinned="A", rate=4),
            Operator("cam2", pinned="B", rate=2),
            Operator("follow", assign=True),
            Operator("user", pinned="I"),
        ),
        (Edge("follow", "user", 1),),
    )
    problem = problem_for(plan, net)
    dummy = problem.network.node(DUMMY)
    assert not problem.network.placeable[dummy]
    assert problem.latency[dummy, net.node("D")] == pytest.approx(net.mean_latency_ms())
    rates = {problem.names[p]: problem.rate[p] for p in problem.producers}
    assert rates[f"{DUMMY}:follow"] == 3  # the mean of the sources' rates
    where = solve(problem, "exact").placement
    assert where["follow"] != DUMMY
    # With an interest, the ASSIGN reads that camera instead.
    following = OperatorPlan(plan.operators, plan.edges, {"follow": ("cam1",)})
    problem = problem_for(following, net)
    assert DUMMY not in problem.network.index
    assert solve(problem, "exact").placement["follow"] in ("A", "D", "I")


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "operators:\n  - {name: a}\nedges:\n  - {from: a, to: b, rate: 1}\n",
            ":4: edges[0].to: no operator 'b'",
        ),
        ("operators:\n  - {name: a, pinnd: X}\n", ":2: operators[0].pinnd: unknown field"),
        (
            "operators:\n  - {name: a}\n  - {name: b}\nedges:\n  - {from: a, to: b, rate: 1}\n"
            "  - {from: b, to: a, rate: 1}\n",
            ":4: edges: the edges form a cycle",
        ),
        (
            "operators:\n  - {name: a}\n  - {name: b}\n  - {name: c}\nedges:\n  - {from: a, to: b, rate: 1}\n"
            "  - {from: a, to: c, rate: 2}\n",
            ":7: edges[1].rate: a's edges carry 1.0 and 2.0 bytes/s",
        ),
        (
            "operators:\n  - {name: a}\nedges:\n  - {from: a, to: a, rate: -1}\n",
            ":4: edges[0].rate: Input should be",
        ),
        ("operators:\n  - {name: a}\n  - {name: a}\n", ":3: operators[1].name: operator 'a' is listed twice"),
        ("operators:\n  - {name: f}\ninterests:\n  f: [x]\n", ":4: interests.f: 'f' is no ASSIGN operator"),
        ("operators: [\n", ": malformed YAML"),
    ],
)
def test_plan_file_errors_are_located(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "plan.yaml", text)
    with pytest.raises(ConfigError) as info:
        load_plan(path)
    assert message in str(info.value)
    assert str(info.value).startswith(path)


def test_plan_errors_are_plan_errors(tmp_path: Path) -> None:
    with pytest.raises(PlanError):
        load_plan(write(tmp_path, "p.yaml", "operators:\n  - {name: a}\n"))


def test_topology_errors() -> None:
    with pytest.raises(NetworkError, match="topohub has no topology 'topozoo/Nowhere'"):
        load_network("topohub:topozoo/Nowhere")
    with pytest.raises(NetworkError, match="is not a topohub key"):
        load_network("topohub:../../etc/passwd")
    disconnected = {
        "nodes": [{"id": 0}, {"id": 1}, {"id": 2}],
        "edges": [{"source": 0, "target": 1, "dist": 10}],
    }
    with pytest.raises(NetworkError, match="no path between '0' and '2'"):
        from_node_link(disconnected, "t")
    with pytest.raises(NetworkError, match=r"edges\[0\] has neither 'latency_ms' nor 'dist'"):
        from_node_link({"nodes": [{"id": 0}, {"id": 1}], "edges": [{"source": 0, "target": 1}]}, "t")
    with pytest.raises(NetworkError, match="latency -1"):
        from_node_link(
            {"nodes": [{"id": 0}, {"id": 1}], "edges": [{"source": 0, "target": 1, "latency_ms": -1}]}, "t"
        )


def test_topohub_graphs_use_fibre_latency() -> None:
    net = load_network("topohub:topozoo/Abilene")
    assert len(net) == 11
    ny, chicago = net.node("New York"), net.node("Chicago")
    # The 1146.16 km link New York - Chicago: 5.73 ms, unless a shorter path exists.
    assert net.latency_ms[ny, chicago] <= 1146.16 / 200 + 1e-9


def test_pinned_to_an_unknown_node_names_it() -> None:
    net = fig4_network()
    plan = OperatorPlan((Operator("a", pinned="Z"), Operator("b", pinned="A")), (Edge("a", "b", 1),))
    with pytest.raises(NetworkError, match="'a' is pinned to a node fig4 does not have: 'Z' is neither"):
        problem_for(plan, net)


def test_a_node_is_pinned_by_its_name_or_its_id(tmp_path: Path) -> None:
    """Abilene's node "0" is New York: a plan may pin by either; a pin that
    is neither is located in the plan file and says so."""
    net = load_network("topohub:topozoo/Abilene")
    assert net.node("New York") == net.node("0") and net.ids[net.node("Chicago")] == "1"
    by_id = OperatorPlan(
        (Operator("cam", pinned="0"), Operator("f"), Operator("user", pinned="Chicago")),
        (Edge("cam", "f", 10), Edge("f", "user", 1)),
    )
    solution = solve(problem_for(by_id, net), "exact")
    assert solution.placement["cam"] == "New York" and solution.placement["f"] == "New York"
    path = write(tmp_path, "p.yaml", "operators:\n  - {name: cam, pinned: 0}\n  - {name: u, pinned: Mars}\n")
    assert load_plan(path).operator("cam").pinned == "0"
    with pytest.raises(PlanError) as info:
        load_plan(path, net)
    message = str(info.value)
    assert message.startswith(f"{path}:3: operators[1].pinned: 'Mars' is neither the name nor the id of")
    assert "topozoo/Abilene (nodes: New York (id 0), Chicago (id 1)," in message and "(11 in all)" in message
    with pytest.raises(NetworkError, match="'Mars' is neither the name nor the id"):
        net.node("Mars")


def test_cli_prints_placement_usage_and_optimum(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from semiactive.cli import main

    topology = {
        "nodes": [{"id": n} for n in "ABDI"],
        "edges": [
            {"source": "A", "target": "D", "latency_ms": 2},
            {"source": "B", "target": "D", "latency_ms": 4},
            {"source": "D", "target": "I", "latency_ms": 3},
        ],
    }
    topo = write(tmp_path, "t.json", json.dumps(topology))
    plan = write(
        tmp_path,
        "p.yaml",
        "operators:\n  - {name: a, pinned: A}\n  - {name: b, pinned: B}\n  - {name: join}\n"
        "  - {name: i, pinned: I}\nedges:\n  - {from: a, to: join, rate: 3}\n"
        "  - {from: b, to: join, rate: 2}\n  - {from: join, to: i, rate: 2.5}\n",
    )
    assert main(["placement", "solve", "--topology", topo, "--plan", plan, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["placement"]["join"] == "D"
    # join on D: 3 x 2 + 2 x 4 + 2.5 x 3; on A 24.5, on I 29, on B 35.5
    assert out["network_usage"] == out["optimum"] == 21.5
    assert main(["placement", "solve", "--topology", topo, "--plan", plan, "--method", "sink"]) == 0
    text = capsys.readouterr().out
    assert "join  I" in text and "ratio" in text
    assert main(["placement", "solve", "--topology", "topohub:nope/x", "--plan", plan]) == 2
    assert "topohub has no topology" in capsys.readouterr().err
