"""The papers' figures from the report's tables (matplotlib, Agg backend).

Seed 002 section 6: Figs. 4/5 bandwidth overhead and recovery time against
the SAS batch size, AS and UB as references; 6/7 the same per operator;
8/9 per network load; 10/11 A-SAS under a data-rate step (backup bandwidth
per second against ``bw_max``, A-SAS vs AS; recovery per kill time against
``recovery_max``, A-SAS vs UB); 12/13 the same under a processing-cost
step. Seed 001: Fig. 8 non-recursive processing time (DTS vs HB, HB's bound
on the x axis), Fig. 9 the L1 data cache miss rate, Fig. 10 recursive
against non-recursive processing time. A figure whose input is missing is
not drawn; :class:`Figure` then names the campaign command that makes it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

Rows = list[dict[str, Any]]
Tables = dict[str, Rows]

SIZES = "1,50,100,150,200,250,300,350,400,450,500"
SWEEP = f"semiactive experiment sweep {{config}} --modes as,ub,sas --batch-sizes {SIZES} --repeat 2"
SELECT_SWEEP = SWEEP.format(config="examples/paper-chain-ha.yaml") + " --tag operator=select"
AGGREGATE_SWEEP = SWEEP.format(config="examples/paper-chain-ha-aggregate.yaml") + " --tag operator=aggregate"
LOAD_SWEEP = AGGREGATE_SWEEP + " --network-load 0,40MB/s,60MB/s"
ASAS = "semiactive experiment asas --scenario {scenario} --modes asas,as,ub --tuner both"
ENGINE = "python bench/recursion.py --campaign runs/engine"


@dataclass
class Figure:
    """One figure: drawn to ``path``, or ``missing`` says why not and
    ``command`` what makes its input; ``kind``: ``timeline`` (one run's)
    or ``campaign``."""

    key: str
    title: str
    path: Path | None = None
    missing: str | None = None
    command: str | None = None
    kind: str = "campaign"


def _sweep(tables: Tables, table: str) -> Rows:
    return [r for r in tables.get(table, []) if r.get("kind") == "sweep" and r.get("mode")]


def _operators(rows: Rows) -> list[str]:
    return sorted({str(r["operator"]) for r in rows if r.get("operator") is not None})


def _preferred(names: list[str], wanted: str) -> str:
    return next((n for n in names if wanted in n), names[0])


def _series_vs_batch(rows: Rows, value: str) -> tuple[list[tuple[int, float]], float | None, float | None]:
    """SAS (B, value) points, and AS's and UB's values (means)."""
    sas = sorted(
        (int(r["batch_size"]), float(r[value]))
        for r in rows
        if r["mode"] == "sas" and r.get("batch_size") is not None and r.get(value) is not None
    )

    def ref(mode: str) -> float | None:
        values = [float(r[value]) for r in rows if r["mode"] == mode and r.get(value) is not None]
        return sum(values) / len(values) if values else None

    return sas, ref("as"), ref("ub")


def _percent(v: float) -> float:
    return v * 100


def _batch_plot(
    path: Path,
    title: str,
    groups: dict[str, Rows],
    value: str,
    ylabel: str,
    scale: Callable[[float], float] = float,
) -> None:
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (label, rows) in enumerate(groups.items()):
        color = f"C{i}"
        sas, as_, ub = _series_vs_batch(rows, value)
        prefix = f"{label}: " if len(groups) > 1 else ""
        if sas:
            ax.plot([b for b, _ in sas], [scale(v) for _, v in sas], "o-", color=color, label=f"{prefix}SAS")
        if as_ is not None:
            ax.axhline(scale(as_), color=color, linestyle="--", linewidth=1, label=f"{prefix}AS")
        if ub is not None:
            ax.axhline(scale(ub), color=color, linestyle=":", linewidth=1.5, label=f"{prefix}UB")
    ax.set_xlabel("SAS batch size B (rows)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _seed002_batch(tables: Tables, out: Path) -> list[Figure]:
    overhead = [r for r in _sweep(tables, "overhead_by_setting") if not r.get("network_load_bytes_per_s")]
    recovery = [r for r in _sweep(tables, "recovery_by_setting") if not r.get("network_load_bytes_per_s")]
    figures = []
    specs: list[tuple[str, Rows, str, Callable[[float], float], str]] = [
        ("overhead_mean", overhead, "bandwidth overhead (%)", _percent, "overhead"),
        ("recovery_ms_mean", recovery, "recovery time (ms)", float, "recovery time"),
    ]
    ops = _operators(overhead + recovery)
    for number, (value, rows, ylabel, scale, what) in zip((4, 5), specs, strict=True):
        key, title = f"seed002-fig{number}", f"Seed 002 Fig. {number}: {what} vs batch size"
        if not ops:
            figures.append(Figure(key, title, missing="no sweep campaign", command=SELECT_SWEEP))
            continue
        op = _preferred(ops, "select")
        path = out / f"{key}.png"
        _batch_plot(
            path, f"{what} vs B ({op})", {op: [r for r in rows if r["operator"] == op]}, value, ylabel, scale
        )
        figures.append(Figure(key, title, path))
    for number, (value, rows, ylabel, scale, what) in zip((6, 7), specs, strict=True):
        key, title = f"seed002-fig{number}", f"Seed 002 Fig. {number}: {what} per operator"
        if len(ops) < 2:
            have = f"sweeps of {', '.join(ops)} only" if ops else "no sweep campaign"
            cmd = f"{SELECT_SWEEP}; {AGGREGATE_SWEEP}"
            figures.append(Figure(key, title, missing=f"needs two operators ({have})", command=cmd))
            continue
        path = out / f"{key}.png"
        groups = {op: [r for r in rows if r["operator"] == op] for op in ops}
        _batch_plot(path, f"{what} vs B per operator", groups, value, ylabel, scale)
        figures.append(Figure(key, title, path))
    return figures


def _seed002_load(tables: Tables, out: Path) -> list[Figure]:
    overhead = _sweep(tables, "overhead_by_setting")
    recovery = _sweep(tables, "recovery_by_setting")
    loads: dict[str, set[float]] = defaultdict(set)
    for r in overhead + recovery:
        loads[str(r.get("operator"))].add(float(r.get("network_load_bytes_per_s") or 0.0))
    candidates = sorted(op for op, levels in loads.items() if len(levels) >= 2)
    figures = []
    specs: list[tuple[int, str, Rows, str, Callable[[float], float], str]] = [
        (8, "overhead_mean", overhead, "bandwidth overhead (%)", _percent, "overhead"),
        (9, "recovery_ms_mean", recovery, "recovery time (ms)", float, "recovery time"),
    ]
    for number, value, rows, ylabel, scale, what in specs:
        key, title = f"seed002-fig{number}", f"Seed 002 Fig. {number}: {what} under network load"
        if not candidates:
            figures.append(Figure(key, title, missing="no sweep with two load levels", command=LOAD_SWEEP))
            continue
        op = _preferred(candidates, "aggregate")
        groups: dict[str, Rows] = {}
        for level in sorted(loads[op]):
            label = "no load" if level == 0 else f"{level / 1e6:g} MB/s"
            groups[label] = [
                r
                for r in rows
                if r["operator"] == op and float(r.get("network_load_bytes_per_s") or 0) == level
            ]
        path = out / f"{key}.png"
        _batch_plot(path, f"{what} vs B under network load ({op})", groups, value, ylabel, scale)
        figures.append(Figure(key, title, path))
    return figures


def _label(r: dict[str, Any]) -> str:
    mode = str(r.get("mode") or "?")
    name = "A-SAS" if mode == "asas" else mode.upper()
    return f"{name} ({r['tuner']})" if mode == "asas" and r.get("tuner") else name


def _seed002_asas(tables: Tables, out: Path) -> list[Figure]:
    figures = []
    for scenario, (bw_fig, rec_fig), what in (("rate", (10, 11), "data-rate"), ("cost", (12, 13), "cost")):
        command = ASAS.format(scenario=scenario)
        bw = [r for r in tables.get("asas_bandwidth", []) if r.get("scenario") == scenario]
        bw = [r for r in bw if r.get("mode") in ("asas", "as")]
        key, title = f"seed002-fig{bw_fig}", f"Seed 002 Fig. {bw_fig}: backup bandwidth under a {what} step"
        if not bw:
            figures.append(Figure(key, title, missing=f"no A-SAS {scenario} campaign", command=command))
        else:
            fig, ax = plt.subplots(figsize=(6.4, 4.2))
            series: dict[str, list[tuple[int, float]]] = defaultdict(list)
            for r in bw:
                series[_label(r)].append((int(r["second"]), float(r["backup_bytes_per_s"]) / 1e3))
            for label, points in sorted(series.items()):
                points.sort()
                ax.plot([p[0] for p in points], [p[1] for p in points], "o-", markersize=3, label=label)
            limits = {float(r["bw_max_bytes_per_s"]) for r in bw if r.get("bw_max_bytes_per_s")}
            for limit in sorted(limits):
                ax.axhline(limit / 1e3, color="red", linestyle="--", linewidth=1, label="bw_max")
            _finish(ax, "time (s)", "backup bandwidth (kB/s)", title)
            figures.append(_saved(fig, out, key, title))
        rec = [r for r in tables.get("asas_recovery", []) if r.get("scenario") == scenario]
        rec = [r for r in rec if r.get("mode") in ("asas", "ub") and r.get("recovery_ms") is not None]
        key, title = f"seed002-fig{rec_fig}", f"Seed 002 Fig. {rec_fig}: recovery time under a {what} step"
        if not rec:
            figures.append(Figure(key, title, missing=f"no A-SAS {scenario} kill runs", command=command))
            continue
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        by: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for r in rec:
            by[_label(r)].append((float(r["kill_at_s"]), float(r["recovery_ms"])))
        for label, kills in sorted(by.items()):
            kills.sort()
            ax.plot([p[0] for p in kills], [p[1] for p in kills], "o-", label=label)
        for limit in sorted({float(r["recovery_max_s"]) for r in rec if r.get("recovery_max_s")}):
            ax.axhline(limit * 1e3, color="red", linestyle="--", linewidth=1, label="recovery_max")
        _finish(ax, "kill time (s)", "recovery time (ms)", title)
        figures.append(_saved(fig, out, key, title))
    return figures


def _asas_traces(tables: Tables, out: Path) -> list[Figure]:
    """B, BW* and R* of the tuner steps of each scenario's runs without a
    kill, against the limits (one run per tuner: the first repeat)."""
    figures = []
    for scenario in sorted({str(r.get("scenario")) for r in tables.get("asas_tuning", [])}):
        rows = [
            r
            for r in tables["asas_tuning"]
            if str(r.get("scenario")) == scenario and r.get("kill_at_s") is None
        ]
        if not rows:
            continue
        first_run: dict[str, str] = {}
        for r in sorted(rows, key=lambda r: (r.get("repeat") or 0, r["run_id"])):
            first_run.setdefault(str(r.get("tuner")), r["run_id"])
        fig, axes = plt.subplots(3, 1, figsize=(6.4, 7.2), sharex=True)
        for tuner, run_id in sorted(first_run.items()):
            trace = sorted((r for r in rows if r["run_id"] == run_id), key=lambda r: r["at_s"])
            t = [r["at_s"] for r in trace]
            axes[0].step(t, [r["batch_size"] for r in trace], where="post", label=tuner)
            axes[1].plot(t, [_kb(r["bw_estimate_bytes_per_s"]) for r in trace], label=f"BW* {tuner}")
            axes[2].plot(t, [r["recovery_estimate_ms"] for r in trace], label=f"R* {tuner}")
        bw_max = {r["bw_max_bytes_per_s"] for r in rows if r.get("bw_max_bytes_per_s")}
        rec_max = {r["recovery_max_ms"] for r in rows if r.get("recovery_max_ms")}
        for limit in bw_max:
            axes[1].axhline(limit / 1e3, color="red", linestyle="--", linewidth=1, label="bw_max")
        for limit in rec_max:
            axes[2].axhline(limit, color="red", linestyle="--", linewidth=1, label="recovery_max")
        axes[0].set_ylabel("B (rows)")
        axes[1].set_ylabel("BW* (kB/s)")
        axes[2].set_ylabel("R* (ms)")
        axes[2].set_xlabel("time (s)")
        for ax in axes:
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        key = f"asas-trace-{scenario}"
        title = f"A-SAS trace ({scenario} step): B, BW*, R* against the limits"
        axes[0].set_title(title)
        fig.tight_layout()
        figures.append(_saved(fig, out, key, title))
    return figures


def _kb(v: Any) -> float | None:
    return None if v is None else float(v) / 1e3


def _saved(fig: Any, out: Path, key: str, title: str) -> Figure:
    """Write ``fig`` as ``out/<key>.png`` and close it."""
    path = out / f"{key}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Figure(key, title, path)


def _finish(ax: Any, xlabel: str, ylabel: str, title: str) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.figure.tight_layout()


def _seed001(tables: Tables, out: Path) -> list[Figure]:
    rows = tables.get("engine_summary", [])
    cost = {
        (r["form"], r["executor"], r.get("hb_bound"), r["subqueries"], r["per_ts"]): float(
            r["cpu_s_per_million"]
        )
        for r in rows
        if r.get("cpu_s_per_million") is not None
    }
    open_dts = [k for k in cost if k[0] == "open" and k[1] == "dts"]
    base_key = min(open_dts, key=lambda k: (k[3], k[4])) if open_dts else None
    base = cost[base_key] if base_key else None
    figures = []
    key8, title8 = "seed001-fig8", "Seed 001 Fig. 8: non-recursive processing time, DTS vs HB"
    hb = [k for k in cost if k[0] == "open" and k[1] == "hb" and k[2] is not None]
    if base is None or not hb:
        figures.append(
            Figure(key8, title8, missing="no engine campaign (DTS and HB, open form)", command=ENGINE)
        )
    else:
        per_ts = sorted({k[4] for k in hb})
        fig, axes = plt.subplots(1, len(per_ts), figsize=(5.2 * len(per_ts), 4.2), squeeze=False)
        for ax, ts in zip(axes[0], per_ts, strict=True):
            for i, sub in enumerate(sorted({k[3] for k in hb if k[4] == ts})):
                points = sorted(
                    (k[2], v / base)
                    for k, v in cost.items()
                    if k[:2] == ("open", "hb") and k[3:] == (sub, ts)
                )
                ax.plot(
                    [p[0] for p in points],
                    [p[1] for p in points],
                    "o-",
                    color=f"C{i}",
                    label=f"HB ({sub} sub-q.)",
                )
                dts = cost.get(("open", "dts", None, sub, ts))
                if dts is not None:
                    ax.axhline(dts / base, color=f"C{i}", linestyle="--", label=f"DTS ({sub} sub-q.)")
            ax.set_xscale("log")
            _finish(
                ax, "HB bound (consecutive runs)", "relative processing time", f"{ts} tuple(s) per timestamp"
            )
        fig.suptitle(title8, fontsize=10)
        fig.tight_layout()
        figures.append(_saved(fig, out, key8, title8))
    key9, title9 = "seed001-fig9", "Seed 001 Fig. 9: L1 data cache miss rate"
    misses = [r for r in rows if r.get("l1_miss_rate") is not None and r["form"] == "open"]
    if not misses:
        why = "no L1 data cache counts (an engine campaign on a machine with hardware counters)"
        figures.append(Figure(key9, title9, missing=why, command=ENGINE))
    else:
        bounds = sorted({r["hb_bound"] for r in misses if r["executor"] == "hb" and r.get("hb_bound")})
        chosen = [b for b in (bounds[:1] + bounds[-1:]) if b is not None]
        bars = [("DTS", "dts", None)] + [(f"HB {b}", "hb", b) for b in dict.fromkeys(chosen)]
        groups = sorted({(r["per_ts"], r["subqueries"]) for r in misses})
        fig, ax = plt.subplots(figsize=(7.2, 4.2))
        width = 0.8 / len(bars)
        for i, (label, executor, bound) in enumerate(bars):
            values = []
            for ts, sub in groups:
                match = [
                    r
                    for r in misses
                    if (r["executor"], r.get("hb_bound"), r["per_ts"], r["subqueries"])
                    == (executor, bound, ts, sub)
                ]
                values.append(float(match[0]["l1_miss_rate"]) * 100 if match else 0.0)
            ax.bar([g + i * width for g in range(len(groups))], values, width, label=label)
        ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
        ax.set_xticklabels([f"{sub} sub-q.\n{ts}/ts" for ts, sub in groups], fontsize=8)
        _finish(ax, "", "L1 data cache miss rate (%)", title9)
        figures.append(_saved(fig, out, key9, title9))
    key10, title10 = "seed001-fig10", "Seed 001 Fig. 10: recursive vs non-recursive processing time (DTS)"
    pairs = sorted(
        (k[3], k[4])
        for k in cost
        if k[0] == "recursive" and k[1] == "dts" and ("open", "dts", None, k[3], k[4]) in cost
    )
    if base is None or not pairs:
        figures.append(
            Figure(key10, title10, missing="no engine campaign with both forms under DTS", command=ENGINE)
        )
    else:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        xs = range(len(pairs))
        ax.bar(
            [x - 0.2 for x in xs],
            [cost[("open", "dts", None, s, t)] / base for s, t in pairs],
            0.4,
            label="non-recursive",
        )
        ax.bar(
            [x + 0.2 for x in xs],
            [cost[("recursive", "dts", None, s, t)] / base for s, t in pairs],
            0.4,
            label="recursive",
        )
        ax.set_xticks(list(xs))
        ax.set_xticklabels([f"{s} sub-q., {t}/ts" for s, t in pairs], fontsize=8)
        _finish(ax, "", "relative processing time", title10)
        figures.append(_saved(fig, out, key10, title10))
    return figures


def draw(tables: Tables, out: Path) -> list[Figure]:
    """Every figure the tables allow, into ``out``; the others as missing."""
    out.mkdir(parents=True, exist_ok=True)
    return [
        *_seed002_batch(tables, out),
        *_seed002_load(tables, out),
        *_seed002_asas(tables, out),
        *_asas_traces(tables, out),
        *_seed001(tables, out),
    ]
