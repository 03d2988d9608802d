"""A source node goes on from the progress in its run directory only when
started with ``--resume`` (what ``cluster up`` does for a source it starts
again): a run directory kept from an earlier deployment must not make a new
source skip rows."""

from __future__ import annotations

from pathlib import Path

from semiactive import config, topology
from semiactive.node.service.daemon import NodeDaemon
from semiactive.node.service.roles.source_progress import SourceProgress
from tests.processes import chain_config, write_config


def _source(tmp_path: Path, resume: bool) -> NodeDaemon:
    path = write_config(tmp_path / "chain.yaml", chain_config(["REGISTER QUERY s1 AS SELECT * FROM s0"]))
    topo = topology.resolve(config.load(str(path)))
    addresses = {name: f"127.0.0.1:{7000 + i}" for i, name in enumerate(topo.nodes)}
    return NodeDaemon(topo, "node-0", addresses, run_dir=tmp_path / "run", resume=resume)


def test_a_source_resumes_only_when_told(tmp_path: Path) -> None:
    SourceProgress(tmp_path / "run", "node-0").save(500)
    (tmp_path / "run" / "sources" / "node-0.jsonl").write_text('{"ts": 0, "id": 0, "val": 1}\n' * 600)
    fresh = _source(tmp_path, resume=False)
    assert fresh.source is not None and fresh.source.log.first == 1 and fresh.source.emitted == 0
    assert (tmp_path / "run" / "sources" / "node-0.jsonl").read_text() == ""
    (tmp_path / "run" / "sources" / "node-0.jsonl").write_text('{"ts": 0, "id": 0, "val": 1}\n' * 600)
    resumed = _source(tmp_path, resume=True)
    assert resumed.source is not None and resumed.source.log.first == 501 and resumed.source.emitted == 500


def test_a_resumed_source_starts_on_the_run_s_recorded_t0_without_a_start(tmp_path: Path) -> None:
    """A container's restart policy starts it again and nobody sends Start:
    the t0 its predecessor recorded puts it back on the run's schedule."""
    SourceProgress(tmp_path / "run", "node-0").save(500, t0=1795900000.5)
    resumed = _source(tmp_path, resume=True)
    assert resumed.source is not None and resumed.source.started.is_set()
    assert resumed.source.t0 == 1795900000.5
    SourceProgress(tmp_path / "run", "node-0").path.write_text('{"freed": 500}')
    waiting = _source(tmp_path, resume=True)
    assert waiting.source is not None and not waiting.source.started.is_set()
    fresh = _source(tmp_path, resume=False)
    assert fresh.source is not None and not fresh.source.started.is_set()
