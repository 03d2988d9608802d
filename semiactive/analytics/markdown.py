"""``report.md``: the report's tables and figures as Markdown, for a reader
(the Parquet tables are for further analysis)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from semiactive.analytics.report_job import ReportResult

Rows = list[dict[str, Any]]
PER_RUN_LIMIT = 200  # per-run and per-fault tables longer than this are left to Parquet


def _cell(value: Any, column: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if column.startswith("overhead"):
            return f"{value:.1%}"
        if column.endswith("_ms") or "_ms_" in column:
            return f"{value:.1f}"
        if column.endswith("per_s") or column.endswith("bytes_mean"):
            return f"{value:,.0f}"
        return f"{value:.4g}"
    return str(value)


def table(rows: Rows, columns: list[str]) -> str:
    """A Markdown table of ``columns`` of ``rows``."""
    if not rows:
        return "(none)\n"
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(r.get(c), c) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


SETTING = ["kind", "operator", "network_load_bytes_per_s", "mode", "batch_size"]


def _section(title: str, text: str) -> str:
    return f"\n## {title}\n\n{text}"


def render(result: ReportResult, inputs: list[Path], master: str) -> str:
    t = result.tables
    kinds = Counter(str(r.get("kind")) for r in t.get("runs", []))
    campaigns = Counter(str(r.get("campaign")) for r in t.get("runs", []))
    parts = [
        "# semiactive report\n",
        f"Inputs: {', '.join(f'`{p}`' for p in inputs)}; {result.runs} runs "
        f"({', '.join(f'{k}: {n}' for k, n in sorted(kinds.items()))}), campaigns: "
        f"{', '.join(f'{c} ({n})' for c, n in sorted(campaigns.items()))}.",
        f"Spark master `{master}`; session {result.seconds.get('session', 0):.1f} s, tables "
        f"{result.seconds.get('tables', 0):.1f} s, figures {result.seconds.get('figures', 0):.1f} s.",
        "Tables (Parquet): " + ", ".join(f"`tables/{name}`" for name in t) + ".",
    ]
    fig_lines = []
    for f in result.figures:
        if f.path is not None:
            rel = os.path.relpath(f.path, result.out)
            fig_lines.append(f"### {f.title}\n\n![{f.title}]({rel})\n")
        else:
            fig_lines.append(f"### {f.title}\n\nNot drawn: {f.missing}. Made by: `{f.command}`\n")
    parts.append(_section("Figures", "\n".join(fig_lines)))
    parts.append(
        _section(
            "Bandwidth overhead per setting",
            "Backup bytes / main bytes on the edges into each protected stage, measured on the producer "
            "up to the run's first fault (docs/telemetry.md).\n\n"
            + table(
                t.get("overhead_by_setting", []),
                [*SETTING, "runs", "overhead_mean", "overhead_min", "overhead_max", "main_bytes_mean"],
            ),
        )
    )
    parts.append(
        _section(
            "Detection and recovery per setting",
            "Detection = `failure_detected.t - fault_injected.t`; "
            "recovery = `recovered.recovery_ms` (ms).\n\n"
            + table(
                t.get("recovery_by_setting", []),
                [
                    *SETTING,
                    "faults",
                    "detected",
                    "recovered",
                    "detection_ms_p50",
                    "detection_ms_max",
                    "recovery_ms_mean",
                    "recovery_ms_p50",
                    "recovery_ms_p99",
                    "recovery_ms_max",
                ],
            ),
        )
    )
    runs_by_id = {r["run_id"]: r for r in t.get("runs", [])}
    per_run = [{**r, "run": runs_by_id.get(r["run_id"], {}).get("run")} for r in t.get("overhead_runs", [])]
    per_fault = [{**r, "run": runs_by_id.get(r["run_id"], {}).get("run")} for r in t.get("faults", [])]
    if len(per_run) <= PER_RUN_LIMIT:
        parts.append(
            _section(
                "Per run",
                table(
                    sorted(per_run, key=lambda r: (str(r["run"]), r["stage"])),
                    ["run", "stage", "main_bytes", "backup_bytes", "overhead", "window"],
                ),
            )
        )
    if len(per_fault) <= PER_RUN_LIMIT:
        parts.append(
            _section(
                "Per fault",
                table(
                    sorted(per_fault, key=lambda r: (str(r["run"]), r["fault"])),
                    [
                        "run",
                        "fault",
                        "target",
                        "fault_kind",
                        "origin",
                        "at_s",
                        "detected_by",
                        "detection_ms",
                        "recovery_ms",
                    ],
                ),
            )
        )
    if t.get("asas_recovery"):
        parts.append(
            _section(
                "A-SAS: recovery per kill time",
                table(
                    t["asas_recovery"],
                    [
                        "scenario",
                        "mode",
                        "tuner",
                        "kill_at_s",
                        "faults",
                        "recovery_ms",
                        "recovery_ms_max",
                        "detection_ms",
                        "recovery_max_s",
                    ],
                ),
            )
        )
    if t.get("asas_bandwidth"):
        over = Counter(
            (r["scenario"], r["mode"], r.get("tuner"))
            for r in t["asas_bandwidth"]
            if r.get("bw_max_bytes_per_s") and r["backup_bytes_per_s"] > r["bw_max_bytes_per_s"]
        )
        seconds = Counter((r["scenario"], r["mode"], r.get("tuner")) for r in t["asas_bandwidth"])
        rows = [
            {"scenario": s, "mode": m, "tuner": tu, "seconds": n, "seconds_over_bw_max": over[(s, m, tu)]}
            for (s, m, tu), n in sorted(seconds.items(), key=lambda kv: tuple(map(str, kv[0])))
        ]
        parts.append(
            _section(
                "A-SAS: seconds over the bandwidth limit (runs without a kill)",
                table(rows, ["scenario", "mode", "tuner", "seconds", "seconds_over_bw_max"]),
            )
        )
    if t.get("engine_summary"):
        parts.append(
            _section(
                "Engine (the recursive CQL paper)",
                table(
                    t["engine_summary"],
                    [
                        "form",
                        "executor",
                        "hb_bound",
                        "subqueries",
                        "per_ts",
                        "repetitions",
                        "cpu_s_per_million",
                        "tuples_per_s",
                        "l1_miss_rate",
                    ],
                ),
            )
        )
    return "\n".join(parts) + "\n"


def write_report(result: ReportResult, inputs: list[Path], master: str) -> Path:
    path = result.out / "report.md"
    path.write_text(render(result, inputs, master))
    return path
