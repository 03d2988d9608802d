"""The report of one run outside a campaign (docs/results.md): its timeline
tables on telemetry written here by hand, every value computed by hand,
the timeline figure, and report.md with the timeline first and the
campaign figures it cannot draw as one short list."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from semiactive.analytics import report_job

T0 = 1_800_000_000.0
EDGE = "a->b"


def _edge(node: str, role: str, t: float, rows: int, backup: int) -> dict[str, Any]:
    return {
        "t": T0 + t, "node": node, "since": T0 - 5, "stage": "a", "role": role, "epoch": 1,
        "edge": EDGE, "direction": "out", "seq": rows, "acked": 0, "ack_lag_rows": 0,
        "retained_rows": 0, "batch_size": 50, "data_rows": rows, "data_bytes": 10 * rows,
        "backup_rows": backup, "backup_bytes": 10 * backup, "backup_batches": 0, "received_rows": 0,
    }  # fmt: skip


def _sink(t: float, rows: int, latency_s: float) -> dict[str, Any]:
    return {"t": T0 + t, "node": "sink", "since": T0 - 5, "stage": "sink", "role": "sink",
            "latency_rows": rows, "latency_sum_s": latency_s}  # fmt: skip


def _ev(t: float, node: str, event: str, **fields: Any) -> dict[str, Any]:
    return {"t": T0 + t, "node": node, "event": event, **fields}


def _write(run: Path, files: dict[str, list[dict[str, Any]]]) -> None:
    (run / "telemetry").mkdir(parents=True)
    manifest: dict[str, Any] = {
        "run": run.name,
        "campaign": None,
        "kind": "cluster",
        "config": "chain.yaml",
        "params": {},
    }
    (run / "manifest.json").write_text(json.dumps(manifest))
    (run / "cluster.json").write_text(json.dumps({"t0_unix": T0}))
    for name, records in files.items():
        (run / "telemetry" / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    # The sink's batches: wall time, first seq, rows; the last line torn by a kill.
    batches = [(0.51, 1, 20), (0.53, 21, 20), (1.025, 41, 10), (1.51, 51, 50)]
    lines = "".join(f"{T0 + t:.4f} {seq} {rows}\n" for t, seq, rows in batches)
    (run / "telemetry" / "sink.arrivals").write_text(lines + f"{T0 + 1.9:.4f} 101")


@pytest.fixture(scope="module")
def report(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> report_job.ReportResult:
    run = tmp_path_factory.mktemp("one") / "run-1"
    quarter = [0.0, 0.25, 0.5, 0.75, 1.0]
    # node-2 sends 400 rows/s and backs up 200 rows/s until it is killed at
    # 1.1 s; sec-2 mirrors the backup cursors as secondary (sending nothing:
    # not counted), takes over at 1.2 s and catches up at 800 rows/s.
    primary = [_edge("node-2", "primary", t, int(400 * t), int(200 * t)) for t in quarter]
    secondary = [_edge("sec-2", "secondary", t, 0, int(200 * t)) for t in quarter]
    secondary += [
        _edge("sec-2", "primary", t, r, 200) for t, r in ((1.25, 0), (1.5, 200), (1.75, 400), (2.0, 600))
    ]
    sink = [_sink(0.5, 0, 0.0), _sink(1.0, 100, 5.0), _sink(1.5, 100, 5.0), _sink(2.0, 300, 85.0)]
    _write(
        run,
        {
            "edges-node-2.jsonl": primary,
            "edges-sec-2.jsonl": secondary,
            "nodes-sink.jsonl": sink,
            "events-nemesis.jsonl": [
                _ev(1.1, "nemesis", "fault_injected", target="node-2", kind="kill", injector="nemesis")
            ],
            "events-launcher.jsonl": [
                _ev(1.12, "launcher", "process_exited", target="node-2", stage="a", pid=7, returncode=-9)
            ],
            "events-sec-2.jsonl": [
                _ev(1.18, "sec-2", "failure_detected", stage="a", primary="node-2", silent_ms=80.0),
                _ev(1.2, "sec-2", "takeover", stage="a", epoch=2, warming_up=False),
                _ev(1.4, "sec-2", "recovered", stage="a", recovery_ms=220.0, target=400),
            ],
            "events-spare-1.jsonl": [
                _ev(1.3, "spare-1", "assigned", stage="a", role="secondary", version=2),
                _ev(1.6, "spare-1", "reprotected", stage="a", warmup_ms=300.0),
            ],
        },
    )  # fmt: skip
    lines: list[str] = []
    result = report_job.run_report([run], run.parent / "out", spark=spark, progress=lines.append)
    assert lines[-2] == "1 timeline, 0 campaign figures drawn (13 need a campaign)"
    return result


def _rounded(rows: list[dict[str, Any]], *columns: str) -> list[tuple[Any, ...]]:
    def r(v: Any) -> Any:
        return round(v, 3) if isinstance(v, float) and math.isfinite(v) else v

    return [tuple(r(row[c]) for c in columns) for row in rows]


def test_rows_and_bytes_per_edge_count_the_senders_only(report: report_job.ReportResult) -> None:
    timeline = sorted(report.tables["edge_timeline"], key=lambda r: r["at_s"])
    columns = ("at_s", "width_s", "main_rows_per_s", "backup_rows_per_s", "main_bytes_per_s")
    assert _rounded(timeline, *columns) == [
        (0.0, 0.25, 400.0, 200.0, 4000.0),
        (0.25, 0.25, 400.0, 200.0, 4000.0),
        (0.5, 0.25, 400.0, 200.0, 4000.0),
        (0.75, 0.25, 400.0, 200.0, 4000.0),
        (1.0, 0.25, 0.0, 0.0, 0.0),  # killed at 1.1: sec-2 took over, nothing sent yet
        (1.25, 0.25, 800.0, 0.0, 8000.0),
        (1.5, 0.25, 800.0, 0.0, 8000.0),
        (1.75, 0.25, 800.0, 0.0, 8000.0),
    ]  # fmt: skip


def test_sink_deliveries_in_fine_bins(report: report_job.ReportResult) -> None:
    rows = sorted(report.tables["sink_deliveries"], key=lambda r: r["at_s"])
    assert _rounded(rows, "sink", "at_s", "width_s", "rows_per_s") == [
        ("sink", 0.5, 0.05, 800.0),
        ("sink", 1.0, 0.05, 200.0),
        ("sink", 1.5, 0.05, 1000.0),
    ]


def test_sink_latency_is_the_mean_of_each_interval(report: report_job.ReportResult) -> None:
    rows = sorted(report.tables["sink_latency"], key=lambda r: r["at_s"])
    assert _rounded(rows, "sink", "at_s", "rows", "rows_per_s", "latency_ms") == [
        ("sink", 1.0, 100, 200.0, 50.0),
        ("sink", 1.5, 0, 0.0, None),
        ("sink", 2.0, 200, 400.0, 400.0),
    ]


def test_the_events_marked_and_the_fault(report: report_job.ReportResult) -> None:
    events = sorted(report.tables["timeline_events"], key=lambda r: r["at_s"])
    assert _rounded(events, "at_s", "event", "node") == [
        (1.18, "failure_detected", "sec-2"),
        (1.2, "takeover", "sec-2"),
        (1.4, "recovered", "sec-2"),
        (1.6, "reprotected", "spare-1"),
    ]
    [fault] = report.tables["faults"]
    assert _rounded([fault], "target", "fault_kind", "origin", "at_s", "detection_ms", "recovery_ms") == [
        ("node-2", "kill", "nemesis", 1.1, 80.0, 220.0)
    ]


def test_the_report_shows_the_timeline_first_and_lists_what_it_cannot_draw(
    report: report_job.ReportResult,
) -> None:
    [timeline] = [f for f in report.figures if f.kind == "timeline"]
    assert timeline.path == report.out / "figures" / "timeline-run-1.png"
    assert timeline.path.stat().st_size > 30_000
    text = (report.out / "report.md").read_text()
    assert "; 1 run (cluster: 1), no campaign.\n" in text
    title = f"Timeline of {timeline.path.parents[2].name}/run-1 (chain)"  # <tmp>/run-1, <tmp>/out/figures
    assert text.index("## Timelines") < text.index(f"![{title}](figures/timeline-run-1.png)")
    assert text.index("figures/timeline-run-1.png") < text.index("## Campaign figures")
    assert text.index("## Campaign figures") < text.index("## Bandwidth overhead per setting")
    assert text.count("Not drawn") == 1
    assert "Not drawn (need a campaign): Seed 002 Figs. 4-13; Seed 001 Figs. 8-10.\n" in text
    assert "- Seed 002 Figs. 4, 5: no sweep campaign; made by `semiactive experiment sweep" in text
