"""Live migration: the pause a move causes at the sink (the placement paper's re-placement).

Runs ``examples/chaos-chain.yaml`` (1,000 rows/s; select-1 SAS, sum-2 SAS
over a 100-row window, select-3 AS; two spares) and moves stages back and
forth with ``semiactive migrate`` (each to a node that is spare at that
moment) while rows flow. Per migration it prints the coordinator's phases
(join to handover, handover to the target's report) and the sink's pause:
the largest latency of the rows that reached the sink in the 2 s after the
handover, minus the median latency before the first move. Then ``semiactive
verify``: the sink must equal the reference.

    .venv/bin/python bench/migration_pause.py [--moves 6] [--stages sum-2,select-1,select-3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def semiactive(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "semiactive", *args], cwd=ROOT, capture_output=True, text=True
    )


def a_spare(run_dir: Path) -> str:
    for _ in range(100):
        state = semiactive("status", "--run-dir", str(run_dir), "--json")
        if state.returncode == 0:
            spares = [n["name"] for n in json.loads(state.stdout)["nodes"] if n["role"] == "spare"]
            if spares:
                return str(spares[0])
        time.sleep(0.2)
    raise SystemExit("no spare came free")


def latencies(run_dir: Path) -> list[tuple[float, float]]:
    t0 = json.loads((run_dir / "cluster.json").read_text())["t0_unix"]
    ts = {}
    for line in (run_dir / "sink" / "sink.jsonl").read_text().splitlines():
        row = json.loads(line)
        ts[row["seq"]] = row["ts"]
    out = []
    for line in (run_dir / "telemetry" / "sink.arrivals").read_text().splitlines():
        wall, seq, count = line.split()
        out += [
            (float(wall), (float(wall) - t0) * 1000 - ts[s]) for s in range(int(seq), int(seq) + int(count))
        ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moves", type=int, default=6)
    ap.add_argument("--stages", default="sum-2,select-1,select-3")
    args = ap.parse_args()
    stages = args.stages.split(",")
    duration = 8 + 3 * args.moves
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        launcher = subprocess.Popen(
            [sys.executable, "-m", "semiactive", "cluster", "up", str(ROOT / "examples" / "chaos-chain.yaml"),
             "--duration", str(duration), "--run-dir", str(run_dir), "--quiet"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(6)
        for k in range(args.moves):
            stage = stages[k % len(stages)]
            target = a_spare(run_dir)
            moved = semiactive("migrate", stage, "--to", target, "--run-dir", str(run_dir), "--wait", "20")
            outcome = "ok" if moved.returncode == 0 else moved.stderr.strip()
            print(f"move {k + 1}: {stage} -> {target}: {outcome}", flush=True)
            time.sleep(1.5)
        _, err = launcher.communicate(timeout=duration * 5 + 60)
        if launcher.returncode != 0:
            raise SystemExit(f"cluster up failed: {err}")
        events = [
            json.loads(x)
            for x in (run_dir / "telemetry" / "events-coordinator.jsonl").read_text().splitlines()
        ]
        handovers = [e for e in events if e["event"] == "migration_handover"]
        done = [e for e in events if e["event"] == "migrated"]
        lat = latencies(run_dir)
        first = min(e["t"] for e in events if e["event"] == "migration_started")
        baseline = statistics.median([x for w, x in lat if w < first])
        pauses = []
        for h in handovers:
            after = [x for w, x in lat if h["t"] <= w <= h["t"] + 2.0]
            pauses.append(max(0.0, max(after, default=baseline) - baseline))
        print(f"sink latency before the first move: median {baseline:.1f} ms")
        seconds = ", ".join(f"{e['seconds']:.2f}" for e in done)
        print(f"migrations done: {len(done)} of {args.moves}; seconds from start to done: {seconds}")
        print(f"handover to the target's report (ms): {', '.join(str(e['handover_ms']) for e in done)}")
        print(f"sink pause per migration (ms): {', '.join(f'{p:.1f}' for p in pauses)}")
        if pauses:
            ordered = sorted(pauses)
            print(f"  p50 {statistics.median(pauses):.1f} ms, max {ordered[-1]:.1f} ms")
        verified = semiactive("verify", str(run_dir))
        print(
            verified.stdout.strip().splitlines()[0]
            if verified.returncode == 0
            else verified.stdout + verified.stderr
        )


if __name__ == "__main__":
    main()
