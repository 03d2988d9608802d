"""The real node and coordinator code under deterministic simulation.

Every node daemon, sender, role, failure detector, takeover and the
coordinator run in one process on virtual time over in-memory gRPC
(``semiactive.simulation``), struck by seeded fault schedules: kills (restarted
as spares), freezes, cut, stalled and slow links, the coordinator's death.
Each run must deliver exactly the reference output, without a hang, an
error exit, an exception in a gRPC handler, or a loss event.

``SEMIACTIVE_SIM_SEEDS`` sets how many seeds the campaign runs (default
64 in two processes, about 35 s on the 2-core CI machine, where 160 took
82 s); ``semiactive simulate --seeds 5000`` runs a long one. A failure
prints the command that replays it exactly.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from semiactive import config
from semiactive.coordinator.control import Coordinator, Liveness
from semiactive.ha.replica import capture_now
from semiactive.ha.resync import StateBytes
from semiactive.ha.views import StageView
from semiactive.node.engine.engine import Engine
from semiactive.simulation.campaign import replay_command, run_campaign, run_seed
from semiactive.simulation.cluster import simulate
from semiactive.simulation.faults import Fault, FaultKind
from semiactive.topology import Topology, resolve

# The campaign runs its seeds in two processes of its own.
pytestmark = pytest.mark.slow

CONFIG = "examples/sim-chain.yaml"
PARTITIONED = "examples/sim-partitioned.yaml"
SEEDS = int(os.environ.get("SEMIACTIVE_SIM_SEEDS", "64"))
PARTITIONED_SEEDS = max(1, SEEDS // 10)
WORKERS = 2  # the CI machine's cores; nothing else runs meanwhile
FAULTS = 3
DURATION_S = 2.0


@pytest.fixture(scope="module")
def topology() -> Topology:
    return resolve(config.load(Path(__file__).parents[2] / CONFIG))


def test_seeded_fault_schedules_deliver_exactly_the_reference(topology: Topology) -> None:
    result = run_campaign(
        Path(__file__).parents[2] / CONFIG,
        range(SEEDS),
        faults=FAULTS,
        duration_s=DURATION_S,
        workers=WORKERS,
    )
    print(
        f"{result.runs} schedules in {result.wall_s:.1f} s ({result.runs_per_s:.1f}/s), "
        f"{result.virtual_s:.0f} virtual s, {result.delivered:,} rows delivered"
    )
    failures = [
        f"{o.summary()}\n  replay: {replay_command(CONFIG, o.seed, FAULTS, DURATION_S)}"
        for o in result.failures
    ]
    assert not failures, "\n".join(failures)
    assert result.delivered > 0


def test_partitioned_stages_under_fault_schedules_deliver_exactly_the_reference() -> None:
    """Two partitioned stages (by key with SAS, round-robin with AS, merged
    by the sink): every partition a stage of its own to kills, freezes and
    cut links; the sink equals the reference that routes and merges."""
    path = Path(__file__).parents[2] / PARTITIONED
    result = run_campaign(
        path, range(PARTITIONED_SEEDS), faults=FAULTS, duration_s=DURATION_S, workers=WORKERS
    )
    failures = [
        f"{o.summary()}\n  replay: {replay_command(PARTITIONED, o.seed, FAULTS, DURATION_S)}"
        for o in result.failures
    ]
    assert not failures, "\n".join(failures)
    assert result.delivered > 0


def test_a_seed_replays_exactly(topology: Topology) -> None:
    """Also when the garbage collector runs at other moments, as it does
    after other work in the same process: it once ran killed processes'
    ``finally`` blocks mid-run and reordered timers due at one instant."""
    first = run_seed(topology, 7, faults=FAULTS, duration_s=DURATION_S)
    thresholds = gc.get_threshold()
    gc.set_threshold(50, 2, 2)
    try:
        again = run_seed(topology, 7, faults=FAULTS, duration_s=DURATION_S)
    finally:
        gc.set_threshold(*thresholds)
    other = run_seed(topology, 8, faults=FAULTS, duration_s=DURATION_S)
    assert first.messages > 1000
    assert (again.trace, again.messages, again.virtual_s) == (first.trace, first.messages, first.virtual_s)
    assert other.trace != first.trace


# node-4 is sum-2's secondary, node-2 its primary (examples/sim-chain.yaml).
SECONDARY_RESTARTED_THEN_PRIMARY_KILLED = [
    Fault(0.3, FaultKind.KILL, "node-4"),
    Fault(0.5, FaultKind.RESTART, "node-4"),
    Fault(1.4, FaultKind.KILL, "node-2"),
]


def test_the_schedule_that_needs_a_re_protected_stage_passes(topology: Topology) -> None:
    outcome = simulate(topology, 1, SECONDARY_RESTARTED_THEN_PRIMARY_KILLED, duration_s=DURATION_S)
    assert outcome.ok, outcome.summary()


def test_a_past_bug_put_back_is_caught(topology: Topology, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commit 5790ad1 fixed it: a secondary restarted empty under its own
    name counted as protecting its stage, so the primary's later death
    found no replica to take over. Put the old rule back (a secondary is
    gone only when its port is closed) and the simulation must fail."""

    def gone_only_when_down(self: Coordinator, node: str, view: StageView, now: float) -> bool:
        return self.liveness(node, now) is Liveness.DOWN

    monkeypatch.setattr(Coordinator, "_gone", gone_only_when_down)
    outcome = simulate(topology, 1, SECONDARY_RESTARTED_THEN_PRIMARY_KILLED, duration_s=DURATION_S)
    assert not outcome.ok
    assert any("hang" in p for p in outcome.problems) or any(not c.ok for c in outcome.checks)


def test_a_partitioned_primary_never_delivers_beside_its_successor(topology: Topology) -> None:
    """sum-2's primary cut off from its secondary and from the coordinator
    while its upstream and downstream still reach it: the secondary takes
    over; whichever epoch the consumer accepts, the sink gets each row once."""
    faults = [
        Fault(0.5, FaultKind.CUT, "node-2", "node-4"),
        Fault(0.5, FaultKind.CUT, "node-2", "coordinator"),
        Fault(1.5, FaultKind.HEAL, "node-2", "node-4"),
        Fault(1.5, FaultKind.HEAL, "node-2", "coordinator"),
    ]
    outcome = simulate(topology, 3, faults, duration_s=DURATION_S)
    assert outcome.ok, outcome.summary()


def test_a_fenced_primary_reassigned_behind_a_partition_does_not_take_over_again(tmp_path: Path) -> None:
    """Found by tests/faults/test_partitions.py on real namespaces, then
    here: without spares, sum-2's primary cut off from its secondary is
    replaced, fenced, and reassigned as the new primary's secondary, which
    it cannot reach either. It used to take the new primary for dead at
    once and the stage failed over back and forth for as long as the cut
    lasted (epochs 1 to 6 in 1.5 s). The coordinator, which still hears
    from the new primary, now witnesses that it lives: one takeover."""
    cfg = yaml.safe_load((Path(__file__).parents[2] / CONFIG).read_text())
    del cfg["spares"]
    path = tmp_path / "no-spares.yaml"
    path.write_text(yaml.safe_dump(cfg))
    faults = [Fault(0.5, FaultKind.CUT, "node-2", "node-4"), Fault(2.0, FaultKind.HEAL, "node-2", "node-4")]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    outcome = simulate(resolve(config.load(path)), 1, faults, keep_dir=run_dir)
    assert outcome.ok, outcome.summary()
    takeovers = [
        event
        for log in (run_dir / "telemetry").glob("events-*.jsonl")
        for event in map(json.loads, log.read_text().splitlines())
        if event["event"] == "takeover" and event["stage"] == "sum-2"
    ]
    assert len(takeovers) == 1, takeovers


def test_a_new_secondary_fed_from_the_first_row_reports_its_re_protection(tmp_path: Path) -> None:
    """sum-2 over [Range Unbounded] keeps its producers' logs from the first
    row, so the secondary that replaces a killed one needs no resync point:
    it is fed from seq 1. It used to never say when it had caught up."""
    cfg = yaml.safe_load((Path(__file__).parents[2] / CONFIG).read_text())
    sum2 = next(s for s in cfg["stages"] if s["name"] == "sum-2")
    sum2["query"] = (
        "REGISTER QUERY s2 AS ISTREAM(SELECT SUM(val) AS total, COUNT(*) AS n FROM s1 [Range Unbounded])"
    )
    path = tmp_path / "unbounded.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    outcome = simulate(
        resolve(config.load(path)), 1, [Fault(0.8, FaultKind.KILL, "node-4")], keep_dir=run_dir
    )
    assert outcome.ok, outcome.summary()
    events = [
        event
        for log in (run_dir / "telemetry").glob("events-*.jsonl")
        for event in map(json.loads, log.read_text().splitlines())
    ]
    assert not [e for e in events if e["event"] == "resync" and e.get("stage") == "sum-2"]
    assert [e["node"] for e in events if e["event"] == "reprotected"] == ["spare-1"], [
        e for e in events if e.get("stage") == "sum-2"
    ]


def _pressed_chain(tmp_path: Path) -> Path:
    """sim-chain with select-1 keeping a third of the rows and sum-2 over
    [Range Unbounded], capturing every 40 of its rows: about 120 source
    rows, and the source's log holds 64. sum-2's cut moves only at its
    captures and select-1's follows it, so the source's log fills first."""
    cfg = yaml.safe_load((Path(__file__).parents[2] / CONFIG).read_text())
    cfg.update(queue_rows=64, snapshot_rows=40)
    cfg["sources"][0]["rate"] = [{"at_s": 0, "tuples_per_s": 400}]
    stages = {s["name"]: s for s in cfg["stages"]}
    stages["select-1"]["query"] = "REGISTER QUERY s1 AS SELECT * FROM readings WHERE val % 3 = 0"
    stages["sum-2"]["query"] = (
        "REGISTER QUERY s2 AS ISTREAM(SELECT SUM(val) AS total, COUNT(*) AS n FROM s1 [Range Unbounded])"
    )
    path = tmp_path / "pressed.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_chain_of_cuts_that_fills_the_first_log_is_relieved_by_pressure(tmp_path: Path) -> None:
    """Found on the 3-hour Linear Road run: the source's log full, held by
    select-1's cut, held by sum-2's, which waited for its next capture,
    which waited for rows the stopped source would never send. The source
    now presses select-1, which passes it on to sum-2, which captures out
    of turn; the run ends exact, also through kills, and under a campaign."""
    path = _pressed_chain(tmp_path)
    topology = resolve(config.load(path))
    for faults in ([], [Fault(0.8, FaultKind.KILL, "node-2")], [Fault(1.0, FaultKind.KILL, "node-1")]):
        run_dir = tmp_path / f"run-{len(faults)}-{faults[0].target if faults else ''}"
        run_dir.mkdir()
        outcome = simulate(topology, 1, faults, keep_dir=run_dir)
        assert outcome.ok, outcome.summary()
        events = [
            event
            for log in (run_dir / "telemetry").glob("events-*.jsonl")
            for event in map(json.loads, log.read_text().splitlines())
        ]
        pressed = {(e["node"], e["edge"]) for e in events if e["event"] == "pressed"}
        assert ("node-1", "node-0->select-1") in pressed
        assert any(edge == "select-1->sum-2" for _, edge in pressed), pressed
        assert not [e for e in events if e["event"] == "log_full"]
    result = run_campaign(path, range(SEEDS // 16), faults=FAULTS, duration_s=DURATION_S, workers=WORKERS)
    assert not result.failures, "\n".join(o.summary() for o in result.failures)


def test_a_replica_whose_operator_fails_exits_and_its_stage_fails_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception in a replica's operator task (here: its first state
    capture refused, as the codec refuses a state it cannot write) used to
    end only that task: the node lived on, serving nothing, and the run
    hung. Now the node exits 1 and its stage fails over; nothing is lost."""
    from semiactive.node.service.roles import replica as replica_role

    failed: list[int] = []
    original = capture_now

    def capture(engine: Engine, done: Callable[[StateBytes | BaseException], None]) -> None:
        if failed:
            original(engine, done)
        else:
            failed.append(1)
            done(RuntimeError("a state the codec refuses"))

    monkeypatch.setattr(replica_role, "capture_now", capture)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    outcome = simulate(resolve(config.load(_pressed_chain(tmp_path))), 1, [], keep_dir=run_dir)
    assert failed
    assert len(outcome.problems) == 1 and outcome.problems[0].endswith("exited with 1"), outcome.summary()
    assert all(check.ok for check in outcome.checks), outcome.summary()
