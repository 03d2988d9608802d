"""A node interpreter started before it is needed (``semiactive warm``).

Most of what a restarted process costs is Python importing the daemon,
gRPC and a broker or database client: about 1.3 s of the 1.5-s output gap
after a source or sink was killed (docs/connectors.md). ``cluster up``
keeps one such interpreter waiting with all of that imported; the next
process it restarts becomes it. Its orders are one line of JSON on stdin,
``{"argv": [...], "log": "..."}``: the ``semiactive`` command line to run
(``node ...``) and the log file its output goes to from then on. End of
input (the launcher gone) ends it.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from semiactive import config as config_mod

# What every node imports, then each connector's client by the kinds the
# config names (imported lazily by the daemon: only its users pay).
NODE_MODULES = ("uvloop", "semiactive.node.service.daemon", "semiactive.node.service.main")
CONNECTOR_MODULES = {
    "kafka": ("semiactive.node.connectors.kafka", "semiactive.node.connectors.kafka_sink"),
    "nats": ("semiactive.node.connectors.nats", "semiactive.node.connectors.nats_source"),
    "postgres": ("semiactive.node.connectors.postgres", "psycopg"),
}


class OrdersError(ValueError):
    """The line on stdin is no order (the launcher writes them; anything
    else is a bug or an intruder, and the process exits)."""


@dataclass(frozen=True)
class Orders:
    argv: list[str]
    log: Path


def modules_for(config_path: str) -> list[str]:
    """The modules a node of this config may import, in import order; a
    config that no longer loads gets the common ones (the process it
    becomes then reports the error itself)."""
    modules = list(NODE_MODULES)
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
    installed: the node that needs it says so when it starts)."""
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
    if argv[0] != "node":
        raise OrdersError(f"a warm interpreter becomes a node, not {argv[0]!r}")
    if not isinstance(log, str) or not log:
        raise OrdersError("log must be a file name")
    return Orders(argv, Path(log))


def become(orders: Orders) -> None:
    """Point stdout and stderr at the order's log (appended to: a restarted
    node's log goes on after its predecessor's) and stdin at nothing."""
    fd = os.open(orders.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for target in (1, 2):
        os.dup2(fd, target)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
