"""``semiactive demo``: the paper's chain (the SAS paper, Fig. 3) for a short
run, verified."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from semiactive.cli.common import Subcommands


def register(sub: Subcommands) -> None:
    demo = sub.add_parser("demo", help="the SAS paper's chain (its Fig. 3) for a short run, verified")
    demo.add_argument("--duration", type=float, default=8.0)
    demo.add_argument("--run-dir", type=Path)
    demo.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from semiactive.launcher.demo import run_demo

    return run_demo(duration=args.duration, run_dir=args.run_dir)
