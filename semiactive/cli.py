"""The ``semiactive`` command line.

Bad input (config, query, arguments) prints one line naming the file and
the field or line/column, and exits with status 2, leaving no process behind.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from node.cql import CqlError
from node.sources import SourceDataError
from semiactive.config import ConfigError

USAGE_ERROR = 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="semiactive", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = p.add_subparsers(dest="command", required=True)

    cluster = sub.add_parser("cluster", help="run a whole cluster on this machine")
    csub = cluster.add_subparsers(dest="action", required=True)
    up = csub.add_parser("up", help="start every process of CONFIG on loopback, run, drain, stop")
    up.add_argument("config")
    up.add_argument("--duration", type=float, default=10.0, help="seconds the sources emit (default 10)")
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

    node = sub.add_parser("node", help="run one node daemon (what a container runs)")
    node.add_argument("--config", required=True)
    node.add_argument("--name", required=True)
    node.add_argument("--endpoints", type=Path, help="JSON: node name -> {host, port, metrics_port}")
    node.add_argument("--run-dir", type=Path)
    node.add_argument("--start-now", action="store_true", help="sources start emitting at once")
    node.add_argument("--spare", action="store_true", help="start as a spare, whatever the config says")
    node.add_argument("--log-level", default=os.environ.get("SEMIACTIVE_LOG", "INFO"))

    query = sub.add_parser("query", help="compile or run CQL in this process")
    qsub = query.add_subparsers(dest="action", required=True)
    check = qsub.add_parser("check", help="parse, type-check and print the plan")
    check.add_argument("file")
    check.add_argument("--insert-delays", action="store_true", help="add <Now> on cycles without a delay")
    run = qsub.add_parser("run", help="run over files, print a query's output as JSON Lines")
    run.add_argument("file")
    run.add_argument(
        "--stream", action="append", default=[], metavar="NAME=FILE", help="input file (CSV/JSONL)"
    )
    run.add_argument("--output", help="registered query to print (default: the last one)")
    run.add_argument(
        "--executor", choices=["dts", "hb"], default="dts", help="time-splitting (default) or heartbeats"
    )
    run.add_argument("--run-limit", type=int, default=100, help="HB: max consecutive runs of one operator")

    demo = sub.add_parser("demo", help="the paper's chain (seed 002 Fig. 3) for a short run, verified")
    demo.add_argument("--duration", type=float, default=8.0)
    demo.add_argument("--run-dir", type=Path)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except (ConfigError, CqlError, SourceDataError) as exc:
        print(f"semiactive: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "node":
        from node.main import run_node

        return run_node(
            args.config, args.name, args.endpoints, args.run_dir, args.start_now, args.log_level, args.spare
        )
    if args.command == "query":
        from semiactive import embedded

        if args.action == "check":
            print(embedded.check(args.file, insert_delays=args.insert_delays))
            return 0
        return embedded.run(args.file, args.stream, args.output, args.executor, args.run_limit)
    if args.command == "cluster":
        from coordinator.launcher import run_cluster

        return asyncio.run(
            run_cluster(
                args.config, args.duration, args.run_dir, args.kill, args.stop, progress=not args.quiet
            )
        )
    if args.command == "demo":
        from coordinator.demo import run_demo

        return run_demo(args.duration, args.run_dir)
    raise AssertionError(args.command)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main())
