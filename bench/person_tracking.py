"""Seed 004's person tracking: network usage u with re-placement against the
initial placement only (the issue's goal: at least 30 % lower over the run),
migrations per minute, and the pause each migration causes at the sink.

Runs ``examples/person-tracking.yaml`` twice on this machine: as it is (the
coordinator moves the user's query next to the camera that sees alice), and
with ``replace_every_s: 0`` (the query stays in Denver, next to the user).
Both with connection management: only the camera that sees her sends whole
rows. u comes from the coordinator's ``network-coordinator.jsonl`` (every
0.5 s, bytes in flight: measured bytes/s x path latency); the mean is over
the data's 40 s. Each run's sink must equal the reference (`semiactive
verify`).

    .venv/bin/python bench/person_tracking.py [--duration 48]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "person-tracking.yaml"
DATA_S = 40.0  # the data's length (examples/data/person-tracking/generate.py)


def semiactive(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "semiactive", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run(folder: Path, replace: bool, duration: float) -> dict[str, Any]:
    config = yaml.safe_load(EXAMPLE.read_text())
    if not replace:
        config["network"]["replace_every_s"] = 0
    for source in config["sources"]:
        source["path"] = str(EXAMPLE.parent / source["path"])
    path = folder / "person-tracking.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    run_dir = folder / "run"
    up = semiactive(
        "cluster", "up", str(path), "--duration", str(duration), "--run-dir", str(run_dir), "--quiet"
    )
    if up.returncode != 0:
        raise SystemExit(f"cluster up failed: {up.stderr[-2000:]}")
    verified = semiactive("verify", str(run_dir))
    identical = verified.returncode == 0 and "identical to the reference" in verified.stdout
    t0 = json.loads((run_dir / "cluster.json").read_text())["t0_unix"]
    samples = [
        (r["t"] - t0, r["usage_bytes"], r["primaries"])
        for r in read_jsonl(run_dir / "telemetry" / "network-coordinator.jsonl")
    ]
    events = [e for f in sorted((run_dir / "telemetry").glob("events-*.jsonl")) for e in read_jsonl(f)]
    return {"run_dir": run_dir, "t0": t0, "samples": samples, "events": events, "identical": identical}


def sink_latencies(run_dir: Path, t0: float) -> list[tuple[float, float]]:
    """(arrival s after t0, latency ms) of every row at the sink."""
    ts = {r["seq"]: r["ts"] for r in read_jsonl(run_dir / "sink" / "user.jsonl")}
    out = []
    for line in (run_dir / "telemetry" / "user.arrivals").read_text().splitlines():
        wall, seq, count = line.split()
        for s in range(int(seq), int(seq) + int(count)):
            out.append((float(wall) - t0, (float(wall) - t0) * 1000 - ts[s]))
    return out


def pauses(result: dict[str, Any]) -> list[float]:
    """Per migration: the largest sink latency in the 2 s after the new
    primary took over, minus the median latency of the rows before any move."""
    t0 = result["t0"]
    handovers = sorted(
        e["t"] - t0 for e in result["events"] if e["event"] == "takeover" and e.get("reason") == "migration"
    )
    latencies = sink_latencies(result["run_dir"], t0)
    if not handovers or not latencies:
        return []
    before = [lat for at, lat in latencies if at < handovers[0]] or [lat for _, lat in latencies]
    base = statistics.median(before)
    return [max((lat for at, lat in latencies if h <= at < h + 2), default=base) - base for h in handovers]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=48.0, help="seconds each cluster runs")
    args = parser.parse_args()
    results = {}
    for name, replace in (("re-placement", True), ("initial only", False)):
        print(f"running {name} ...", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            results[name] = r = run(Path(tmp), replace, args.duration)
            r["pauses"] = pauses(r)
            r["migrations"] = sum(1 for e in r["events"] if e["event"] == "migrated")
    print("\nu (bytes in flight) over time, mean per 4 s; where the query runs")
    print(f"{'t s':>6} {'re-placement':>13} {'':<11} {'initial only':>13}")
    replaced, initial = results["re-placement"]["samples"], results["initial only"]["samples"]
    for start in range(0, int(DATA_S), 4):
        a = [u for t, u, _ in replaced if start <= t < start + 4]
        b = [u for t, u, _ in initial if start <= t < start + 4]
        where = next((p.get("follow-alice", "") for t, _, p in replaced if t >= start + 2), "")
        mean_a, mean_b = (statistics.fmean(x) if x else 0.0 for x in (a, b))
        print(f"{start:>6} {mean_a:>13.1f} {where:<11} {mean_b:>13.1f}")
    means = {
        name: statistics.fmean([u for t, u, _ in r["samples"] if 1 <= t < DATA_S] or [0.0])
        for name, r in results.items()
    }
    reduction = 1 - means["re-placement"] / means["initial only"] if means["initial only"] else 0.0
    print(
        f"\nmean u: re-placement {means['re-placement']:.1f} bytes, "
        f"initial only {means['initial only']:.1f} bytes: {reduction:.0%} lower (goal: at least 30 %)"
    )
    r = results["re-placement"]
    print(f"migrations: {r['migrations']} in {DATA_S:.0f} s = {r['migrations'] / DATA_S * 60:.1f} per minute")
    if r["pauses"]:
        ordered = sorted(r["pauses"])
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        print(f"sink pause per migration (ms): {', '.join(f'{p:.0f}' for p in r['pauses'])}; p99 {p99:.0f}")
    for name, res in results.items():
        print(f"{name}: sink {'identical to' if res['identical'] else 'DIFFERS from'} the reference")


if __name__ == "__main__":
    main()
