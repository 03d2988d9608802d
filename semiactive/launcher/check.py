"""``semiactive cluster check``: everything ``cluster up`` refuses before it
starts anything, found without starting anything.

A configuration is valid when it loads (:mod:`semiactive.config`), resolves
(:mod:`semiactive.topology`: names, streams, CQL, placement) and every file
source's data reads (:func:`check_source_files`): a ``path`` that does not
exist or a row that does not fit its schema (``qty=lots`` for an integer)
is a located configuration error, as ``cluster up`` reports it.
"""

from __future__ import annotations

from pathlib import Path

from semiactive import config as config_mod
from semiactive import topology as topology_mod
from semiactive.node.connectors.replay_clock import ReplayClock
from semiactive.node.connectors.sources import SourceDataError, read_rows
from semiactive.node.cql import plan


def check_source_files(loaded: config_mod.LoadedConfig, topology: topology_mod.Topology) -> dict[str, float]:
    """Read every file source's data once: a bad file is a
    :class:`~semiactive.config.ConfigError` at the source's ``path`` naming
    the data file and line, not a run that emits nothing (the source would
    only log it). Returns each file source's replay length: seconds from
    the run's start to its last row, at its speed."""
    replay_s: dict[str, float] = {}
    for i, src in enumerate(topology.config.sources):
        stage = topology.stages[src.name]
        if stage.source is None or stage.source.kind != "file" or stage.schema is None:
            continue
        assert stage.source.path is not None
        first = last = None
        try:
            for row in read_rows(stage.source.path, stage.schema, plan.Kind.STREAM):
                first = row[0] if first is None else first
                last = row[0]
        except SourceDataError as exc:
            raise loaded.error(str(exc), "sources", i, "path") from None
        replay = ReplayClock(src.speed, [(st.from_s * 1000, st.speed) for st in src.speed_steps])
        span = 0 if first is None or last is None else last - first
        replay_s[src.name] = replay.wall_ms(span) / 1000
    return replay_s


def check_config(path: str | Path) -> str:
    """What ``cluster check`` prints for a valid configuration (its stages
    and edges); a :class:`~semiactive.config.ConfigError` otherwise."""
    loaded = config_mod.load(path)
    topology = topology_mod.resolve(loaded)
    check_source_files(loaded, topology)
    return topology_mod.describe(topology)
