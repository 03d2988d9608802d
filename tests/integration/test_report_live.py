"""The report job on a real short run with a kill: its per-fault and
per-stage figures are those of the run's own report (semiactive/launcher/measurements.py's
``report.json``), and its per-second backup bandwidth that of the A-SAS
experiment's reader (semiactive/campaigns/asas.py), each computed without
Spark from the same files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from semiactive.analytics import report_job
from semiactive.campaigns.asas import per_second, read_samples
from tests.processes import ROOT, assert_no_processes, run_t0, semiactive

# A cluster run and a Spark job: about a minute, several when the 2-core
# machine is loaded (other suites' clusters).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_the_report_agrees_with_the_runs_own_report(
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    config = ROOT / "examples" / "paper-chain-ha.yaml"
    args = (
        "cluster",
        "up",
        str(config),
        "--duration",
        "4",
        "--run-dir",
        str(run_dir),
        "--kill",
        "node-2@2.5",
    )
    result = semiactive(*args, timeout=120)
    assert_no_processes(str(run_dir))
    assert result.returncode == 0, result.stderr
    own = json.loads((run_dir / "telemetry" / "report.json").read_text())

    report = report_job.run_report([run_dir], tmp_path / "report", spark=spark, progress=lambda line: None)

    [fault] = report.tables["faults"]
    [expected] = own["faults"]
    assert (fault["target"], fault["fault_kind"], fault["detected_by"]) == ("node-2", "kill", "node-4")
    assert expected["detected_by"] == "node-4"
    assert fault["detection_ms"] == pytest.approx(expected["detection_ms"], abs=0.01)
    assert fault["recovery_ms"] == expected["recovery_ms"] is not None

    overhead = {r["stage"]: r for r in report.tables["overhead_runs"]}
    assert set(overhead) == {b["stage"] for b in own["bandwidth"]} == {"select-2"}
    for b in own["bandwidth"]:
        got = overhead[b["stage"]]
        assert (got["main_bytes"], got["backup_bytes"]) == (b["main_bytes"], b["backup_bytes"])
        assert got["main_bytes"] > 10_000 and got["window"] == "before the first fault"
        assert got["overhead"] == pytest.approx(b["overhead"])

    # node-1 (never killed: one series) sends select-1 -> select-2.
    t0 = run_t0(run_dir)
    edge = "select-1->select-2"
    samples = read_samples(run_dir / "telemetry" / "edges-node-1.jsonl", t0, edge)
    by_hand = {k: rate for k, rate, _ in per_second(samples, 10)}
    spark_rates = {
        r["second"]: r["backup_bytes_per_s"]
        for r in report.tables["edge_bandwidth"]
        if r["edge"] == edge and r["second"] >= 0
    }
    assert set(spark_rates) == set(by_hand) and len(by_hand) >= 3
    for k, rate in by_hand.items():
        assert spark_rates[k] == pytest.approx(rate, rel=1e-9, abs=1e-6), k
    assert (report.out / "report.md").read_text().count("| node-2 | kill | launcher |") == 1
