"""A run's timeline figure (matplotlib, Agg): a lane of the run's faults,
detections, takeovers, recoveries and re-protections; rows/s and kB/s per
edge (data channel solid, backup dashed); the rows/s each sink received,
in fine bins (a short failover shows as a gap); the sinks' mean latency. Faults
are red lines through every panel, each failover (fault to recovered)
shaded, the other events thin lines in their lane's colour."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from semiactive.analytics.figures import Figure
from semiactive.analytics.runs import TIMELINES

Rows = list[dict[str, Any]]
Tables = dict[str, Rows]

FAULT = "#d62728"
# Edge colours: matplotlib's cycle without its red (faults) and grey.
PALETTE = ("C0", "C1", "C2", "C4", "C5", "C6", "C8", "C9")
LATENCY = "#333333"
# Event lanes, top to bottom: label, marker, colour.
LANES = {
    "fault": ("fault", "X", FAULT),
    "failure_detected": ("detected", "v", "#e69f00"),
    "takeover": ("takeover", "^", "#7b3294"),
    "recovered": ("recovered", "o", "#1a9850"),
    "reprotected": ("re-protected", "s", "#2166ac"),
    "process_resumed": ("resumed", ">", "#777777"),
}


def draw(tables: Tables, out: Path) -> list[Figure]:
    """One timeline per run outside a campaign (the first ``TIMELINES``)."""
    figures = []
    used: set[str] = set()
    alone = sorted(
        (r for r in tables.get("runs", []) if r.get("campaign") is None), key=lambda r: r["run_id"]
    )
    for run in alone[:TIMELINES]:
        key = _key(str(run.get("run") or "run"), used)
        where = Path(str(run["run_id"]))  # its parent too: run directories are often named "run"
        title = f"Timeline of {where.parent.name}/{where.name}" + (
            f" ({Path(run['config']).stem})" if run.get("config") else ""
        )
        rows = [r for r in tables.get("edge_timeline", []) if r["run_id"] == run["run_id"]]
        if not rows:
            figures.append(Figure(key, title, missing="no edge samples", kind="timeline"))
            continue
        path = out / f"{key}.png"
        _draw(path, title, run["run_id"], rows, tables)
        figures.append(Figure(key, title, path, kind="timeline"))
    return figures


def _key(name: str, used: set[str]) -> str:
    base = "timeline-" + (re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "run")
    key, n = base, 2
    while key in used:
        key, n = f"{base}-{n}", n + 1
    used.add(key)
    return key


def pipeline_order(edges: Sequence[str]) -> list[str]:
    """Edges ``a->b`` from the sources downstream (by name within a hop)."""
    consumers = {e.split("->", 1)[1] for e in edges}
    depth: dict[str, int] = {}
    producers_of: dict[str, list[str]] = defaultdict(list)
    for e in edges:
        a, b = e.split("->", 1)
        producers_of[b].append(a)

    def hops(stage: str, seen: frozenset[str] = frozenset()) -> int:
        if stage not in depth:
            ups = [p for p in producers_of.get(stage, []) if p not in seen]
            depth[stage] = (
                0 if stage not in consumers or not ups else 1 + max(hops(p, seen | {stage}) for p in ups)
            )
        return depth[stage]

    return sorted(edges, key=lambda e: (hops(e.split("->", 1)[0]), e))


def _series(points: list[tuple[float, float | None]], gap: float) -> tuple[list[float], list[float]]:
    """x and y with a break (NaN) wherever the points are more than ``gap`` apart."""
    xs: list[float] = []
    ys: list[float] = []
    for x, y in sorted(points):
        if xs and x - xs[-1] > gap:
            xs.append((x + xs[-1]) / 2)
            ys.append(math.nan)
        xs.append(x)
        ys.append(math.nan if y is None else y)
    return xs, ys


def _steps(bins: Sequence[tuple[float, float | None]], width: float) -> tuple[list[float], list[float]]:
    """Each bin ``[start, start + width)`` drawn flat at its value; a break
    where bins are missing."""
    xs: list[float] = []
    ys: list[float] = []
    for start, value in sorted(bins):
        if xs and start > xs[-1] + width / 2:
            xs.append(xs[-1])
            ys.append(math.nan)
        v = math.nan if value is None else value
        xs += [start, start + width]
        ys += [v, v]
    return xs, ys


def _draw(path: Path, title: str, run_id: str, rows: Rows, tables: Tables) -> None:
    def mine(table: str) -> Rows:
        return [r for r in tables.get(table, []) if r["run_id"] == run_id and r.get("at_s") is not None]

    faults, events, latency, delivered = (
        mine("faults"),
        [e for e in mine("timeline_events") if e["at_s"] >= 0],
        mine("sink_latency"),
        mine("sink_deliveries"),
    )
    width = float(rows[0]["width_s"])
    ends = [r["at_s"] + width for r in rows] + [r["at_s"] for r in latency + delivered]
    end = max(ends) + width / 2
    fig, axes = plt.subplots(
        5, 1, figsize=(10, 11.5), sharex=True, gridspec_kw={"height_ratios": [1.1, 2.2, 2.2, 1.5, 1.5]}
    )
    lane, rates, volume, sinks, delay = axes
    _lane(lane, faults, events, end)
    _edges(rates, volume, rows, width)
    _deliveries(sinks, delivered)
    _latency(delay, latency, width)
    delay.set_xlabel(f"seconds after t0 (edges in bins of {width:g} s)")
    for ax in (rates, volume, sinks, delay):
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        _marks(ax, faults, events)
    lane.set_xlim(0, end)
    fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def _legend(ax: Any, **kwargs: Any) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False, **kwargs)


def _edges(rates: Any, volume: Any, rows: Rows, width: float) -> None:
    """Rows/s and kB/s per edge, data channel solid, backup dashed."""
    by_edge: dict[str, Rows] = defaultdict(list)
    for r in rows:
        by_edge[r["edge"]].append(r)
    handles = []
    for i, edge in enumerate(pipeline_order(list(by_edge))):
        color = PALETTE[i % len(PALETTE)]
        for ax, unit, scale in ((rates, "rows", 1.0), (volume, "bytes", 1e-3)):
            for channel, style, lw in (("main", "-", 1.8), ("backup", "--", 1.2)):
                values = [(r["at_s"], _scaled(r[f"{channel}_{unit}_per_s"], scale)) for r in by_edge[edge]]
                if channel == "backup" and not any(v for _, v in values):
                    continue  # an unprotected consumer: no backup channel
                ax.plot(*_steps(values, width), style, color=color, linewidth=lw)
        handles.append(Line2D([], [], color=color, linewidth=1.8, label=edge))
    handles += [
        Line2D([], [], color="black", linestyle="-", label="data channel"),
        Line2D([], [], color="black", linestyle="--", linewidth=1.2, label="backup channel"),
    ]
    _legend(rates, handles=handles)
    rates.set_ylabel("rows/s per edge")
    volume.set_ylabel("kB/s per edge")


def _sink_color(i: int) -> str:
    return LATENCY if i == 0 else PALETTE[-i % len(PALETTE)]


def _deliveries(ax: Any, rows: Rows) -> None:
    """Rows/s each sink received, in fine bins (none delivered: 0)."""
    by_sink: dict[str, dict[int, float]] = defaultdict(dict)
    width = float(rows[0]["width_s"]) if rows else 0.0
    for r in rows:
        by_sink[r["sink"]][round(r["at_s"] / width)] = float(r["rows_per_s"])
    for i, (sink, bins) in enumerate(sorted(by_sink.items())):
        values = [(k * width, bins.get(k, 0.0)) for k in range(max(bins) + 1)]
        ax.plot(*_steps(values, width), color=_sink_color(i), linewidth=1.2, label=sink)
    if by_sink:
        _legend(ax, title="sink")
        ax.set_ylabel(f"rows/s delivered\n(bins of {width:g} s)")
    else:
        ax.set_ylabel("rows/s delivered")
        _none(ax, "no sink arrivals in this run's telemetry")


def _latency(ax: Any, rows: Rows, width: float) -> None:
    by_sink: dict[str, list[tuple[float, float | None]]] = defaultdict(list)
    for r in rows:
        by_sink[r["sink"]].append((float(r["at_s"]), r["latency_ms"]))
    for i, (sink, samples) in enumerate(sorted(by_sink.items())):
        xs, ys = _series(samples, 3 * max(width, 0.25))
        ax.plot(xs, ys, ".-", color=_sink_color(i), linewidth=1.5, markersize=4, label=sink)
    if by_sink:
        _legend(ax, title="sink")
    else:
        _none(ax, "no latency samples in this run's telemetry")
    ax.set_ylabel("sink latency (ms,\nmean per sample)")


def _none(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#777777")


def _scaled(value: Any, scale: float) -> float | None:
    return None if value is None else float(value) * scale


def _recovered_at(fault: dict[str, Any]) -> float | None:
    if fault.get("detection_ms") is None or fault.get("recovery_ms") is None:
        return None
    return float(fault["at_s"]) + (float(fault["detection_ms"]) + float(fault["recovery_ms"])) / 1000


def _fault_label(fault: dict[str, Any]) -> str:
    """``kill node-2: detected after 77 ms, recovered 224 ms later``."""
    kind = str(fault.get("fault_kind"))
    what = {"stop": "freeze", "exit": "exited", "freeze": "froze"}.get(kind, kind)
    label = f"{what} {fault['target']}"
    if fault.get("detection_ms") is not None:
        label += f": detected after {fault['detection_ms']:.0f} ms"
        if fault.get("recovery_ms") is not None:
            label += f", recovered {fault['recovery_ms']:.0f} ms later"
    return label


def _lane(ax: Any, faults: Rows, events: Rows, end: float) -> None:
    """One row per kind of event, a marker and the node at each."""
    present = ["fault"] * bool(faults) + [
        k for k in LANES if k != "fault" and any(e["event"] == k for e in events)
    ]
    if not present:
        _none(ax, "no fault in this run")
        ax.set_yticks([])
    y = {kind: -i for i, kind in enumerate(present)}
    for f in faults:
        _, marker, color = LANES["fault"]
        ax.plot([f["at_s"]], [y["fault"]], marker, color=color, markersize=9)
        ax.annotate(_fault_label(f), (f["at_s"], y["fault"]), xytext=(7, -4), textcoords="offset points",
                    fontsize=9, color=color, fontweight="bold")  # fmt: skip
    for e in events:
        _, marker, color = LANES[e["event"]]
        who = e.get("target") if e["event"] == "process_resumed" else e.get("node")
        ax.plot([e["at_s"]], [y[e["event"]]], marker, color=color, markersize=7)
        ax.annotate(str(who), (e["at_s"], y[e["event"]]), xytext=(6, -4), textcoords="offset points",
                    fontsize=8, color=color)  # fmt: skip
    if present:
        ax.set_yticks(list(y.values()), [LANES[k][0] for k in present], fontsize=9)
        ax.set_ylim(-len(present) + 0.4, 0.6)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlim(0, end)
    for f in faults:
        _failover(ax, f)


def _failover(ax: Any, fault: dict[str, Any]) -> None:
    """The fault's line and, up to its recovery (or a freeze's end), a shade."""
    at = float(fault["at_s"])
    ax.axvline(at, color=FAULT, linewidth=1.6, alpha=0.85)
    until = _recovered_at(fault)
    if fault.get("duration_s"):
        until = max(until or at, at + float(fault["duration_s"]))
    if until is not None and until > at:
        ax.axvspan(at, until, color=FAULT, alpha=0.12, linewidth=0)


def _marks(ax: Any, faults: Rows, events: Rows) -> None:
    for f in faults:
        _failover(ax, f)
    for e in events:
        ax.axvline(e["at_s"], color=LANES[e["event"]][2], linewidth=0.9, linestyle=":", alpha=0.9)
