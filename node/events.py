"""Telemetry events of one node (failure detected, takeover, recovered,
fenced, resync, ...) as JSON Lines in ``<run-dir>/telemetry/events-<node>.jsonl``,
one file per node so concurrent writers never interleave. The launcher and
the experiment commands read them to report detection and recovery times;
the report job aggregates them (docs/telemetry.md). Observers (the
Prometheus metrics) see every event as it is written."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from node import clock

log = logging.getLogger(__name__)


class EventLog:
    def __init__(self, node: str, run_dir: Path | None) -> None:
        self.node = node
        self.path = run_dir / "telemetry" / f"events-{node}.jsonl" if run_dir is not None else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.observers: list[Callable[[dict[str, Any]], None]] = []

    def emit(self, event: str, **fields: Any) -> None:
        record = {"t": clock.wall(), "node": self.node, "event": event, **fields}
        log.info("event %s %s", event, {k: v for k, v in fields.items()})
        if self.path is not None:
            with self.path.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
        for observe in self.observers:
            observe(record)
