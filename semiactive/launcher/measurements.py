"""What a run measured (the SAS paper, definitions 1 and 2), from its run
directory: per fault, detection time (fault to the secondary's verdict),
recovery time (verdict to the new primary reproducing the old primary's
output) and the sink's output gap; per protected stage, bandwidth
overhead = backup bytes / main bytes on the edges into it.

A fault comes from one of three places: the launcher's own injections
(``faults.json``), the nemesis's history (``nemesis.jsonl``: the exact
moment of an external fault), or the launcher's observation of an exit or
freeze nobody announced (its ``process_exited`` / ``process_frozen``
events; the observed moment stands in for the fault's). An observation the
nemesis explains is not counted twice. The launcher looks every 20 ms, and
a secondary whose connection breaks detects a death at once, so it may
detect before the launcher sees it: a detection up to one polling interval
before an observed fault belongs to it, with detection 0 ms.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from semiactive.launcher.supervision import OBSERVE_INTERVAL_S
from semiactive.runtime.telemetry import read_jsonl
from semiactive.topology import Topology


@dataclass
class FaultResult:
    node: str
    kind: str  # kill, stop (injected); exit, freeze (observed, cause unknown)
    at: float  # seconds after t0
    origin: str = "launcher"  # launcher, nemesis, observed
    detected_by: str | None = None
    detection_ms: float | None = None
    recovery_ms: float | None = None
    sink_gap_ms: float | None = None


@dataclass
class StageBandwidth:
    stage: str
    main_bytes: int
    backup_bytes: int

    @property
    def overhead(self) -> float | None:
        return self.backup_bytes / self.main_bytes if self.main_bytes else None


@dataclass
class RunReport:
    faults: list[FaultResult] = field(default_factory=list)
    bandwidth: list[StageBandwidth] = field(default_factory=list)
    sinks: dict[str, dict[str, Any]] = field(default_factory=dict)
    emitted: dict[str, int] = field(default_factory=dict)
    bandwidth_window: str = "whole run"
    interrupted: bool = False  # Ctrl-C or SIGTERM ended the run early (drained)
    # Stages a failure stopped for good: reason, what each consumer received
    # from them (last seq per edge), and per sink the rows of the reference
    # it lacks (a loss) and whether what it has is the reference's prefix.
    stopped: list[dict[str, Any]] = field(default_factory=list)
    lost: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The coordinator's own failures (a step that raised): a run with any is
    # not a clean run, whatever its sinks received.
    coordinator_errors: list[str] = field(default_factory=list)
    # Rows a node found freed when a consumer needed them (event rows_lost).
    losses_noticed: list[dict[str, Any]] = field(default_factory=list)

    def record_stopped(
        self, stopped: list[Any], received: dict[str, dict[str, int]], checks: list[Any]
    ) -> None:
        self.stopped = [
            {"stage": s.stage, "reason": s.reason, "consumers_received": received.get(s.stage, {})}
            for s in stopped
        ]
        for check in checks:
            self.lost[check.sink] = {
                "expected": check.expected,
                "delivered": check.delivered,
                "missing": len(check.missing),
                "duplicated": len(check.duplicated),
                "wrong": len(check.wrong) + check.out_of_order,
                "prefix": check.is_prefix,
            }

    def to_json(self) -> dict[str, Any]:
        return {
            "interrupted": self.interrupted,
            "stopped": self.stopped,
            "lost": self.lost,
            "coordinator_errors": self.coordinator_errors,
            "losses_noticed": self.losses_noticed,
            "emitted": self.emitted,
            "sinks": self.sinks,
            "faults": [asdict(f) for f in self.faults],
            "bandwidth": [
                {**asdict(b), "overhead": b.overhead, "window": self.bandwidth_window} for b in self.bandwidth
            ],
        }

    def describe(self) -> str:
        lines = [f"{name}: emitted {count:,} rows" for name, count in self.emitted.items()]
        for name, data in self.sinks.items():
            p50, p99 = data.get("p50_ms"), data.get("p99_ms")
            latency = (
                f"; latency p50 {p50:.1f} ms, p99 {p99:.1f} ms" if p50 is not None and p99 is not None else ""
            )
            lines.append(f"{name}: {data.get('delivered', 0):,} rows{latency}")
        for f in self.faults:
            by = {"nemesis": " (nemesis)", "observed": " (seen by the launcher)"}.get(f.origin, "")
            parts = [f"{f.kind} {f.node} at {f.at:.2f} s{by}"]
            if f.detection_ms is not None:
                parts.append(f"detected by {f.detected_by} after {f.detection_ms:.0f} ms")
            if f.recovery_ms is not None:
                parts.append(f"recovered {f.recovery_ms:.1f} ms later")
            if f.sink_gap_ms is not None:
                parts.append(f"sink output gap {f.sink_gap_ms:.0f} ms")
            lines.append("; ".join(parts))
        for b in self.bandwidth:
            overhead = f"{b.overhead:.1%}" if b.overhead is not None else "-"
            lines.append(
                f"{b.stage}: main {b.main_bytes / 1e3:,.1f} kB, backup {b.backup_bytes / 1e3:,.1f} kB, "
                f"overhead {overhead} ({self.bandwidth_window})"
            )
        for error in self.coordinator_errors:
            lines.append(f"COORDINATOR ERROR: {error}")
        for loss in self.losses_noticed:
            lines.append(
                f"ROWS LOST: {loss.get('node')} freed seqs {loss.get('first')}-{loss.get('last')} of "
                f"{loss.get('edge')} that {loss.get('target')} still needed"
            )
        for st in self.stopped:
            got = ", ".join(f"{edge} {seq:,} rows" for edge, seq in st["consumers_received"].items())
            got = got or "nothing (none alive)"
            lines.append(f"STOPPED {st['stage']}: {st['reason']}; its consumers received: {got}")
        for sink, loss in self.lost.items():
            shape = "a prefix of the reference" if loss["prefix"] else "NOT a prefix of the reference"
            lines.append(
                f"LOST at {sink}: {loss['missing']:,} of {loss['expected']:,} reference rows missing; "
                f"the {loss['delivered']:,} delivered are {shape}"
            )
        return "\n".join(lines)


def _json(path: Path) -> dict[str, Any] | None:
    """A JSON file's object, or None if it is missing or unreadable (a node
    killed before it ever wrote it)."""
    try:
        value = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def analyse(topology: Topology, run_dir: Path) -> RunReport:
    telemetry = run_dir / "telemetry"
    report = RunReport()
    for stage in topology.stages.values():
        end = _json(run_dir / "sources" / f"{stage.name}.end.json")
        if stage.role == "source" and end is not None:
            report.emitted[stage.name] = int(end.get("count", 0))
        latency = _json(telemetry / f"{stage.name}.latency.json")
        if stage.role == "sink" and latency is not None:
            report.sinks[stage.name] = latency
    events = sorted(
        (e for path in telemetry.glob("events-*.jsonl") for e in read_jsonl(path)),
        key=lambda e: float(e["t"]),
    )
    report.coordinator_errors = [str(e.get("error", "")) for e in events if e["event"] == "coordinator_error"]
    report.losses_noticed = [e for e in events if e["event"] == "rows_lost"]
    arrivals = _arrival_times(telemetry)
    emitted_until = _emission_end(run_dir)
    injected = fault_records(run_dir)
    primaries = _primary_timeline(topology, events)
    for i, record in enumerate(injected):
        # A detection belongs to the latest fault of its node before it: a
        # freeze too short to be noticed must not take a later kill's, nor
        # one that ended more than a second before.
        later = [float(r["injected_at"]) for r in injected[i + 1 :] if r["node"] == record["node"]]
        until = min(later, default=math.inf)
        if record["kind"] == "stop" and record.get("duration"):
            until = min(until, float(record["injected_at"]) + float(record["duration"]) + FREEZE_SLACK_S)
        # ...and concerns the stage the node was primary of when it was hit
        # (a node restarted since may serve, and fail, as another stage's;
        # a secondary or a spare hit has nothing to detect).
        served = _primary_of(primaries, record["node"], _earliest(record))
        report.faults.append(_fault(record, events, arrivals, until, emitted_until, served))
    first_fault = min((float(r["injected_at"]) for r in injected), default=None)
    report.bandwidth = _bandwidth(topology, telemetry, until=first_fault)
    report.bandwidth_window = "before the first fault" if first_fault is not None else "whole run"
    return report


OBSERVED = {"process_exited": ("exit", "kill"), "process_frozen": ("freeze", "stop")}


def fault_records(run_dir: Path) -> list[dict[str, Any]]:
    """Every fault of the run, wherever it came from, in time order, as
    ``{node, kind, at, injected_at, origin}``."""
    telemetry = run_dir / "telemetry"
    faults_file = telemetry / "faults.json"
    launcher = json.loads(faults_file.read_text()) if faults_file.exists() else []
    records = [{**r, "origin": "launcher"} for r in launcher if r.get("injected_at") is not None]
    t0 = float((_json(run_dir / "cluster.json") or {}).get("t0_unix") or 0.0)
    nemesis = [
        r
        for r in read_jsonl(telemetry / "nemesis.jsonl")
        if r.get("kind") in ("kill", "stop") and "skipped" not in r
    ]
    for r in nemesis:
        records.append(
            {"node": r["node"], "kind": r["kind"], "at": float(r["t"]) - t0, "injected_at": float(r["t"])}
            | {"origin": "nemesis", "pid": r.get("pid"), "duration": float(r.get("duration") or 0.0)}
        )
    for e in read_jsonl(telemetry / "events-launcher.jsonl"):
        if e["event"] not in OBSERVED:
            continue
        kind, cause = OBSERVED[e["event"]]
        explained = any(
            r.get("pid") == e.get("pid") and r["kind"] == cause and float(r["t"]) <= float(e["t"]) + 0.05
            for r in nemesis
        )
        if not explained:
            t = float(e["t"])
            records.append(
                {"node": e["target"], "kind": kind, "at": t - t0, "injected_at": t, "origin": "observed"}
            )
    return sorted(records, key=lambda r: float(r["injected_at"]))


def _emission_end(run_dir: Path) -> float | None:
    """Wall time at which the last source stopped emitting: as it wrote it,
    or, in a run directory of an older version, t0 + its final watermark
    (which assumes event time in milliseconds since t0: not so for a broker
    source's rows, whose ts is the producer's)."""
    ends = []
    for path in (run_dir / "sources").glob("*.end.json"):
        end = _json(path)
        with contextlib.suppress(ValueError, KeyError, TypeError):
            if "ended_unix" in end:  # type: ignore[operator]
                ends.append(float(end["ended_unix"]))  # type: ignore[index]
            else:
                ends.append(float(end["t0"]) + float(end["watermark"]) / 1000)  # type: ignore[index]
    return max(ends, default=None)


FREEZE_SLACK_S = 1.0  # a freeze is detected within the failure timeout of it


def _primary_timeline(topology: Topology, events: list[dict[str, Any]]) -> dict[str, list[tuple[float, str]]]:
    """Per stage, (time, node) each time its primary changed: the config's
    at the start, then every takeover."""
    # A protected source or sink (a standby) fails over too.
    timeline = {
        s.name: [(-math.inf, s.primary)]
        for s in topology.stages.values()
        if s.role == "stage" or s.secondary is not None
    }
    for e in events:
        if e["event"] == "takeover" and e.get("stage") in timeline:
            timeline[e["stage"]].append((float(e["t"]), e["node"]))
    return timeline


def _earliest(record: dict[str, Any]) -> float:
    """The earliest moment the fault can have happened: when injected, or up
    to one polling interval before the launcher observed it."""
    observed = record.get("origin") == "observed"
    return float(record["injected_at"]) - (OBSERVE_INTERVAL_S if observed else 0.0)


def _primary_of(timeline: dict[str, list[tuple[float, str]]], node: str, at: float) -> str | None:
    for stage, changes in timeline.items():
        current = [n for t, n in changes if t <= at]
        if current and current[-1] == node:
            return stage
    return None


def _fault(
    record: dict[str, Any],
    events: list[dict[str, Any]],
    arrivals: list[float],
    until: float,
    emitted_until: float | None,
    stage: str | None = None,
) -> FaultResult:
    at = float(record["injected_at"])
    since = _earliest(record)
    result = FaultResult(
        record["node"], record["kind"], float(record["at"]), record.get("origin", "launcher")
    )
    detected = next(
        (
            e
            for e in events
            if e["event"] == "failure_detected"
            and e.get("primary") == record["node"]
            and stage is not None
            and e.get("stage", stage) == stage
            and since <= float(e["t"]) < until
        ),
        None,
    )
    if detected is not None:
        result.detected_by = detected["node"]
        result.detection_ms = max(0.0, float(detected["t"]) - at) * 1000
        recovered = next(
            (
                e
                for e in events
                if e["event"] == "recovered" and e["node"] == detected["node"] and e["t"] >= detected["t"]
            ),
            None,
        )
        if recovered is not None:
            result.recovery_ms = float(recovered["recovery_ms"])
    window = [t for t in arrivals if at - 0.001 <= t <= at + 10]
    before = [t for t in arrivals if t < at]
    points = ([before[-1]] if before else []) + window
    # Silence after the last row counts too, up to when the sources stopped:
    # a sink that never hears from the stage again has a gap, not none.
    if emitted_until is not None and points and emitted_until > points[-1]:
        points.append(min(emitted_until, at + 10))
    if window or len(points) > 1:
        result.sink_gap_ms = max((b - a for a, b in itertools.pairwise(points)), default=0.0) * 1000
    return result


def _arrival_times(telemetry: Path) -> list[float]:
    times: list[float] = []
    for path in telemetry.glob("*.arrivals"):
        times += [float(line.split()[0]) for line in path.read_text().splitlines() if line.strip()]
    return sorted(times)


def _bandwidth(topology: Topology, telemetry: Path, until: float | None) -> list[StageBandwidth]:
    """Bytes per (edge, channel) summed over every node: the final counts,
    or the last sample each node took before ``until``."""
    sent: dict[tuple[str, str], int] = {}
    if until is None:
        for path in telemetry.glob("*.summary.json"):
            for item in (_json(path) or {}).get("bytes", []):
                key = (item["edge"], item["channel"])
                sent[key] = sent.get(key, 0) + int(item["bytes"])
    else:
        last: dict[tuple[str, float, str], dict[str, Any]] = {}  # (node, series, edge) -> sample
        for path in telemetry.glob("edges-*.jsonl"):
            for r in read_jsonl(path):
                if r.get("direction") == "out" and float(r["t"]) <= until:
                    last[(r["node"], r["since"], r["edge"])] = r
        for (_, _, edge), r in last.items():
            for channel in ("data", "backup"):
                sent[(edge, channel)] = sent.get((edge, channel), 0) + int(r[f"{channel}_bytes"])
    out = []
    for stage in topology.stages.values():
        if stage.config is None or stage.config.ha.mode == "none":
            continue
        main = sum(sent.get((e.id, "data"), 0) for e in stage.inputs)
        backup = sum(sent.get((e.id, "backup"), 0) for e in stage.inputs)
        out.append(StageBandwidth(stage.name, main, backup))
    return out
