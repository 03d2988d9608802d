"""Named failure scenarios on several chains, in the deterministic
simulation (the real node and coordinator code, ``semiactive.simulation``):
selections, a windowed aggregate, a join of two sources, and chains all
UB or all AS. Each must deliver exactly the failure-free output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from semiactive import config
from semiactive.simulation.cluster import Outcome, simulate
from semiactive.simulation.faults import Fault, FaultKind
from semiactive.topology import Topology, resolve
from tests.faults.harness import protected_chain

SELECTION = [
    "REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 100",
    "REGISTER QUERY s2 AS SELECT id, val * 2 AS v FROM s1 WHERE val % 3 != 0",
    "REGISTER QUERY s3 AS SELECT * FROM s2",
]
AGGREGATE = [
    "REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 100",
    "REGISTER QUERY s2 AS ISTREAM(SELECT SUM(val) AS total, COUNT(*) AS n FROM s1 [Rows 20 Slide 3])",
    "REGISTER QUERY s3 AS SELECT * FROM s2 WHERE n > 0",
]
JOIN = [
    "REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 100",
    "REGISTER QUERY s2 AS ISTREAM(SELECT s1.id, s1.val, t0.val AS v2 FROM s1 [Rows 5], t0 [Range 3] "
    "WHERE s1.val % 7 = t0.val % 7)",
    "REGISTER QUERY s3 AS SELECT * FROM s2",
]
CHAINS: dict[str, tuple[list[str], list[tuple[str, int]]]] = {
    "selection": (SELECTION, [("sas", 5), ("sas", 10), ("as", 1)]),
    "aggregate": (AGGREGATE, [("sas", 5), ("sas", 10), ("as", 1)]),
    "join": (JOIN, [("sas", 4), ("sas", 6), ("ub", 1)]),
    "ub": (AGGREGATE, [("ub", 1), ("ub", 1), ("ub", 1)]),
    "as": (AGGREGATE, [("as", 1), ("as", 1), ("as", 1)]),
}


def K(at: float, kind: FaultKind, target: str, peer: str | None = None) -> Fault:
    return Fault(at, kind, target, peer)


SCENARIOS: dict[str, list[Fault]] = {
    "kill the middle primary": [K(0.7, FaultKind.KILL, "node-2")],
    "kill the first stage (the source's downstream)": [K(0.4, FaultKind.KILL, "node-1")],
    "kill the last stage": [K(0.9, FaultKind.KILL, "node-3")],
    "kill a secondary": [K(0.6, FaultKind.KILL, "sec-2")],
    "kill the upstream of a protected stage, then the stage during its recovery": [
        K(0.6, FaultKind.KILL, "node-1"),
        K(0.64, FaultKind.KILL, "node-2"),
    ],
    "freeze a primary past detection, then resume it": [
        K(0.5, FaultKind.FREEZE, "node-2"),
        K(1.5, FaultKind.THAW, "node-2"),
    ],
    "kill a primary, then its replacement after re-protection": [
        K(0.5, FaultKind.KILL, "node-2"),
        K(1.0, FaultKind.RESTART, "node-2"),
        K(1.8, FaultKind.KILL, "sec-2"),
    ],
    "cut a primary from its secondary, then heal": [
        K(0.5, FaultKind.CUT, "node-2", "sec-2"),
        K(1.2, FaultKind.HEAL, "node-2", "sec-2"),
    ],
    "stall a consumer's link to its producer": [
        K(0.5, FaultKind.STALL, "node-1", "node-2"),
        K(1.0, FaultKind.HEAL, "node-1", "node-2"),
    ],
}


def chain(tmp: Path, queries: list[str], modes: list[tuple[str, int]], join: bool) -> Topology:
    """The failure-injection suite's chain, slowed and with short timers:
    100 rows/s, heartbeats and acknowledgements every 50 ms."""
    path = protected_chain(
        tmp,
        queries,
        second_source=join,
        modes=modes,
        rate=100,
        second_rate=50,
        heartbeat_ms=50,
        ack_interval_ms=50,
    )
    return resolve(config.load(path))


@pytest.fixture(scope="module")
def chains(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Topology]:
    return {
        kind: chain(tmp_path_factory.mktemp(kind), queries, modes, kind == "join")
        for kind, (queries, modes) in CHAINS.items()
    }


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("kind", list(CHAINS))
def test_scenarios_deliver_the_failure_free_output(
    chains: dict[str, Topology], kind: str, scenario: str
) -> None:
    outcome = simulate(chains[kind], 1, SCENARIOS[scenario])
    assert outcome.ok, outcome.summary()


def _backup_bytes(tmp: Path, topology: Topology) -> dict[str, int]:
    outcome: Outcome = simulate(topology, 1, [], keep_dir=tmp)
    assert outcome.ok, outcome.summary()
    summary = json.loads((tmp / "telemetry" / "node-1.summary.json").read_text())
    return {b["channel"]: b["bytes"] for b in summary["bytes"] if b["edge"] == "stage-1->stage-2"}


def test_backup_volume_per_mode(chains: dict[str, Topology], tmp_path: Path) -> None:
    """UB ships no backups, AS ships every row, SAS (B = 10) less."""
    ub = _backup_bytes(tmp_path / "ub", chains["ub"])
    as_ = _backup_bytes(tmp_path / "as", chains["as"])
    sas = _backup_bytes(tmp_path / "sas", chains["aggregate"])
    assert ub.get("backup", 0) == 0
    assert as_["backup"] >= 0.9 * as_["data"]
    assert 0 < sas["backup"] < as_["backup"]


def test_a_spare_becomes_the_secondary_of_a_stage_whose_secondary_died(
    chains: dict[str, Topology], tmp_path: Path
) -> None:
    outcome = simulate(chains["aggregate"], 4, [K(0.3, FaultKind.KILL, "sec-2")], keep_dir=tmp_path)
    assert outcome.ok, outcome.summary()
    events = [json.loads(line) for line in (tmp_path / "telemetry" / "events-coordinator.jsonl").open()]
    assigned = [e for e in events if e["event"] == "assigned" and e["stage"] == "stage-2"]
    assert assigned and assigned[0]["secondary"].startswith("spare-")
