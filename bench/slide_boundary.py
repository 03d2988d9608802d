"""What a slide boundary costs: Linear Road's per-expressway program
(examples/linear-road/xway.cql) embedded, over the public generator's data
(CSV files as ``bench/linear_road.py convert`` writes them), with the
planner's pane aggregate and, in a child process, without it (each GROUP BY
over a sliding window then reads the window's changes one by one, as before
the pane aggregate existed).

    python bench/slide_boundary.py DIR [--from 3300] [--until 3720] [--xway 0]

Feeds the rows of seconds ``--from`` .. ``--until`` (and the historical
tolls), one second of data per advance, and prints for every minute
boundary after the 5-minute window has filled: the advance of the
boundary's second beside the median and the largest of the other seconds.
The boundary is where ``[Range 5 minutes Slide 1 minute]`` adds a minute of
reports and drops one; the answers due at that second wait for it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from state_snapshot import PROGRAM, Fed, elements  # type: ignore[import-not-found]

from semiactive.node.cql import compile_program
from semiactive.node.engine.engine import Engine
from semiactive.node.engine.operators.pane_aggregate import PaneAggregateOp

WINDOW_S = 300


def measure(
    directory: Path, xway: int, start_s: int, until_s: int, fuse_panes: bool = True
) -> dict[str, object]:
    """Per-second advance times (s) of the embedded program."""
    fed = Fed(Engine(compile_program(PROGRAM.read_text()), ["XOut"], lineage=True, panes=fuse_panes))
    panes = sum(isinstance(op, PaneAggregateOp) for op in fed.engine.operators)
    seconds: dict[int, float] = {}
    rows = 0
    second = start_s
    for name, e in elements(directory, xway):
        if e[0] < start_s * 1000 and name != "HistTolls":
            continue
        while e[0] >= (second + 1) * 1000:
            started = time.perf_counter()
            fed.advance((second + 1) * 1000 - 1)
            seconds[second] = time.perf_counter() - started
            second += 1
            if second >= until_s:
                return {"panes": panes, "rows": rows, "seconds": seconds}
        fed.pending[name].append(e)
        rows += 1
    return {"panes": panes, "rows": rows, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dir", type=Path)
    parser.add_argument("--from", dest="start", type=int, default=3300)
    parser.add_argument("--until", type=int, default=3720)
    parser.add_argument("--xway", type=int, default=0)
    parser.add_argument("--no-panes", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.no_panes:
        # The child run: the planner keeps the window and the GROUP BY apart.
        result = measure(args.dir, args.xway, args.start, args.until, fuse_panes=False)
        print(json.dumps({str(k): v for k, v in result.items()} | {"seconds": result["seconds"]}))
        return 0

    print(
        f"xway {args.xway}, seconds {args.start}..{args.until} of {args.dir}, one advance a second",
        flush=True,
    )
    results = {"pane aggregate": measure(args.dir, args.xway, args.start, args.until)}
    child = subprocess.run(
        [
            sys.executable,
            __file__,
            str(args.dir),
            "--from",
            str(args.start),
            "--until",
            str(args.until),
            "--xway",
            str(args.xway),
            "--no-panes",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    unfused = json.loads(child.stdout)
    unfused["seconds"] = {int(k): v for k, v in unfused["seconds"].items()}
    results["without it"] = unfused
    for label, result in results.items():
        seconds: dict[int, float] = result["seconds"]  # type: ignore[assignment]
        boundaries = [s for s in seconds if s % 60 == 0 and s >= args.start + WINDOW_S]
        others = [v for s, v in seconds.items() if s % 60 != 0 and s >= args.start + WINDOW_S]
        print(f"{label} ({result['panes']} pane operators, {result['rows']:,} rows):")
        for s in boundaries:
            print(f"  boundary at {s} s: advance {seconds[s] * 1000:,.0f} ms")
        if others:
            print(
                f"  other seconds: median {statistics.median(others) * 1000:,.0f} ms, "
                f"max {max(others) * 1000:,.0f} ms ({len(others)} seconds)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
