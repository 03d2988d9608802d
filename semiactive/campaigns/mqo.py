"""``semiactive experiment mqo``: the MQO paper's experiment (section 5, Figs. 10-13).

300 random queries from Fig. 10's template (``MASTER Mj``, j = 0..9;
``WINDOW SIZE`` 3, 4 or 5 units; ``FROM Quote, News WHERE Quote.name =
News.company``); one unit = 1 s = 1000 ticks. Quote and News bring 24
tuples per unit each (evenly spaced, a company out of 50 each). Each master
brings one tuple per 10-unit cycle, at a phase of the cycle that follows a
pattern. The seed shows its two patterns only as images (Figs. 11, 12), so
we pick two that exercise the same change:

- pattern A (the first cycle, t < 10): M0, M1 at 1, M2 at 2 | M3, M4 at 4,
  M5 at 5 | M6, M7 at 7, M8, M9 at 8: three tight groups of masters;
- pattern B (from t = 11 on): M0, M3, M6 at 1, M9 at 2 | M1, M4, M7 at 4 |
  M2, M5, M8 at 7: three tight groups again, but each old group is now
  spread over the whole cycle.

Clusters learnt from pattern A are right until t = 10 and wrong after.
Methods (each in its own process, interleaved across repeats): ``dynamic``
(clusters from the log of pattern A, re-clustered at t = 20 from the log of
the last 10 units), ``static`` (the same first clusters, kept), ``single``
(all queries in one cluster), ``none`` (every query alone). Written to
``--out``: ``data/``, ``runs/<method>-<k>/`` (the runner's outputs),
``table.md`` and ``table.csv``, ``time_per_unit.png``, ``work_per_unit.png``.
"""

from __future__ import annotations

import csv
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from semiactive.errors import UserError
from semiactive.source_tree import ROOT

UNIT = 1000
CYCLE = 10
PATTERN_A = [1, 1, 2, 4, 4, 5, 7, 7, 8, 8]
PATTERN_B = [1, 4, 7, 1, 4, 7, 1, 4, 7, 2]
METHODS = ("dynamic", "static", "single", "none")
TEMPLATE = "SELECT * FROM Quote, News WHERE Quote.name = News.company"
COMPANIES = 50
PER_UNIT = 24


class ExperimentError(UserError):
    pass


def write_data(out: Path, queries: int, units: int, seed: int) -> list[str]:
    """The queries and the streams; returns the runner's ``--stream`` specs."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        f"-- {queries} random queries from the MQO paper's Fig. 10 template (seed {seed}).",
        f"-- Patterns of masters per {CYCLE}-unit cycle: A {PATTERN_A} (t < 10), B {PATTERN_B} (t >= 11).",
    ]
    for i in range(queries):
        lines.append(
            f"CREATE Q{i} MASTER M{rng.randrange(10)} "
            f"WINDOW SIZE {rng.choice([3, 4, 5])} * second {TEMPLATE};"
        )
    (out / "queries.cql").write_text("\n".join(lines) + "\n")
    step = UNIT / PER_UNIT
    for stream, column, offset in (("Quote", "name", 0), ("News", "company", step / 2)):
        with (out / f"{stream}.csv").open("w") as f:
            f.write(f"ts,{column},value\n")
            for k in range(units * PER_UNIT):
                f.write(f"{int(k * step + offset)},c{rng.randrange(COMPANIES)},{rng.randrange(1000)}\n")
    for j in range(10):
        with (out / f"M{j}.csv").open("w") as f:
            f.write("ts\n")
            for cycle in range(units // CYCLE + 1):
                phase = (PATTERN_A if cycle == 0 else PATTERN_B)[j]
                t = (cycle * CYCLE + phase) * UNIT
                if t < units * UNIT:
                    f.write(f"{t}\n")
    return [f"{s}={out / f'{s}.csv'}" for s in ("Quote", "News", *(f"M{j}" for j in range(10)))]


def run_method(
    data: Path, streams: list[str], method: str, theta: float, at_unit: int, out: Path
) -> dict[str, Any]:
    command = [sys.executable, "-m", "semiactive", "mqo", "run", str(data / "queries.cql")]
    for spec in streams:
        command += ["--stream", spec]
    command += [
        "--method",
        method,
        "--theta",
        str(theta),
        "--unit",
        str(UNIT),
        "--log-period",
        str(CYCLE * UNIT),
    ]
    if method == "dynamic":
        command += ["--recluster-at", str(at_unit * UNIT)]
    command += ["--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise ExperimentError(
            f"{method}: {done.stderr.strip().splitlines()[-1] if done.stderr else done.returncode}"
        )
    stats: dict[str, Any] = json.loads((out / "stats.json").read_text())
    return stats


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def summarise(per_method: dict[str, list[dict[str, Any]]], at_unit: int) -> list[dict[str, Any]]:
    """Per method: median over repeats of each unit's time, then means per phase."""
    rows = []
    for method, runs in per_method.items():
        units = len(runs[0]["per_unit"])
        ms = [statistics.median(r["per_unit"][u]["seconds"] for r in runs) * 1000 for u in range(units)]
        after = range(at_unit + 1, units)
        work = runs[0]["per_unit"]
        rows.append(
            {
                "method": method,
                "ms_t_lt_10": _mean(ms[:CYCLE]),
                "ms_10_to_20": _mean(ms[CYCLE:at_unit]),
                "ms_reclustering_unit": ms[at_unit],
                "ms_after_20": _mean([ms[u] for u in after]),
                "ms_whole_run": _mean(ms),
                "probes_after": sum(work[u]["probes"] for u in after),
                "intermediate_after": sum(work[u]["intermediate"] for u in after),
                "delivered_after": sum(work[u]["delivered"] for u in after),
                "results_after": sum(work[u]["results"] for u in after),
                "clusters": runs[0].get("clusters_at_end", ""),
                "per_unit_ms": ms,
            }
        )
    return rows


def clustering_cost(data: Path, streams: list[str], theta: float, repeat: int = 5) -> dict[str, float]:
    """Milliseconds to compute the similarity and clusters of the queries
    from the first cycle's log: every query alone, and via base groups."""
    from semiactive.embedded.mqo import arrival_log, load_queries, read_stream
    from semiactive.mqo.grouping import base_groups, cluster
    from semiactive.mqo.similarity import similarity_matrix, usage, use_bitmap

    queries = load_queries(str(data / "queries.cql"))
    loaded = {}
    for spec in streams:
        name, _, path = spec.partition("=")
        loaded[name] = read_stream(name, Path(path))
    log = arrival_log(loaded, {}, CYCLE * UNIT)

    def per_query() -> None:
        uses = [usage(q.masters, q.window, q.sources, log) for q in queries]
        cluster(similarity_matrix(uses), theta)

    def per_group() -> None:
        # A base group's members share their masters: its USE set of a source
        # is that of its widest member reading the source (as the executor does).
        groups = base_groups(queries, theta)
        uses = []
        for g in groups:
            members = [queries[i] for i in g]
            widest: dict[str, int | None] = {}
            for q in members:
                for src in q.sources:
                    w = widest.get(src, 0)
                    widest[src] = None if w is None or q.window is None else max(w, q.window)
            when = log.master_times(members[0].masters)
            uses.append({src: use_bitmap(log.arrivals(src), when, w) for src, w in widest.items()})
        cluster(similarity_matrix(uses), theta)

    out = {}
    for name, fn in (("queries", per_query), ("base_groups", per_group)):
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            fn()
            times.append((time.perf_counter() - started) * 1000)
        out[name] = statistics.median(times)
    return out


def _same_results(out: Path, methods: list[str], queries: int) -> None:
    """Every method must give every query the same results (in any order within an instant)."""
    first = out / "runs" / f"{methods[0]}-0"
    for i in range(queries):
        want = sorted((first / f"Q{i}.jsonl").read_text().splitlines())
        for method in methods[1:]:
            got = sorted((out / "runs" / f"{method}-0" / f"Q{i}.jsonl").read_text().splitlines())
            if got != want:
                raise ExperimentError(f"Q{i}: {method} and {methods[0]} give different results")
    print(f"  every method gave every one of the {queries} queries the same results")


def write_table(out: Path, rows: list[dict[str, Any]], cost: dict[str, float], queries: int) -> str:
    fields = [k for k in rows[0] if k not in ("per_unit_ms", "clusters")]
    with (out / "table.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    by = {r["method"]: r for r in rows}
    lines = [
        "| method | ms/unit t<10 | ms/unit 10<=t<20 | ms at t=20 | ms/unit t>20 | ms/unit whole | "
        "probes t>20 | intermediate t>20 | delivered t>20 | results t>20 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['method']} | {r['ms_t_lt_10']:.2f} | {r['ms_10_to_20']:.2f} | "
            f"{r['ms_reclustering_unit']:.2f} | {r['ms_after_20']:.2f} | {r['ms_whole_run']:.2f} | "
            f"{r['probes_after']:,} | {r['intermediate_after']:,} | {r['delivered_after']:,} | "
            f"{r['results_after']:,} |"
        )
    ratios = []
    if "dynamic" in by:
        d = by["dynamic"]
        for other in ("none", "static", "single"):
            if other in by and d["ms_whole_run"] and d["ms_after_20"]:
                o = by[other]
                ratios.append(
                    f"- {other} / dynamic: whole run {o['ms_whole_run'] / d['ms_whole_run']:.2f}x, "
                    f"after t = 20 {o['ms_after_20'] / d['ms_after_20']:.2f}x; intermediate after t = 20 "
                    f"{o['intermediate_after'] / max(d['intermediate_after'], 1):.2f}x, delivered "
                    f"{o['delivered_after'] / max(d['delivered_after'], 1):.2f}x"
                )
    lines += ["", *ratios]
    lines += [
        "",
        f"- similarity + clustering of {queries} queries from one cycle's log: "
        f"{cost['queries']:.1f} ms query by query, {cost['base_groups']:.1f} ms via base groups "
        "(median of 5)",
    ]
    text = "\n".join(lines) + "\n"
    (out / "table.md").write_text(text)
    return text


def plot(
    out: Path, rows: list[dict[str, Any]], per_method: dict[str, list[dict[str, Any]]], at_unit: int
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in rows:
        ax.plot(range(len(r["per_unit_ms"])), r["per_unit_ms"], marker=".", label=r["method"])
    ax.set_yscale("log")
    ax.set_xlabel("time (units of 1 s of event time)")
    ax.set_ylabel("processing time per unit (ms, median of repeats)")
    for x, text in ((CYCLE, "pattern changes"), (at_unit, "dynamic re-clusters")):
        ax.axvline(x, color="grey", linestyle="--", linewidth=0.8)
        ax.text(x + 0.2, ax.get_ylim()[1] * 0.7, text, fontsize=8, color="grey")
    ax.set_title("Seed 003 Fig. 13: processing time per unit, 300 queries")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "time_per_unit.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for method, runs in per_method.items():
        work = [u["intermediate"] + u["delivered"] for u in runs[0]["per_unit"]]
        ax.plot(range(len(work)), work, marker=".", label=method)
    ax.set_yscale("log")
    ax.set_xlabel("time (units)")
    ax.set_ylabel("intermediate + delivered tuples per unit")
    ax.axvline(CYCLE, color="grey", linestyle="--", linewidth=0.8)
    ax.axvline(at_unit, color="grey", linestyle="--", linewidth=0.8)
    ax.set_title("Join work per unit")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "work_per_unit.png", dpi=120)
    plt.close(fig)


def run_mqo_experiment(
    out: Path,
    *,
    queries: int,
    units: int,
    methods: list[str],
    theta: float,
    recluster_at_unit: int,
    seed: int,
    repeat: int,
) -> int:
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ExperimentError(
            f"--methods: unknown {', '.join(unknown) or 'none given'} (known: {', '.join(METHODS)})"
        )
    if queries < 1 or repeat < 1:
        raise ExperimentError("--queries and --repeat must be at least 1")
    if not 0 < theta <= 1:
        raise ExperimentError(f"--theta {theta}: must be in (0, 1]")
    if not CYCLE < recluster_at_unit < units - 1:
        raise ExperimentError(
            f"--recluster-at-unit {recluster_at_unit}: must be after {CYCLE} and before {units - 1}"
        )
    out.mkdir(parents=True, exist_ok=True)
    data = out / "data"
    streams = write_data(data, queries, units, seed)
    print(
        f"experiment mqo: {queries} queries, {units} units, methods {', '.join(methods)}, x{repeat} -> {out}"
    )
    per_method: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    for k in range(repeat):
        for method in methods:
            started = time.monotonic()
            stats = run_method(
                data, streams, method, theta, recluster_at_unit, out / "runs" / f"{method}-{k}"
            )
            per_method[method].append(stats)
            print(
                f"  {method} run {k + 1}/{repeat}: {stats['mean_seconds_per_unit'] * 1000:.2f} ms/unit, "
                f"{stats['results']:,} results ({time.monotonic() - started:.1f} s)",
                flush=True,
            )
    _same_results(out, methods, queries)
    rows = summarise(per_method, recluster_at_unit)
    cost = clustering_cost(data, streams, theta)
    text = write_table(out, rows, cost, queries)
    plot(out, rows, per_method, recluster_at_unit)
    (out / "params.json").write_text(
        json.dumps(
            {
                "queries": queries,
                "units": units,
                "methods": methods,
                "theta": theta,
                "seed": seed,
                "repeat": repeat,
                "recluster_at_unit": recluster_at_unit,
                "pattern_a": PATTERN_A,
                "pattern_b": PATTERN_B,
            },
            indent=1,
        )
        + "\n"
    )
    print(text)
    return 0
