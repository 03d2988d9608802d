"""``semiactive bench NAME``: a benchmark script of the source tree's bench/
(benchmarks are scripts beside the packages, not installed with them)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import TYPE_CHECKING

from semiactive.errors import UserError
from semiactive.source_tree import BENCH

if TYPE_CHECKING:
    from semiactive.cli.common import Subcommands

BENCHMARKS = {"linear-road": "linear_road_cluster.py"}  # semiactive bench NAME -> bench/FILE


def register(sub: Subcommands) -> None:
    bench = sub.add_parser(
        "bench", help="a benchmark of the source tree's bench/ (linear-road: on a cluster)"
    )
    bench.add_argument("name", choices=sorted(BENCHMARKS), help="which benchmark")
    bench.add_argument("options", nargs=argparse.REMAINDER, help="its options (NAME --help lists them)")
    bench.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    """Runs bench/FILE.py of the source tree this package is in, as a child."""
    script = BENCH / BENCHMARKS[args.name]
    if not script.is_file():
        raise UserError(f"{script} is missing: benchmarks run from a source checkout")
    return subprocess.call([sys.executable, str(script), *args.options])
