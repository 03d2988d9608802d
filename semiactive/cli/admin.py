"""Commands that operate a running cluster from outside: ``status``,
``migrate``, ``health``, ``start``, ``drain``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from semiactive.cli.common import coordinator_address, coordinator_options, tls_dir_option

if TYPE_CHECKING:
    from semiactive.cli.common import Subcommands

ADMIN_TLS = "admin's; default $SEMIACTIVE_TLS_DIR, or RUN_DIR/tls with --run-dir"


def register(sub: Subcommands) -> None:
    status = sub.add_parser("status", help="every stage and node of a running cluster, from its coordinator")
    coordinator_options(status)
    status.add_argument("--json", action="store_true", help="machine-readable")
    tls_dir_option(status, ADMIN_TLS)
    status.set_defaults(func=_status)

    migrate = sub.add_parser("migrate", help="move a running stage's primary to a spare node (no row lost)")
    migrate.add_argument("stage")
    migrate.add_argument("--to", dest="target", required=True, metavar="NODE", help="a spare node")
    coordinator_options(migrate)
    migrate.add_argument(
        "--wait", type=float, default=30.0, metavar="S", help="follow it (0: return at once)"
    )
    tls_dir_option(migrate, ADMIN_TLS)
    migrate.set_defaults(func=_migrate)

    health = sub.add_parser(
        "health", help="the gRPC health check of a node or coordinator: exit 0 when it is SERVING"
    )
    health.add_argument("address", metavar="HOST:PORT")
    health.add_argument("--peer", metavar="NAME", help="the name its certificate carries (default: HOST)")
    health.add_argument(
        "--as", dest="identity", metavar="NAME", help="the identity to present (default: the peer's own)"
    )
    health.add_argument("--timeout", type=float, default=2.0, help="seconds (default 2)")
    tls_dir_option(health, "the identity's; default $SEMIACTIVE_TLS_DIR; none: an insecure cluster")
    health.set_defaults(func=_health)

    start = sub.add_parser(
        "start", help="a deployed cluster: wait until every node serves, then start it (as the launcher does)"
    )
    start.set_defaults(func=_start)
    drain = sub.add_parser(
        "drain", help="a deployed cluster: stop the sources, wait until every sink has its end of stream"
    )
    drain.set_defaults(func=_drain)
    for deployed in (start, drain):
        deployed.add_argument("--config", required=True)
        deployed.add_argument(
            "--endpoints", type=Path, help="JSON: node name -> {host, port} (else the config's)"
        )
        deployed.add_argument(
            "--wait", type=float, default=120.0, help="seconds to wait for the nodes to serve (default 120)"
        )
        tls_dir_option(deployed, "admin's; default $SEMIACTIVE_TLS_DIR")
    drain.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the sinks (default 60)"
    )

    ingest = sub.add_parser(
        "ingest", help="push rows of a CSV or JSON Lines file (- for stdin) into an ingest source"
    )
    ingest.add_argument("file", metavar="FILE")
    ingest.add_argument("--source", required=True, metavar="NAME", help="the ingest source")
    where = ingest.add_mutually_exclusive_group(required=True)
    where.add_argument("--run-dir", type=Path, help="a `cluster up` run (its addresses and credentials)")
    where.add_argument("--endpoint", metavar="HOST:PORT", help="the source's address")
    tls_dir_option(ingest, "default $SEMIACTIVE_TLS_DIR, or RUN_DIR/tls with --run-dir")
    ingest.add_argument(
        "--as",
        dest="identity",
        default="admin",
        metavar="NAME",
        help="identity: admin or ingest-* (default admin)",
    )
    ingest.add_argument("--format", choices=["csv", "jsonl"], help="default: by extension, else by content")
    ingest.add_argument("--batch", type=int, default=1000, help="rows per call (default 1000)")
    ingest.add_argument(
        "--skip", type=int, default=0, metavar="N", help="skip the first N data rows (resume)"
    )
    ingest.add_argument("--end", action="store_true", help="end the source's stream after the last row")
    ingest.set_defaults(func=_ingest)


def _status(args: argparse.Namespace) -> int:
    from semiactive.admin.status import show_status

    return show_status(
        coordinator_address(args), run_dir=args.run_dir, as_json=args.json, tls_dir=args.tls_dir
    )


def _migrate(args: argparse.Namespace) -> int:
    from semiactive.admin.migrate import migrate

    return migrate(
        coordinator_address(args),
        run_dir=args.run_dir,
        stage=args.stage,
        target=args.target,
        wait_s=args.wait,
        tls_dir=args.tls_dir,
    )


def _health(args: argparse.Namespace) -> int:
    from semiactive.runtime.health import health_main

    return health_main(
        args.address, tls_dir=args.tls_dir, peer=args.peer, identity=args.identity, timeout=args.timeout
    )


def _start(args: argparse.Namespace) -> int:
    from semiactive.admin.deployment import run_start

    return run_start(args.config, endpoints=args.endpoints, tls_dir=args.tls_dir, wait_s=args.wait)


def _drain(args: argparse.Namespace) -> int:
    from semiactive.admin.deployment import run_drain

    return run_drain(
        args.config,
        endpoints=args.endpoints,
        tls_dir=args.tls_dir,
        wait_s=args.wait,
        drain_s=args.timeout,
    )


def _ingest(args: argparse.Namespace) -> int:
    from semiactive.admin.ingest import run_ingest

    return run_ingest(
        args.file,
        source=args.source,
        run_dir=args.run_dir,
        endpoint=args.endpoint,
        tls_dir=args.tls_dir,
        identity=args.identity,
        file_format=args.format,
        batch=args.batch,
        skip=args.skip,
        end=args.end,
    )
