"""The run report (semiactive/launcher/measurements.py) from a run directory's telemetry,
written here by hand: which detection and recovery belong to which fault."""

from __future__ import annotations

import json
from pathlib import Path

from semiactive import config, topology
from semiactive.launcher.measurements import analyse
from tests.processes import ROOT

T0 = 1_800_000_000.0


def _run_dir(tmp_path: Path, faults: list[dict[str, object]], events: list[dict[str, object]]) -> Path:
    telemetry = tmp_path / "telemetry"
    telemetry.mkdir()
    (telemetry / "faults.json").write_text(json.dumps(faults))
    (telemetry / "events-node-5.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return tmp_path


def _analyse(run_dir: Path) -> list[tuple[str, str, float | None, float | None]]:
    topo = topology.resolve(config.load(str(ROOT / "examples" / "chaos-chain.yaml")))
    report = analyse(topo, run_dir)
    return [
        (f.node, f.kind, None if f.detection_ms is None else round(f.detection_ms), f.recovery_ms)
        for f in report.faults
    ]


def test_a_detection_belongs_to_the_fault_it_follows(tmp_path: Path) -> None:
    detected = {"t": T0 + 1.02, "node": "node-5", "event": "failure_detected", "primary": "node-1"}
    recovered = {"t": T0 + 1.05, "node": "node-5", "event": "recovered", "recovery_ms": 30.0}
    run_dir = _run_dir(
        tmp_path,
        [{"node": "node-1", "kind": "kill", "at": 1.0, "injected_at": T0 + 1.0}],
        [detected, recovered],
    )
    assert _analyse(run_dir) == [("node-1", "kill", 20, 30.0)]


def test_a_freeze_too_short_to_notice_does_not_take_a_later_kills_detection(tmp_path: Path) -> None:
    # node-1 frozen for 0.4 s (under the failure timeout: nobody notices),
    # then killed at 3 s and detected 20 ms later.
    faults = [
        {"node": "node-1", "kind": "stop", "at": 1.0, "duration": 0.4, "injected_at": T0 + 1.0},
        {"node": "node-2", "kind": "kill", "at": 2.0, "injected_at": T0 + 2.0},
        {"node": "node-1", "kind": "kill", "at": 3.0, "injected_at": T0 + 3.0},
    ]
    events = [
        {"t": T0 + 2.01, "node": "node-4", "event": "failure_detected", "primary": "node-2"},
        {"t": T0 + 2.03, "node": "node-4", "event": "recovered", "recovery_ms": 20.0},
        {"t": T0 + 3.02, "node": "node-5", "event": "failure_detected", "primary": "node-1"},
        {"t": T0 + 3.04, "node": "node-5", "event": "recovered", "recovery_ms": 15.0},
    ]
    assert _analyse(_run_dir(tmp_path, faults, events)) == [
        ("node-1", "stop", None, None),
        ("node-2", "kill", 10, 20.0),
        ("node-1", "kill", 20, 15.0),
    ]


def test_a_detection_of_another_stage_or_after_a_freeze_ended_is_not_that_faults(tmp_path: Path) -> None:
    """Seen in a nemesis campaign: node-5, sec of select-1 in chaos-chain, is
    killed; restarted, it later serves sum-2 and is (spuriously) detected
    there: not the kill's detection. And a freeze of node-1 resumed after
    0.4 s is not detected 2.5 s later by the kill it did not cause."""
    faults = [
        {"node": "node-5", "kind": "kill", "at": 1.0, "injected_at": T0 + 1.0},
        {"node": "node-1", "kind": "stop", "at": 1.0, "duration": 0.4, "injected_at": T0 + 1.0},
    ]
    events = [
        {"t": T0 + 3.0, "node": "node-4", "event": "takeover", "stage": "sum-2"},
        {"t": T0 + 5.0, "node": "node-6", "event": "failure_detected", "stage": "sum-2", "primary": "node-5"},
        {
            "t": T0 + 3.5,
            "node": "node-5",
            "event": "failure_detected",
            "stage": "select-1",
            "primary": "node-1",
        },
    ]
    assert _analyse(_run_dir(tmp_path, faults, events)) == [
        ("node-5", "kill", None, None),
        ("node-1", "stop", None, None),
    ]
