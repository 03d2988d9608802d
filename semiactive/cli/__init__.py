"""The ``semiactive`` command line.

Bad input (config, query, arguments) prints one line naming the file and
the field or line/column, and exits with status 2, leaving no process behind.

Each command group is a module of this package that registers its parsers
(``register(subparsers)``) with a handler as their ``func`` default; a
handler takes the parsed arguments and calls the library with keyword
arguments, importing it only then, so that the command line starts light.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence

from semiactive import __version__
from semiactive.cli import (
    admin,
    bench,
    certs,
    cluster,
    daemons,
    demo,
    experiment,
    faults,
    mqo,
    placement,
    query,
    report,
    verify,
)
from semiactive.cli.common import USAGE_ERROR, Handler
from semiactive.errors import UserError

# In the order `semiactive --help` lists their commands.
COMMAND_GROUPS = (
    cluster,  # cluster up|check
    daemons,  # node, coordinator
    admin,  # status, migrate, health, start, drain
    verify,  # verify
    certs,  # certs init|issue
    query,  # query check|add|remove|run
    mqo,  # mqo run
    placement,  # placement solve
    experiment,  # experiment sweep|asas|mqo
    faults,  # chaos, nemesis, simulate
    report,  # report
    demo,  # demo
    bench,  # bench
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="semiactive", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--version", action="version", version=f"semiactive {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for group in COMMAND_GROUPS:
        group.register(sub)
    return p


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "simulate" and argv is None:
        from semiactive.simulation.campaign import exact_hash_seed

        exact_hash_seed(sys.argv[1:])
    # SIGTERM (a supervisor, a container stop) ends a command like Ctrl-C.
    signal.signal(signal.SIGTERM, _terminate)
    handler: Handler = args.func
    try:
        code = handler(args)
        sys.stdout.flush()  # here, where a closed pipe is caught (below), not at exit
        return code
    except UserError as exc:
        print(f"semiactive: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`semiactive status --json | head`): as a
        # pipeline's other commands do, stop quietly with SIGPIPE's status.
        # stdout now points nowhere, so that flushing it at exit says nothing.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main())
