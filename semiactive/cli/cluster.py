"""``semiactive cluster up|check``: a whole cluster on this machine."""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from semiactive.cli.common import Subcommands


def register(sub: Subcommands) -> None:
    cluster = sub.add_parser("cluster", help="run a whole cluster on this machine")
    csub = cluster.add_subparsers(dest="action", required=True)
    up = csub.add_parser("up", help="start every process of CONFIG on loopback, run, drain, stop")
    up.add_argument("config")
    up.add_argument(
        "--duration",
        type=float,
        help="seconds the sources emit (default: until the files end when every source is a file, else 10)",
    )
    up.add_argument("--run-dir", type=Path, help="where cluster.json, sources/, sink/, logs/ go")
    up.add_argument("--kill", action="append", default=[], metavar="NODE@SECONDS", help="SIGKILL a node")
    up.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="NODE@SECONDS:DURATION",
        help="SIGSTOP a node, SIGCONT it DURATION seconds later",
    )
    up.add_argument("--quiet", action="store_true", help="no live progress line")
    up.set_defaults(func=_up)
    check = csub.add_parser(
        "check", help="validate CONFIG (fields, queries, partitionings) without running it"
    )
    check.add_argument("config")
    check.set_defaults(func=_check)
    down = csub.add_parser(
        "down", help="stop a run of `cluster up` (in the background): drain to the sinks, stop every process"
    )
    down.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    down.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for the drain (default 120)"
    )
    down.add_argument("--now", action="store_true", help="kill every process at once, no drain")
    down.set_defaults(func=_down)


def _up(args: argparse.Namespace) -> int:
    # The fork server imports the daemon (about 1 s here) while this
    # process imports the launcher; a run directory that holds a run is
    # refused below, before anything is forked.
    from semiactive.launcher.node_forker import NodeForker

    run_dir: Path = args.run_dir or Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    forker = NodeForker(args.config, run_dir)
    forker.start()
    try:
        from semiactive.launcher.cluster import run_cluster

        return asyncio.run(
            run_cluster(
                args.config,
                duration=args.duration,
                run_dir=run_dir,
                kills=args.kill,
                stops=args.stop,
                progress=not args.quiet,
                forker=forker,
            )
        )
    finally:
        forker.close()


def _check(args: argparse.Namespace) -> int:
    from semiactive.launcher.check import check_config

    print(check_config(args.config))
    return 0


def _down(args: argparse.Namespace) -> int:
    from semiactive.launcher.down import cluster_down

    return cluster_down(args.run_dir, timeout=args.timeout, now=args.now)
