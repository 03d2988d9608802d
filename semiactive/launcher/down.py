"""``semiactive cluster down RUN_DIR``: stop a run started in the background.

The launcher of ``cluster up`` takes SIGTERM as Ctrl-C: it stops the
sources, lets what is in flight drain to the sinks, and stops every process
(a second one kills them all at once). This sends it, to the launcher
``cluster.json`` names (known by its pid and start time, never a recycled
pid), waits until it is gone, and prints what the run delivered.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from semiactive import config as config_mod
from semiactive import topology as topology_mod
from semiactive.errors import UserError
from semiactive.launcher.measurements import analyse
from semiactive.launcher.supervision import is_launcher

KILL_GRACE_S = 0.5  # between the two signals of --now


def read_cluster_json(run_dir: Path) -> dict[str, Any]:
    try:
        doc = json.loads((run_dir / "cluster.json").read_text())
    except (OSError, ValueError):
        raise UserError(f"{run_dir}: no run there (no readable cluster.json)") from None
    if not isinstance(doc, dict):
        raise UserError(f"{run_dir}/cluster.json: not a run's cluster.json")
    return doc


def cluster_down(run_dir: Path, *, timeout: float, now: bool) -> int:
    """0 once the run has stopped (or had already); 1 if it still drains
    after ``timeout`` seconds."""
    doc = read_cluster_json(run_dir)
    pid, started = doc.get("launcher_pid"), doc.get("launcher_started")
    if not isinstance(pid, int) or not is_launcher(pid, started if isinstance(started, int) else None):
        print(f"the run in {run_dir} has already ended")
        return 0
    os.kill(pid, signal.SIGTERM)
    if now:
        time.sleep(KILL_GRACE_S)
        if is_launcher(pid, started if isinstance(started, int) else None):
            os.kill(pid, signal.SIGTERM)  # the second one kills every process of the run
    print(f"{'killing' if now else 'draining'} the run in {run_dir} ...", file=sys.stderr, flush=True)
    deadline = time.monotonic() + timeout
    while is_launcher(pid, started if isinstance(started, int) else None):
        if time.monotonic() > deadline:
            print(
                f"the run in {run_dir} still drains after {timeout:g} s; `cluster down --now` kills it",
                file=sys.stderr,
            )
            return 1
        time.sleep(0.1)
    print(f"the run in {run_dir} has stopped")
    config = doc.get("config")
    if isinstance(config, str) and not now:
        # A config changed or gone since: the run's files still say it all.
        with contextlib.suppress(OSError, config_mod.ConfigError):
            print(analyse(topology_mod.resolve(config_mod.load(config)), run_dir).describe())
    return 0
