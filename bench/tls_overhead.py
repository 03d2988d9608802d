"""What mutual TLS costs: the paper chain (5 processes on loopback) with TLS
(the default) against the same chain with ``insecure: true``, in the same
process tree, runs interleaved so that a busy machine disturbs both alike.

    python bench/tls_overhead.py [--rates 50000,75000,100000] [--seconds 6] [--repeat 2]

Reports, per setting, the highest source rate sustained with zero loss and
the p50/p99 source-to-sink latency at 1000 tuples/s, and the ratios
(goal: >= 90% of the throughput, p99 at most 2 ms more).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chain import run_chain


def trial(insecure: bool, rate: int, seconds: float, directory: Path) -> dict[str, float | bool]:
    def change(cfg: dict[str, Any]) -> None:
        cfg["insecure"] = insecure

    r = run_chain(f"{'insecure' if insecure else 'tls'}-{rate}", rate, seconds, directory, change)
    return {"ok": r.ok and r.lag_ms < 250, "p50_ms": r.p50_ms, "p99_ms": r.p99_ms}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="50000,75000,100000,125000")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--latency-seconds", type=float, default=8.0)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    print(f"machine: {os.cpu_count()} cores; paper chain, 5 processes on loopback; TLS vs insecure")
    p50: dict[bool, list[float]] = {True: [], False: []}
    p99: dict[bool, list[float]] = {True: [], False: []}
    best = {True: 0, False: 0}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for i in range(args.repeat):
            for insecure in (False, True):
                r = trial(insecure, 1000, args.latency_seconds, directory)
                p50[insecure].append(float(r["p50_ms"]))
                p99[insecure].append(float(r["p99_ms"]))
                print(
                    f"  latency {i + 1} {'insecure' if insecure else 'tls':>8}: p50 {r['p50_ms']:.1f} ms, "
                    f"p99 {r['p99_ms']:.1f} ms",
                    file=sys.stderr,
                )
        for rate in rates:
            for insecure in (False, True):
                r = trial(insecure, rate, args.seconds, directory)
                print(
                    f"  rate {rate:>7,}/s {'insecure' if insecure else 'tls':>8}: "
                    f"{'sustained' if r['ok'] else 'NOT sustained'}",
                    file=sys.stderr,
                )
                if r["ok"]:
                    best[insecure] = max(best[insecure], rate)
    for insecure in (False, True):
        name = "insecure" if insecure else "tls"
        print(
            f"{name:>8}: highest sustained {best[insecure]:,} tuples/s; at 1000/s p50 "
            f"{statistics.median(p50[insecure]):.1f} ms, p99 {statistics.median(p99[insecure]):.1f} ms "
            f"(median of {args.repeat})"
        )
    ratio = best[False] / best[True] if best[True] else 0.0
    extra = statistics.median(p99[False]) - statistics.median(p99[True])
    print(
        f"tls/insecure throughput: {ratio:.2f} (goal >= 0.90); p99 difference {extra:+.1f} ms (goal <= +2 ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
