"""What an operator state snapshot costs and saves, on Linear Road's
per-expressway program (examples/linear-road/xway.cql) over the public
generator's data (CSV files as ``bench/linear_road.py convert`` writes them).

    python bench/state_snapshot.py DIR [--at 300,900,1800] [--xway 0] [--collector node|python]

Feeds expressway ``--xway``'s rows in order, one second of data per
advance, and at each ``--at`` second: captures the state (time, bytes),
captures it again in a forked child as a node daemon does (how long the
parent stops for the fork, until the bytes are in, and the parent's event
loop's longest stall meanwhile), decodes and
restores it into a fresh engine (time), and checks that the
restored engine then answers the next 30 s exactly as the original (and
prints both engines' processing time for them: a restored state should cost
no more to work on). The
rebuild a snapshot replaces is a replay of every row from the first (the
historical tolls included), whose cost is the processing time up to that
second, printed beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import gc
import heapq
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from semiactive.ha.resync import StateBytes
from semiactive.node.cql import compile_program
from semiactive.node.engine import state
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine
from semiactive.node.service.forked_capture import ForkedCapture
from semiactive.runtime.process import COLLECTOR_THRESHOLDS

PROGRAM = Path(__file__).resolve().parents[1] / "examples" / "linear-road" / "xway.cql"
INPUTS = ("HistTolls", "PosReport", "ExpQuery")


def _rows(path: Path, xway: int) -> Iterator[tuple[int, str, tuple[int, ...]]]:
    with path.open() as f:
        reader = csv.reader(f)
        header = next(reader)
        skip = {i for i, name in enumerate(header) if name in ("ts", "op")}
        column = header.index("xway")
        for row in reader:
            if int(row[column]) == xway:
                yield int(row[0]), path.stem, tuple(int(v) for i, v in enumerate(row) if i not in skip)


def elements(directory: Path, xway: int) -> Iterator[tuple[str, Element]]:
    """Every input row of one expressway in (ts, input) order, with its
    stage position as lineage."""
    merged = heapq.merge(*(_rows(directory / f"{name}.csv", xway) for name in INPUTS), key=lambda r: r[0])
    for position, (ts, name, values) in enumerate(merged, start=1):
        yield name, (ts, position, 1, *values)


@dataclass
class Fed:
    """An engine with the rows it has not been given yet."""

    engine: Engine
    pending: dict[str, list[Element]] = field(default_factory=lambda: {name: [] for name in INPUTS})
    busy_s: float = 0.0

    def advance(self, until_ms: int) -> list[Element]:
        started = time.perf_counter()
        for name, batch in self.pending.items():
            self.engine.push(name, batch)
            batch.clear()
        out = self.engine.advance(until_ms)["XOut"]
        self.busy_s += time.perf_counter() - started
        return out


def _forked(engine: Engine) -> tuple[float, float, float, StateBytes | BaseException]:
    """A capture in a forked child: seconds the caller is stopped (the
    fork), seconds until the bytes are in, the event loop's longest stall
    after the fork (reading the bytes in: a node's heartbeats and rows wait
    that long), and the bytes."""

    async def capture() -> tuple[float, float, float, StateBytes | BaseException]:
        done: asyncio.Future[StateBytes | BaseException] = asyncio.get_running_loop().create_future()
        started = time.perf_counter()
        ForkedCapture()(engine, done.set_result)
        paused = time.perf_counter() - started
        stall, tick = 0.0, time.perf_counter()
        while not done.done():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            stall, tick = max(stall, now - tick), now
        return paused, time.perf_counter() - started, stall, done.result()

    return asyncio.run(capture())


def _without_lineage(out: list[Element]) -> list[Element]:
    return [e[:1] + e[2:] for e in out]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("directory", type=Path)
    parser.add_argument("--at", default="300,900,1800", help="seconds of data at which to snapshot")
    parser.add_argument("--xway", type=int, default=0)
    parser.add_argument(
        "--collector",
        choices=("node", "python"),
        default="node",
        help="the cyclic collector's thresholds: a node daemon's (semiactive.node.service.main) "
        "or Python's default",
    )
    args = parser.parse_args(argv)
    if args.collector == "node":
        gc.set_threshold(*COLLECTOR_THRESHOLDS)
    print(f"collector thresholds {gc.get_threshold()}")
    marks = sorted(int(s) for s in args.at.split(","))
    program = compile_program(PROGRAM.read_text())
    original = Fed(Engine(program, ["XOut"], lineage=True))
    restored: dict[int, Fed] = {}  # by the second of their snapshot: compared for 30 s after it
    busy_at: dict[int, float] = {}  # the original's processing time at each snapshot
    second = 0
    print("data s      rows  replay s  state MB  capture s  fork ms  forked s  stall ms  restore s")
    for name, element in elements(args.directory, args.xway):
        while element[0] >= (second + 1) * 1000:
            second += 1
            out = original.advance(second * 1000 - 1)
            for mark, fed in list(restored.items()):
                assert _without_lineage(fed.advance(second * 1000 - 1)) == _without_lineage(out), (
                    mark,
                    second,
                )
                if second == mark + 30:
                    del restored[mark]
                    print(
                        f"  the engine restored at {mark} s answered the next 30 s exactly as the original, "
                        f"in {fed.busy_s:.2f} s of processing against the original's "
                        f"{original.busy_s - busy_at[mark]:.2f} s"
                    )
            if marks and second == marks[0]:
                marks.pop(0)
                started = time.perf_counter()
                data = state.capture(original.engine)
                capture_s = time.perf_counter() - started
                paused_s, forked_s, stall_s, forked = _forked(original.engine)
                assert forked == data, forked
                started = time.perf_counter()
                fresh = Engine(program, ["XOut"], lineage=True)
                state.restore(fresh, data)
                restore_s = time.perf_counter() - started
                restored[second] = Fed(fresh)
                busy_at[second] = original.busy_s
                print(
                    f"{second:6d} {element[1] - 1:9d} {original.busy_s:9.1f} {len(data) / 1e6:9.1f} "
                    f"{capture_s:10.2f} {paused_s * 1000:8.1f} {forked_s:9.2f} {stall_s * 1000:9.1f} "
                    f"{restore_s:10.2f}",
                    flush=True,
                )
            if not marks and not restored:
                return 0
        original.pending[name].append(element)
        for fed in restored.values():
            fed.pending[name].append(element)
    if marks:
        print(f"the data ends at {second} s, before {marks[0]} s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
