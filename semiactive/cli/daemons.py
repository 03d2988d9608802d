"""``semiactive node`` and ``semiactive coordinator``: the long-running
processes of a deployed cluster (what its containers run)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from semiactive.cli.common import tls_dir_option

if TYPE_CHECKING:
    from semiactive.cli.common import Subcommands


def register(sub: Subcommands) -> None:
    node = sub.add_parser("node", help="run one node daemon (what a container runs)")
    node.add_argument("--config", required=True)
    node.add_argument("--name", required=True)
    node.add_argument("--endpoints", type=Path, help="JSON: node name -> {host, port, metrics_port}")
    node.add_argument("--run-dir", type=Path)
    node.add_argument("--start-now", action="store_true", help="sources start emitting at once")
    node.add_argument("--spare", action="store_true", help="start as a spare, whatever the config says")
    node.add_argument(
        "--resume",
        action="store_true",
        help="a file or generator source started again: go on from its progress in --run-dir",
    )
    node.add_argument("--coordinator", metavar="HOST:PORT", help="report to this coordinator")
    tls_dir_option(node)
    node.add_argument("--log-level", default=os.environ.get("SEMIACTIVE_LOG", "INFO"))
    node.set_defaults(func=_node)

    forks = sub.add_parser(
        "fork-server",
        help="import once, then fork each process cluster up starts (orders: JSON lines on stdin)",
    )
    forks.add_argument("--config", required=True, help="its sources' and sinks' clients are imported too")
    forks.add_argument("--run-dir", type=Path, help="the run it serves (shown by ps; not used)")
    forks.set_defaults(func=_fork_server)

    coord = sub.add_parser("coordinator", help="run the coordinator (the control plane) of a cluster")
    coord.add_argument("--config", required=True)
    coord.add_argument("--listen", required=True, metavar="HOST:PORT")
    coord.add_argument("--endpoints", type=Path, help="JSON: node name -> {host, port} (else the config's)")
    coord.add_argument("--run-dir", type=Path, help="where its events go (telemetry/)")
    coord.add_argument(
        "--metrics-port", type=int, metavar="PORT", help="serve Prometheus metrics here (host of --listen)"
    )
    coord.add_argument(
        "--http", type=int, metavar="PORT", help="serve the live web page here (host of --listen; read-only)"
    )
    coord.add_argument(
        "--no-reprotect", action="store_true", help="converge views only; assign no new secondaries"
    )
    tls_dir_option(coord)
    coord.add_argument("--log-level", default=os.environ.get("SEMIACTIVE_LOG", "INFO"))
    coord.set_defaults(func=_coordinator)


def _node(args: argparse.Namespace) -> int:
    from semiactive.node.service.main import run_node

    return run_node(
        args.config,
        name=args.name,
        endpoints=args.endpoints,
        run_dir=args.run_dir,
        start_now=args.start_now,
        log_level=args.log_level,
        spare=args.spare,
        resume=args.resume,
        coordinator=args.coordinator,
        tls_dir=args.tls_dir,
    )


def _fork_server(args: argparse.Namespace) -> int:
    import sys

    from semiactive.cli import main
    from semiactive.launcher.fork_server import OrdersError, modules_for, preload, serve

    preload(modules_for(args.config))
    try:
        orders = serve(sys.stdin.buffer, sys.stdout.buffer)
    except OrdersError as exc:
        print(f"semiactive fork-server: bad orders: {exc}", file=sys.stderr)
        return 2
    if orders is None:
        return 0  # the launcher is gone
    return main(orders.argv)  # in the process forked for it


def _coordinator(args: argparse.Namespace) -> int:
    from semiactive.coordinator.service import run_coordinator

    return run_coordinator(
        args.config,
        listen=args.listen,
        endpoints=args.endpoints,
        run_dir=args.run_dir,
        reprotect=not args.no_reprotect,
        log_level=args.log_level,
        tls_dir=args.tls_dir,
        metrics_port=args.metrics_port,
        http_port=args.http,
    )
