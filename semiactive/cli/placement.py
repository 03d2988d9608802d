"""``semiactive placement solve``: place a plan file on a topology.

Prints the placement, its network usage and the optimum's (the exact
method), as a table or as JSON for scripts.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from semiactive.cli.common import Subcommands
    from semiactive.placement.solve import Solution


def register(sub: Subcommands) -> None:
    placement = sub.add_parser("placement", help="network-aware operator placement")
    psub = placement.add_subparsers(dest="action", required=True)
    solve = psub.add_parser("solve", help="place a plan's operators on a topology, minimising network usage")
    solve.add_argument(
        "--topology", required=True, metavar="topohub:KEY|FILE", help="e.g. topohub:topozoo/Abilene"
    )
    solve.add_argument("--plan", required=True, metavar="PLAN.yaml", help="operators, pins, edges with rates")
    solve.add_argument(
        "--method",
        choices=["exact", "search", "relaxation", "sink", "sources"],
        default="exact",
        help="exact (default: tree DP, or an ILP for shared plans), search (relaxation + local search), "
        "relaxation (Pietzuch), sink, sources",
    )
    solve.add_argument("--json", action="store_true", help="one JSON object on standard output")
    solve.set_defaults(func=_solve)


def _solve(args: argparse.Namespace) -> int:
    import json

    from semiactive.placement.network import load_network
    from semiactive.placement.plan import load_plan
    from semiactive.placement.solve import problem_for, solve

    method: str = args.method
    network = load_network(args.topology)
    plan = load_plan(args.plan, network)
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
    if args.json:
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
