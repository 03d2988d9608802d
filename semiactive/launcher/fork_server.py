"""The run's fork server (``semiactive fork-server``): one interpreter that
imports what a node and the coordinator import, once, then forks every
process ``cluster up`` starts or restarts.

Python's start and those imports cost about 1 s of CPU per process here;
a cluster of ten processes started cold spent 5-6 s of its two cores
before the first row (docs/lab/suite-time.md). A forked process shares the
imported modules and runs its command line at once.

Orders are one line of JSON each on stdin, ``{"argv": [...], "log": "..."}``:
the ``semiactive`` command line to run (``node ...`` or ``coordinator ...``)
and the log file its output goes to. The server answers ``ready`` once it
has imported, then one line per order: ``{"pid": N}``, the process's pid,
or ``{"error": "..."}`` when it could not fork (the launcher then starts
that process cold).
It forks twice, so that the process is no child of the server: its parent
becomes the launcher, which has made itself the subreaper of its
descendants (:mod:`semiactive.launcher.node_forker`) and so waits for it as
for any process it started. The process is the leader of its own session,
as a process started cold is. End of input (the launcher gone) ends the
server; a malformed order ends it with status 2 (the launcher writes them:
anything else is a bug or an intruder).

The server forks while it has one thread (numpy's BLAS pool aside, which
handles fork itself) and has opened no channel, loop or file: gRPC and the
event loop start in the forked process, after the fork.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from semiactive import config as config_mod

# What every node imports, what the coordinator imports, then each
# connector's client by the kinds the config names (imported lazily by the
# daemon: only its users pay).
NODE_MODULES = ("uvloop", "semiactive.node.service.daemon", "semiactive.node.service.main")
COORDINATOR_MODULES = ("semiactive.coordinator.service",)
CONNECTOR_MODULES = {
    "kafka": ("semiactive.node.connectors.kafka", "semiactive.node.connectors.kafka_sink"),
    "nats": ("semiactive.node.connectors.nats", "semiactive.node.connectors.nats_source"),
    "postgres": ("semiactive.node.connectors.postgres", "psycopg"),
}
COMMANDS = ("node", "coordinator")
READY = b"ready\n"


class OrdersError(ValueError):
    """The line on stdin is no order."""


@dataclass(frozen=True)
class Orders:
    argv: list[str]
    log: Path


def modules_for(config_path: str) -> list[str]:
    """The modules a process of this config may import, in import order; a
    config that no longer loads gets the common ones (the process it
    becomes then reports the error itself)."""
    modules = [*NODE_MODULES, *COORDINATOR_MODULES]
    try:
        cfg = config_mod.load(config_path).model
    except (OSError, config_mod.ConfigError):
        return modules
    kinds = {s.kind for s in cfg.sources} | {s.kind for s in cfg.sinks}
    for kind in sorted(kinds & CONNECTOR_MODULES.keys()):
        modules.extend(CONNECTOR_MODULES[kind])
    return modules


def preload(modules: list[str]) -> list[str]:
    """Import ``modules``; return those that failed (an optional client not
    installed: the process that needs it says so when it starts)."""
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def read_orders(stream: BinaryIO) -> Orders | None:
    """The next order, or None at end of input."""
    line = stream.readline(1 << 16)
    if not line:
        return None
    try:
        raw = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OrdersError(f"not JSON: {exc}") from None
    if not isinstance(raw, dict) or set(raw) != {"argv", "log"}:
        raise OrdersError("expected an object with argv and log")
    argv, log = raw["argv"], raw["log"]
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise OrdersError("argv must be a non-empty list of strings")
    if argv[0] not in COMMANDS:
        raise OrdersError(f"the fork server starts {' or '.join(COMMANDS)}, not {argv[0]!r}")
    if not isinstance(log, str) or not log:
        raise OrdersError("log must be a file name")
    return Orders(argv, Path(log))


def serve(orders_in: BinaryIO, answers: BinaryIO) -> Orders | None:
    """Answer ``ready``, then fork a process per order and answer its pid.

    Returns None in the server, at end of input; returns the order in the
    process forked for it, whose output then goes to the order's log (the
    caller runs its command line). Raises :class:`OrdersError` in the
    server for a malformed order."""
    # Objects made by the imports stay where they are: the forked
    # processes' collections do not touch (and so copy) their pages.
    gc.freeze()
    answers.write(READY)
    answers.flush()
    while (orders := read_orders(orders_in)) is not None:
        try:
            pid = _fork_detached()
        except OSError as exc:  # no memory or processes left: the launcher starts it cold
            answers.write(json.dumps({"error": str(exc)}).encode() + b"\n")
            answers.flush()
            continue
        if pid == 0:
            _become(orders)
            return orders
        answers.write(json.dumps({"pid": pid}).encode() + b"\n")
        answers.flush()
    return None


def _fork_detached() -> int:
    """Fork twice; return 0 in the grandchild, its pid in the server.

    The grandchild leads a new session before its pid is known here, and
    the child between is reaped before this returns, so that by then the
    grandchild's parent is the subreaper (the launcher) and a signal to
    its process group reaches it."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            between = os.getpid()
            if os.fork() == 0:
                os.close(read_end)
                os.setsid()
                os.write(write_end, str(os.getpid()).encode())
                os.close(write_end)
                # A node takes a parent other than the launcher for the
                # launcher's death: wait for the adoption.
                while os.getppid() == between:
                    time.sleep(0.001)
                return 0
        except BaseException:
            os._exit(1)
        os._exit(0)
    os.close(write_end)
    try:
        reported = b""
        while chunk := os.read(read_end, 32):
            reported += chunk
    finally:
        os.close(read_end)
        os.waitpid(child, 0)
    if not reported.isdigit():
        raise OSError("the forked process died before it reported its pid")
    return int(reported)


def _become(orders: Orders) -> None:
    """Point stdout and stderr at the order's log (appended to: a restarted
    process's log goes on after its predecessor's) and stdin at nothing."""
    fd = os.open(orders.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for target in (1, 2):
        os.dup2(fd, target)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
