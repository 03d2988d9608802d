"""Linear Road (Arasu et al., VLDB 2004) on ``semiactive query run``, checked
answer by answer against the expected answers of the benchmark's public
validator (docs/linear-road.md).

    python bench/linear_road.py synth OUT.dat [--quirk]
    python bench/linear_road.py replicate DATA.dat L OUT.dat [--expected ANSWERS]
    python bench/linear_road.py convert DATA.dat OUTDIR [--tolls FILE] [--match-only]
    python bench/linear_road.py run DATA.dat --expected ANSWERS [--until T] [--match-only]
    python bench/linear_road.py compare ANSWERS PRODUCT

``synth`` writes a small seeded scenario that reaches every answer path in
seconds; ``convert`` turns a Linear Road data file (and its historical tolls
file) into the program's CSV inputs; ``run`` converts, runs
examples/linear-road/linear-road.cql once, writes the answers in the
validator's line format and compares them strictly with the validator's
``out`` file: missing, unexpected, wrong, late and duplicate answers of each
type (LAV included). It exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "examples" / "linear-road"
XWAY = PROGRAMS / "xway.cql"  # per expressway: types 0, 1, 3 and the charges (XOut)
BALANCE = PROGRAMS / "balance.cql"  # per car, over every expressway: type 2 (BOut)
SYNTH_EXPECTED = ROOT / "tests" / "data" / "linear-road" / "synth-expected.txt"  # the validator's, for synth
INPUTS = ("PosReport", "BalQuery", "ExpQuery", "HistTolls")
TYPES = {0: "toll notifications", 1: "accident alerts", 2: "account balances", 3: "daily expenditures"}
KINDS = ("missing", "unexpected", "wrong", "late", "duplicate")

# ---------------------------------------------------------------------------
# The synthetic scenario
# ---------------------------------------------------------------------------

FT = 5280  # feet per segment (one mile)
SYNTH_END = 1200
Report = tuple[int, int, int, int]  # time, lane, pos, spd


def car_reports(start: int, pos0: int, lanes: list[int], direction: int, spd: int) -> list[Report]:
    """A car's reports every 30 s from ``start`` at a constant speed; ``lanes``
    gives the lane of each report (the last repeats). It ends at the end of the
    scenario, at the road's end, or after its exit-lane (4) report."""
    out: list[Report] = []
    pos, k, t = pos0, 0, start
    while t <= SYNTH_END and 0 <= pos < 100 * FT:
        lane = lanes[min(k, len(lanes) - 1)]
        out.append((t, lane, pos, spd))
        if lane == 4:
            break
        step = int(spd * 5280 / 3600 * 30)
        pos = pos + step if direction == 0 else pos - step
        k += 1
        t += 30
    return out


def synth(out: Path, quirk: bool = False) -> int:
    """Writes the seeded scenario to ``out`` and its tolls to ``out``.tolls.dat;
    returns the number of data lines. It covers congestion tolls in both
    directions, accidents in both directions, exits in a new segment (charged)
    and in the same one (not), a re-entry after more than 60 s, and type 2/3
    queries. ``quirk`` adds a second accident in a segment that already had one,
    which the validator never detects. The RNG calls keep their order: the
    stored expected answers depend on them."""
    rnd = random.Random(2026)
    cars: dict[int, tuple[int, list[Report]]] = {}  # car -> (dir, reports)

    def trip(lo: int, hi: int) -> list[int]:
        nrep = rnd.randrange(lo, hi)
        return [0] + [rnd.choice((1, 2, 3))] * (nrep - 1) + [4]

    for c in range(130):  # congestion, dir 0, segments 10..11, slow
        pos0 = 10 * FT + rnd.randrange(0, 2 * FT)
        lanes = trip(25, 40)
        start = rnd.randrange(0, 30)
        cars[c] = (0, car_reports(start, pos0, lanes, 0, rnd.choice((8, 10, 12))))
    for c in range(140, 260):  # fast, dir 0, entering over the whole run
        pos0 = rnd.randrange(0, 30) * FT + rnd.randrange(FT)
        lanes = trip(6, 20)
        start = rnd.randrange(0, SYNTH_END - 60)
        cars[c] = (0, car_reports(start, pos0, lanes, 0, rnd.choice((45, 60, 70))))
    for c in range(300, 460):  # dir 1, congested around segment 73 for c < 400
        slow = c < 400
        pos0 = (rnd.randrange(72, 74) if slow else rnd.randrange(80, 95)) * FT + rnd.randrange(FT)
        lanes = trip(10, 40)
        start = rnd.randrange(0, 30) if slow else rnd.randrange(0, SYNTH_END - 60)
        cars[c] = (1, car_reports(start, pos0, lanes, 1, 10 if slow else 55))

    def stopped_pair(a: int, b: int, t0: int, seg: int, direction: int, n: int = 10, off: int = 1000) -> None:
        """Two cars stopped at one place in lane 1 for ``n`` reports, then moving on."""
        p = seg * FT + off
        for car, t in ((a, t0), (b, t0 + 15)):
            stopped = [(t + 30 * k, 1, p, 0) for k in range(n)]
            moving_on = p + (3000 if direction == 0 else -3000)
            cars[car] = (direction, stopped + car_reports(t + 30 * n, moving_on, [1, 1, 1, 4], direction, 30))

    stopped_pair(500, 501, 200, 25, 0)
    stopped_pair(600, 601, 430, 70, 1, n=8)
    if quirk:
        stopped_pair(510, 511, 800, 25, 0, off=3000)
    # 700 exits in a new segment (charged its last toll); 701 exits in the same
    # segment (not charged), then re-enters it in lane 0 400 s later (a reset).
    cars[700] = (0, car_reports(40, 11 * FT + 4000, [0] + [1] * 11 + [4], 0, 12))
    first = car_reports(100, 10 * FT + 5000, [0, 1, 1, 1, 4], 0, 12)
    again = car_reports(first[-1][0] + 400, first[-1][2], [0] + [1] * 15 + [4], 0, 12)
    cars[701] = (0, first + again)

    lines = [
        (t, 0, car, f"0,{t},{car},{spd},0,{lane},{d},{pos // FT},{pos},-1,-1,-1,-1,-1,-1")
        for car, (d, reports) in cars.items()
        for t, lane, pos, spd in reports
    ]
    qid = 0
    for t, _, car, _ in sorted(lines):  # a query follows its car's report of that second
        if rnd.random() < 0.04 or (car in (700, 701, 500) and rnd.random() < 0.3):
            qid += 1
            lines.append((t, 1, car, f"2,{t},{car},0,0,0,0,0,0,{qid},-1,-1,-1,-1,-1"))
        elif rnd.random() < 0.01:
            qid += 1
            lines.append((t, 1, car, f"3,{t},{car},0,0,0,0,0,0,{qid},-1,-1,-1,-1,{rnd.randrange(1, 70)}"))
    lines.sort(key=lambda line: line[:3])
    out.write_text("".join(text + "\n" for *_, text in lines))
    tolls = (
        f"{car},{day},0,{rnd.randrange(10, 100)}\n" for car in range(max(cars) + 1) for day in range(1, 70)
    )
    Path(f"{out}.tolls.dat").write_text("".join(tolls))
    return len(lines)


REPLICA_OFFSET = 100_000  # car ids and qids of expressway k are shifted by k times this


def replicate(data: Path, xways: int, out: Path) -> int:
    """A scenario of one expressway (``data`` and its tolls file) copied onto
    expressways 0..``xways``-1, each copy with its own cars and query ids, in
    time order. The copies never meet: tolls and accidents are per
    expressway and each balance is one car's, so the validator's answers
    for the copy are those for ``data``, copied the same way
    (:func:`replicate_answers`). Returns the number of data lines."""
    lines: list[tuple[int, int, str]] = []
    for n, line in enumerate(data.read_text().splitlines()):
        f = line.split(",")
        for k in range(xways):
            g = list(f)
            g[2] = str(int(f[2]) + k * REPLICA_OFFSET)
            g[4] = str(k)
            if f[9] != "-1":
                g[9] = str(int(f[9]) + k * REPLICA_OFFSET)
            lines.append((int(f[1]), k * 10**9 + n, ",".join(g)))
    lines.sort()
    out.write_text("".join(text + "\n" for *_, text in lines))
    tolls = Path(f"{data}.tolls.dat").read_text().splitlines()
    with Path(f"{out}.tolls.dat").open("w") as dst:
        for k in range(xways):
            for line in tolls:
                car, day, _, toll = line.split(",")
                dst.write(f"{int(car) + k * REPLICA_OFFSET},{day},{k},{toll}\n")
    return len(lines)


def replicate_answers(lines: Iterable[str], xways: int) -> list[str]:
    """The validator's answers for :func:`replicate`'s copy, from its answers
    for the one expressway."""
    out = []
    for line in lines:
        v = [int(x) for x in line.split(",")] if line.strip() else []
        for k in range(xways):
            w = list(v)
            shift = k * REPLICA_OFFSET
            if not v:
                continue
            if v[0] == 0:  # 0,car,time,emit,lav,toll
                w[1] += shift
            elif v[0] == 1:  # 1,time,emit,xway,accseg,dir,car
                w[3], w[6] = k, v[6] + shift
            elif v[0] in (2, 5):  # 2,time,emit,resulttime,qid,bal
                w[4] += shift
            elif v[0] == 3:  # 3,time,emit,qid,toll
                w[3] += shift
            out.append(",".join(map(str, w)))
    return out


# ---------------------------------------------------------------------------
# Conversion into the program's inputs
# ---------------------------------------------------------------------------


def convert(data: Path, outdir: Path, tolls: Path | None = None, match_only: bool = False) -> dict[str, int]:
    """Writes PosReport, BalQuery and ExpQuery CSVs (ts = time * 1000, the time
    in seconds repeated as a column: CQL cannot read a row's ts) and HistTolls,
    the tolls file as a stream at ts 0. ``match_only`` keeps only the
    toll rows some type 3 query asks for, as the validator does: much less
    memory, but it reads the queries ahead, so the full table is the default.
    Type 4 lines (never generated) are dropped. Returns row counts."""
    outdir.mkdir(parents=True, exist_ok=True)
    counts = {"type 0": 0, "type 2": 0, "type 3": 0, "type 4": 0, "tolls": 0}
    wanted: set[tuple[str, str, str]] = set()
    last = -1
    with (
        data.open() as src,
        (outdir / "PosReport.csv").open("w") as pos,
        (outdir / "BalQuery.csv").open("w") as bal,
        (outdir / "ExpQuery.csv").open("w") as exp,
    ):
        pos.write("ts,time,car,spd,xway,lane,dir,seg,pos\n")
        bal.write("ts,time,car,qid\n")
        exp.write("ts,time,car,xway,qid,day\n")
        for line in src:
            f = line.rstrip("\n").split(",")
            if len(f) < 15:
                continue
            t = int(f[1])
            if t < last:
                raise SystemExit(f"{data}: time goes back at {line!r}")
            last = t
            counts[f"type {f[0]}"] = counts.get(f"type {f[0]}", 0) + 1
            if f[0] == "0":
                pos.write(f"{t * 1000},{t},{f[2]},{f[3]},{f[4]},{f[5]},{f[6]},{f[7]},{f[8]}\n")
            elif f[0] == "2":
                bal.write(f"{t * 1000},{t},{f[2]},{f[9]}\n")
            elif f[0] == "3":
                exp.write(f"{t * 1000},{t},{f[2]},{f[4]},{f[9]},{f[14]}\n")
                wanted.add((f[2], f[14], f[4]))
    with (outdir / "HistTolls.csv").open("w") as out, (tolls or Path(os.devnull)).open() as table:
        out.write("ts,car,day,xway,toll\n")
        for line in table:
            f = line.strip().split(",")
            if len(f) == 4 and not (match_only and (f[0], f[1], f[2]) not in wanted):
                out.write(f"0,{f[0]},{f[1]},{f[2]},{f[3]}\n")
                counts["tolls"] += 1
    return counts


# ---------------------------------------------------------------------------
# Running the program
# ---------------------------------------------------------------------------


@dataclass
class Run:
    """One run of the program: its answers in the validator's line format."""

    lines: list[str]
    input_rows: int
    toll_rows: int
    seconds: float
    peak_mb: float


def answer_line(row: dict[str, int], emit: int | None = None) -> str:
    """An answer row (typ, time, a, b, c, d) as the validator's line. ``emit``:
    when it was emitted, in benchmark seconds; by default the application
    time the engine emitted it at, rounded up (embedded mode has no
    wall-clock latency to report)."""
    typ, t, a, b, c, d = (row[k] for k in ("typ", "time", "a", "b", "c", "d"))
    if emit is None:
        emit = -(-row["ts"] // 1000)
    if typ == 0:
        return f"0,{a},{t},{emit},{b},{c}"
    if typ == 1:
        return f"1,{t},{emit},{b},{c},{d},{a}"
    if typ == 2:
        return f"2,{t},{emit},{t},{a},{b}"
    return f"3,{t},{emit},{a},{b}"


def cut_data(data: Path, until: int, out: Path) -> Path:
    """The lines of ``data`` up to time ``until``, written to ``out``."""
    with data.open() as src, out.open("w") as dst:
        for line in src:
            if int(line.split(",", 2)[1]) > until:
                break
            dst.write(line)
    return out


def last_time(data: Path) -> int:
    """The time of the data file's last line (its lines are in time order)."""
    with data.open("rb") as src:
        src.seek(max(0, src.seek(0, os.SEEK_END) - 4096))
        lines = [line for line in src.read().decode().splitlines() if line.count(",") >= 14]
    return int(lines[-1].split(",")[1]) if lines else 0


def expressways(data: Path) -> int:
    """How many expressways the data has (the largest XWay + 1)."""
    with data.open() as src:
        return 1 + max((int(line.split(",", 5)[4]) for line in src if line.count(",") >= 14), default=0)


def whole_program() -> str:
    """Both parts as one program for embedded mode: xway.cql, balance.cql
    reading xway.cql's XOut query instead of declaring it, and LROut, the
    union of the answers of both."""
    balance = [
        line for line in BALANCE.read_text().splitlines() if not line.startswith("REGISTER STREAM XOut")
    ]
    answers = (
        "REGISTER QUERY LROut AS\n  SELECT * FROM XOut WHERE typ <> 9\n  UNION ALL\n  SELECT * FROM BOut\n"
    )
    return XWAY.read_text() + "\n" + "\n".join(balance) + "\n\n" + answers


def run_program(
    data: Path,
    tolls: Path,
    workdir: Path,
    until: int | None = None,
    match_only: bool = False,
    window_bounds: str = "closed",
    executor: str = "dts",
) -> Run:
    """Converts ``data`` (cut at time ``until``) into ``workdir`` and runs the
    program once for all four answer types (its LROut query) in a child process."""
    if until is not None:
        data = cut_data(data, until, workdir / "data.dat")
    counts = convert(data, workdir, tolls, match_only)
    program = workdir / "linear-road.cql"
    program.write_text(whole_program())
    streams = [f"--stream={name}={workdir / name}.csv" for name in INPUTS]
    command = [sys.executable, "-m", "semiactive", "query", "run", str(program), *streams]
    command += ["--output", "LROut", "--window-bounds", window_bounds, "--executor", executor]
    raw = workdir / "LROut.jsonl"
    start = time.perf_counter()
    with raw.open("w") as stdout, (workdir / "stderr.txt").open("w") as stderr:
        child = subprocess.Popen(command, stdout=stdout, stderr=stderr, cwd=ROOT)
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"query run failed:\n{(workdir / 'stderr.txt').read_text()}")
    with raw.open() as rows:
        lines = [answer_line(row) for row in map(json.loads, rows) if row.get("op", "+") == "+"]
    inputs = counts["type 0"] + counts["type 2"] + counts["type 3"]
    return Run(lines, inputs, counts["tolls"], seconds, usage.ru_maxrss / 1024)


# ---------------------------------------------------------------------------
# Strict comparison with the validator's answers
# ---------------------------------------------------------------------------

Key = tuple[int, ...]


@dataclass
class Answers:
    """Answers by type: key -> (compared values, emit - time in seconds), keyed as
    the validator's own comparator does. ``alternative`` holds the validator's
    type 5 lines: the balance 30 s earlier, which it also accepts."""

    by_type: dict[int, dict[Key, tuple[Key, int]]] = field(default_factory=lambda: {t: {} for t in TYPES})
    alternative: dict[Key, Key] = field(default_factory=dict)
    duplicates: dict[int, list[Key]] = field(default_factory=lambda: {t: [] for t in TYPES})


def parse_answers(lines: Iterable[str]) -> Answers:
    """Reads lines in the validator's format (its ``out`` file, or a product's)."""
    answers = Answers()
    key: Key
    value: Key
    for line in lines:
        if not line.strip():
            continue
        v = tuple(int(x) for x in line.strip().split(","))
        if v[0] == 0:  # 0,car,time,emit,lav,toll
            key, value, delay = (v[1], v[2]), (v[4], v[5]), v[3] - v[2]
        elif v[0] == 1:  # 1,time,emit,xway,accseg,dir,car
            key, value, delay = (v[1], v[3], v[4], v[5], v[6]), (), v[2] - v[1]
        elif v[0] in (2, 5):  # 2,time,emit,resulttime,qid,balance
            key, value, delay = (v[1], v[4]), (v[3], v[5]), v[2] - v[1]
        elif v[0] == 3:  # 3,time,emit,qid,toll
            key, value, delay = (v[1], v[3]), (v[4],), v[2] - v[1]
        else:
            continue
        if v[0] == 5:
            answers.alternative[key] = value
            continue
        if key in answers.by_type[v[0]]:
            answers.duplicates[v[0]].append(key)
        answers.by_type[v[0]][key] = (value, delay)
    return answers


def compare(
    expected: Answers, product: Answers, max_delay: int = 5, check_lav: bool = True
) -> dict[int, dict[str, list[Key]]]:
    """The product's problems, per answer type and kind (KINDS): the keys of
    the answers concerned. Late = emitted more than ``max_delay`` s after the
    input, as the benchmark requires."""
    problems: dict[int, dict[str, list[Key]]] = {}
    for typ in TYPES:
        want, got = expected.by_type[typ], product.by_type[typ]
        found: dict[str, list[Key]] = {kind: [] for kind in KINDS}
        found["missing"] = [k for k in want if k not in got]
        found["duplicate"] = list(product.duplicates[typ])
        for key, (value, delay) in got.items():
            if delay > max_delay:
                found["late"].append(key)
            if key not in want:
                found["unexpected"].append(key)
                continue
            right = want[key][0]
            if typ == 0:
                ok = value[1] == right[1] and (not check_lav or value[0] == right[0])
            elif typ == 2:
                ok = value in (right, expected.alternative.get(key))
            else:
                ok = value == right
            if not ok:
                found["wrong"].append(key)
        problems[typ] = found
    return problems


def summary(answers: Answers) -> dict[str, int]:
    """How many answers of each type, and how many of them are not zero."""
    counts = {name: len(answers.by_type[typ]) for typ, name in TYPES.items()}
    counts["non-zero tolls"] = sum(1 for v, _ in answers.by_type[0].values() if v[1] != 0)
    counts["non-zero balances"] = sum(1 for v, _ in answers.by_type[2].values() if v[1] != 0)
    return counts


def cut_answers(lines: Iterable[str], until: int) -> list[str]:
    """The answers to input up to time ``until`` (exact: the validator is causal)."""
    return [
        line for line in lines if line.strip() and int(line.split(",")[2 if line[0] == "0" else 1]) <= until
    ]


def report(expected: Answers, product: Answers, problems: dict[int, dict[str, list[Key]]]) -> int:
    """Prints the table of answer counts and problems; returns the number of problems."""
    want, got = summary(expected), summary(product)
    print(f"{'type':<4} {'answers':<19} {'expected':>9} {'product':>9}" + "".join(f" {k:>10}" for k in KINDS))
    for typ, name in TYPES.items():
        counts = "".join(f" {len(problems[typ][kind]):>10}" for kind in KINDS)
        print(f"{typ:<4} {name:<19} {want[name]:>9} {got[name]:>9}{counts}")
    for name in ("non-zero tolls", "non-zero balances"):
        print(f"{'':<4} {name:<19} {want[name]:>9} {got[name]:>9}")
    for typ in TYPES:
        for kind in KINDS:
            for key in problems[typ][kind][:5]:
                print(f"  type {typ} {kind}: {key}")
    return sum(len(keys) for found in problems.values() for keys in found.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("synth", help="write the seeded scenario (and OUT.tolls.dat)")
    p.add_argument("out", type=Path)
    p.add_argument("--quirk", action="store_true", help="a second accident in an already used segment")
    p = commands.add_parser("replicate", help="copy a one-expressway scenario onto L expressways")
    p.add_argument("data", type=Path)
    p.add_argument("xways", type=int)
    p.add_argument("out", type=Path)
    p.add_argument("--expected", type=Path, help="its validator answers: also write OUT.expected")
    p = commands.add_parser("convert", help="a data file (+ tolls file) -> the program's CSV inputs")
    p.add_argument("data", type=Path)
    p.add_argument("outdir", type=Path)
    p.add_argument("--tolls", type=Path)
    p.add_argument("--match-only", action="store_true", help="only the toll rows the queries ask for")
    p = commands.add_parser("run", help="run the program on a data file and compare its answers")
    p.add_argument("data", type=Path)
    p.add_argument("--expected", type=Path, required=True, help="the validator's answers (its out file)")
    p.add_argument("--tolls", type=Path, help="the historical tolls (default: DATA.tolls.dat)")
    p.add_argument("--until", type=int, help="cut input and answers at this time (s)")
    p.add_argument("--match-only", action="store_true", help="only the toll rows the queries ask for")
    p.add_argument("--window-bounds", default="closed", choices=("closed", "half-open"))
    p.add_argument("--executor", default="dts", choices=("dts", "hb"))
    p.add_argument("--product", type=Path, help="also write the answers here, in the validator's format")
    p = commands.add_parser("compare", help="compare answers in the validator's format")
    p.add_argument("expected", type=Path)
    p.add_argument("product", type=Path)
    args = parser.parse_args(argv)

    if args.command == "synth":
        print(f"{synth(args.out, args.quirk)} lines", file=sys.stderr)
        return 0
    if args.command == "replicate":
        print(f"{replicate(args.data, args.xways, args.out)} lines", file=sys.stderr)
        if args.expected is not None:
            answers = replicate_answers(args.expected.read_text().splitlines(), args.xways)
            Path(f"{args.out}.expected").write_text("".join(line + "\n" for line in answers))
        return 0
    if args.command == "convert":
        print(convert(args.data, args.outdir, args.tolls, args.match_only), file=sys.stderr)
        return 0
    if args.command == "compare":
        expected = parse_answers(args.expected.read_text().splitlines())
        product = parse_answers(args.product.read_text().splitlines())
    else:
        tolls = args.tolls or Path(f"{args.data}.tolls.dat")
        with tempfile.TemporaryDirectory(prefix="linear-road-") as tmp:
            run = run_program(
                args.data, tolls, Path(tmp), args.until, args.match_only, args.window_bounds, args.executor
            )
        if args.product:
            args.product.write_text("".join(line + "\n" for line in run.lines))
        want = args.expected.read_text().splitlines()
        expected = parse_answers(want if args.until is None else cut_answers(want, args.until))
        product = parse_answers(run.lines)
        print(
            f"input rows {run.input_rows} (+ {run.toll_rows} toll rows), query run {run.seconds:.1f} s wall, "
            f"{run.input_rows / run.seconds:,.0f} input rows/s, peak {run.peak_mb:,.0f} MB"
        )
    problems = report(expected, product, compare(expected, product))
    print("0 differences" if problems == 0 else f"{problems} differences")
    return 0 if problems == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
