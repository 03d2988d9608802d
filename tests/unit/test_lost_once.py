"""A producer reports rows a receiver needed but its log had freed once
per range: the receiver refuses what follows the gap and comes back asking
for the same seqs at every reconnection, which used to count the loss again
each time."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from semiactive import config, topology
from semiactive.node.service.daemon import NodeDaemon
from tests.processes import chain_config, write_config


def test_a_lost_range_is_counted_and_reported_once(tmp_path: Path) -> None:
    path = write_config(tmp_path / "chain.yaml", chain_config(["REGISTER QUERY s1 AS SELECT * FROM s0"]))
    topo = topology.resolve(config.load(str(path)))
    addresses = {name: f"127.0.0.1:{7000 + i}" for i, name in enumerate(topo.nodes)}
    daemon = NodeDaemon(topo, "node-0", addresses, run_dir=tmp_path / "run")
    assert daemon.source is not None
    outbound = daemon.source.outbound
    edge = next(iter(daemon.source.log.edges))
    sender = SimpleNamespace(edge=edge, target="node-1")
    for _ in range(3):  # the same request at three reconnections
        outbound._lost(sender, 85, 99)  # type: ignore[arg-type]
    outbound._lost(sender, 85, 120)  # type: ignore[arg-type]  # freed further meanwhile
    counted = daemon.metrics.rows_lost.labels(edge)._value.get()
    daemon.events.close()
    lines = (tmp_path / "run" / "telemetry").glob("events-*.jsonl")
    lost = [
        e for p in lines for e in map(json.loads, p.read_text().splitlines()) if e["event"] == "rows_lost"
    ]
    assert counted == 36  # 85..120
    assert [(e["first"], e["last"]) for e in lost] == [(85, 99), (100, 120)]
