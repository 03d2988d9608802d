"""What telemetry and metrics cost: the paper chain saturated (the source
asks for more than the chain can take, so backpressure sets the rate) with
telemetry samples every 250 ms and every process's Prometheus endpoint
scraped every second, against the same chain with no samples and no scrape,
in the same process tree, runs interleaved so that a busy machine disturbs
both alike.

    python bench/telemetry_overhead.py [--seconds 6] [--repeat 3] [--rate 400000]

Throughput = rows the source emitted / seconds (every run checked row by
row). Goal (issue 12): on >= 95% of off. The counters the code keeps
anyway (prometheus_client objects) are in both; what "off" removes is the
sampling, the files and the scrapes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chain import ChainRun, run_chain


class Scraper(threading.Thread):
    """Scrapes every metrics endpoint of a run every ``interval`` s, as a
    Prometheus would (the run's cluster.json says where)."""

    def __init__(self, directory: Path, interval: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.directory = directory
        self.interval = interval
        self.stop = threading.Event()
        self.scrapes = 0

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            for doc in self.directory.glob("*/cluster.json"):
                try:
                    processes = json.loads(doc.read_text())["processes"]
                except (OSError, ValueError, KeyError):
                    continue
                for p in processes:
                    port = p.get("ports", {}).get("metrics")
                    if not port:
                        continue
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
                            r.read()
                        self.scrapes += 1
                    except OSError:
                        pass  # between runs, or a process gone


def trial(on: bool, rate: int, seconds: float, directory: Path) -> ChainRun:
    def change(cfg: dict[str, Any]) -> None:
        cfg["telemetry_interval_ms"] = 250 if on else 0

    run_dir = directory / ("on" if on else "off")
    run_dir.mkdir(exist_ok=True)
    scraper = Scraper(run_dir) if on else None
    if scraper is not None:
        scraper.start()
    try:
        return run_chain("on" if on else "off", rate, seconds, run_dir, change)
    finally:
        if scraper is not None:
            scraper.stop.set()
            scraper.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rate", type=int, default=400_000, help="asked of the source (more than it gets)")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores; paper chain saturated, 5 processes on loopback")
    throughput: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for i in range(args.repeat):
            # Alternating which goes first: a machine that slows down or
            # speeds up over time then favours neither.
            for on in (True, False) if i % 2 == 0 else (False, True):
                r = trial(on, args.rate, args.seconds, directory)
                rows_per_s = r.emitted / args.seconds
                if r.ok:
                    throughput[on].append(rows_per_s)
                print(
                    f"  {i + 1} {'on' if on else 'off':>3}: {rows_per_s:,.0f} rows/s"
                    + ("" if r.ok else f"  FAILED (exit {r.exit}, identical {r.identical})"),
                    file=sys.stderr,
                )
    if not throughput[True] or not throughput[False]:
        print("no successful run on one side: no ratio")
        return 1
    with_, without = statistics.median(throughput[True]), statistics.median(throughput[False])
    print(f"telemetry+metrics on: {with_:,.0f} rows/s; off: {without:,.0f} rows/s (median of {args.repeat})")
    print(f"on/off throughput: {with_ / without:.3f} (goal >= 0.95)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
