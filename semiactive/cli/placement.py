"""``semiactive placement solve``: place a plan file on a topology.

Prints the placement, its network usage and the optimum's (the exact
method), as a table or as JSON for scripts.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from semiactive.placement.network import load_network
from semiactive.placement.plan import load_plan
from semiactive.placement.solve import Solution, problem_for, solve


def main(topology: str, plan_path: str, method: str, as_json: bool) -> int:
    network = load_network(topology)
    plan = load_plan(plan_path)
    problem = problem_for(plan, network)
    chosen = solve(problem, method)
    optimum = chosen if method == "exact" else solve(problem, "exact")
    out: dict[str, Any] = {
        "placement": chosen.placement,
        "network_usage": chosen.network_usage,
        "optimum": optimum.network_usage,
        "method": method,
        "solve_s": chosen.seconds,
        "optimum_solve_s": optimum.seconds,
    }
    if as_json:
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(_table(network.name, chosen, optimum))
    return 0


def _table(name: str, chosen: Solution, optimum: Solution) -> str:
    width = max(len(op) for op in chosen.placement)
    lines = [f"{op:<{width}}  {node}" for op, node in chosen.placement.items()]
    ratio = chosen.network_usage / optimum.network_usage if optimum.network_usage else 1.0
    lines.append(
        f"network usage on {name}: {chosen.network_usage:.6g} bytes/s x ms ({chosen.method}, "
        f"{chosen.seconds * 1000:.1f} ms); optimum {optimum.network_usage:.6g} (ratio {ratio:.3f})"
    )
    return "\n".join(lines) + "\n"
