"""``semiactive report`` on one real run with a kill (a protected chain
with spares; node-2 killed by the nemesis from outside) draws the run's
timeline: rows/s per edge, the sink's deliveries and latency, the kill,
the detection and the takeover; report.md shows it before the campaign figures, which it
lists in one line as not drawn."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from semiactive.analytics import report_job
from tests.faults.harness import SELECTION, protected_chain, run_with_nemesis

# A cluster run and a Spark job: about a minute, several on a loaded machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_one_run_with_a_kill_gets_its_timeline(spark: SparkSession, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result, _ = run_with_nemesis(
        protected_chain(tmp_path, SELECTION), run_dir, "--kill", "node-2@1.5", duration=4
    )
    assert result.returncode == 0, result.stderr

    report = report_job.run_report([run_dir], tmp_path / "report", spark=spark, progress=lambda line: None)

    [fault] = report.tables["faults"]
    assert (fault["target"], fault["fault_kind"], fault["origin"], fault["detected_by"]) == (
        "node-2",
        "kill",
        "nemesis",
        "sec-2",
    )
    marked = {(e["event"], e["node"]) for e in report.tables["timeline_events"]}
    assert {("failure_detected", "sec-2"), ("takeover", "sec-2"), ("recovered", "sec-2")} <= marked
    after = [
        r
        for r in report.tables["edge_timeline"]
        if r["edge"] == "stage-2->stage-3" and r["at_s"] > fault["at_s"] + 0.5
    ]
    assert sum(r["main_rows_per_s"] for r in after) > 0  # sec-2 sends after the takeover
    assert any(r["latency_ms"] is not None for r in report.tables["sink_latency"])
    assert sum(r["rows_per_s"] * r["width_s"] for r in report.tables["sink_deliveries"]) > 1000

    [timeline] = [f for f in report.figures if f.kind == "timeline"]
    assert timeline.path is not None and timeline.path.stat().st_size > 30_000
    if os.environ.get("SEMIACTIVE_TIMELINE_PNG"):
        shutil.copy(timeline.path, os.environ["SEMIACTIVE_TIMELINE_PNG"])
    text = (report.out / "report.md").read_text()
    shown = text.index(f"]({timeline.path.relative_to(report.out)})")
    assert text.index("## Timelines") < shown < text.index("## Campaign figures")
    assert text.count("Not drawn") == 1 and "Not drawn (need a campaign): Seed 002 Figs. 4-13" in text
