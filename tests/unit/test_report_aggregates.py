"""The report job's tables on telemetry written here by hand, per
docs/telemetry.md, with every expected value computed by hand (one local
SparkSession for the module's tests, made once per test session).

The campaign: a sweep of two runs (SAS B=100, killed by the launcher; UB,
whose primary dies unannounced, with a freeze of another node nobody
notices), an A-SAS campaign (a run without a kill, with tuner steps, and a
kill run) and an engine campaign.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import SparkSession  # noqa: E402

from semiactive.analytics import report_job  # noqa: E402
from semiactive.analytics.runs import ReportInputError, discover  # noqa: E402
from semiactive.cli import main  # noqa: E402

T0 = 1_800_000_000.0
EDGE_IN = "select-1->select-2"  # into the protected stage
EDGE_OUT = "select-2->select-3"

CONFIG = """
name: hand
sources:
  - {name: node-0, stream: readings, schema: {id: integer, val: integer}, rate: [{at_s: 0, tuples_per_s: 10}]}
stages:
  - {name: select-1, node: node-1, query: "REGISTER QUERY s1 AS SELECT * FROM readings"}
  - name: select-2
    node: node-2
    ha: {mode: sas, batch_size: 100, secondary: node-4}
    query: "REGISTER QUERY s2 AS SELECT * FROM s1"
  - {name: select-3, node: node-3, query: "REGISTER QUERY s3 AS SELECT * FROM s2"}
sinks:
  - {name: sink, input: s3}
"""


def _jsonl(path: Path, records: list[dict[str, Any]], torn: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in records)
    # A kill mid-write leaves half a line at the end.
    path.write_text(text + ('{"t": 1800000009.0, "node": "no' if torn else ""))


def _edge(
    node: str, since: float, t: float, edge: str, data: int, backup: int, b: int = 100
) -> dict[str, Any]:
    return {
        "t": T0 + t,
        "node": node,
        "since": since,
        "stage": "select-1",
        "role": "primary",
        "epoch": 1,
        "edge": edge,
        "direction": "out",
        "seq": data // 10,
        "acked": 0,
        "ack_lag_rows": data // 10,
        "retained_rows": 0,
        "batch_size": b,
        "data_rows": data // 10,
        "data_bytes": data,
        "backup_rows": backup // 10,
        "backup_bytes": backup,
        "backup_batches": 0,
        "received_rows": 0,
    }


def _ev(t: float, node: str, event: str, **fields: Any) -> dict[str, Any]:
    return {"t": T0 + t, "node": node, "event": event, **fields}


def _run(
    campaign: Path, name: str, kind: str, params: dict[str, Any], files: dict[str, list[dict[str, Any]]]
) -> None:
    run = campaign / name
    (run / "telemetry").mkdir(parents=True)
    (run / "manifest.json").write_text(
        json.dumps(
            {
                "run": name,
                "campaign": campaign.name,
                "kind": kind,
                "config": str(campaign / "config.yaml"),
                "params": params,
            }
        )
    )
    (run / "cluster.json").write_text(json.dumps({"t0_unix": T0, "config": str(campaign / "config.yaml")}))
    for file, records in files.items():
        _jsonl(run / "telemetry" / file, records, torn=file.startswith("edges-node-1"))


def _campaign(root: Path, name: str, kind: str, runs: list[str], params: dict[str, Any]) -> Path:
    campaign = root / name
    campaign.mkdir(parents=True)
    mode = "mode: asas" if kind == "asas" else "mode: sas, batch_size: 100"
    (campaign / "config.yaml").write_text(CONFIG.replace("mode: sas, batch_size: 100", mode))
    (campaign / "manifest.json").write_text(
        json.dumps({"campaign": name, "kind": kind, "created_unix": T0, "params": params, "runs": runs})
    )
    return campaign


def _sweep(root: Path) -> Path:
    campaign = _campaign(
        root, "sweep", "sweep", ["run-sas100-0", "run-ub-0"], {"config": "x/paper-chain-ha.yaml"}
    )
    tags = {
        "operator": "select",
        "repeat": 0,
        "network_load_bytes_per_s": 0.0,
        "kill": "node-2",
        "kill_at_s": 2.2,
    }
    # Samples off the second boundaries: second 0 is covered from 0.25 only
    # (0.5 s), second 2 up to 2.25 (0.25 s: no rate). node-1 restarts at
    # 3 s: a new series, counting from 0 again.
    data = [0, 1000, 2000, 3000, 4000]
    backup = [0, 0, 1000, 1000, 2000]
    times = [0.25, 0.75, 1.25, 1.75, 2.25]
    edges = [_edge("node-1", T0 - 1, t, EDGE_IN, d, b) for t, d, b in zip(times, data, backup, strict=True)]
    edges += [_edge("node-1", T0 + 3, t, EDGE_IN, d, 0) for t, d in ((3.0, 0), (3.5, 500), (4.0, 1000))]
    into_sink = [_edge("node-2", T0 - 1, t, EDGE_OUT, d, 0, 0) for t, d in ((0.0, 0), (2.0, 8000))]
    _run(
        campaign,
        "run-sas100-0",
        "sweep",
        {"mode": "sas", "batch_size": 100, **tags},
        {
            "edges-node-1.jsonl": edges,
            "edges-node-2.jsonl": into_sink,
            "events-launcher.jsonl": [
                _ev(
                    2.2,
                    "launcher",
                    "fault_injected",
                    target="node-2",
                    kind="kill",
                    duration_s=0,
                    injector="launcher",
                ),
                _ev(
                    2.21,
                    "launcher",
                    "process_exited",
                    target="node-2",
                    stage="select-2",
                    pid=7,
                    returncode=-9,
                ),
            ],
            "events-node-4.jsonl": [
                _ev(2.215, "node-4", "failure_detected", stage="select-2", primary="node-2", silent_ms=15.0),
                _ev(2.22, "node-4", "takeover", stage="select-2", epoch=2, warming_up=False),
                _ev(2.24, "node-4", "recovered", stage="select-2", recovery_ms=12.5, target="node-2"),
            ],
        },
    )
    ub_edges = [_edge("node-1", T0 - 1, t, EDGE_IN, d, 0, 0) for t, d in ((0.0, 0), (1.0, 900), (1.9, 1800))]
    _run(
        campaign,
        "run-ub-0",
        "sweep",
        {"mode": "ub", "batch_size": None, **tags},
        {
            "edges-node-1.jsonl": ub_edges,
            "events-nemesis.jsonl": [
                _ev(
                    1.0,
                    "nemesis",
                    "fault_injected",
                    target="node-3",
                    kind="stop",
                    duration_s=0.4,
                    injector="nemesis",
                )
            ],
            "events-launcher.jsonl": [
                _ev(1.05, "launcher", "process_frozen", target="node-3", stage="select-3", pid=8),
                _ev(
                    2.0, "launcher", "process_exited", target="node-2", stage="select-2", pid=7, returncode=-9
                ),
            ],
            "events-node-4.jsonl": [
                # 10 ms before the launcher saw the exit: within its polling interval.
                _ev(1.99, "node-4", "failure_detected", stage="select-2", primary="node-2", silent_ms=3.0),
                _ev(2.03, "node-4", "recovered", stage="select-2", recovery_ms=40.0, target="node-2"),
                # long after the freeze ended: not the freeze's detection.
                _ev(3.0, "node-5", "failure_detected", stage="select-3", primary="node-3", silent_ms=500.0),
            ],
        },
    )
    return campaign


def _asas(root: Path) -> Path:
    campaign = _campaign(
        root, "asas", "asas", ["run-free", "run-kill1"], {"duration": 2.0, "scenario": "rate"}
    )
    limits = {"bw_max_bytes_per_s": 3000.0, "recovery_max_s": 0.08, "step_at_s": 1.0, "scenario": "rate"}
    free = [
        _edge("node-1", T0 - 1, t, EDGE_IN, d, b, bs)
        for t, d, b, bs in (
            (0.0, 0, 0, 1),
            (1.0, 1000, 1000, 1),
            (2.0, 5000, 5000, 40),
            (3.0, 9000, 5200, 400),
        )
    ]
    tuning = {
        "t": T0 + 1.5,
        "edge": EDGE_IN,
        "stage": "select-2",
        "tuner": "model",
        "batch_size": 40,
        "previous": 1,
        "bw_estimate_bytes_per_s": 2500.0,
        "recovery_estimate_s": 0.05,
        "bw_max_bytes_per_s": 3000.0,
        "recovery_max_s": 0.08,
        "input_rate_per_s": 100.0,
        "backup_bytes_per_s": 4000.0,
        "branch": "bandwidth",
    }
    _run(
        campaign,
        "run-free",
        "asas",
        {"mode": "asas", "tuner": "model", "repeat": 0, "kill_at_s": None, **limits},
        {"edges-node-1.jsonl": free, "tuning-coordinator.jsonl": [tuning]},
    )
    _run(
        campaign,
        "run-kill1",
        "asas",
        {"mode": "asas", "tuner": "model", "repeat": 0, "kill_at_s": 1.0, **limits},
        {
            "edges-node-1.jsonl": [_edge("node-1", T0 - 1, 0.5, EDGE_IN, 0, 0, 1)],
            "events-launcher.jsonl": [_ev(1.0, "launcher", "fault_injected", target="node-2", kind="kill")],
            "events-node-4.jsonl": [
                _ev(1.02, "node-4", "failure_detected", stage="select-2", primary="node-2"),
                _ev(1.05, "node-4", "recovered", stage="select-2", recovery_ms=20.0),
            ],
        },
    )
    return campaign


def _engine(root: Path) -> Path:
    campaign = _campaign(root, "engine", "engine", ["open-dts"], {})
    record = {
        "node": "bench",
        "form": "open",
        "executor": "dts",
        "hb_bound": None,
        "subqueries": 1,
        "per_ts": 1,
    }
    _run(
        campaign,
        "open-dts",
        "engine",
        {"form": "open", "executor": "dts", "hb_bound": None, "subqueries": 1, "per_ts": 1},
        {
            "engine-bench.jsonl": [
                {
                    **record,
                    "t": T0,
                    "tuples": 1_000_000,
                    "cpu_s": 1.0,
                    "wall_s": 1.1,
                    "tuples_per_s": 1e6,
                    "l1_dcache_misses": 10,
                    "l1_dcache_loads": 1000,
                },
                {
                    **record,
                    "t": T0 + 2,
                    "tuples": 1_000_000,
                    "cpu_s": 1.2,
                    "wall_s": 1.3,
                    "tuples_per_s": 833333.3,
                    "l1_dcache_misses": 30,
                    "l1_dcache_loads": 1000,
                },
            ]
        },
    )
    return campaign


@pytest.fixture(scope="module")
def report(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> report_job.ReportResult:
    root = tmp_path_factory.mktemp("campaigns")
    _sweep(root)
    _asas(root)
    _engine(root)
    return report_job.run_report([root], root / "out", spark=spark, progress=lambda line: None)


def _rows(report: report_job.ReportResult, table: str, *columns: str) -> list[tuple[Any, ...]]:
    return sorted(
        (tuple(_round(r[c]) for c in columns) for r in report.tables[table]),
        key=lambda row: tuple(map(str, row)),
    )


def _round(v: Any) -> Any:
    # Times are T0 + a few seconds: differences are exact to about 1e-6 s.
    return round(v, 3) if isinstance(v, float) and math.isfinite(v) else v


def _name(report: report_job.ReportResult, run_id: str) -> str:
    return Path(run_id).name


def test_every_run_is_found_by_its_manifest(report: report_job.ReportResult) -> None:
    assert _rows(
        report, "runs", "run", "kind", "mode", "batch_size", "operator", "kill_at_s", "duration_s"
    ) == [
        ("open-dts", "engine", None, None, None, None, None),
        ("run-free", "asas", "asas", None, None, None, 2.0),
        ("run-kill1", "asas", "asas", None, None, 1.0, 2.0),
        ("run-sas100-0", "sweep", "sas", 100, "select", 2.2, None),
        ("run-ub-0", "sweep", "ub", None, "select", 2.2, None),
    ]


def test_per_second_bandwidth_spreads_intervals_and_keeps_series_apart(
    report: report_job.ReportResult,
) -> None:
    rows = [
        r
        for r in report.tables["edge_bandwidth"]
        if r["run_id"].endswith("run-sas100-0") and r["edge"] == EDGE_IN
    ]
    got = sorted(
        (r["second"], _round(r["main_bytes_per_s"]), _round(r["backup_bytes_per_s"]), r["batch_size"])
        for r in rows
    )
    # Intervals are spread over the seconds they overlap:
    # second 0: [0.25, 0.75] and a quarter second of [0.75, 1.25], covered
    #   0.75 s: data 1000 + 500, backup 0 + 500 -> 2000 and 666.7 B/s;
    # second 1: [0.75, 1.25] half, [1.25, 1.75], [1.75, 2.25] half: data
    #   500 + 1000 + 500, backup 500 + 0 + 500 over 1 s;
    # second 2: covered 0.25 s (no rate); second 3: the restarted series,
    #   1000 bytes from 0, never 1000 - 4000.
    assert got == [(0, 2000.0, 666.667, 100), (1, 2000.0, 1000.0, 100), (3, 1000.0, 0.0, 100)]


def test_overhead_is_backup_over_main_into_the_protected_stage_up_to_the_first_fault(
    report: report_job.ReportResult,
) -> None:
    got = [
        (Path(r[0]).name, *r[1:])
        for r in _rows(
            report, "overhead_runs", "run_id", "stage", "main_bytes", "backup_bytes", "overhead", "window"
        )
    ]
    assert got == [
        # only select-2 is protected; last sample before the fault at 2.2 s is 1.75 s
        ("run-free", "select-2", 9000, 5200, round(5200 / 9000, 3), "whole run"),
        ("run-kill1", "select-2", 0, 0, None, "before the first fault"),
        ("run-sas100-0", "select-2", 3000, 1000, round(1 / 3, 3), "before the first fault"),
        ("run-ub-0", "select-2", 900, 0, 0.0, "before the first fault"),
    ]


def test_faults_detection_and_recovery(report: report_job.ReportResult) -> None:
    got = [
        (Path(r[0]).name, *r[1:])
        for r in _rows(
            report,
            "faults",
            "run_id",
            "target",
            "fault_kind",
            "origin",
            "at_s",
            "detected_by",
            "detection_ms",
            "recovery_ms",
        )
    ]
    assert got == [
        ("run-kill1", "node-2", "kill", "launcher", 1.0, "node-4", 20.0, 20.0),
        # the exit the launcher saw is the kill it injected: one fault
        ("run-sas100-0", "node-2", "kill", "launcher", 2.2, "node-4", 15.0, 12.5),
        # unannounced: detected 10 ms before observed -> 0 ms
        ("run-ub-0", "node-2", "exit", "observed", 2.0, "node-4", 0.0, 40.0),
        # a freeze explained by the nemesis, and undetected within its second
        ("run-ub-0", "node-3", "stop", "nemesis", 1.0, None, None, None),
    ]


def test_per_setting_tables(report: report_job.ReportResult) -> None:
    overhead = _rows(
        report, "overhead_by_setting", "kind", "operator", "mode", "batch_size", "runs", "overhead_mean"
    )
    assert overhead == [
        ("asas", None, "asas", None, 2, round(5200 / 9000, 3)),  # mean over the one with bytes
        ("sweep", "select", "sas", 100, 1, round(1 / 3, 3)),
        ("sweep", "select", "ub", None, 1, 0.0),
    ]
    recovery = _rows(
        report,
        "recovery_by_setting",
        "kind",
        "mode",
        "batch_size",
        "faults",
        "detected",
        "recovered",
        "recovery_ms_mean",
        "detection_ms_max",
    )
    assert recovery == [
        ("asas", "asas", None, 1, 1, 1, 20.0, 20.0),
        ("sweep", "sas", 100, 1, 1, 1, 12.5, 15.0),
        ("sweep", "ub", None, 2, 1, 1, 40.0, 0.0),
    ]


def test_asas_tables(report: report_job.ReportResult) -> None:
    # Seconds 0 and 1 of the free run (its duration is 2 s); B at each
    # second's end.
    assert _rows(
        report,
        "asas_bandwidth",
        "mode",
        "tuner",
        "second",
        "backup_bytes_per_s",
        "batch_size",
        "bw_max_bytes_per_s",
    ) == [
        ("asas", "model", 0, 1000.0, 1, 3000.0),
        ("asas", "model", 1, 4000.0, 40, 3000.0),
    ]
    assert _rows(report, "asas_recovery", "mode", "tuner", "kill_at_s", "recovery_ms", "recovery_max_s") == [
        ("asas", "model", 1.0, 20.0, 0.08)
    ]
    assert _rows(
        report,
        "asas_tuning",
        "at_s",
        "batch_size",
        "bw_estimate_bytes_per_s",
        "recovery_estimate_ms",
        "recovery_max_ms",
    ) == [(1.5, 40, 2500.0, 50.0, 80.0)]


def test_engine_summary(report: report_job.ReportResult) -> None:
    assert _rows(
        report, "engine_summary", "form", "executor", "repetitions", "cpu_s_per_million", "l1_miss_rate"
    ) == [("open", "dts", 2, 1.1, 0.02)]


def test_parquet_report_and_figures_are_written(report: report_job.ReportResult) -> None:
    for name in report_job.TABLES:
        assert list((report.out / "tables" / name).glob("*.parquet")), name
    drawn = {f.key for f in report.figures if f.path is not None}
    missing = {f.key: f.command for f in report.figures if f.path is None}
    assert {"seed002-fig4", "seed002-fig5", "seed002-fig10", "seed002-fig11", "asas-trace-rate"} <= drawn
    assert all((report.out / "figures" / f"{key}.png").stat().st_size > 1000 for key in drawn)
    assert "--scenario cost" in str(missing["seed002-fig12"])
    assert "--network-load" in str(missing["seed002-fig8"])
    assert "operator=aggregate" in str(missing["seed002-fig6"])
    text = (report.out / "report.md").read_text()
    assert "![Seed 002 Fig. 4" in text and "## Timelines" not in text
    assert (
        text.count("Not drawn") == 1
        and "Not drawn (what each needs is below): Seed 002 Figs. 6-9, 12, 13" in text
    )
    assert (
        "- Seed 002 Fig. 12: no A-SAS cost campaign; made by `semiactive experiment asas --scenario cost"
        in text
    )


def test_a_run_directory_given_directly_is_a_run(tmp_path: Path) -> None:
    campaign = _sweep(tmp_path)
    runs = discover([campaign / "run-ub-0"])
    assert [(r.path.name, r.kind, r.campaign, r.operator()) for r in runs] == [
        ("run-ub-0", "sweep", "sweep", "select")
    ]


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == f"semiactive: {tmp_path / 'nowhere'}: no such directory"
    (tmp_path / "empty" / "telemetry").mkdir(parents=True)
    assert main(["report", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no telemetry found" in err[0]
    with pytest.raises(ReportInputError):
        discover([tmp_path / "empty"])
