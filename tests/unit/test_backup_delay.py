"""``backup_max_delay_ms``: a partial backup batch ships after that long.

Under SAS a producer ships backups to the consumer's secondary in batches
of B rows (Algorithm 1). On a sparse edge of a multi-input stage the
secondary then waits for B of its rows, and the watermark they carry,
before it can process any other input: in Linear Road the expenditure
queries' edge (about 2 rows/s, B = 100) stopped the secondary for up to
50 s, and its catch-up bursts took the cores its primary needed."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from semiactive import config
from semiactive.ha.output_log import OutputLog
from semiactive.ha.views import StageView, ViewTable
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.outbound import Outbound
from semiactive.simulation.memory_network import Fabric
from semiactive.simulation.virtual_loop import VirtualLoop
from semiactive.topology import resolve
from semiactive.wire import dataplane_pb2 as pb
from tests.processes import write_config
from tests.waiting import on_virtual_clock

EDGE = "src->keep"


def _outbound(tmp_path: Path, delay_ms: float, mode: str = "sas") -> Outbound:
    cluster = {
        "insecure": True,
        "backup_max_delay_ms": delay_ms,
        "sources": [{"name": "src", "stream": "s0"}],
        "stages": [
            {
                "name": "keep",
                "node": "node-1",
                "query": "REGISTER QUERY s1 AS SELECT * FROM s0",
                "ha": {"mode": mode, "secondary": "node-2", "batch_size": 100},
            }
        ],
        "sinks": [{"name": "sink", "input": "s1"}],
    }
    topology = resolve(config.load(write_config(tmp_path / "c.yaml", cluster)))
    log_ = OutputLog(capacity=1000)
    log_.add_edge(EDGE)
    log_.edges[EDGE].batch_size = 100
    # Nothing listens there: the senders retry, and the test looks only at
    # what the log ships to the backup channel. On the simulation's network
    # and virtual clock: the delays pass at once.
    addresses = {name: f"{name}:9" for name in topology.nodes}
    fabric = Fabric(_loop(), random.Random(1))
    views = ViewTable([StageView("keep", 0, 1, "node-1", "node-2" if mode != "none" else None)])
    out = Outbound(
        "src", topology.stages["src"], topology, addresses, log_, views,
        NodeMetrics("src", "src", "source"), epoch=lambda: 0, on_refused=lambda sender, details: None,
        network=fabric.network("src", "src#1"),
    )  # fmt: skip
    out.reconcile()
    return out


def _loop() -> VirtualLoop:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualLoop)
    return loop


@on_virtual_clock
async def test_a_partial_backup_batch_ships_after_the_delay(tmp_path: Path) -> None:
    out = _outbound(tmp_path, delay_ms=50)
    try:
        assert (EDGE, pb.BACKUP) in out.senders
        out.log.append([(t, t, 1, t, 0) for t in range(1, 4)], 3)
        out.appended()
        assert out.log.unsent(EDGE) == 3  # fewer than B: held
        await asyncio.sleep(0.045)
        assert out.log.unsent(EDGE) == 3  # held until the delay is up
        await asyncio.sleep(0.01)
        assert out.log.unsent(EDGE) == 0 and out.log.edges[EDGE].batches == 1
        out.log.append([(4, 4, 1, 4, 0)], 4)
        out.appended()
        await asyncio.sleep(0.2)
        assert out.log.unsent(EDGE) == 0 and out.log.edges[EDGE].batches == 2  # armed again
    finally:
        out.stop()


@on_virtual_clock
async def test_without_the_delay_a_partial_batch_waits_for_b_rows(tmp_path: Path) -> None:
    out = _outbound(tmp_path, delay_ms=0)
    try:
        out.log.append([(t, t, 1, t, 0) for t in range(1, 4)], 3)
        out.appended()
        await asyncio.sleep(60)  # a virtual minute: far past any delay
        assert out.log.unsent(EDGE) == 3 and out.log.edges[EDGE].batches == 0
    finally:
        out.stop()


@on_virtual_clock
async def test_an_edge_without_a_backup_channel_ships_nothing(tmp_path: Path) -> None:
    out = _outbound(tmp_path, delay_ms=50, mode="none")
    try:
        assert (EDGE, pb.BACKUP) not in out.senders
        out.log.append([(t, t, 1, t, 0) for t in range(1, 4)], 3)
        out.appended()
        await asyncio.sleep(60)  # a virtual minute: far past any delay
        assert out.log.edges[EDGE].batches == 0 and not out._backup_due
    finally:
        out.stop()
