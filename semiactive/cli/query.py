"""``semiactive query check|run`` (CQL compiled or run here) and
``semiactive query add|remove`` (MQO queries of a running cluster)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from semiactive.cli.common import Subcommands

WINDOW_BOUNDS = ("closed", "half-open")  # node/cql/bounds.py; not imported: the CLI starts light


def register(sub: Subcommands) -> None:
    query = sub.add_parser("query", help="compile or run CQL here; add or remove MQO queries of a cluster")
    qsub = query.add_subparsers(dest="action", required=True)
    check = qsub.add_parser("check", help="parse, type-check and print the plan")
    check.add_argument("file")
    check.add_argument("--insert-delays", action="store_true", help="add <Now> on cycles without a delay")
    check.add_argument(
        "--show-code", action="store_true", help="also print the Python generated for each query"
    )
    bounds_help = "[Range T]: closed [ts, ts+T] (CQL, default) or half-open [ts, ts+T) (Stanford STREAM)"
    check.add_argument("--window-bounds", choices=WINDOW_BOUNDS, default="closed", help=bounds_help)
    check.add_argument(
        "--partition-by",
        action="append",
        metavar="STREAM=COL[,COL]",
        help="check that partitions routed by these columns (STREAM= : round-robin) keep the result",
    )
    check.set_defaults(func=_check)
    for action, what in (
        ("add", "register MQO queries (a file, - for stdin)"),
        ("remove", "remove MQO queries"),
    ):
        reg = qsub.add_parser(action, help=f"{what} with a running cluster's registry")
        if action == "add":
            reg.add_argument("items", nargs=1, metavar="FILE")
        else:
            reg.add_argument("items", nargs="+", metavar="NAME")
        reg.add_argument("--run-dir", type=Path, help="a `cluster up` run directory (config, endpoints, TLS)")
        reg.add_argument("--config")
        reg.add_argument("--endpoints", type=Path, help="endpoints file (default: the config's endpoints)")
        reg.add_argument("--tls-dir", type=Path)
        reg.add_argument("--registry", help="the registry source (default: the only one)")
        reg.set_defaults(func=_register)
    run = qsub.add_parser("run", help="run over files, print a query's output as JSON Lines")
    run.add_argument("file")
    run.add_argument(
        "--stream", action="append", default=[], metavar="NAME=FILE", help="input file (CSV/JSONL)"
    )
    run.add_argument("--output", help="registered query to print (default: the last one)")
    run.add_argument(
        "--executor",
        choices=["auto", "dts", "hb", "columnar"],
        default="auto",
        help="auto (default): column batches if `query check` says the query is vectorized, else dts; "
        "dts: time-splitting; hb: heartbeats; columnar: column batches or exit 2",
    )
    run.add_argument("--run-limit", type=int, default=100, help="HB: max consecutive runs of one operator")
    run.add_argument("--window-bounds", choices=WINDOW_BOUNDS, default="closed", help=bounds_help)
    run.set_defaults(func=_run)


def _check(args: argparse.Namespace) -> int:
    from semiactive.embedded import query as embedded

    keys = embedded.parse_partition_by(args.partition_by) if args.partition_by else None
    text = embedded.check(
        args.file,
        insert_delays=args.insert_delays,
        show_code=args.show_code,
        window_bounds=args.window_bounds,
        partition_by=keys,
    )
    print(text)
    return 0


def _run(args: argparse.Namespace) -> int:
    from semiactive.embedded import query as embedded

    return embedded.run(
        args.file,
        args.stream,
        output=args.output,
        executor=args.executor,
        run_limit=args.run_limit,
        window_bounds=args.window_bounds,
    )


def _register(args: argparse.Namespace) -> int:
    """``query add`` and ``query remove``."""
    from semiactive.admin.registration import run_registration

    return run_registration(
        args.action,
        args.items,
        config=args.config,
        run_dir=args.run_dir,
        endpoints=args.endpoints,
        tls_dir=args.tls_dir,
        registry=args.registry,
    )
