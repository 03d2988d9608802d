"""Failure injection with real processes and real signals: SIGKILL and
SIGSTOP at random moments; the sink must receive exactly the failure-free
output (no loss, no duplicate, in order)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from semiactive.runtime.telemetry import read_jsonl
from tests.faults.harness import (
    AGGREGATE,
    FLOAT_SUMS,
    GROUPED_PARTITION,
    GROUPED_WINDOW,
    JOIN,
    RANGE_AGGREGATE,
    SELECTION,
    assert_on_record_blocks,
    protected_chain,
    run,
)

pytestmark = pytest.mark.slow

RANDOM = random.Random(20261122)


def _at() -> str:
    return f"{RANDOM.uniform(1.0, 2.8):.2f}"


@pytest.mark.parametrize(
    "queries",
    [SELECTION, AGGREGATE, RANGE_AGGREGATE, GROUPED_WINDOW, GROUPED_PARTITION, FLOAT_SUMS],
    ids=[
        "selection",
        "windowed aggregate",
        "columnar window",
        "columnar grouped window",
        "columnar partition",
        "columnar float sums",
    ],
)
def test_sigkill_the_middle_primary_at_a_random_time(tmp_path: Path, queries: list[str]) -> None:
    out = run(protected_chain(tmp_path, queries), tmp_path / "run", "--kill", f"node-2@{_at()}")
    assert_on_record_blocks(tmp_path / "run", "stage-2")  # the window on the columnar engine
    measured = json.loads((tmp_path / "run" / "telemetry" / "report.json").read_text())
    fault = measured["faults"][0]
    assert fault["detection_ms"] is not None and fault["recovery_ms"] is not None
    assert fault["sink_gap_ms"] is not None
    assert {b["stage"] for b in measured["bandwidth"]} == {"stage-1", "stage-2", "stage-3"}
    kinds = [e["event"] for e in out["events"] if e.get("stage") == "stage-2"]
    assert "failure_detected" in kinds and "takeover" in kinds and "recovered" in kinds
    assert any(e["event"] == "assigned" and e.get("stage") == "stage-2" for e in out["events"]), out["stderr"]
    _check_telemetry(tmp_path / "run", out["events"])


def _check_telemetry(run_dir: Path, events: list[dict[str, Any]]) -> None:
    """The samples of docs/telemetry.md: cumulative counters never fall
    within a series, and the sink's last sample counts what it wrote."""
    (fault,) = [e for e in events if e["event"] == "fault_injected"]
    assert (fault["target"], fault["kind"], fault["injector"]) == ("node-2", "kill", fault["node"])
    series: dict[tuple[str, float, str, str], list[dict[str, Any]]] = {}
    for path in (run_dir / "telemetry").glob("edges-*.jsonl"):
        for r in read_jsonl(path):
            series.setdefault((r["node"], r["since"], r["edge"], r["direction"]), []).append(r)
    assert {node for node, *_ in series} >= {"node-0", "node-1", "node-2", "node-3", "sink"}
    for samples in series.values():
        for counter in ("data_bytes", "backup_bytes", "received_rows", "seq"):
            values = [r[counter] for r in samples]
            assert values == sorted(values), (counter, samples[0]["node"])
    ((*_, last),) = [s for (node, *_), s in series.items() if node == "sink"]
    assert last["received_rows"] == len(read_jsonl(run_dir / "sink" / "sink.jsonl"))


def test_sigkill_the_first_stage_the_sources_downstream(tmp_path: Path) -> None:
    run(protected_chain(tmp_path, AGGREGATE), tmp_path / "run", "--kill", f"node-1@{_at()}")


def test_sigkill_the_last_stage_of_a_window_join(tmp_path: Path) -> None:
    config = protected_chain(tmp_path, JOIN, second_source=True)
    run(config, tmp_path / "run", "--kill", f"node-2@{_at()}")


def test_sigkill_a_secondary_the_primary_keeps_going(tmp_path: Path) -> None:
    out = run(protected_chain(tmp_path, AGGREGATE), tmp_path / "run", "--kill", "sec-2@1.5")
    assert not [e for e in out["events"] if e["event"] == "takeover"]


def test_sigkill_the_upstream_then_the_stage_during_its_recovery(tmp_path: Path) -> None:
    """Stage 2, a window on the columnar engine, is rebuilt from the cut
    its oldest carried tuple gives, while stage 1 recovers too."""
    out = run(
        protected_chain(tmp_path, RANGE_AGGREGATE),
        tmp_path / "run",
        "--kill",
        "node-1@1.5",
        "--kill",
        "node-2@1.55",
    )
    taken = {e["stage"] for e in out["events"] if e["event"] == "takeover"}
    assert taken == {"stage-1", "stage-2"}
    assert_on_record_blocks(tmp_path / "run", "stage-2")


def test_sigstop_a_primary_past_the_timeout_then_sigcont(tmp_path: Path) -> None:
    """The frozen primary is replaced; when it resumes it is fenced and
    delivers nothing twice."""
    out = run(protected_chain(tmp_path, AGGREGATE), tmp_path / "run", "--stop", "node-2@1.5:1.5", duration=5)
    assert any(e["event"] == "takeover" and e["node"] == "sec-2" for e in out["events"])
    assert any(e["event"] == "fenced" and e["node"] == "node-2" for e in out["events"]), out["stderr"]


@pytest.mark.parametrize("mode", ["as", "ub", "sas"])
def test_modes_deliver_the_same_output(tmp_path: Path, mode: str) -> None:
    out = run(protected_chain(tmp_path, AGGREGATE, mode=mode), tmp_path / "run", "--kill", "node-2@2")
    # Bytes into stage-2 while it was protected (up to the kill).
    stage = next(b for b in out["bandwidth"] if b.stage == "stage-2")
    main, backup = stage.main_bytes, stage.backup_bytes
    assert main > 0
    if mode == "ub":
        assert backup == 0
    elif mode == "as":
        # Every row goes to the secondary too; frames batch a little differently.
        assert 0.8 * main <= backup <= 1.2 * main, (main, backup)
    else:
        assert 0 < backup < main


def test_a_restarted_secondary_protects_its_stage_again(tmp_path: Path) -> None:
    """No standing spare: sec-2 is killed and restarted, empty, under its
    name; it must become stage-2's secondary again, so that the primary's
    death later loses nothing (a chaos run found this unprotected)."""
    config = protected_chain(tmp_path, AGGREGATE, spares=[])
    out = run(config, tmp_path / "run", "--kill", "sec-2@0.8", "--kill", "node-2@3.8", duration=5)
    assert any(e["event"] == "assigned" and e.get("secondary") == "sec-2" for e in out["events"])
    assert any(e["event"] == "takeover" and e["node"] == "sec-2" for e in out["events"]), out["stderr"]


def _rebuilt_by(out: dict[str, Any], stage: str) -> str:
    """The node assigned to ``stage`` after both its replicas died, which then
    took it over (rebuilt from its producers' retained logs)."""
    events = out["events"]
    replicas = {e["node"] for e in events if e["event"] == "takeover" and e.get("stage") == stage}
    assigned = [
        e["secondary"]
        for e in events
        if e["event"] == "assigned" and "secondary" in e and e["stage"] == stage
    ]
    rebuilt = [node for node in assigned if node in replicas]
    assert rebuilt, out["stderr"]
    return str(rebuilt[0])


@pytest.mark.parametrize("stage", [1, 2, 3], ids=["first stage", "middle stage", "last stage"])
def test_both_replicas_of_a_stage_killed_at_once_a_spare_rebuilds_it(tmp_path: Path, stage: int) -> None:
    """Beyond the single failure: both replicas of a stage die together. A
    spare rebuilds the stage from its producer's retained log (from the
    Level-1 cut) and takes over; nothing lost, nothing twice."""
    config = protected_chain(tmp_path, AGGREGATE, spares=["spare-1"])
    out = run(
        config, tmp_path / "run", "--kill", f"node-{stage}@1.5", "--kill", f"sec-{stage}@1.5", duration=5
    )
    assert _rebuilt_by(out, f"stage-{stage}") == "spare-1"


def test_both_replicas_lost_without_spares_the_restarted_nodes_rebuild_it(tmp_path: Path) -> None:
    """No spare at all: the stage waits for its replicas to be restarted;
    the restarted secondary rebuilds it (the restarted primary must not be
    asked to watch itself), while the producer retains what it needs: the
    window's rows, on the columnar engine, from its oldest carried tuple."""
    config = protected_chain(tmp_path, RANGE_AGGREGATE, spares=[])
    out = run(config, tmp_path / "run", "--kill", "node-2@1.0", "--kill", "sec-2@1.0", duration=6)
    assert _rebuilt_by(out, "stage-2") == "sec-2"
    assert_on_record_blocks(tmp_path / "run", "stage-2")
