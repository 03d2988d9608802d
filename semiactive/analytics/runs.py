"""Finding the runs under the directories given to ``semiactive report``.

A campaign directory has a ``manifest.json`` with ``runs``; a run
directory has one with ``run``, or, written by hand or by an older
launcher, at least a ``telemetry/`` directory. Directories holding neither
are searched a few levels down, so ``runs/`` (many campaigns) works too.
What a run varied comes from its manifest's ``params`` (docs/telemetry.md);
which of its stages are protected, and how, from its configuration (read
as YAML, not validated: a report must not fail on a config that has moved
on since) or else from ``cluster.json``'s secondaries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from semiactive.errors import UserError

MANIFEST = "manifest.json"
TELEMETRY = "telemetry"
SEARCH_DEPTH = 4  # directories below a given one searched for runs
# Telemetry file kinds (``<kind>-<process>.jsonl``).
KINDS = ("edges", "nodes", "events", "tuning", "engine")
TIMELINES = 12  # runs outside a campaign that get a timeline, the first by directory


class ReportInputError(UserError):
    """A directory given to the report that does not exist or holds no run."""


@dataclass(frozen=True)
class StageInfo:
    """How one stage of a run is protected (``mode`` ``none`` if not)."""

    stage: str
    mode: str
    batch_size: int | None


@dataclass
class Run:
    """One run directory and what its manifests say about it."""

    path: Path
    kind: str
    campaign: str | None
    params: dict[str, Any]
    campaign_params: dict[str, Any]
    t0_unix: float | None
    config: str | None
    stages: list[StageInfo] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        """The key of every table: the run directory's absolute path."""
        return str(self.path)

    def files(self, kind: str) -> list[Path]:
        """This run's telemetry files of one kind (``engine`` records may
        also sit in the run directory itself)."""
        found = sorted((self.path / TELEMETRY).glob(f"{kind}-*.jsonl"))
        if kind == "engine":
            found += sorted(self.path.glob("engine-*.jsonl"))
        return [p for p in found if p.is_file()]

    def operator(self) -> str | None:
        """The operator the campaign labelled (``--tag operator=...``), else
        the stem of the campaign's configuration file."""
        tagged = self.params.get("operator") or self.campaign_params.get("operator")
        if tagged:
            return str(tagged)
        config = self.campaign_params.get("config")
        return Path(str(config)).stem if isinstance(config, str) and config else None

    def param(self, key: str) -> Any:
        """A run parameter, falling back to the campaign's (``duration``)."""
        value = self.params.get(key)
        return self.campaign_params.get(key) if value is None else value


def outside_campaigns(runs: list[Run]) -> list[Run]:
    """The runs that belong to no campaign, by directory: the first
    ``TIMELINES`` get a timeline."""
    return sorted((r for r in runs if r.campaign is None), key=lambda r: r.run_id)


def _json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def discover(paths: list[Path]) -> list[Run]:
    """Every run under ``paths``, each once, in a stable order. Raises
    :class:`ReportInputError` for a missing directory or when none holds
    a run with telemetry."""
    seen: dict[Path, Run] = {}
    for given in paths:
        if not given.is_dir():
            raise ReportInputError(f"{given}: no such directory")
        for run in _search(given.resolve(), None, SEARCH_DEPTH):
            seen.setdefault(run.path, run)
    runs = [r for r in seen.values() if any(r.files(kind) for kind in KINDS)]
    if not runs:
        where = ", ".join(str(p) for p in paths)
        raise ReportInputError(
            f"{where}: no telemetry found (no run directory with telemetry/*.jsonl of docs/telemetry.md)"
        )
    return sorted(runs, key=lambda r: r.run_id)


def _search(directory: Path, campaign: dict[str, Any] | None, depth: int) -> list[Run]:
    manifest = _json(directory / MANIFEST)
    if manifest is not None and "runs" in manifest:
        listed = [directory / str(name) for name in manifest.get("runs") or []]
        others = [d for d in sorted(directory.iterdir()) if d.is_dir() and (d / MANIFEST).exists()]
        return [_run(d, manifest) for d in dict.fromkeys(listed + others) if d.is_dir()]
    if manifest is not None or (directory / TELEMETRY).is_dir():
        return [_run(directory, campaign)]
    if depth <= 0:
        return []
    found: list[Run] = []
    for child in sorted(directory.iterdir()):
        if child.is_dir() and not child.is_symlink():
            found += _search(child, None, depth - 1)
    return found


def _run(directory: Path, campaign: dict[str, Any] | None) -> Run:
    manifest = _json(directory / MANIFEST) or {}
    if campaign is None:
        parent = _json(directory.parent / MANIFEST)
        campaign = parent if parent is not None and "runs" in parent else None
    cluster = _json(directory / "cluster.json") or {}
    t0 = cluster.get("t0_unix")
    config = cluster.get("config") or manifest.get("config")  # the launcher's is absolute
    return Run(
        path=directory,
        kind=str(manifest.get("kind") or (campaign or {}).get("kind") or "cluster"),
        campaign=manifest.get("campaign") or (campaign or {}).get("campaign"),
        params=dict(manifest.get("params") or {}),
        campaign_params=dict((campaign or {}).get("params") or {}),
        t0_unix=float(t0) if isinstance(t0, int | float) else None,
        config=str(config) if config else None,
        stages=_stages(directory, config, cluster),
    )


def _stages(directory: Path, config: Any, cluster: dict[str, Any]) -> list[StageInfo]:
    """The stages of the run's configuration and their HA mode; from
    ``cluster.json`` (a stage with a secondary is protected) when the
    configuration cannot be read."""
    loaded = None
    if isinstance(config, str) and config:
        path = Path(config)
        for candidate in (path, directory / path, directory.parent / path.name):
            try:
                loaded = yaml.safe_load(candidate.read_text())
                break
            except (OSError, yaml.YAMLError):
                continue
    if isinstance(loaded, dict) and isinstance(loaded.get("stages"), list):
        out = []
        for stage in loaded["stages"]:
            if not isinstance(stage, dict) or "name" not in stage:
                continue
            ha_value = stage.get("ha")
            ha: dict[str, Any] = ha_value if isinstance(ha_value, dict) else {}
            mode = str(ha.get("mode", "none"))
            size = {"as": 1, "sas": ha.get("batch_size", 100)}.get(mode)
            out.append(StageInfo(str(stage["name"]), mode, int(size) if isinstance(size, int) else None))
        return out
    protected = {
        p.get("stage")
        for p in cluster.get("processes") or []
        if isinstance(p, dict) and p.get("role") == "secondary"
    }
    return [StageInfo(str(s), "unknown", None) for s in sorted(x for x in protected if x)]
