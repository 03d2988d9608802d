"""``semiactive simulate``: many seeded fault schedules, each run checked.

A seed draws a fault schedule (:func:`~semiactive.sim.faults.random_schedule`)
and the network's latencies; the run is the real node and coordinator code
on virtual time (:func:`~semiactive.sim.cluster.simulate`). A failing seed
is printed with the command that replays it exactly (same seed, same
``PYTHONHASHSEED``: set iteration order is part of an interleaving), which
keeps the run's directory for inspection.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from semiactive.sim.cluster import Outcome, simulate
from semiactive.sim.faults import random_schedule
from semiactive.topology import Topology

HASH_SEED = "0"


@dataclass
class CampaignResult:
    runs: int = 0
    failures: list[Outcome] = field(default_factory=list)
    wall_s: float = 0.0
    virtual_s: float = 0.0
    delivered: int = 0

    @property
    def runs_per_s(self) -> float:
        return self.runs / self.wall_s if self.wall_s else 0.0


def run_seed(
    topology: Topology, seed: int, faults: int, duration_s: float, keep_dir: Path | None = None
) -> Outcome:
    schedule = random_schedule(topology, random.Random(seed), duration_s, faults)
    return simulate(topology, seed, schedule, duration_s=duration_s, keep_dir=keep_dir)


def run_campaign(
    topology: Topology,
    seeds: range,
    faults: int,
    duration_s: float,
    progress: Callable[[str], None] | None = None,
) -> CampaignResult:
    result = CampaignResult()
    started = time.monotonic()
    for i, seed in enumerate(seeds, start=1):
        outcome = run_seed(topology, seed, faults, duration_s)
        result.runs += 1
        result.virtual_s += outcome.virtual_s
        result.delivered += outcome.delivered
        if not outcome.ok:
            result.failures.append(outcome)
            if progress is not None:
                progress(outcome.summary())
        if progress is not None and (i % 50 == 0 or i == len(seeds)):
            elapsed = time.monotonic() - started
            progress(
                f"[{i}/{len(seeds)}] {len(result.failures)} failed, {i / elapsed:.1f} runs/s, "
                f"about {(len(seeds) - i) * elapsed / i:.0f} s left"
            )
    result.wall_s = time.monotonic() - started
    return result


def replay_command(config: str, seed: int, faults: int, duration_s: float) -> str:
    return (
        f"PYTHONHASHSEED={HASH_SEED} semiactive simulate {config} --seed {seed} --faults {faults} "
        f"--duration {duration_s:g} --keep runs/sim-{seed}"
    )


def exact_hash_seed(argv: list[str]) -> None:
    """Re-run this command with ``PYTHONHASHSEED`` fixed, so a seed means
    the same interleaving in every process."""
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        os.environ["PYTHONHASHSEED"] = HASH_SEED
        os.execv(sys.executable, [sys.executable, "-m", "semiactive.cli", *argv])  # noqa: S606
