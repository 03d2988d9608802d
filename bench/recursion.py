"""Seed 001, Figs. 8 and 10 on semiactive's engine: the Fig. 7 query (running
averages per id through nested loops) over N input tuples, with 1, 2 and 4
sub-queries, timestamps all distinct or 4 tuples per timestamp.

    python bench/recursion.py [--tuples 2000000] [--subqueries 1 2 4] [--per-ts 1 4]

Columns (input tuples per second of CPU time of this process, so that other
load on the machine skews the figures less; best of --repeat runs):

- ``recursive DTS``: examples/fig7-N.cql, the loops closed. A recursive
  program runs one instant per slice (its cut delays are 1 ms): the strict
  per-timestamp DTS of the paper.
- ``open DTS``: examples/fig7-N-open.cql, the loops opened, each fed-back
  stream replaced by a DUMMY input carrying the series the recursive run fed
  back (recorded during that run), so every operator does the same work
  (section 4.1). Our DTS runs an acyclic program in one wide slice per
  advance (each operator still finishes instant t before t+1 internally);
- ``open DTS 1ms``: the same with ``max_slice_ms=1``, strict per-timestamp
  DTS as in the paper's Fig. 8 (the fair comparison with the paper);
- ``HB 10`` ... ``HB 1000``: the open form on the heartbeat executor, with
  that bound on one operator's consecutive run (Fig. 8's x axis).

Inputs are pushed in batches of --batch tuples with a watermark after each
(DUMMY tuples up to the same watermark). Tuples/s counts the N tuples of
``input`` only (as the paper does), although the open form also reads the
DUMMY tuples. Every run's output (all_avg_delay) is checked to be the
recursive run's. The goals of issue 4 are evaluated at the end.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node.cql import compile_program
from node.cql.examples import fig7, fig7_open
from node.engine.elements import Element
from node.engine.engine import Engine
from node.engine.heartbeat import HeartbeatEngine

RUN_LIMITS = (10, 20, 100, 1000)
SETTLE_MS = 5  # Fig. 7's loops settle within 3 ms of the last input

Runner = Engine | HeartbeatEngine


def make_input(n: int, per_ts: int) -> list[Element]:
    """The paper's data: id = 0..3 repeating, val counting up from 1."""
    return [(i // per_ts, i + 1, 1, i % 4, i // 4 + 1) for i in range(n)]


def _values(elements: list[Element]) -> list[tuple[Any, ...]]:
    return [(e[0], *e[3:]) for e in elements]


def feed(
    engine: Runner, inputs: dict[str, list[Element]], n_input: int, batch: int, end: int
) -> tuple[float, dict[str, list[Element]]]:
    """Push ``input`` in batches (other inputs up to the same watermark),
    advance after each, then to ``end``. Returns the CPU seconds and the
    outputs."""
    main = inputs["input"]
    cuts = [main[min(i + batch, n_input) - 1][0] for i in range(0, n_input, batch)] + [end]
    plan: list[tuple[dict[str, list[Element]], int]] = []
    start = dict.fromkeys(inputs, 0)
    for cut in cuts:
        pushes = {}
        for name, rows in inputs.items():
            i = start[name]
            j = i
            while j < len(rows) and rows[j][0] <= cut:
                j += 1
            pushes[name] = rows[i:j]
            start[name] = j
        plan.append((pushes, cut))
    outputs: dict[str, list[Element]] = {}
    started = time.process_time()
    for pushes, cut in plan:
        for name, rows in pushes.items():
            engine.push(name, rows)
        for name, out in engine.advance(cut).items():
            outputs.setdefault(name, []).extend(out)
    return time.process_time() - started, outputs


def best(repeat: int, run: Callable[[], tuple[float, dict[str, list[Element]]]]) -> tuple[float, Any]:
    results = [run() for _ in range(repeat)]
    return min(r[0] for r in results), results[0][1]


def measure(n: int, subqueries: int, per_ts: int, batch: int, repeat: int) -> dict[str, float]:
    """Input tuples/s for every column of one row of the table."""
    rows = make_input(n, per_ts)
    end = rows[-1][0] + SETTLE_MS
    fed_back = ["all_avg_delay", *(f"avg_delay_{i}" for i in range(subqueries))]
    recursive = compile_program(fig7(subqueries))

    def closed() -> tuple[float, dict[str, list[Element]]]:
        engine = Engine(recursive, fed_back)
        seconds, out = feed(engine, {"input": rows}, n, batch, end)
        assert engine.next_event() is None, "the loops did not settle"
        return seconds, out

    seconds, series = best(repeat, closed)
    rates = {"recursive DTS": n / seconds}
    expected = _values(series["all_avg_delay"])
    inputs = {"input": rows, "dummy_all": series["all_avg_delay"]}
    inputs.update({f"dummy_{i}": series[f"avg_delay_{i}"] for i in range(subqueries)})
    opened = compile_program(fig7_open(subqueries))
    runners: dict[str, Callable[[], Runner]] = {
        "open DTS": lambda: Engine(opened, ["all_avg_delay"]),
        "open DTS 1ms": lambda: Engine(opened, ["all_avg_delay"], max_slice_ms=1),
    }
    for limit in RUN_LIMITS:
        runners[f"HB {limit}"] = lambda limit=limit: HeartbeatEngine(
            opened, ["all_avg_delay"], run_limit=limit
        )  # type: ignore[misc]
    for column, make in runners.items():
        seconds, out = best(repeat, lambda make=make: feed(make(), inputs, n, batch, end))  # type: ignore[misc]
        assert _values(out["all_avg_delay"]) == expected, f"{column}: output differs from the recursive run"
        rates[column] = n / seconds
    return rates


def _machine() -> str:
    cpu = subprocess.run(
        ["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True
    ).stdout.strip()
    return f"{platform.machine()} {cpu}; python {platform.python_version()}"


def _verdict(value: float, bound: float, text: str) -> str:
    return f"{text} ({'met' if value >= bound else 'NOT met'}: >= {bound:,})"


def goals(table: dict[tuple[int, int], dict[str, float]]) -> list[str]:
    """Issue 4's goals, checked against the measured table."""
    lines = []
    for (subqueries, per_ts), rates in sorted(table.items()):
        hb = max(v for k, v in rates.items() if k.startswith("HB"))
        where = f"{subqueries} sub-quer{'y' if subqueries == 1 else 'ies'}, {per_ts}/ts"
        for column in ("open DTS", "open DTS 1ms"):
            ratio = rates[column] / hb
            lines.append(_verdict(ratio, 0.9, f"{where}: {column} / best HB = {ratio:.2f}"))
        ratio = rates["recursive DTS"] / rates["open DTS 1ms"]
        lines.append(_verdict(ratio, 0.9, f"{where}: recursive DTS / open DTS 1ms = {ratio:.2f}"))
    if (1, 4) in table:
        rate = table[(1, 4)]["recursive DTS"]
        lines.append(_verdict(rate, 250_000, f"1 sub-query, 4/ts: recursive DTS {rate:,.0f} tuples/s"))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tuples", type=int, default=2_000_000, help="input tuples per run (default 2,000,000)"
    )
    parser.add_argument("--subqueries", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--per-ts", type=int, nargs="+", default=[1, 4], help="tuples per timestamp")
    parser.add_argument("--batch", type=int, default=10_000, help="input tuples per push and watermark")
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell; the best counts")
    args = parser.parse_args(argv)
    print(f"machine: {_machine()}")
    print(f"Fig. 7, {args.tuples:,} input tuples, batches of {args.batch:,}; input tuples/s (CPU time)")
    columns = ["recursive DTS", "open DTS", "open DTS 1ms", *(f"HB {limit}" for limit in RUN_LIMITS)]
    print(f"{'sub-queries':>11} {'ts':>9} " + " ".join(f"{c:>13}" for c in columns))
    table: dict[tuple[int, int], dict[str, float]] = {}
    for subqueries in args.subqueries:
        for per_ts in args.per_ts:
            rates = measure(args.tuples, subqueries, per_ts, args.batch, args.repeat)
            table[(subqueries, per_ts)] = rates
            label = "distinct" if per_ts == 1 else f"{per_ts} per ts"
            print(
                f"{subqueries:>11} {label:>9} " + " ".join(f"{rates[c]:>13,.0f}" for c in columns), flush=True
            )
    print()
    print("\n".join(goals(table)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
