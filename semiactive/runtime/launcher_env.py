"""What a process started by ``cluster up`` learns from its environment.

Kept free of imports: the launcher builds this environment for its fork
server before it has imported anything else (:mod:`semiactive.cli.cluster`).
"""

from __future__ import annotations

import os

# Set by ``cluster up`` for the nodes it starts: the launcher's pid. Such a
# node ends the run when its launcher is gone (killed without cleaning up),
# instead of running on as an orphan holding ports: sources stop, every
# primary delivers what it holds and its end of stream, sinks close their
# output, and each process exits (secondaries and spares at once). Nothing a
# surviving replica held is lost, but failures during that drain are not
# covered: no coordinator re-protects and no process is restarted.
LAUNCHER_PID_ENV = "SEMIACTIVE_LAUNCHER_PID"


def launched_env() -> dict[str, str]:
    """The environment of every process this launcher starts."""
    env = dict(os.environ, GRPC_VERBOSITY="ERROR", PYTHONUNBUFFERED="1")
    env[LAUNCHER_PID_ENV] = str(os.getpid())
    return env
