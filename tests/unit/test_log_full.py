"""A producer whose output log stays full says why, once: a consumer whose
state keeps old input forever pins its Level-1 cut, so nothing can be freed
(the stall Linear Road's unbounded balances hit). Without this the run
only "did not drain"."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from semiactive import config
from semiactive.ha.output_log import OutputLog
from semiactive.ha.views import ViewTable
from semiactive.node.service import outbound as outbound_module
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.outbound import Outbound
from semiactive.runtime.events import EventLog
from semiactive.topology import resolve
from tests.processes import write_config


async def test_a_full_log_is_reported_once_with_the_consumer_that_pins_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = {
        "sources": [{"name": "node-0", "stream": "s0"}],
        "stages": [{"name": "keep", "node": "node-1", "query": "REGISTER QUERY s1 AS SELECT * FROM s0"}],
        "sinks": [{"name": "sink", "input": "s1"}],
    }
    topology = resolve(config.load(write_config(tmp_path / "c.yaml", cluster)))
    stage = topology.stages["node-0"]
    log_ = OutputLog(capacity=64)
    log_.add_edge("node-0->keep")
    log_.append([(t, t, 1, t, 0) for t in range(1, 65)], 64)
    assert log_.full
    monkeypatch.setattr(outbound_module, "STALL_REPORT_S", 0.05)
    events = EventLog("node-0", tmp_path)
    out = Outbound(
        "node-0", stage, topology, {}, log_, ViewTable(), NodeMetrics("node-0", "node-0", "source"),
        epoch=lambda: 0, on_refused=lambda sender, details: None, events=events,
    )  # fmt: skip
    with (
        caplog.at_level(logging.WARNING, logger="semiactive.node.service.outbound"),
        pytest.raises(TimeoutError),
    ):
        await asyncio.wait_for(out.wait_room(), 0.5)  # still full: it keeps waiting
    records = [
        json.loads(line) for line in (tmp_path / "telemetry" / "events-node-0.jsonl").read_text().splitlines()
    ]
    full = [r for r in records if r["event"] == "log_full"]
    assert len(full) == 1, full
    assert full[0]["pinned_by"] == ["node-0->keep"] and full[0]["needed_from"] == 1
    assert full[0]["retained"] == full[0]["capacity"] == 64
    assert "output log full (64 rows, queue_rows 64)" in caplog.text and "node-0->keep" in caplog.text
