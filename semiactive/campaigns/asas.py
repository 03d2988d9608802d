"""``semiactive experiment asas``: the SAS paper's experiments 4 and 5 (Adaptive SAS).

The paper chain with node-2 protected by node-4, under a step at the
protected edge: the source rate (``--scenario rate``, 100 -> 1000 tuples/s)
or the stage's per-row cost (``--scenario cost``, 0.05 -> 1 ms). For every
setting (A-SAS with each tuner, AS, UB) and repetition:

- one run without a kill: the backup bandwidth on the edge into node-2 per
  second and the B in force, from the producer's byte samples (every 0.5 s),
  and the coordinator's ``batch_size_changed`` events;
- one run per kill time, node-2 SIGKILLed at that second: detection and
  recovery time, and the sink checked against the reference. A kill run
  ends ``TAIL_S`` after its kill: what the kill meets depends only on what
  came before it.

Writes ``bandwidth.csv`` and ``recovery.csv`` and prints both as tables, then
the goals' figures: how long after the step the backup bandwidth stays over
``bw_max``, the worst recovery against ``recovery_max``, and how often B
moved. As in experiments 1-2 the coordinator does not re-protect.
"""

from __future__ import annotations

import asyncio
import csv
import itertools
import json
import shutil
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from semiactive import config, topology
from semiactive.campaigns.sweep import _trial
from semiactive.config import ConfigError
from semiactive.launcher.cluster import run_cluster
from semiactive.launcher.faults import Fault, FaultKind
from semiactive.launcher.manifest import Campaign
from semiactive.launcher.measurements import RunReport
from semiactive.oracle.verify import check_run
from semiactive.runtime.telemetry import read_jsonl
from semiactive.source_tree import EXAMPLES

SCENARIOS = {"rate": "paper-chain-asas.yaml", "cost": "paper-chain-asas-cost.yaml"}
KILLED = "node-2"
TAIL_S = 3.0
RUN_OVERHEAD_S = 5.0  # start, drain and check, for the ETA
GOAL_MARGIN = 0.10  # recovery may exceed recovery_max by this much
START_ATTEMPTS = 3


@dataclass(frozen=True)
class Setting:
    mode: str  # asas, as, ub
    tuner: str = ""  # asas only

    @property
    def label(self) -> str:
        return f"asas/{self.tuner}" if self.mode == "asas" else self.mode.upper()


@dataclass(frozen=True)
class Scenario:
    """The base config and what the experiment reads from it."""

    config: dict[str, Any]
    step_at_s: float
    bw_max: float
    recovery_max_ms: float


@dataclass
class BandwidthRow:
    mode: str
    tuner: str
    repeat: int
    second: int
    backup_bytes_per_s: float
    batch_size: int | None


@dataclass
class RecoveryRow:
    mode: str
    tuner: str
    repeat: int
    kill_at_s: float
    detection_ms: float | None
    recovery_ms: float | None
    identical: bool


@dataclass(frozen=True)
class Sample:
    """One byte sample of the producer: seconds after t0, cumulative backup
    bytes on the edge, and its B (None: no backup, UB)."""

    t: float
    backup_bytes: float
    batch_size: int | None


@dataclass
class FreeRun:
    """The figures of one run without a kill."""

    setting: Setting
    repeat: int
    identical: bool
    samples: list[Sample]
    batch_sizes: list[int] = field(default_factory=list)  # each B the coordinator decided, in order


def load_scenario(name: str, step_at: float | None) -> Scenario:
    """The scenario's config, its step moved to ``step_at`` if given."""
    if name not in SCENARIOS:
        raise ConfigError(f"--scenario {name!r}: expected one of {', '.join(SCENARIOS)}")
    cfg: dict[str, Any] = yaml.safe_load((EXAMPLES / SCENARIOS[name]).read_text())
    stage = _protected(cfg)
    phases = stage.get("cost_schedule", []) if name == "cost" else cfg["sources"][0]["rate"]
    steps = [float(p["at_s"]) for p in phases if float(p["at_s"]) > 0]
    if not steps:
        raise ConfigError(f"{SCENARIOS[name]}: no step to move (no phase after 0 s)")
    if step_at is not None:
        if step_at <= 0:
            raise ConfigError(f"--step-at {step_at}: give a time after 0 s")
        for p in phases:
            if float(p["at_s"]) == steps[0]:
                p["at_s"] = step_at
    ha = config.HaConfig.model_validate(stage["ha"])
    assert ha.bw_max is not None and ha.recovery_max_ms is not None
    return Scenario(cfg, step_at if step_at is not None else steps[0], ha.bw_max, ha.recovery_max_ms)


def _protected(cfg: dict[str, Any]) -> dict[str, Any]:
    stages: list[dict[str, Any]] = cfg.get("stages", [])
    for stage in stages:
        if stage.get("node") == KILLED and stage.get("ha", {}).get("mode") == "asas":
            return stage
    raise ConfigError(f"the config has no asas stage on {KILLED}")


def settings(modes: list[str], tuner: str) -> list[Setting]:
    tuners = {"both": ["algorithm3", "model"], "algorithm3": ["algorithm3"], "model": ["model"]}
    if tuner not in tuners:
        raise ConfigError(f"--tuner {tuner!r}: expected algorithm3, model or both")
    out: list[Setting] = []
    for mode in modes:
        if mode == "asas":
            out += [Setting("asas", t) for t in tuners[tuner]]
        elif mode in ("as", "ub"):
            out.append(Setting(mode))
        else:
            raise ConfigError(f"--modes: unknown mode {mode!r} (asas, as, ub)")
    if not out:
        raise ConfigError("--modes: give at least one mode")
    return out


def variant(base: dict[str, Any], setting: Setting) -> dict[str, Any]:
    """The config with the protected stage under ``setting``."""
    cfg: dict[str, Any] = yaml.safe_load(yaml.safe_dump(base))
    stage = next(s for s in cfg["stages"] if s.get("node") == KILLED)
    if setting.mode == "asas":
        stage["ha"]["tuner"] = setting.tuner
    else:
        stage["ha"] = {"mode": setting.mode, "secondary": stage["ha"]["secondary"]}
    return cfg


def parse_times(text: str) -> list[float]:
    try:
        times = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"--kill-times {text!r}: expected comma-separated seconds") from None
    if not times or min(times) <= 0:
        raise ConfigError(f"--kill-times {text!r}: give times after 0 s")
    return times


# -- reading a run --------------------------------------------------------------------------


def read_samples(path: Path, t0: float, edge: str) -> list[Sample]:
    """The producer's samples of ``edge``'s backup channel, from its
    ``edges-<node>.jsonl`` (docs/telemetry.md)."""
    return [
        Sample(float(r["t"]) - t0, float(r["backup_bytes"]), int(r["batch_size"]) or None)
        for r in read_jsonl(path)
        if r.get("edge") == edge and r.get("direction") == "out"
    ]


def cumulative_at(samples: list[Sample], t: float) -> float:
    """Backup bytes sent by time ``t``, linear between samples, clamped to
    the first and last."""
    if t <= samples[0].t:
        return samples[0].backup_bytes
    for a, b in itertools.pairwise(samples):
        if t <= b.t:
            return a.backup_bytes + (b.backup_bytes - a.backup_bytes) * (t - a.t) / (b.t - a.t)
    return samples[-1].backup_bytes


def per_second(samples: list[Sample], seconds: int) -> list[tuple[int, float, int | None]]:
    """(second k, backup bytes/s over [k, k+1), B in force at its end), for
    each second the samples cover at least half of."""
    out: list[tuple[int, float, int | None]] = []
    if not samples:
        return out
    for k in range(seconds):
        lo, hi = max(k, samples[0].t), min(k + 1, samples[-1].t)
        if hi - lo < 0.5:
            continue
        rate = (cumulative_at(samples, hi) - cumulative_at(samples, lo)) / (hi - lo)
        held = [s for s in samples if s.t <= hi] or samples[:1]
        out.append((k, rate, held[-1].batch_size))
    return out


def intervals_after(samples: list[Sample], start: float) -> list[tuple[float, float, float]]:
    """(from, to, bytes/s) between consecutive samples, for those ending after ``start``."""
    return [
        (a.t, b.t, (b.backup_bytes - a.backup_bytes) / (b.t - a.t))
        for a, b in itertools.pairwise(samples)
        if b.t > start and b.t > a.t
    ]


def settle_time(samples: list[Sample], step_at: float, limit: float) -> float | None:
    """Seconds after the step until the backup bandwidth is under ``limit``
    for good (0: never over it, at the samples' resolution), or None if it
    is still over at the end."""
    intervals = intervals_after(samples, step_at)
    over = [b for _, b, rate in intervals if rate > limit]
    if not intervals or (over and over[-1] == intervals[-1][1]):
        return None
    return max(0.0, over[-1] - step_at) if over else 0.0


def seconds_over(samples: list[Sample], step_at: float, limit: float) -> float:
    """How long, after the step, the backup bandwidth was over ``limit``."""
    return sum(b - max(a, step_at) for a, b, rate in intervals_after(samples, step_at) if rate > limit)


def reversals(sizes: list[int]) -> int:
    """Times B changed direction (a measure of oscillation)."""
    moves = [b - a for a, b in itertools.pairwise(sizes) if b != a]
    return sum(1 for x, y in itertools.pairwise(moves) if (x > 0) != (y > 0))


def decided_sizes(run_dir: Path, edge: str, initial: int | None) -> list[int]:
    """B as the coordinator set it: the initial B, then each change."""
    path = run_dir / "telemetry" / "events-coordinator.jsonl"
    sizes = [] if initial is None else [initial]
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue
            if e.get("event") == "batch_size_changed" and e.get("edge") == edge:
                sizes.append(int(e["batch_size"]))
    return sizes


# -- running ---------------------------------------------------------------------------------


@dataclass
class Results:
    bandwidth: list[BandwidthRow] = field(default_factory=list)
    recovery: list[RecoveryRow] = field(default_factory=list)
    free: list[FreeRun] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def run_asas_experiment(
    scenario_name: str,
    *,
    modes: list[str],
    tuner: str,
    kill_times: list[float],
    repeat: int,
    duration: float,
    step_at: float | None,
    out_dir: Path,
    tags: dict[str, str] | None = None,
) -> int:
    """``tags``: labels for the report job, in every run's manifest."""
    scenario = load_scenario(scenario_name, step_at)
    plan = settings(modes, tuner)
    if repeat < 1 or duration <= 0:
        raise ConfigError("--repeat and --duration must be positive")
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = [(s, r, k) for s in plan for r in range(repeat) for k in [None, *kill_times]]
    weights = [(duration if k is None else k + TAIL_S) + RUN_OVERHEAD_S for _, _, k in runs]
    results = Results()
    params = {"modes": modes, "tuner": tuner, "kill_times": kill_times, "repeat": repeat}
    params |= {"duration": duration, "step_at_s": scenario.step_at_s}
    campaign = Campaign(out_dir, "asas", params, {**(tags or {}), "scenario": scenario_name})
    started, done_weight = time.monotonic(), 0.0
    print(
        f"experiment asas, scenario {scenario_name}: step at {scenario.step_at_s:g} s, "
        f"bw_max {scenario.bw_max:,.0f} B/s, recovery_max {scenario.recovery_max_ms:g} ms; "
        f"{len(runs)} runs, about {sum(weights) / 60:.0f} min",
        file=sys.stderr,
    )
    try:
        for i, ((setting, r, kill), weight) in enumerate(zip(runs, weights, strict=True), start=1):
            line = _run_one(scenario, setting, r, kill, duration, campaign, results)
            done_weight += weight
            eta = (time.monotonic() - started) / done_weight * (sum(weights) - done_weight)
            print(f"[{i}/{len(runs)}] {line}  (about {eta:.0f} s left)", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted: the experiment stops here", file=sys.stderr)
        _write(out_dir, results)
        print(report(results, scenario, int(duration)))
        return 130
    _write(out_dir, results)
    print(report(results, scenario, int(duration)))
    print(f"\nCSV: {out_dir / 'bandwidth.csv'}, {out_dir / 'recovery.csv'}")
    for failure in results.failed:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if results.failed else 0


def _run_one(
    scenario: Scenario,
    setting: Setting,
    r: int,
    kill: float | None,
    duration: float,
    campaign: Campaign,
    results: Results,
) -> str:
    out_dir = campaign.directory
    name = setting.label.replace("/", "-").lower()
    cfg_path = out_dir / f"config-{name}.yaml"
    if not cfg_path.exists():
        cfg_path.write_text(yaml.safe_dump(variant(scenario.config, setting), sort_keys=False))
    topo = topology.resolve(config.load(cfg_path))
    edge = topo.stages[topo.nodes[KILLED].stage or ""].inputs[0]
    run_dir = out_dir / f"run-{name}-{r}-{'free' if kill is None else f'kill{kill:g}'}"
    what = f"{setting.label} #{r} {'no kill' if kill is None else f'kill {KILLED}@{kill:g}'}"
    length = duration if kill is None else kill + TAIL_S
    for attempt in range(1, START_ATTEMPTS + 1):
        reports: list[RunReport] = []
        faults = [] if kill is None else [Fault(KILLED, kill, FaultKind.KILL)]
        code = asyncio.run(
            run_cluster(
                str(cfg_path),
                duration=length,
                run_dir=run_dir,
                progress=False,
                faults=faults,
                report_to=reports,
                reprotect=False,
            )
        )
        if not reports or reports[0].interrupted:
            raise KeyboardInterrupt
        if _t0(run_dir) is not None or attempt == START_ATTEMPTS:
            break
        # Never started (e.g. a port taken by another process meanwhile): not a measurement.
        print(f"{what}: the cluster did not start; again", file=sys.stderr)
        shutil.rmtree(run_dir)
    trial = _trial(setting.mode, None, r, reports[0], check_run(topo, run_dir), code, edge.consumer)
    limits = {"bw_max_bytes_per_s": scenario.bw_max, "recovery_max_s": scenario.recovery_max_ms / 1000}
    run_params = {"mode": setting.mode, "tuner": setting.tuner or None, "repeat": r, "kill_at_s": kill}
    campaign.add(run_dir, str(cfg_path), run_params | {"step_at_s": scenario.step_at_s} | limits)
    if not trial.identical:
        results.failed.append(f"{what}: exit {code}, sink not identical or coordinator error ({run_dir})")
    if kill is not None:
        results.recovery.append(
            RecoveryRow(
                setting.mode, setting.tuner, r, kill, trial.detection_ms, trial.recovery_ms, trial.identical
            )
        )
        rec = "-" if trial.recovery_ms is None else f"{trial.recovery_ms:.1f} ms"
        return f"{what}: recovery {rec}, identical {trial.identical}"
    producer = topo.stages[edge.producer].primary
    t0 = _t0(run_dir)
    path = run_dir / "telemetry" / f"edges-{producer}.jsonl"
    # After the duration the sources have stopped: the drain, not the setting.
    samples = [] if t0 is None else [s for s in read_samples(path, t0, edge.id) if s.t <= duration]
    initial = next((s.batch_size for s in samples if s.batch_size is not None), None)
    free = FreeRun(setting, r, trial.identical, samples, decided_sizes(run_dir, edge.id, initial))
    results.free.append(free)
    for k, rate, size in per_second(samples, int(duration)):
        results.bandwidth.append(BandwidthRow(setting.mode, setting.tuner, r, k, round(rate, 1), size))
    settle = settle_time(samples, scenario.step_at_s, scenario.bw_max)
    changes = f"{len(free.batch_sizes) - 1} B changes, " if setting.mode == "asas" else ""
    return f"{what}: {changes}under bw_max {_secs(settle)} after the step"


def _t0(run_dir: Path) -> float | None:
    """The run's t0 (None if it never started)."""
    try:
        return float(json.loads((run_dir / "cluster.json").read_text())["t0_unix"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(out_dir: Path, results: Results) -> None:
    for name, rows, fields in (
        ("bandwidth.csv", results.bandwidth, list(BandwidthRow.__dataclass_fields__)),
        ("recovery.csv", results.recovery, list(RecoveryRow.__dataclass_fields__)),
    ):
        with (out_dir / name).open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            for row in rows:
                writer.writerow({k: "" if v is None else v for k, v in asdict(row).items()})


# -- tables ----------------------------------------------------------------------------------


def _secs(v: float | None) -> str:
    return "never (over at the end)" if v is None else f"{v:.1f} s"


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _labels(results: Results) -> list[tuple[str, str]]:
    keys = [(f.setting.mode, f.setting.tuner) for f in results.free]
    keys += [(r.mode, r.tuner) for r in results.recovery]
    return list(dict.fromkeys(keys))


def bandwidth_table(results: Results, seconds: int) -> str:
    keys = _labels(results)
    head = "second" + "".join(f"{Setting(*k).label:>24}" for k in keys)
    rows = [head, " " * 6 + "".join(f"{'backup B/s':>16}{'B':>8}" for _ in keys)]
    for k in range(seconds):
        cells = []
        for mode, tuner in keys:
            group = [b for b in results.bandwidth if (b.mode, b.tuner, b.second) == (mode, tuner, k)]
            rate = _mean([b.backup_bytes_per_s for b in group])
            sizes = [b.batch_size for b in group if b.batch_size is not None]
            size = f"{statistics.fmean(sizes):.0f}" if sizes else "-"
            cells.append(f"{'-' if rate is None else f'{rate:,.0f}':>16}{size:>8}")
        rows.append(f"{k:>6}" + "".join(cells))
    return "\n".join(rows)


def recovery_table(results: Results) -> str:
    keys = _labels(results)
    head = "kill at" + "".join(f"{Setting(*k).label:>22}" for k in keys)
    rows = [head, " " * 7 + "".join(f"{'recovery (detect) ms':>22}" for _ in keys)]
    for at in sorted({r.kill_at_s for r in results.recovery}):
        cells = []
        for mode, tuner in keys:
            group = [r for r in results.recovery if (r.mode, r.tuner, r.kill_at_s) == (mode, tuner, at)]
            rec, det = _mean([r.recovery_ms for r in group]), _mean([r.detection_ms for r in group])
            text = "-" if rec is None else f"{rec:.1f} ({'-' if det is None else f'{det:.0f}'})"
            if not all(r.identical for r in group):
                text += " FAIL"
            cells.append(f"{text:>22}")
        rows.append(f"{at:>5g} s" + "".join(cells))
    return "\n".join(rows)


def summary(results: Results, scenario: Scenario) -> str:
    limit = scenario.recovery_max_ms * (1 + GOAL_MARGIN)
    rows = [
        f"goals: backup bandwidth under bw_max {scenario.bw_max:,.0f} B/s within 1 s of the step at "
        f"{scenario.step_at_s:g} s (bandwidth over 0.5 s sample intervals); recovery <= "
        f"recovery_max {scenario.recovery_max_ms:g} ms + {GOAL_MARGIN:.0%} = {limit:g} ms at every kill"
    ]
    for mode, tuner in _labels(results):
        label = Setting(mode, tuner).label
        free = [f for f in results.free if (f.setting.mode, f.setting.tuner) == (mode, tuner)]
        kills = [r for r in results.recovery if (r.mode, r.tuner) == (mode, tuner)]
        parts = []
        if free:
            settles = [settle_time(f.samples, scenario.step_at_s, scenario.bw_max) for f in free]
            worst = None if None in settles else max(s for s in settles if s is not None)
            over = max(seconds_over(f.samples, scenario.step_at_s, scenario.bw_max) for f in free)
            parts.append(f"under bw_max {_secs(worst)} after the step ({over:.1f} s over in all)")
            if mode == "asas":
                changes = max(len(f.batch_sizes) - 1 for f in free)
                turns = max(reversals(f.batch_sizes) for f in free)
                final = free[-1].batch_sizes[-1] if free[-1].batch_sizes else "-"
                parts.append(f"B changes {changes}, direction reversals {turns}, final B {final}")
        measured = [r for r in kills if r.recovery_ms is not None]
        if measured:
            top = max(measured, key=lambda r: r.recovery_ms or 0.0)
            verdict = "met" if (top.recovery_ms or 0.0) <= limit else "MISSED"
            parts.append(f"recovery max {top.recovery_ms:.1f} ms (kill at {top.kill_at_s:g} s): {verdict}")
        rows.append(f"  {label:<16}" + "; ".join(parts))
    return "\n".join(rows)


def report(results: Results, scenario: Scenario, seconds: int) -> str:
    return "\n\n".join(
        [
            "backup bandwidth on the edge into node-2, per second (run without kill)",
            bandwidth_table(results, seconds),
            "recovery per kill time (node-2 SIGKILLed)",
            recovery_table(results),
            summary(results, scenario),
        ]
    )
