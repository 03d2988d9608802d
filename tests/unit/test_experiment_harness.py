"""The experiment harness's judgement of a run (issue: its known flaws):
the sink gap counts the silence after the last row, an empty run is never
identical, a run's overhead is the killed stage's, and a cluster that
exited non-zero or a coordinator that failed make a run not identical."""

from __future__ import annotations

import json
from pathlib import Path

from semiactive import config, topology
from semiactive.campaigns.sweep import _trial
from semiactive.launcher.measurements import RunReport, StageBandwidth, analyse
from semiactive.oracle.verify import SinkCheck
from tests.processes import ROOT

T0 = 1_800_000_000.0


def _run_dir(tmp_path: Path, arrivals: list[float], emitted_until_s: float) -> Path:
    telemetry = tmp_path / "telemetry"
    telemetry.mkdir()
    (tmp_path / "sources").mkdir()
    (tmp_path / "cluster.json").write_text(json.dumps({"t0_unix": T0}))
    end = {"t0": T0, "watermark": int(emitted_until_s * 1000), "count": 1}
    (tmp_path / "sources" / "node-0.end.json").write_text(json.dumps(end))
    (telemetry / "faults.json").write_text(
        json.dumps([{"node": "node-2", "kind": "kill", "at": 2.0, "injected_at": T0 + 2.0}])
    )
    (telemetry / "sink.arrivals").write_text("".join(f"{T0 + t:.4f} 1 1\n" for t in arrivals))
    (telemetry / "events-coordinator.jsonl").write_text(
        json.dumps({"t": T0 + 3, "node": "coordinator", "event": "coordinator_error", "error": "boom"}) + "\n"
    )
    return tmp_path


def _topology() -> topology.Topology:
    return topology.resolve(config.load(str(ROOT / "examples" / "paper-chain-ha.yaml")))


def test_the_silence_after_the_last_row_is_a_gap(tmp_path: Path) -> None:
    # Rows every 10 ms until 2.0 s, then never again while the source emits until 5 s.
    run_dir = _run_dir(tmp_path, [i / 100 for i in range(1, 201)], emitted_until_s=5.0)
    report = analyse(_topology(), run_dir)
    (fault,) = report.faults
    assert fault.sink_gap_ms is not None and round(fault.sink_gap_ms) == 3000
    assert report.coordinator_errors == ["boom"]


def test_rows_until_the_end_leave_only_the_real_gap(tmp_path: Path) -> None:
    times = [i / 100 for i in range(1, 201)] + [2.05 + i / 100 for i in range(300)]
    report = analyse(_topology(), _run_dir(tmp_path, times, emitted_until_s=5.0))
    assert round(report.faults[0].sink_gap_ms or 0) == 50


def test_the_sources_end_is_when_they_said_they_stopped_not_their_event_time(tmp_path: Path) -> None:
    """A broker source's ts is the producer's (unix ms): t0 plus it is no
    moment of the run (the gap of a source kill once read 5.4 s for 1.5)."""
    times = [i / 100 for i in range(1, 201)] + [3.5 + i / 100 for i in range(150)]
    run_dir = _run_dir(tmp_path, times, emitted_until_s=5.0)
    end = {"t0": T0, "watermark": 1_795_900_000_000, "count": 1, "ended_unix": T0 + 5.0}
    (run_dir / "sources" / "node-0.end.json").write_text(json.dumps(end))
    assert round(analyse(_topology(), run_dir).faults[0].sink_gap_ms or 0) == 1500


def test_an_empty_run_is_never_identical() -> None:
    assert not SinkCheck("sink", expected=0, delivered=0).ok
    assert "proves nothing" in SinkCheck("sink", expected=0, delivered=0).describe()
    assert SinkCheck("sink", expected=3, delivered=3).ok


def test_a_trial_takes_the_killed_stages_overhead_and_fails_on_exit_status_and_coordinator_errors() -> None:
    report = RunReport(bandwidth=[StageBandwidth("select-1", 100, 100), StageBandwidth("select-2", 100, 10)])
    ok = [SinkCheck("sink", expected=3, delivered=3)]
    trial = _trial("sas", 100, 0, report, ok, code=0, killed_stage="select-2")
    assert trial.overhead == 0.1 and trial.identical
    assert not _trial("sas", 100, 0, report, ok, code=1, killed_stage="select-2").identical
    report.coordinator_errors = ["boom"]
    assert not _trial("sas", 100, 0, report, ok, code=0, killed_stage="select-2").identical


def test_a_report_survives_telemetry_torn_by_a_kill(tmp_path: Path) -> None:
    """A node SIGKILLed while it wrote: an empty summary, a half line of
    events. (A nemesis campaign crashed on this.)"""
    run_dir = _run_dir(tmp_path, [0.5, 1.0], emitted_until_s=1.0)
    (run_dir / "telemetry" / "node-2.summary.json").write_text("")
    with (run_dir / "telemetry" / "events-node-4.jsonl").open("w") as handle:
        handle.write(
            json.dumps({"t": T0 + 2.01, "node": "node-4", "event": "failure_detected", "primary": "node-2"})
        )
        handle.write('\n{"t": 18000')
    (run_dir / "telemetry" / "faults.json").write_text("[]")
    report = analyse(_topology(), run_dir)
    assert report.bandwidth and report.coordinator_errors == ["boom"]


def test_a_loss_a_node_noticed_is_in_the_report(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, [i / 100 for i in range(1, 201)], emitted_until_s=2.0)
    loss = {"t": T0 + 1, "node": "node-1", "event": "rows_lost", "edge": "select-1->select-2"}
    loss |= {"target": "node-2", "first": 5, "last": 9}
    (run_dir / "telemetry" / "events-node-1.jsonl").write_text(json.dumps(loss) + "\n")
    report = analyse(_topology(), run_dir)
    assert [(e["node"], e["first"], e["last"]) for e in report.losses_noticed] == [("node-1", 5, 9)]
    assert (
        "ROWS LOST: node-1 freed seqs 5-9 of select-1->select-2 that node-2 still needed" in report.describe()
    )
    assert report.to_json()["losses_noticed"] == report.losses_noticed
