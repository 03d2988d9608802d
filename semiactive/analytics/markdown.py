"""``report.md``: the report's tables and figures as Markdown, for a reader
(the Parquet tables are for further analysis)."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from semiactive.analytics.figures import Figure
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


def _drawn(f: Figure, out: Path) -> str:
    return f"### {f.title}\n\n![{f.title}]({os.path.relpath(f.path or '', out)})\n"


def figure_sections(result: ReportResult) -> list[str]:
    """Each run's timeline first, then the campaign figures drawn, then
    one short list of those not drawn (what each needs folded below)."""
    sections = []
    timelines = [f for f in result.figures if f.kind == "timeline"]
    alone = sum(1 for r in result.tables.get("runs", []) if r.get("campaign") is None)
    if timelines:
        lines = [
            "One per run outside a campaign: rows/s and kB/s per edge (data channel solid, backup "
            "dashed), the rows/s each sink received and its mean latency over time; faults (red, the "
            "failover shaded up to its recovery), detections, takeovers, recoveries and re-protections "
            "marked.\n"
        ]
        for f in timelines:
            lines.append(_drawn(f, result.out) if f.path else f"### {f.title}\n\nNot drawn: {f.missing}.\n")
        if alone > len(timelines):
            lines.append(f"({alone - len(timelines)} more runs outside a campaign: report them apart.)\n")
        sections.append(_section("Timelines", "\n".join(lines)))
    campaign = [f for f in result.figures if f.kind == "campaign"]
    lines = [_drawn(f, result.out) for f in campaign if f.path is not None]
    missing = [f for f in campaign if f.path is None]
    if missing:
        need = (
            "need a campaign" if alone == len(result.tables.get("runs", [])) else "what each needs is below"
        )
        lines.append(f"Not drawn ({need}): {short_list(missing)}.\n")
        why: dict[tuple[str, str], list[Figure]] = {}
        for f in missing:
            why.setdefault((str(f.missing), str(f.command)), []).append(f)
        lines.append("<details><summary>What they need</summary>\n")
        lines += [
            f"- {short_list(fs)}: {reason}; made by `{command}`" for (reason, command), fs in why.items()
        ]
        lines.append("\n</details>\n")
    if lines:
        sections.append(_section("Campaign figures" if timelines else "Figures", "\n".join(lines)))
    return sections


def short_list(figures: list[Figure]) -> str:
    """``Seed 002 Figs. 4-13; Seed 001 Figs. 8-10`` from the titles."""
    groups: dict[str, list[int]] = {}
    others = []
    for f in figures:
        match = re.match(r"(.+?) Fig\. (\d+)", f.title)
        if match:
            groups.setdefault(match[1], []).append(int(match[2]))
        else:
            others.append(f.title)
    parts = []
    for prefix, numbers in groups.items():
        ranges: list[list[int]] = []
        for n in sorted(set(numbers)):
            if ranges and n == ranges[-1][1] + 1:
                ranges[-1][1] = n
            else:
                ranges.append([n, n])
        text = ", ".join(f"{a}" if a == b else f"{a}-{b}" if b > a + 1 else f"{a}, {b}" for a, b in ranges)
        parts.append(f"{prefix} Fig{'s' * (len(numbers) > 1)}. {text}")
    return "; ".join(parts + others)


def render(result: ReportResult, inputs: list[Path], master: str) -> str:
    t = result.tables
    kinds = Counter(str(r.get("kind")) for r in t.get("runs", []))
    campaigns = Counter(str(r["campaign"]) for r in t.get("runs", []) if r.get("campaign") is not None)
    named = ", ".join(f"{c} ({n})" for c, n in sorted(campaigns.items()))
    parts = [
        "# semiactive report\n",
        f"Inputs: {', '.join(f'`{p}`' for p in inputs)}; {result.runs} run{'s' * (result.runs != 1)} "
        f"({', '.join(f'{k}: {n}' for k, n in sorted(kinds.items()))}), "
        + (f"campaigns: {named}." if named else "no campaign."),
        f"Spark master `{master}`; session {result.seconds.get('session', 0):.1f} s, tables "
        f"{result.seconds.get('tables', 0):.1f} s, figures {result.seconds.get('figures', 0):.1f} s.",
        "Tables (Parquet): " + ", ".join(f"`tables/{name}`" for name in t) + ".",
    ]
    parts += figure_sections(result)
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
