"""Linear Road on a cluster: the data replayed in real time (or faster)
through real node processes, one operator partition per expressway, each
protected by Semi-Active Standby; the answers collected at the sinks with
their arrival times and checked against the validator's (docs/linear-road.md).

    semiactive bench linear-road [DATA.dat --expected OUT] [--xways L] [--speed S[,T:S...]]
        [--kill-at SECONDS] [--ha sas|as|none] [--until T] [--run-dir DIR] [--full-tolls]

(``semiactive bench linear-road`` runs this file.) Without DATA it runs the
seeded synthetic scenario copied onto L expressways, against the
validator's answers stored in tests/data/linear-road, copied the same way;
with DATA (the public generator's output) it needs the validator's answers
for it (``--expected``).

The cluster (``config``): four file sources (PosReport, BalQuery, ExpQuery,
HistTolls at ts 0), stage ``xway`` running examples/linear-road/xway.cql as
L partitions routed by ``xway`` (primaries ``x0..``, secondaries ``y0..``),
stage ``balance`` running balance.cql unpartitioned (``b0``, secondary
``b1``: a car's charges span expressways), and two sinks. ``--kill-at T``
SIGKILLs the primary of partition 0 from outside (``semiactive nemesis``)
T seconds into the run.

An answer's emit time is its arrival at the sink in benchmark seconds,
``(arrival - t0) * speed``: the benchmark asks for every answer within 5 s
of its input, so at speed S the bound is 5/S s of wall time. The run passes
(exit 0) when every answer is correct, none is missing or duplicated, and
none is late; the L-rating is the largest L that passes at speed 1.

The speed may change with the data's time: ``--speed 2.5,1200:1.6,3600:1``
replays the first 1,200 s of data at 2.5x, up to 3,600 s at 1.6x and the
rest in real time (``semiactive.node.connectors.replay_clock``). Emit times then follow the same
schedule, so a faster stretch only tightens the 5 s bound: a run that
passes in real time from T on, faster before, passes in real time.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semiactive.node.connectors.replay_clock import ReplayClock, parse_speed

sys.path.insert(0, str(Path(__file__).resolve().parent))
import linear_road as lr  # a sibling script, not a package

ROOT = lr.ROOT
SCHEMAS = {
    "PosReport": {
        "time": "integer", "car": "integer", "spd": "integer", "xway": "integer",
        "lane": "integer", "dir": "integer", "seg": "integer", "pos": "integer",
    },
    "BalQuery": {"time": "integer", "car": "integer", "qid": "integer"},
    "ExpQuery": {"time": "integer", "car": "integer", "xway": "integer", "qid": "integer", "day": "integer"},
    "HistTolls": {"car": "integer", "day": "integer", "xway": "integer", "toll": "integer"},
}  # fmt: skip
SINKS = {"answers": "XOut", "balances": "BOut"}
PROGRESS_S = 30.0  # a progress line this often


def config(
    workdir: Path, xways: int, speed: ReplayClock, ha: str, queue_rows: int, snapshot_rows: int = 0
) -> dict[str, Any]:
    """The cluster for L expressways reading the CSVs that ``lr.convert`` wrote into ``workdir``."""
    sources = [
        {
            "name": f"src-{name.lower()}",
            "stream": name,
            "kind": "file",
            "path": str(workdir / f"{name}.csv"),
            "speed": speed.speeds[0],
            "speed_steps": [
                {"from_s": at / 1000, "speed": s}
                for at, s in zip(speed.data_starts[1:], speed.speeds[1:], strict=True)
            ],
            "schema": schema,
        }
        for name, schema in SCHEMAS.items()
    ]
    xway: dict[str, Any] = {
        "name": "xway",
        "query_file": str(lr.XWAY),
        "output": "XOut",
    }
    if xways > 1:
        xway.update(
            partitions=xways,
            nodes=[f"x{i}" for i in range(xways)],
            partition_by=["xway"],
            partition_routing="modulo",
        )
    else:
        xway["node"] = "x0"
    balance: dict[str, Any] = {
        "name": "balance",
        "node": "b0",
        "query_file": str(lr.BALANCE),
        "output": "BOut",
    }
    if ha != "none":
        secondaries = [f"y{i}" for i in range(xways)]
        xway["ha"] = {"mode": ha, "batch_size": 100}
        xway["ha"].update({"secondaries": secondaries} if xways > 1 else {"secondary": secondaries[0]})
        balance["ha"] = {"mode": ha, "batch_size": 100, "secondary": "b1"}
    return {
        "name": "linear-road",
        "heartbeat_ms": 250,
        # 10 s, not the default 2 heartbeats. A killed process is detected
        # at once all the same (its port refuses connections); the timeout
        # only bounds how long a frozen one goes unnoticed. With 17
        # processes on 2 cores, and a rebuild replaying the whole run after
        # a kill, a busy node answered heartbeats 2-5 s late, and each false
        # takeover cost one more such rebuild (docs/linear-road.md).
        "failure_timeout_ms": 10_000,
        "ack_interval_ms": 250,
        "linger_ms": 5,
        # The expenditure queries' edge carries about 2 rows/s: in batches
        # of B = 100 its rows and watermark reached xway's secondary up to
        # 50 s late, which held the secondary's whole input, and its
        # catch-up bursts then took the cores its primary needed.
        "backup_max_delay_ms": 500,
        # The program's state is unbounded (balances, a car's previous
        # report, the accident history), so without state snapshots its
        # Level-1 cut never passes the first rows and producers retain their
        # whole input (docs/linear-road.md): the queue must hold the whole run.
        "queue_rows": queue_rows,
        "snapshot_rows": snapshot_rows,
        "sources": sources,
        "stages": [xway, balance],
        "sinks": [{"name": name, "input": stream} for name, stream in SINKS.items()],
    }


@dataclass
class ClusterRun:
    lines: list[str]  # the answers in the validator's format, emit from the arrival time
    lateness: list[float]  # per answer: arrival minus due, benchmark seconds
    wall_s: float
    returncode: int
    output: str  # what cluster up (and the nemesis) printed
    killed: str | None
    retained: dict[str, int]  # per node, the most rows its output log retained


def answer_rows(run_dir: Path, sink: str) -> list[tuple[dict[str, Any], float]]:
    """A sink's rows with the wall time each arrived at (telemetry/SINK.arrivals:
    one line per delivered batch, "wall first_seq count")."""
    starts: list[int] = []
    walls: list[float] = []
    arrivals = run_dir / "telemetry" / f"{sink}.arrivals"
    for line in arrivals.read_text().splitlines():
        wall, first, _ = line.split()
        starts.append(int(first))
        walls.append(float(wall))
    out = []
    with (run_dir / "sink" / f"{sink}.jsonl").open() as rows:
        for row in map(json.loads, rows):
            batch = bisect.bisect_right(starts, row["seq"]) - 1
            out.append((row, walls[batch]))
    return out


def collect(run_dir: Path, speed: ReplayClock) -> tuple[list[str], list[float]]:
    """Every answer as a validator line whose emit is its arrival in benchmark
    seconds, and every answer's lateness (arrival minus due) in benchmark seconds."""
    t0 = float(json.loads((run_dir / "cluster.json").read_text())["t0_unix"])
    lines: list[str] = []
    lateness: list[float] = []
    for sink in SINKS:
        for row, wall in answer_rows(run_dir, sink):
            if row["typ"] == 9:
                continue  # a charge, balance.cql's input
            emitted = speed.data_ms((wall - t0) * 1000) / 1000
            lines.append(lr.answer_line(row, emit=math.ceil(max(emitted, row["time"]))))
            lateness.append(emitted - row["ts"] / 1000)
    return lines, lateness


def run_cluster(
    data: Path,
    tolls: Path,
    workdir: Path,
    xways: int,
    speed: ReplayClock,
    ha: str = "sas",
    kill_at: float | None = None,
    match_only: bool = True,
    until: int | None = None,
    snapshot_rows: int = 0,
) -> ClusterRun:
    """Convert ``data`` into ``workdir``, run it on a cluster in
    ``workdir/run`` and collect the answers. ``snapshot_rows``: the cluster
    setting; the queues then hold 4 times that per partition (a source's
    log holds what every partition's cut keeps), else the whole run."""
    if until is not None:
        data = lr.cut_data(data, until, workdir / "data.dat")
    counts = lr.convert(data, workdir, tolls, match_only)
    last = lr.last_time(data)
    rows = counts["type 0"] + counts["type 2"] + counts["type 3"] + counts["tolls"]
    path = workdir / "linear-road.yaml"
    queue_rows = max(50_000, 4 * snapshot_rows * xways if snapshot_rows else 2 * rows)
    path.write_text(json.dumps(config(workdir, xways, speed, ha, queue_rows, snapshot_rows), indent=1))
    check = subprocess.run(
        [sys.executable, "-m", "semiactive", "cluster", "check", str(path)], capture_output=True, text=True
    )
    if check.returncode != 0:
        raise SystemExit(f"the cluster config is refused:\n{check.stderr}")
    run_dir = workdir / "run"
    duration = speed.wall_ms(last * 1000) / 1000 + 2
    up = ["cluster", "up", str(path), "--duration", f"{duration:.1f}", "--run-dir", str(run_dir), "--quiet"]
    start = time.perf_counter()
    with (workdir / "launcher.log").open("w+") as log:
        # A file, not a pipe: nobody reads a pipe during a 3-hour run.
        launcher = subprocess.Popen(
            [sys.executable, "-m", "semiactive", *up], cwd=ROOT, stdout=log, stderr=log
        )
        nemesis: subprocess.Popen[bytes] | None = None
        shown = start
        try:
            while launcher.poll() is None:
                # Started once the run has its t0: the launcher reads the
                # sources' files first, minutes for the 3-hour data.
                if kill_at is not None and nemesis is None and _t0(run_dir) is not None:
                    kill = [sys.executable, "-m", "semiactive", "nemesis", str(run_dir)]
                    kill += ["--kill", f"x0@{kill_at}"]
                    nemesis = subprocess.Popen(kill, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
                if time.perf_counter() - start > duration + 600:
                    raise SystemExit(
                        f"the run did not end 10 minutes after its {duration:.0f} s (see {log.name})"
                    )
                try:
                    launcher.wait(timeout=1)  # the nemesis starts within a second of t0
                except subprocess.TimeoutExpired:
                    if time.perf_counter() >= shown + PROGRESS_S:
                        shown = time.perf_counter()
                        print(progress(run_dir, speed, duration), file=sys.stderr)
            if kill_at is not None and (nemesis is None or nemesis.wait(timeout=60) != 0):
                raise SystemExit(f"nemesis failed (see {log.name})")
        finally:
            for child in (launcher, nemesis):
                if child is not None and child.poll() is None:
                    child.kill()
                    child.wait()
        log.seek(0)
        output = log.read()
    wall = time.perf_counter() - start
    lines, lateness = collect(run_dir, speed)
    return ClusterRun(
        lines,
        lateness,
        wall,
        launcher.returncode,
        output,
        "x0" if kill_at is not None else None,
        peak_retained(run_dir),
    )


def peak_retained(run_dir: Path) -> dict[str, int]:
    """Per node, the most rows its output log ever retained (telemetry
    samples): with state snapshots this stays bounded, without it grows
    with the run."""
    peaks: dict[str, int] = {}
    for path in (run_dir / "telemetry").glob("nodes-*.jsonl"):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            node = record["node"]
            peaks[node] = max(peaks.get(node, 0), int(record.get("output_log_rows", 0)))
    return peaks


def _t0(run_dir: Path) -> float | None:
    """The run's t0 once ``cluster up`` has started it, else None."""
    try:
        t0 = json.loads((run_dir / "cluster.json").read_text())["t0_unix"]
    except (OSError, ValueError, KeyError):
        return None
    return float(t0) if isinstance(t0, int | float) else None


def progress(run_dir: Path, speed: ReplayClock, duration: float) -> str:
    """One line on a running replay: how far, how many answers, how far the
    newest answer lags behind the replay (benchmark seconds)."""
    t0 = _t0(run_dir)
    if t0 is None:
        return "starting the cluster"
    elapsed = time.time() - t0
    answers, newest = 0, None
    sink = run_dir / "sink" / "answers.jsonl"
    if sink.exists():
        with sink.open("rb") as rows:
            rows.seek(max(0, rows.seek(0, 2) - 4096))
            tail = rows.read().decode(errors="replace").splitlines()[1:]
        if tail:
            last = json.loads(tail[-1])
            answers, newest = last["seq"], last["ts"] / 1000
    replayed = speed.data_ms(elapsed * 1000) / 1000
    lag = "" if newest is None else f", newest answer {replayed - newest:.1f} s behind the replay"
    return f"{elapsed:.0f} of {duration:.0f} s, {answers:,} rows at the answers sink{lag}"


def synthetic(workdir: Path, xways: int) -> tuple[Path, list[str]]:
    """The seeded scenario on ``xways`` expressways in ``workdir``, and the
    validator's answers for it (stored for one expressway, copied)."""
    one, data = workdir / "synth-1.dat", workdir / f"synth-{xways}.dat"
    lr.synth(one)
    lr.replicate(one, xways, data)
    return data, lr.replicate_answers(lr.SYNTH_EXPECTED.read_text().splitlines(), xways)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else math.nan


def _speed(text: str) -> ReplayClock:
    try:
        return parse_speed(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="semiactive bench linear-road", description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, nargs="?", help="default: the synthetic scenario on --xways")
    parser.add_argument("--expected", type=Path, help="the validator's answers for DATA (its out file)")
    parser.add_argument("--tolls", type=Path, help="the historical tolls (default: DATA.tolls.dat)")
    parser.add_argument(
        "--xways", type=int, help="expressways = partitions (default: as many as the data has)"
    )
    parser.add_argument(
        "--speed",
        type=_speed,
        default=ReplayClock(1.0),
        help="replay speed (1: real time); S,T:S,... changes it to S from T s of data on",
    )
    parser.add_argument("--ha", default="sas", choices=("sas", "as", "none"))
    parser.add_argument(
        "--kill-at", type=float, help="SIGKILL partition 0's primary (x0) this many seconds in"
    )
    parser.add_argument("--until", type=int, help="cut input and answers at this time (s)")
    parser.add_argument(
        "--full-tolls", action="store_true", help="the whole tolls table, not the rows asked for"
    )
    parser.add_argument(
        "--snapshot-rows",
        type=int,
        default=0,
        help="state snapshots every N rows a cut would keep; queues of 4N rows per expressway (default: "
        "no snapshots, queues for the whole run)",
    )
    parser.add_argument("--run-dir", type=Path, help="keep the converted data and the run here")
    parser.add_argument("--product", type=Path, help="also write the answers here, in the validator's format")
    args = parser.parse_args(argv)
    if (args.data is None) != (args.expected is None):
        parser.error("give DATA and --expected together, or neither (the synthetic scenario)")
    for given in (args.data, args.expected, args.tolls):
        if given is not None and not given.is_file():
            parser.error(f"{given}: no such file")
    if args.snapshot_rows < 0:
        parser.error("--snapshot-rows must be >= 0")
    if args.xways is not None and not 1 <= args.xways <= 64:
        parser.error("--xways must be 1..64 (one partition per expressway)")
    with tempfile.TemporaryDirectory(prefix="linear-road-") as tmp:
        workdir = (args.run_dir or Path(tmp)).resolve()  # its commands run from the repository
        workdir.mkdir(parents=True, exist_ok=True)
        if args.data is None:
            xways = args.xways or 1
            data, expected_lines = synthetic(workdir, xways)
        else:
            data, expected_lines = args.data, args.expected.read_text().splitlines()
            xways = args.xways or lr.expressways(data)
        tolls = args.tolls or Path(f"{data}.tolls.dat")
        print(
            f"Linear Road, L={xways}: {data.name} replayed at {args.speed.describe()} on a cluster",
            file=sys.stderr,
        )
        run = run_cluster(
            data,
            tolls,
            workdir,
            xways,
            args.speed,
            args.ha,
            args.kill_at,
            not args.full_tolls,
            args.until,
            args.snapshot_rows,
        )
    if args.product is not None:
        args.product.write_text("".join(line + "\n" for line in run.lines))
    late = run.lateness
    print(
        f"L={xways} speed {args.speed.describe()} ha {args.ha}"
        + (f", {run.killed} killed at {args.kill_at:g} s" if run.killed else "")
        + f": {len(run.lines):,} answers in {run.wall_s:.1f} s wall; lateness (benchmark s) "
        f"p50 {quantile(late, 0.5):.2f}, p99 {quantile(late, 0.99):.2f}, "
        f"max {max(late, default=math.nan):.2f}"
    )
    busiest = sorted(run.retained.items(), key=lambda item: -item[1])[:4]
    print("most rows retained in an output log: " + ", ".join(f"{node} {rows:,}" for node, rows in busiest))
    if run.returncode != 0:
        print(f"cluster up exited {run.returncode}:\n{run.output}", file=sys.stderr)
        return 1
    if args.until is not None:
        expected_lines = lr.cut_answers(expected_lines, args.until)
    expected = lr.parse_answers(expected_lines)
    product = lr.parse_answers(run.lines)
    problems = lr.report(expected, product, lr.compare(expected, product))
    print("0 differences: passed" if problems == 0 else f"{problems} differences: failed")
    return 0 if problems == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
