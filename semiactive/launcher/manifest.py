"""What a run or a campaign was: ``manifest.json`` in its directory
(docs/telemetry.md), so that the report job can group runs by the
parameters a campaign varied without parsing directory names."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from semiactive.config import ConfigError
from semiactive.runtime.atomic_file import write_json

MANIFEST = "manifest.json"


def write_run(
    run_dir: Path, kind: str, config: str, params: dict[str, Any], campaign: str | None = None
) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(
        run_dir / MANIFEST,
        {
            "run": run_dir.name,
            "campaign": campaign,
            "kind": kind,
            "created_unix": time.time(),
            "config": config,
            "params": params,
        },
    )


class Campaign:
    """A campaign directory whose manifest lists its runs so far: rewritten
    after each run, so an interrupted campaign still describes what it has."""

    def __init__(
        self, directory: Path, kind: str, params: dict[str, Any], tags: dict[str, str] | None = None
    ) -> None:
        """``params``: the campaign's arguments; ``tags``: labels every run's
        params carry too (``operator=aggregate``)."""
        self.directory = directory
        self.kind = kind
        self.tags = tags or {}
        self.params = {**params, **self.tags}
        self.created = time.time()
        self.runs: list[str] = []
        directory.mkdir(parents=True, exist_ok=True)
        self._write()

    def add(self, run_dir: Path, config: str, params: dict[str, Any]) -> None:
        """Record a finished run (its directory exists)."""
        write_run(run_dir, self.kind, config, {**self.tags, **params}, campaign=self.directory.name)
        self.runs.append(run_dir.name)
        self._write()

    def _write(self) -> None:
        write_json(
            self.directory / MANIFEST,
            {
                "campaign": self.directory.name,
                "kind": self.kind,
                "created_unix": self.created,
                "params": self.params,
                "runs": self.runs,
            },
        )


def parse_tags(tags: list[str]) -> dict[str, str]:
    """``--tag KEY=VALUE`` arguments: labels a campaign adds to every run's
    params (``operator=aggregate``), for the report's grouping."""
    out = {}
    for tag in tags:
        key, sep, value = tag.partition("=")
        if not sep or not key.isidentifier():
            raise ConfigError(f"--tag {tag!r}: expected KEY=VALUE with KEY a name")
        out[key] = value
    return out
