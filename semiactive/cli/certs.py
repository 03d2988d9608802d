"""``semiactive certs init|issue``: the mutual-TLS certificates of a cluster."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from semiactive.cli.common import Subcommands


def register(sub: Subcommands) -> None:
    certs = sub.add_parser("certs", help="mutual-TLS certificates of a cluster (a CA, one per identity)")
    tsub = certs.add_subparsers(dest="action", required=True)
    init = tsub.add_parser("init", help="a new CA and a certificate for every node, coordinator and admin")
    init.add_argument("dir", type=Path)
    init.add_argument("--config", required=True)
    init.add_argument("--days", type=float, default=365.0, help="validity (default 365)")
    init.set_defaults(func=_init)
    issue = tsub.add_parser("issue", help="one more identity (e.g. ingest-NAME) from DIR's CA")
    issue.add_argument("dir", type=Path)
    issue.add_argument("name")
    issue.add_argument("--days", type=float, default=365.0)
    issue.set_defaults(func=_issue)


def _init(args: argparse.Namespace) -> int:
    from semiactive.admin.certificates import issue_certs

    return issue_certs("init", args.dir, config=args.config, days=args.days)


def _issue(args: argparse.Namespace) -> int:
    from semiactive.admin.certificates import issue_certs

    return issue_certs("issue", args.dir, name=args.name, days=args.days)
