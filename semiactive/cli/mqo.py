"""``semiactive mqo run``: many continuous queries sharing their window
joins, run here over files (the MQO paper, embedded)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from semiactive.cli.common import Subcommands


def register(sub: Subcommands) -> None:
    mqo = sub.add_parser(
        "mqo", help="multi-query optimisation: continuous queries sharing window joins, here"
    )
    msub = mqo.add_subparsers(dest="action", required=True)
    mrun = msub.add_parser("run", help="run MASTER/WINDOW SIZE queries over files with shared window joins")
    mrun.add_argument("queries", help="file of CREATE ... statements, or - for standard input")
    mrun.add_argument(
        "--stream", action="append", default=[], metavar="NAME=FILE", help="CSV/JSONL, ts column"
    )
    mrun.add_argument("--clock", action="append", default=[], metavar="NAME=PERIOD[+PHASE]", help="ms")
    mrun.add_argument("--method", choices=["dynamic", "static", "single", "none"], default="dynamic")
    mrun.add_argument("--theta", type=float, default=0.5, help="similarity threshold (default 0.5)")
    mrun.add_argument(
        "--unit", type=int, default=1000, help="ticks per unit of the statistics (default 1000)"
    )
    mrun.add_argument("--log-period", type=int, default=10_000, help="ticks of arrival log (default 10000)")
    mrun.add_argument("--recluster-every", type=int, metavar="TICKS", help="dynamic: check similarity")
    mrun.add_argument("--recluster-at", type=int, action="append", default=[], metavar="TICKS")
    mrun.add_argument("--patience", type=int, default=1, help="checks below theta before re-clustering")
    mrun.add_argument("--add", action="append", default=[], metavar="TICKS:FILE", help="register later")
    mrun.add_argument("--remove", action="append", default=[], metavar="TICKS:NAME")
    mrun.add_argument("--out", type=Path, required=True)
    mrun.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from semiactive.embedded import mqo as mqo_runner

    return mqo_runner.main(
        args.queries,
        stream_specs=args.stream,
        clock_specs=args.clock,
        method=args.method,
        out=args.out,
        theta=args.theta,
        unit=args.unit,
        log_period=args.log_period,
        recluster_every=args.recluster_every,
        recluster_at=args.recluster_at,
        patience=args.patience,
        add=args.add,
        remove=args.remove,
    )
