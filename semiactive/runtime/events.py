"""A process's telemetry files in ``<run-dir>/telemetry/`` (docs/telemetry.md):
its events (failure detected, takeover, recovered, fenced, ...) in
``events-<process>.jsonl`` and its periodic samples in ``<kind>-<process>.jsonl``,
one file per process so concurrent writers never interleave. Every line is
written whole and flushed, so a killed process leaves all it wrote. The
launcher and the experiment commands read the events to report detection and
recovery times; the report job aggregates everything. Observers (the
Prometheus metrics) see every event as it is written."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from semiactive.runtime import clock

log = logging.getLogger(__name__)


class EventLog:
    def __init__(self, node: str, run_dir: Path | None) -> None:
        self.node = node
        self.directory = run_dir / "telemetry" if run_dir is not None else None
        self.path = self.directory / f"events-{node}.jsonl" if self.directory is not None else None
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
        self.observers: list[Callable[[dict[str, Any]], None]] = []
        self._files: dict[str, IO[str]] = {}

    def emit(self, event: str, at: float | None = None, **fields: Any) -> None:
        """``at``: when it happened (wall clock), if not now."""
        record = {"t": clock.wall() if at is None else at, "node": self.node, "event": event, **fields}
        log.info("event %s %s", event, {k: v for k, v in fields.items()})
        self.append("events", [record])
        for observe in self.observers:
            observe(record)

    def append(self, kind: str, records: Iterable[dict[str, Any]]) -> None:
        """Append records to ``<kind>-<process>.jsonl`` (nothing without a run directory)."""
        if self.directory is None:
            return
        handle = self._files.get(kind)
        if handle is None:
            handle = self._files[kind] = (self.directory / f"{kind}-{self.node}.jsonl").open("a")
        text = "".join(json.dumps(r) + "\n" for r in records)
        if text:
            handle.write(text)
            handle.flush()

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()
