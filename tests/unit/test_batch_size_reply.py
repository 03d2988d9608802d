"""A node applies the coordinator's batch sizes (ReportReply.batch_sizes)
only to its own output edges and only within 1..2^31-1: a malformed or
hostile reply changes nothing else (node/service/daemon.py, apply_batch_sizes)."""

from __future__ import annotations

from pathlib import Path

from semiactive import config, topology
from semiactive.ha.output_log import UNBOUNDED
from semiactive.node.service.daemon import NodeDaemon

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "paper-chain-asas.yaml"
EDGE = "select-1->select-2"


async def test_only_sane_sizes_of_own_edges_are_applied() -> None:
    topo = topology.resolve(config.load(CONFIG))
    addresses = {name: f"127.0.0.1:{i}" for i, name in enumerate(topo.nodes, start=1)}
    node = NodeDaemon(topo, "node-1", addresses)
    assert node.replica is not None
    cursors = node.replica.replica.log.edges[EDGE]
    assert cursors.batch_size == 1  # initial_batch_size
    node.apply_batch_sizes({EDGE: 0, "nope->x": 50, "select-2->select-3": 7})
    assert cursors.batch_size == 1 and set(node.replica.replica.log.edges) == {EDGE}
    node.apply_batch_sizes({EDGE: 2**32 - 1})
    assert cursors.batch_size == 1
    node.apply_batch_sizes({EDGE: 250})
    assert cursors.batch_size == 250 < UNBOUNDED
    node.replica.stop()
