"""One run of the paper chain (examples/paper-chain.yaml: source, three
selection stages, sink; 5 processes on loopback) with a changed config,
checked row by row: what the throughput and overhead benchmarks share."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from semiactive import config, topology
from semiactive.launcher.cluster import run_cluster
from semiactive.oracle.verify import check_run

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "paper-chain.yaml"


@dataclass
class ChainRun:
    run_dir: Path
    exit: int
    emitted: int  # rows the source emitted (backpressure holds it back)
    lag_ms: float  # how far behind its schedule the source was at the end
    identical: bool  # the sink's output equals the reference, row by row
    p50_ms: float
    p99_ms: float

    @property
    def ok(self) -> bool:
        return self.exit == 0 and self.identical


def run_chain(
    label: str, rate: int, seconds: float, directory: Path, change: Callable[[dict[str, Any]], None]
) -> ChainRun:
    """Run the chain at ``rate`` tuples/s for ``seconds`` with its config
    passed through ``change``, in ``directory/<label>-<n>``."""
    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg["sources"][0]["rate"] = [{"at_s": 0, "tuples_per_s": rate}]
    change(cfg)
    name = f"{label}-{len(list(directory.glob('*.yaml')))}"
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    run_dir = directory / name
    code = asyncio.run(run_cluster(str(path), duration=seconds, run_dir=run_dir, progress=False))
    end = json.loads((run_dir / "sources" / "node-0.end.json").read_text())
    latency = json.loads((run_dir / "telemetry" / "sink.latency.json").read_text())
    checks = check_run(topology.resolve(config.load(path)), run_dir)
    return ChainRun(
        run_dir,
        code,
        int(end["count"]),
        float(end["lag_ms"]),
        all(c.ok for c in checks),
        float(latency.get("p50_ms") or 0.0),
        float(latency.get("p99_ms") or 0.0),
    )
