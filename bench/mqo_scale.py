"""Seed 003 at scale: 300 and 3,000 queries of Fig. 10's template at the
same input rate (the data of ``semiactive experiment mqo``).

Prints (a) the similarity and clustering time from one 10-unit cycle's
arrival log, query by query and via base groups (median of 5), and (b) per
method and query count, the processing time per unit and the peak memory
of the process (``semiactive mqo run`` in a subprocess, results written).

    .venv/bin/python bench/mqo_scale.py [--queries 300,3000] [--methods dynamic,none]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from semiactive.campaigns.mqo import CYCLE, UNIT, clustering_cost, write_data

ROOT = Path(__file__).resolve().parents[1]
# The peak resident memory of the run's own process (VmHWM starts afresh at
# exec; ru_maxrss would include the parent's peak at fork).
PROBE = (
    "import sys\n"
    "from semiactive.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
    "print('MAXRSS_KB', hwm, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def run(data: Path, streams: list[str], method: str, out: Path) -> tuple[float, float, int]:
    args = ["mqo", "run", str(data / "queries.cql"), "--method", method, "--theta", "0.6"]
    args += ["--unit", str(UNIT), "--log-period", str(CYCLE * UNIT), "--out", str(out)]
    for spec in streams:
        args += ["--stream", spec]
    if method == "dynamic":
        args += ["--recluster-at", str(20 * UNIT)]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=ROOT, capture_output=True, text=True, timeout=3600
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    rss = next(int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("MAXRSS_KB"))
    stats = json.loads((out / "stats.json").read_text())
    per_unit = [u["seconds"] * 1000 for u in stats["per_unit"]]
    steady = sorted(per_unit)[len(per_unit) // 2]
    return stats["mean_seconds_per_unit"] * 1000, steady, rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--queries", default="300,3000")
    parser.add_argument("--methods", default="dynamic,none")
    parser.add_argument("--units", type=int, default=40)
    args = parser.parse_args()
    counts = [int(q) for q in args.queries.split(",")]
    methods = [m for m in args.methods.split(",") if m]
    with tempfile.TemporaryDirectory(prefix="mqo-scale-") as tmp:
        print(f"{'queries':>8} {'similarity+clusters ms':>23} {'via base groups ms':>19}")
        data_for: dict[int, tuple[Path, list[str]]] = {}
        for n in counts:
            data = Path(tmp) / f"data-{n}"
            streams = write_data(data, n, args.units, seed=1)
            data_for[n] = (data, streams)
            cost = clustering_cost(data, streams, 0.6)
            print(f"{n:>8} {cost['queries']:>23.1f} {cost['base_groups']:>19.1f}")
        print()
        print(f"{'queries':>8} {'method':>8} {'ms/unit mean':>13} {'ms/unit median':>15} {'peak RSS MB':>12}")
        for n in counts:
            data, streams = data_for[n]
            for method in methods:
                mean, median, rss = run(data, streams, method, Path(tmp) / f"run-{n}-{method}")
                print(f"{n:>8} {method:>8} {mean:>13.2f} {median:>15.2f} {rss / 1024:>12.0f}")


if __name__ == "__main__":
    main()
