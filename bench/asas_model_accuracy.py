"""How well A-SAS's cost model predicts recovery: the heavy paper chain
(``examples/paper-chain-ha-heavy.yaml``: node-2 and its secondary burn
0.2 ms per row, 1000 rows/s) under SAS at fixed batch sizes, node-2
SIGKILLed at ``--kill-at``; the measured recovery against

- eq. 3, ``R* = B x (S_time + R_ptime)`` (the SAS paper, the worst case: B rows
  never sent), and
- the bounded model, ``R = min(B, n(1 + j)) x (S_time + R_ptime)``
  (``ha/round_model.py``: above the rows per Level-1 round nothing is sent
  and the replay starts at the cut).

    python bench/asas_model_accuracy.py [--batch-sizes 50,100,200,300,400,600,800] [--repeat 1] [--kill-at 5]

Method: the costs and n are measured as the coordinator measures them.
While the run goes, this process polls the ``Status`` of the producer
(node-1) and both replicas of the stage every 100 ms, from 1 s after the
start until just before the kill, and feeds the replies to the
coordinator's own measurement code (``semiactive.coordinator.adaptive_backup``, one
window spanning the whole polling period); its ``Measurements`` give
S_time and R_ptime (the secondary's when it received batches, else the
primary's: the machine that recovers) and the rows per Level-1 round n.
The stage runs plain SAS with B fixed, so nothing in the run depends on
the polling. Measured recovery is definition 2 (detection to the new
primary having reproduced the old one's output), as in ``docs/ha.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from semiactive import config, topology
from semiactive.coordinator.adaptive_backup import AdaptiveBackup
from semiactive.ha.cost_model import Measurements, estimated_recovery
from semiactive.ha.round_model import RoundModel
from semiactive.launcher.cluster import run_cluster
from semiactive.launcher.faults import Fault, FaultKind
from semiactive.launcher.measurements import RunReport
from semiactive.oracle.verify import check_run
from semiactive.runtime.events import EventLog
from semiactive.runtime.tls import ADMIN, Security
from semiactive.wire import control_pb2_grpc as cpb_grpc
from semiactive.wire import dataplane_pb2 as pb

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "paper-chain-ha-heavy.yaml"
WATCHED = ("node-1", "node-2", "node-4")
POLL_S = 0.1
GOAL = 0.25


@dataclass
class Result:
    batch_size: int
    measurements: Measurements | None
    recovery_ms: float | None
    identical: bool

    @property
    def eq3_ms(self) -> float | None:
        m = self.measurements
        return None if m is None else estimated_recovery(m, self.batch_size) * 1000

    @property
    def bounded_ms(self) -> float | None:
        m = self.measurements
        return None if m is None else RoundModel.from_measurements(m).recovery(self.batch_size) * 1000


def configs(base: dict[str, Any], batch_size: int, kill_at: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's config (SAS at B) and the same stage as ``asas`` with a
    window over the polling period, for the coordinator's measurement code."""
    run: dict[str, Any] = yaml.safe_load(yaml.safe_dump(base))
    stage = next(s for s in run["stages"] if s.get("node") == "node-2")
    stage["ha"] = {"mode": "sas", "batch_size": batch_size, "secondary": "node-4"}
    model: dict[str, Any] = yaml.safe_load(yaml.safe_dump(run))
    window_ms = int((kill_at - 1.2) * 1000)
    next(s for s in model["stages"] if s.get("node") == "node-2")["ha"] = {
        "mode": "asas",
        "secondary": "node-4",
        "bw_max": 1e12,
        "recovery_max_ms": 1e9,
        "initial_batch_size": batch_size,
        "max_batch_size": batch_size,
        "window_ms": window_ms,
    }
    return run, model


async def _poll(run_dir: Path, kill_at: float, tuning: AdaptiveBackup) -> Measurements | None:
    """Feed the watched nodes' statuses to ``tuning`` until just before the
    kill; its measurements over that period."""
    doc: dict[str, Any] = {}
    while not doc.get("t0_unix"):
        await asyncio.sleep(0.05)
        try:
            doc = json.loads((run_dir / "cluster.json").read_text())
        except (OSError, ValueError):
            doc = {}
    t0 = float(doc["t0_unix"])
    tls = run_dir / "tls"
    security = Security.load(tls, ADMIN) if tls.exists() else Security.insecure(ADMIN)
    ports = {p["name"]: p["ports"]["grpc"] for p in doc["processes"]}
    channels = {n: security.channel(f"127.0.0.1:{ports[n]}", n) for n in WATCHED}
    stubs = {n: cpb_grpc.ControlStub(c) for n, c in channels.items()}
    (edge,) = tuning.edges.values()
    latest: Measurements | None = None
    try:
        await asyncio.sleep(max(0.0, t0 + 1.0 - time.time()))
        while time.time() < t0 + kill_at - 0.15:
            for stub in stubs.values():
                try:
                    tuning.observe(await stub.Status(pb.Empty(), timeout=1.0), time.monotonic())
                except grpc.aio.AioRpcError:
                    continue
            # The newest full window (a loaded machine may leave the last one short).
            latest = edge.measure(time.monotonic()) or latest
            await asyncio.sleep(POLL_S)
        return latest
    finally:
        for channel in channels.values():
            await channel.close()


async def _trial(
    run_cfg: Path, model_cfg: Path, run_dir: Path, kill_at: float
) -> tuple[int, RunReport | None, Measurements | None]:
    tuning = AdaptiveBackup(topology.resolve(config.load(model_cfg)), EventLog("bench", None))
    reports: list[RunReport] = []
    poll = asyncio.create_task(_poll(run_dir, kill_at, tuning))
    code = await run_cluster(
        str(run_cfg),
        duration=kill_at + 3,
        run_dir=run_dir,
        progress=False,
        faults=[Fault("node-2", kill_at, FaultKind.KILL)],
        report_to=reports,
        reprotect=False,
    )
    report = reports[0] if reports else None
    if not poll.done():  # the run ended before the kill (it failed)
        poll.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poll
        return code, report, None
    return code, report, poll.result()


def trial(base: dict[str, Any], batch_size: int, kill_at: float, directory: Path, r: int) -> Result:
    run, model = configs(base, batch_size, kill_at)
    run_cfg, model_cfg = directory / f"sas-{batch_size}.yaml", directory / f"model-{batch_size}.yaml"
    run_cfg.write_text(yaml.safe_dump(run, sort_keys=False))
    model_cfg.write_text(yaml.safe_dump(model, sort_keys=False))
    run_dir = directory / f"run-{batch_size}-{r}"
    code, report, measured = asyncio.run(_trial(run_cfg, model_cfg, run_dir, kill_at))
    checks = check_run(topology.resolve(config.load(run_cfg)), run_dir)
    fault = report.faults[0] if report is not None and report.faults else None
    identical = code == 0 and all(c.ok for c in checks)
    return Result(batch_size, measured, fault.recovery_ms if fault else None, identical)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _ratio(measured: float | None, predicted: float | None) -> str:
    if measured is None or not predicted:
        return "-"
    ratio = measured / predicted
    return f"{ratio:.2f}" + ("" if abs(ratio - 1) <= GOAL else " *")


def table(results: list[Result]) -> str:
    rows = [
        f"{'B':>5} {'S+R us':>7} {'n':>5} {'n(1+j)':>7} {'eq.3 R*':>8} {'bounded':>8} "
        f"{'mean':>7} {'max':>7} {'max/eq.3':>9} {'max/bnd':>8} {'mean/eq.3':>10}  identical"
    ]
    for b in sorted({r.batch_size for r in results}):
        group = [r for r in results if r.batch_size == b]
        models = [RoundModel.from_measurements(r.measurements) for r in group if r.measurements is not None]
        per_row = _mean([m.recovery_s_per_tuple * 1e6 for m in models])
        n, most = _mean([m.rows_per_round for m in models]), _mean([m.max_rows_per_round for m in models])
        eq3, bounded = _mean([r.eq3_ms for r in group]), _mean([r.bounded_ms for r in group])
        measured = [r.recovery_ms for r in group if r.recovery_ms is not None]
        mean, top = _mean(list(measured)), max(measured, default=None)
        rows.append(
            f"{b:>5} {_ms(per_row):>7} {_int(n):>5} {_int(most):>7} "
            f"{_ms(eq3):>8} {_ms(bounded):>8} {_ms(mean):>7} {_ms(top):>7} {_ratio(top, eq3):>9} "
            f"{_ratio(top, bounded):>8} {_ratio(mean, eq3):>10}  {all(r.identical for r in group)}"
        )
    return "\n".join(rows)


def _int(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="50,100,200,300,400,600,800")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--kill-at", type=float, default=5.0)
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temporary directory)")
    args = parser.parse_args()
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    base = yaml.safe_load(EXAMPLE.read_text())
    print(f"machine: {os.cpu_count()} cores; {EXAMPLE.name}, SAS, node-2 killed at {args.kill_at:g} s")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.out or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        for r in range(args.repeat):
            for b in sizes:
                result = trial(base, b, args.kill_at, directory, r)
                results.append(result)
                print(
                    f"  B={b} #{r}: eq.3 {_ms(result.eq3_ms)} ms, bounded {_ms(result.bounded_ms)} ms, "
                    f"measured {_ms(result.recovery_ms)} ms, identical {result.identical}",
                    file=sys.stderr,
                )
    print(table(results))
    print(
        f"(recovery in ms over {args.repeat} run(s) per B; ratio = measured / predicted, "
        f"* outside +-{GOAL:.0%}; eq. 3 is a worst case: compare it with the max)"
    )
    return 0 if all(r.identical for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
