"""The ``network:`` block (the placement paper): located errors, the sites' latencies,
and the coordinator's pricing and re-placement decision from reported byte
counters (coordinator/replacement.py), without sockets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from semiactive.coordinator.control import WARMUP_S
from semiactive.ha.routing import initial_views
from semiactive.runtime.events import EventLog
from semiactive.runtime.messages import view_to_pb
from semiactive.wire import control_pb2 as cpb
from tests.processes import ROOT
from tests.unit.test_config import BASE, _check, _load

TOPOLOGY = str(ROOT / "examples" / "networks" / "two-coasts.json")
SITES = "    node-0: east\n    node-1: west\n    sink: east\n"


def network(sites: str = SITES, extra: str = "", topology: str = TOPOLOGY) -> str:
    return BASE + f"network:\n  topology: {topology}\n  sites:\n{sites}{extra}"


def test_sites_give_latencies(tmp_path: Path) -> None:
    top = _load(tmp_path, network())
    assert top.latency_s("node-0", "node-1") == pytest.approx(0.040)
    assert top.latency_s("node-0", "sink") == 0.0
    assert _load(tmp_path, BASE).latency_s("node-0", "node-1") == 0.0


def test_a_site_is_a_node_name_or_id(tmp_path: Path) -> None:
    topology = tmp_path / "ids.json"
    nodes = [{"id": k, "name": name} for k, name in enumerate(("east", "hub", "west"))]
    edges = [{"source": 0, "target": 1, "latency_ms": 5}, {"source": 1, "target": 2, "latency_ms": 35}]
    topology.write_text(json.dumps({"nodes": nodes, "edges": edges}))
    top = _load(tmp_path, network(sites=SITES.replace("node-1: west", "node-1: 2"), topology=str(topology)))
    assert top.network is not None and top.network.sites["node-1"] == "west"
    assert top.latency_s("node-0", "node-1") == pytest.approx(0.040)


def test_network_errors_are_located(tmp_path: Path) -> None:
    _check(
        tmp_path,
        network(sites=SITES + "    ghost: east\n"),
        "ghost: east",
        "network.sites.ghost",
        "no node 'ghost'",
    )
    _check(tmp_path, network(sites=SITES.replace("node-1: west", "node-1: mars")), "node-1: mars",
           "network.sites.node-1", "'mars' is neither the name nor the id of a node")  # fmt: skip
    _check(tmp_path, network(sites="    node-0: east\n    sink: east\n"), "sites:", "network.sites",
           "no site for node-1")  # fmt: skip
    _check(tmp_path, network(topology="topohub:topozoo/Nowhere"), "topology: topohub", "network.topology",
           "topohub has no topology")  # fmt: skip
    _check(tmp_path, network(extra="  min_gain: 1.5\n"), "min_gain", "network.min_gain", "less than 1")


class Reports:
    """Reports as the nodes send them: cumulative data bytes per output edge."""

    def __init__(self, tmp_path: Path, text: str) -> None:
        from semiactive.coordinator.control import Coordinator

        self.topology = _load(tmp_path, text)
        names = list(self.topology.nodes)
        addresses = {n: f"127.0.0.1:{i}" for i, n in enumerate(names, start=2000)}
        self.coordinator = Coordinator(
            self.topology, addresses, EventLog("coordinator", tmp_path / "run"), 0.0
        )
        self.now = 0.0
        self.sent: dict[str, int] = {}

    def round(self, rates: dict[str, int], roles: dict[str, tuple[str, str]]) -> None:
        self.now += 0.1
        for node, (role, stage) in roles.items():
            status = cpb.NodeStatus(name=node, role=role, stage=stage)
            status.views.extend(view_to_pb(v) for v in initial_views(self.topology))
            for edge in self.topology.edges:
                if edge.producer == stage and role in ("primary", "source"):
                    self.sent[edge.id] = self.sent.get(edge.id, 0) + rates.get(edge.id, 0) // 10
                    status.outputs.add(edge=edge.id, data_bytes=self.sent[edge.id])
            self.coordinator.on_report(status, "", self.now)
        self.coordinator.step(self.now)


PROTECTED = network(
    sites=SITES + "    sec-1: west\n    spare-east: east\n",
    extra="  replace_every_s: 1\n  min_gain: 0.2\n",
).replace("    node: node-1\n", "    node: node-1\n    ha: {mode: sas, secondary: sec-1}\n") + (
    "spares: [spare-east]\n"
)
ROLES = {
    "node-0": ("source", "node-0"),
    "node-1": ("primary", "stage-1"),
    "sec-1": ("secondary", "stage-1"),
    "sink": ("sink", "sink"),
    "spare-east": ("spare", ""),
}


def test_usage_is_rate_times_latency_and_the_stage_moves_where_it_is_cheaper(tmp_path: Path) -> None:
    reports = Reports(tmp_path, PROTECTED)
    rates = {"node-0->stage-1": 10_000, "stage-1->sink": 2_000}
    for _ in range(int((WARMUP_S + 0.5) / 0.1)):
        reports.round(rates, ROLES)
    monitor = reports.coordinator.monitor
    assert monitor is not None
    assert monitor.rates["node-0->stage-1"] == pytest.approx(10_000, rel=0.02)
    # (10 kB/s + 2 kB/s) x 40 ms
    assert monitor.usage_bytes(reports.coordinator) == pytest.approx(480, rel=0.02)
    replacer = reports.coordinator.replacer
    assert replacer is not None
    decision = replacer.decide(reports.now)
    assert decision is not None and (decision.stage, decision.target) == ("stage-1", "spare-east")
    assert decision.usage_now == pytest.approx(480, rel=0.02) and decision.usage_best == 0
    for _ in range(12):
        reports.round(rates, ROLES)
    assert reports.coordinator.views["stage-1"].secondary == "spare-east"  # the migration started
    assert "stage-1" in reports.coordinator.migrations.active


def test_no_decision_until_every_edge_has_a_rate(tmp_path: Path) -> None:
    """The stage's output edge unmeasured would be priced at nothing, and
    the stage moved toward its input alone (seen at start-up: the edges
    measured first decided)."""
    reports = Reports(tmp_path, PROTECTED.replace("    sink: east\n", "    sink: west\n"))
    rates = {"node-0->stage-1": 10_000, "stage-1->sink": 9_000}
    without_stage = {n: r for n, r in ROLES.items() if n != "node-1"}
    for _ in range(12):
        reports.round(rates, without_stage)
    replacer = reports.coordinator.replacer
    assert replacer is not None
    assert replacer.decide(reports.now) is None
    for _ in range(12):
        reports.round(rates, ROLES)
    decision = replacer.decide(reports.now)
    assert decision is not None and decision.stage is None


def test_no_move_below_the_margin(tmp_path: Path) -> None:
    # The sink sits west too: moving east would save the input side only
    # to pay the output side; with a small output the move is still worth it,
    # with a large one it is not.
    text = PROTECTED.replace("    sink: east\n", "    sink: west\n")
    reports = Reports(tmp_path, text)
    rates = {"node-0->stage-1": 10_000, "stage-1->sink": 9_000}
    for _ in range(12):
        reports.round(rates, ROLES)
    replacer = reports.coordinator.replacer
    assert replacer is not None
    decision = replacer.decide(reports.now)
    assert decision is not None and decision.stage is None  # 10 x 40 vs 9 x 40: gain 10% < 20%
    assert not reports.coordinator.migrations.active


def test_an_edge_is_measured_from_its_first_bytes(tmp_path: Path) -> None:
    """Nodes report before the sources start: zeros before an edge's
    first bytes would halve its rate (a decision 0.4 s into a run priced
    the replacement chain at 580 bytes for about 1,300), and a silent
    edge is measured at 0 only over a whole window."""
    reports = Reports(tmp_path, PROTECTED)
    for _ in range(15):
        reports.round({}, ROLES)  # 1.5 s of zeros: less than the 2-s window
    monitor = reports.coordinator.monitor
    assert monitor is not None and not monitor.rates
    rates = {"node-0->stage-1": 10_000, "stage-1->sink": 2_000}
    for _ in range(7):
        reports.round(rates, ROLES)
    assert monitor.rates["node-0->stage-1"] == pytest.approx(10_000, rel=0.2)
    (tmp_path / "quiet").mkdir()
    quiet = Reports(tmp_path / "quiet", PROTECTED)
    for _ in range(21):
        quiet.round({}, ROLES)
    assert quiet.coordinator.monitor is not None and quiet.coordinator.monitor.rates["stage-1->sink"] == 0


def test_after_a_migration_the_next_decision_waits_for_rates_measured_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window that holds a migration counts the new primary's catch-up:
    person tracking's stage, moved on such rates, went New York -> Atlanta
    -> New York in its first 4 s. The next decision waits for a whole
    ``rate_window_s`` (2 s) after the migration, plus a heartbeat (0.25 s)."""
    reports = Reports(tmp_path, PROTECTED)
    replacer = reports.coordinator.replacer
    assert replacer is not None
    decided: list[float] = []
    monkeypatch.setattr(replacer, "decide", decided.append)
    active: dict[str, Any] = reports.coordinator.migrations.active  # type: ignore[assignment]
    active["stage-1"] = "under way"
    replacer.step(10.0)
    del active["stage-1"]
    replacer.step(11.0)
    replacer.step(12.2)
    assert decided == []
    replacer.step(12.3)
    assert decided == [12.3]


def test_reprotection_prefers_the_spare_near_the_stages_inputs(tmp_path: Path) -> None:
    # Two free spares: "a-far" comes first by name but stands on the west
    # coast; the stage's inputs come from the east: "z-near" is chosen.
    text = network(
        sites=SITES.replace("node-1: west", "node-1: east")
        + "    sec-1: east\n    a-far: west\n    z-near: east\n",
    ).replace("    node: node-1\n", "    node: node-1\n    ha: {mode: sas, secondary: sec-1}\n") + (
        "spares: [a-far, z-near]\n"
    )
    reports = Reports(tmp_path, text)
    roles = dict(ROLES, **{"a-far": ("spare", ""), "z-near": ("spare", "")})
    del roles["spare-east"]
    rates = {"node-0->stage-1": 10_000, "stage-1->sink": 2_000}
    for _ in range(int((WARMUP_S + 0.5) / 0.1)):
        reports.round(rates, roles)
    del roles["sec-1"]  # dies: no more reports, its port refuses
    for _ in range(8):
        reports.round(rates, roles)
        for name in reports.coordinator.to_probe(reports.now):
            reports.coordinator.probed(name, False)
    assert reports.coordinator.views["stage-1"].secondary == "z-near"
