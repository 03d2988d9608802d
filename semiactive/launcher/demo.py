"""``semiactive demo``: the paper's chain (the SAS paper, Fig. 3) for a short run,
then the sink's output checked row by row against a reference computed from
the source's log."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from semiactive import config, topology
from semiactive.launcher.cluster import run_cluster
from semiactive.oracle.verify import check_run
from semiactive.source_tree import EXAMPLES


def run_demo(*, duration: float, run_dir: Path | None) -> int:
    path = EXAMPLES / "paper-chain.yaml"
    if not path.exists():
        print(f"semiactive demo: {path} not found (run it from a source checkout)", file=sys.stderr)
        return 2
    run_dir = run_dir or Path("runs") / f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    print(
        f"Seed 002 Fig. 3: source -> 3 selection stages -> sink, 1000 tuples/s for {duration:g} s",
        file=sys.stderr,
    )
    code = asyncio.run(run_cluster(str(path), duration=duration, run_dir=run_dir))
    checks = check_run(topology.resolve(config.load(path)), run_dir)
    for check in checks:
        print(check.describe())
    return code if all(c.ok for c in checks) else 1
