"""The highest input rate the MQO cluster example sustains (the MQO paper in a
cluster: 300 queries shared on one SAS-protected stage).

Runs ``semiactive cluster up examples/mqo-cluster.yaml`` with Quote and News
at increasing rates (each the same), and calls a rate sustained when the
sources kept their schedule (lag under 500 ms at the end), the sink's p99
latency stayed under 1 s and the stage's output equals the MQO paper's
semantics (``semiactive verify``). Results grow with the square of the rate
(a window join), so the sink's volume is printed too.

    .venv/bin/python bench/mqo_cluster_rate.py [--rates 50,100,200,400] [--duration 8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def run_at(rate: float, duration: float, work: Path) -> dict[str, float | bool]:
    config = yaml.safe_load((ROOT / "examples" / "mqo-cluster.yaml").read_text())
    config["stages"][0]["mqo"]["queries_file"] = str(ROOT / "examples" / "mqo-queries.cql")
    for source in config["sources"]:
        if source.get("kind", "synthetic") == "synthetic":
            source["rate"] = [{"at_s": 0, "tuples_per_s": rate}]
    path = work / f"mqo-{rate:g}.yaml"
    path.write_text(yaml.safe_dump(config))
    run_dir = work / f"run-{rate:g}"
    up = subprocess.run(
        [sys.executable, "-m", "semiactive", "cluster", "up", str(path), "--duration", str(duration),
         "--run-dir", str(run_dir), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=duration * 10 + 120,
    )  # fmt: skip
    verify = subprocess.run(
        [sys.executable, "-m", "semiactive", "verify", str(run_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    lag = max(json.loads(p.read_text()).get("lag_ms", 0.0) for p in (run_dir / "sources").glob("*.end.json"))
    latency = json.loads((run_dir / "telemetry" / "sink.latency.json").read_text())
    exact = up.returncode == 0 and verify.returncode == 0 and "identical to the reference" in verify.stdout
    p99 = latency.get("p99_ms") or 0.0
    return {
        "rate": rate,
        "rows": float(latency.get("delivered") or 0),
        "p99_ms": float(p99),
        "lag_ms": float(lag),
        "exact": exact,
        "sustained": exact and lag < 500 and p99 < 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rates", default="50,100,200,400", help="tuples/s of Quote and of News each")
    parser.add_argument("--duration", type=float, default=8.0)
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    best = 0.0
    with tempfile.TemporaryDirectory(prefix="mqo-rate-") as tmp:
        print(f"{'rate/s':>8} {'sink rows':>10} {'rows/s':>8} {'p99 ms':>8} {'lag ms':>8}  exact  sustained")
        for rate in rates:
            r = run_at(rate, args.duration, Path(tmp))
            print(
                f"{rate:>8g} {r['rows']:>10,.0f} {r['rows'] / args.duration:>8,.0f} {r['p99_ms']:>8.1f} "
                f"{r['lag_ms']:>8.1f}  {'yes' if r['exact'] else 'NO':5}  {'yes' if r['sustained'] else 'no'}"
            )
            if r["sustained"]:
                best = max(best, rate)
    print(f"highest sustained: {best:g} tuples/s per stream (x2 streams), 300 queries, SAS")


if __name__ == "__main__":
    main()
