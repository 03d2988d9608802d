"""The same job on semiactive and on Apache Flink, on this machine, in one
run: generator -> filter -> window sum -> sink.

    python bench/flink_comparison.py [--tuples 10000000] [--rates 25000,50000,100000]

The job: tuples ``(ts, id, val)``, one per ms, val uniform in [-50, 1000);
``WHERE val >= 0``; SUM(val) over a 100-ms window sliding by 10 ms; every
sum to a file. It runs

* on semiactive in one process (``semiactive query run``: the columnar
  engine, and the row engine for reference) over a CSV file;
* on Flink (PyFlink's Table API, so the job runs in the JVM) at parallelism
  1 and 2, over the same file; Flink comes from PyPI (``apache-flink``) in a
  venv of its own that this script makes (``.venv-flink``), never in the
  project's venv or the node image; it needs Java (``make java``);
* on a semiactive cluster: a synthetic source, a filter stage, a window-sum
  stage and a sink, 4 processes over gRPC on loopback, with the highest
  source rate sustained with zero loss (as bench/cluster_throughput.py).

Each one-process run is timed at two input sizes: end to end (process or
job start to the last sum written) and the marginal rate (the extra tuples
of the larger input over its extra seconds: start-up costs cancel). Flink's
sums are checked against semiactive's: equal at every window end, the
windows semiactive leaves out being those whose sum repeats the previous
one (ISTREAM).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import functools
import itertools
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chain import run_chain

ROOT = Path(__file__).resolve().parents[1]
FLINK_VENV = ROOT / ".venv-flink"
FLINK = "apache-flink==2.3.0"
PROGRAM = """
REGISTER STREAM S (id integer, val integer);
REGISTER QUERY f AS SELECT * FROM S WHERE val >= 0;
REGISTER QUERY agg AS ISTREAM(SELECT SUM(val) AS total FROM f [Range 100 Slide 10]);
"""
CLUSTER_SUM = "ISTREAM(SELECT SUM(val) AS total FROM s1 [Range 100 Slide 10])"


def flink_python() -> Path:
    """The Flink venv's Python, made (once, a few minutes) when missing."""
    python = FLINK_VENV / "bin" / "python"
    if (
        python.exists()
        and subprocess.run([python, "-c", "import pyflink"], capture_output=True).returncode == 0
    ):
        return python
    print(f"installing {FLINK} into {FLINK_VENV} (once; about 700 MB) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", FLINK_VENV], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", FLINK], check=True)
    return python


def write_inputs(n: int, directory: Path) -> tuple[Path, Path]:
    """The same tuples twice: with a header (semiactive reads columns by
    name) and without (Flink's CSV format has none)."""
    rnd = random.Random(1)
    text = "".join([f"{i},{i},{rnd.randrange(-50, 1000)}\n" for i in range(n)])
    headed, bare = directory / f"in-{n}.csv", directory / f"in-{n}-bare.csv"
    bare.write_text(text)
    with headed.open("w") as out:
        out.write("ts,id,val\n")
        out.write(text)
    return headed, bare


def timed(command: list[str | Path], stdout: Path) -> float:
    started = time.perf_counter()
    with stdout.open("wb") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.PIPE)
    if done.returncode != 0:
        raise SystemExit(f"{command[:4]}... failed ({done.returncode}):\n{done.stderr.decode()[-3000:]}")
    return time.perf_counter() - started


def run_semiactive(executor: str, source: Path, directory: Path) -> tuple[float, dict[int, int]]:
    program = directory / "job.cql"
    program.write_text(PROGRAM)
    out = directory / f"semiactive-{executor}-{source.stem}.jsonl"
    command: list[str | Path] = [sys.executable, "-m", "semiactive", "query", "run", program]
    command += ["--stream", f"S={source}", "--window-bounds", "half-open", "--executor", executor]
    seconds = timed(command, out)
    sums = {}
    for line in out.read_text().splitlines():
        row = json.loads(line)
        sums[int(row["ts"])] = int(row["total"])
    return seconds, sums


def run_flink(python: Path, parallelism: int, source: Path, directory: Path) -> tuple[float, dict[int, int]]:
    sink = directory / f"flink-p{parallelism}-{source.stem}"
    shutil.rmtree(sink, ignore_errors=True)
    log = directory / f"flink-p{parallelism}-{source.stem}.out"
    command: list[str | Path] = [python, ROOT / "bench" / "flink_job.py", str(parallelism), source, sink]
    seconds = timed(command, log)
    sums = {}
    for part in sink.glob("part-*"):
        with part.open(newline="") as f:
            for end, total in csv.reader(f):
                at = datetime.datetime.fromisoformat(end).replace(tzinfo=datetime.UTC)
                sums[round(at.timestamp() * 1000)] = int(total)
    return seconds, sums


def disagreement(flink: dict[int, int], ours: dict[int, int], last_ts: int) -> str | None:
    """None when the two agree on every window ending by the last tuple
    (Flink also fires the windows that end after it, semiactive stops at
    the last tuple's instant)."""
    ends = sorted(e for e in flink if e <= last_ts)
    if not ends or not ours:
        return f"no sums (flink {len(ends)}, semiactive {len(ours)})"
    for at, total in ours.items():
        if flink.get(at) != total:
            return f"at {at} ms: flink {flink.get(at)}, semiactive {total}"
    for before, at in itertools.pairwise(ends):
        if at not in ours and flink[at] != flink[before]:
            return f"at {at} ms: flink {flink[at]}, semiactive none (not a repeated sum)"
    return None


def measure(
    label: str,
    run: Callable[[Path], tuple[float, dict[int, int]]],
    small: Path,
    large: Path,
    sizes: tuple[int, int],
) -> tuple[dict[str, Any], dict[int, int]]:
    print(f"  {label} ...", end="", flush=True)
    t_small, _ = run(small)
    t_large, sums = run(large)
    # None when the larger input took no longer (start-up noise above the work).
    marginal = (sizes[1] - sizes[0]) / (t_large - t_small) if t_large > t_small else None
    result = {"label": label, "seconds": t_large, "end_to_end": sizes[1] / t_large, "marginal": marginal}
    print(f" {t_small:.1f} s / {t_large:.1f} s")
    return result, sums


def rate(per_s: float | None) -> str:
    return f"{per_s:,.0f}/s" if per_s else "n/a"


def cluster_rate(rates: list[int], seconds: float, directory: Path) -> tuple[int, list[str]]:
    def window_chain(cfg: dict[str, Any]) -> None:
        cfg["stages"] = [
            cfg["stages"][0],
            {"name": "sum-2", "node": "node-2", "query": f"REGISTER QUERY s2 AS {CLUSTER_SUM}"},
        ]
        cfg["sinks"][0]["input"] = "s2"
        # No row log (the check makes the source's stream again from its seed).
        cfg["sources"][0]["log"] = False
        # The window stage's Level-1 cut trails its input by the window and
        # its sink's acknowledgement interval (about 400 ms: 110 + 250 + the
        # round trips); its producer's log holds that, at 500,000 tuples/s
        # 200,000 rows (docs/ha.md, Retention).
        cfg["queue_rows"] = 200_000

    best, lines = 0, []
    for rate in rates:
        r = run_chain("window", rate, seconds, directory, window_chain)
        sustained = r.ok and r.lag_ms < 250
        lines.append(
            f"  {rate:>9,}/s: emitted {r.emitted:,}, behind {r.lag_ms:.0f} ms, identical {r.identical}"
            f" -> {'sustained' if sustained else 'NOT sustained'}"
        )
        print(lines[-1], flush=True)
        if sustained:
            best = max(best, rate)
    return best, lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=10_000_000, help="the larger input; the smaller is 1/5")
    parser.add_argument("--rates", default="25000,50000,100000", help="the cluster's source rates")
    parser.add_argument("--seconds", type=float, default=6.0, help="each cluster run")
    parser.add_argument("--no-row-engine", action="store_true", help="skip the row engine (slow)")
    args = parser.parse_args()
    if shutil.which("java") is None:
        raise SystemExit("Flink needs Java: `make java` installs it (as root)")
    python = flink_python()
    sizes = (args.tuples // 5, args.tuples)
    print(f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}; {FLINK}")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (small, small_bare), (large, large_bare) = (write_inputs(n, directory) for n in sizes)
        print(f"one process, {sizes[0]:,} and {sizes[1]:,} tuples:")
        results = []
        executors = ["auto"] if args.no_row_engine else ["auto", "dts"]
        ours: dict[int, int] = {}
        for executor in executors:
            name = "columnar" if executor == "auto" else "row engine"
            result, sums = measure(
                f"semiactive {name}",
                functools.partial(run_semiactive, executor, directory=directory),
                small,
                large,
                sizes,
            )
            if executor == "auto":
                ours = sums
            elif sums != ours:
                raise SystemExit("semiactive's row engine and columnar engine disagree")
            results.append(result)
        for parallelism in (1, 2):
            result, sums = measure(
                f"Flink parallelism {parallelism}",
                functools.partial(run_flink, python, parallelism, directory=directory),
                small_bare,
                large_bare,
                sizes,
            )
            differs = disagreement(sums, ours, sizes[1] - 1)
            if differs:
                raise SystemExit(f"Flink p{parallelism} and semiactive disagree: {differs}")
            results.append(result)
        print(f"results: every Flink sum equals semiactive's ({len(ours):,} sums)")
        print(f"{'':28} {'end to end':>14} {'marginal':>14}")
        columnar = results[0]
        for r in results:
            ratio = columnar["marginal"] / r["marginal"] if columnar["marginal"] and r["marginal"] else None
            print(
                f"{r['label']:28} {r['end_to_end']:>10,.0f}/s {rate(r['marginal']):>14}"
                f"   columnar / this: {columnar['end_to_end'] / r['end_to_end']:.2f}x, "
                + (f"{ratio:.2f}x" if ratio else "n/a")
            )
        print("cluster (source, filter stage, window-sum stage, sink over gRPC):")
        best, _ = cluster_rate([int(r) for r in args.rates.split(",")], args.seconds, directory)
        print(f"  highest sustained zero-loss rate: {best:,} tuples/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
