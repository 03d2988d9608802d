"""Seed 004's placement on real topologies: how close each method comes to
the optimum, and how long it takes.

For each topology, N random query trees (a pinned sink, 4 to MAX free
operators, 1-2 pinned sources under every leaf, all at random nodes; source
rates 100-1000 bytes/s, each operator's output a random 0.1-1.2 of its
input). Prints, per method, u / optimum (mean, worst) and the solve time;
then the solve time on MAX-operator trees alone.

    .venv/bin/python bench/placement_quality.py [--trees 100] [--max-ops 20]
        [--topologies topozoo/Abilene,sndlib/germany50] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from semiactive.placement.network import Network, load_network
from semiactive.placement.plan import Edge, Operator, OperatorPlan
from semiactive.placement.solve import METHODS, problem_for, solve


def random_tree(rng: random.Random, net: Network, free: int) -> OperatorPlan:
    """A query tree: the sink at the root, ``free`` unpinned operators,
    pinned sources at the leaves."""
    ops = [Operator("sink", pinned=rng.choice(net.nodes))]
    parent: dict[str, str] = {}
    for k in range(free):
        name = f"op{k}"
        parent[name] = rng.choice([o.name for o in ops])
        ops.append(Operator(name))
    leaves = [o.name for o in ops[1:] if o.name not in parent.values()]
    for leaf in leaves:
        for _ in range(rng.randint(1, 2)):
            name = f"src{len(ops)}"
            ops.append(Operator(name, pinned=rng.choice(net.nodes)))
            parent[name] = leaf
    children: dict[str, list[str]] = {}
    for child, p in parent.items():
        children.setdefault(p, []).append(child)
    rates: dict[str, float] = {}

    def rate(name: str) -> float:
        if name not in rates:
            kids = children.get(name, [])
            own = rng.uniform(100, 1000) if not kids else sum(map(rate, kids)) * rng.uniform(0.1, 1.2)
            rates[name] = own
        return rates[name]

    return OperatorPlan(tuple(ops), tuple(Edge(c, p, rate(c)) for c, p in parent.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--max-ops", type=int, default=20)
    ap.add_argument("--topologies", default="topozoo/Abilene,sndlib/germany50")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    for key in args.topologies.split(","):
        net = load_network(f"topohub:{key}")
        rng = random.Random(args.seed)
        ratios: dict[str, list[float]] = {m: [] for m in METHODS}
        seconds: dict[str, list[float]] = {m: [] for m in METHODS}
        started = time.perf_counter()
        for k in range(args.trees):
            problem = problem_for(random_tree(rng, net, rng.randint(4, args.max_ops)), net)
            optimum = solve(problem, "exact")
            for method in METHODS:
                found = optimum if method == "exact" else solve(problem, method)
                ratios[method].append(found.network_usage / optimum.network_usage)
                seconds[method].append(found.seconds)
            if (k + 1) % 25 == 0:
                print(
                    f"  {key}: {k + 1}/{args.trees} trees ({time.perf_counter() - started:.1f} s)", flush=True
                )
        print(
            f"{key} ({len(net)} nodes, {len(net.links)} links), "
            f"{args.trees} trees of 5-{args.max_ops} free operators:"
        )
        print(f"  {'method':<11} {'u/opt mean':>10} {'worst':>7} {'solve ms mean':>14} {'max':>8}")
        for method in METHODS:
            r, s = ratios[method], seconds[method]
            print(
                f"  {method:<11} {statistics.mean(r):>10.3f} {max(r):>7.3f} "
                f"{statistics.mean(s) * 1000:>14.2f} {max(s) * 1000:>8.2f}"
            )
        full = [problem_for(random_tree(rng, net, args.max_ops), net) for _ in range(20)]
        for method in ("relaxation", "search", "exact"):
            times = [solve(p, method).seconds for p in full]
            print(
                f"  {args.max_ops} free operators, {method}: mean {statistics.mean(times) * 1000:.1f} ms, "
                f"max {max(times) * 1000:.1f} ms"
            )


if __name__ == "__main__":
    main()
