"""``semiactive verify``: a run's sinks checked against the engine's
reference and an independent SQLite oracle."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from semiactive.cli.common import Subcommands


def register(sub: Subcommands) -> None:
    verify = sub.add_parser(
        "verify", help="a run's sinks against the engine's reference and an independent SQLite oracle"
    )
    verify.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    verify.add_argument("--config", help="the run's configuration (default: the one cluster.json names)")
    verify.add_argument("--oracle-rows", type=int, help="source rows the oracle reads (default 5000)")
    verify.set_defaults(func=_verify)


def _verify(args: argparse.Namespace) -> int:
    from semiactive.oracle.verify import main as verify_main

    options = ["--config", args.config] if args.config else []
    options += ["--oracle-rows", str(args.oracle_rows)] if args.oracle_rows else []
    return verify_main([str(args.run_dir), *options])
