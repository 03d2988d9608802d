"""What high availability costs in steady state: the paper chain with
node-2 unprotected (``none``) and protected by SAS (B = 100, secondary
node-4), at the same source rates, no failure.

    python bench/ha_cost.py [--rates 10000,20000,40000] [--seconds 6]

For each rate and mode: rows delivered per second at the sink, how far the
source fell behind its schedule, and whether the output is identical to the
reference; then the ratio of SAS to none at each rate and of their highest
sustained rates. Both runs share this machine's two cores with every
process of the cluster (the secondary is one more process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from semiactive import config, topology
from semiactive.launcher.cluster import run_cluster
from semiactive.oracle.verify import check_run

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "paper-chain-ha.yaml"


def trial(mode: str, rate: int, seconds: float, directory: Path) -> dict[str, Any]:
    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg["sources"][0]["rate"] = [{"at_s": 0, "tuples_per_s": rate}]
    cfg["sources"][0]["log"] = True
    for stage in cfg["stages"]:
        if "ha" in stage:
            if mode == "none":
                del stage["ha"]
            else:
                stage["ha"] = {"mode": "sas", "batch_size": 100, "secondary": "node-4"}
    path = directory / f"{mode}-{rate}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    run_dir = directory / f"run-{mode}-{rate}"
    code = asyncio.run(run_cluster(str(path), duration=seconds, run_dir=run_dir, progress=False))
    end = json.loads((run_dir / "sources" / "node-0.end.json").read_text())
    delivered = json.loads((run_dir / "telemetry" / "sink.latency.json").read_text())["delivered"]
    identical = all(c.ok for c in check_run(topology.resolve(config.load(path)), run_dir))
    duration = (end["watermark"] + 1) / 1000
    return {
        "delivered_per_s": delivered / duration if duration > 0 else 0.0,
        "lag_ms": end["lag_ms"],
        "sustained": code == 0 and identical and end["lag_ms"] < 250,
        "identical": identical,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="10000,20000,40000,60000")
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    print(f"machine: {os.cpu_count()} cores; paper chain, node-2 protected by node-4 (SAS, B = 100) or not")
    best = {"none": 0, "sas": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for rate in rates:
            results = {mode: trial(mode, rate, args.seconds, Path(tmp)) for mode in ("none", "sas")}
            for mode, r in results.items():
                if r["sustained"]:
                    best[mode] = max(best[mode], rate)
            ratio = results["sas"]["delivered_per_s"] / max(results["none"]["delivered_per_s"], 1e-9)
            print(
                f"rate {rate:>7,}/s: none {results['none']['delivered_per_s']:>9,.0f}/s "
                f"(behind {results['none']['lag_ms']:.0f} ms), "
                f"sas {results['sas']['delivered_per_s']:>9,.0f}/s "
                f"(behind {results['sas']['lag_ms']:.0f} ms); sas/none {ratio:.0%}; "
                f"identical {results['none']['identical'] and results['sas']['identical']}"
            )
    ratio = best["sas"] / best["none"] if best["none"] else 0.0
    print(f"highest sustained: none {best['none']:,}/s, sas {best['sas']:,}/s ({ratio:.0%} of none)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
