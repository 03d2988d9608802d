"""What several commands share: options, environment variables, the exit
status of a usage error, the type of a command's handler."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

USAGE_ERROR = 2
COORDINATOR_ENV = "SEMIACTIVE_COORDINATOR"
DEFAULT_COORDINATOR = "127.0.0.1:7070"
TLS_DIR_ENV = "SEMIACTIVE_TLS_DIR"

Handler: TypeAlias = Callable[[argparse.Namespace], int]
"""What runs a command: the parsed arguments in, the exit status out
(a parser's ``func`` default)."""

if TYPE_CHECKING:
    Subcommands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def tls_dir_option(parser: argparse.ArgumentParser, whose: str = "default $SEMIACTIVE_TLS_DIR") -> None:
    parser.add_argument(
        "--tls-dir",
        type=Path,
        default=os.environ.get(TLS_DIR_ENV) or None,
        help=f"CA, certificate and key of this process ({whose}); not needed with `insecure: true`",
    )


def tag_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label every run's manifest carries, for the report (e.g. operator=aggregate)",
    )


def coordinator_options(parser: argparse.ArgumentParser) -> None:
    """Which coordinator: ``--coordinator HOST:PORT`` or ``--run-dir`` (not both)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--coordinator", metavar="HOST:PORT", help=f"default ${COORDINATOR_ENV} or {DEFAULT_COORDINATOR}"
    )
    where.add_argument("--run-dir", type=Path, help="the coordinator of this `cluster up` run")


def coordinator_address(args: argparse.Namespace) -> str:
    """``--coordinator``, else ``$SEMIACTIVE_COORDINATOR``, else the default."""
    address: str = args.coordinator or os.environ.get(COORDINATOR_ENV, DEFAULT_COORDINATOR)
    return address


def dated_dir(kind: str) -> Path:
    """``runs/KIND-<time>``: where a campaign goes without ``--out``."""
    return Path("runs") / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}"


def names(text: str) -> list[str]:
    """A comma-separated list such as ``--modes as,ub``, lower-cased."""
    return [m.strip().lower() for m in text.split(",") if m.strip()]
