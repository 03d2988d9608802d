"""Wall time of ``semiactive report`` over a sweep's runs, in local mode and
against a Spark standalone master (one master and one worker from the
pyspark package, on this machine).

Takes an existing campaign (``--campaign DIR``), or makes one first with
``--make``: ``semiactive experiment sweep examples/paper-chain-ha.yaml
--modes as,ub,sas --batch-sizes 1,50,...,500 --repeat 8 --duration 5
--kill node-2@3 --tag operator=select`` (104 real runs, about 15 minutes).
``--runs N`` reports over the first N runs only (given as run directories).
Each report is the CLI in a subprocess, so the times include starting the
driver's JVM; the job's own stderr gives the Spark session and table times.

    python bench/report_scale.py --campaign runs/report-sweep-select --runs 100
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from semiactive.analytics.standalone import local_cluster  # noqa: E402

SIZES = "1,50,100,150,200,250,300,350,400,450,500"
MAKE = [
    "experiment", "sweep", "examples/paper-chain-ha.yaml", "--modes", "as,ub,sas", "--batch-sizes", SIZES,
    "--repeat", "8", "--duration", "5", "--kill", "node-2@3", "--tag", "operator=select",
]  # fmt: skip
SESSION = re.compile(r"Spark \S+ on \S+ \(([\d.]+) s\)")
TOTAL = re.compile(r"wrote .*report\.md \(([\d.]+) s\)")


def semiactive(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "semiactive", *args], capture_output=True, text=True, cwd=ROOT, check=False
    )


def report(inputs: list[Path], out: Path, master: str) -> dict[str, float]:
    started = time.monotonic()
    done = semiactive("report", *map(str, inputs), "--master", master, "--out", str(out))
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"report on {master} failed:\n{done.stderr[-3000:]}")
    session = SESSION.search(done.stderr)
    total = TOTAL.search(done.stderr)
    return {
        "wall_s": wall,
        "session_s": float(session.group(1)) if session else float("nan"),
        "job_s": float(total.group(1)) if total else float("nan"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--campaign", type=Path, default=ROOT / "runs" / "report-sweep-select")
    parser.add_argument("--make", action="store_true", help="run the sweep into --campaign first")
    parser.add_argument("--runs", type=int, default=100, help="report over this many runs (default 100)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--modes", default="local,standalone")
    args = parser.parse_args()
    if args.make:
        made = semiactive(*MAKE, "--out", str(args.campaign))
        print(made.stdout[-2000:])
        if made.returncode not in (0, 1):
            raise SystemExit(f"sweep failed:\n{made.stderr[-3000:]}")
    listed = json.loads((args.campaign / "manifest.json").read_text())["runs"]
    inputs = [args.campaign / name for name in listed[: args.runs]]
    if len(inputs) < args.runs:
        print(f"only {len(inputs)} runs in {args.campaign}", file=sys.stderr)
    files = sum(1 for d in inputs for _ in (d / "telemetry").glob("*.jsonl"))
    size = sum(p.stat().st_size for d in inputs for p in (d / "telemetry").glob("*.jsonl"))
    print(f"{len(inputs)} runs, {files} telemetry files, {size / 1e6:.1f} MB")
    results: list[tuple[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(prefix="report-scale-") as tmp:
        for mode in args.modes.split(","):
            for r in range(args.repeat):
                out = Path(tmp) / f"{mode}-{r}"
                if mode == "local":
                    results.append(("local[2]", report(inputs, out, "local[2]")))
                else:
                    with local_cluster(Path(tmp) / f"spark-{r}") as url:
                        results.append(("standalone (1 worker, 2 cores)", report(inputs, out, url)))
                print(f"{results[-1][0]}: {results[-1][1]}", file=sys.stderr)
    print("| master | runs | wall s (CLI) | Spark session s | job s (discovery to report.md) |")
    print("|---|---|---|---|---|")
    for name, t in results:
        print(f"| {name} | {len(inputs)} | {t['wall_s']:.1f} | {t['session_s']:.1f} | {t['job_s']:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
