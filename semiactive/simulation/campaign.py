"""``semiactive simulate``: many seeded fault schedules, each run checked.

A seed draws a fault schedule (:func:`~semiactive.simulation.faults.random_schedule`)
and the network's latencies; the run is the real node and coordinator code
on virtual time (:func:`~semiactive.simulation.cluster.simulate`). A failing seed
is printed with the command that replays it exactly (same seed, same
``PYTHONHASHSEED``: set iteration order is part of an interleaving), which
keeps the run's directory for inspection.
"""

from __future__ import annotations

import concurrent.futures
import functools
import multiprocessing
import os
import random
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from semiactive.config import load
from semiactive.simulation.cluster import Outcome, simulate
from semiactive.simulation.faults import random_schedule
from semiactive.topology import Topology, resolve

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
    topology: Topology, seed: int, *, faults: int, duration_s: float, keep_dir: Path | None = None
) -> Outcome:
    schedule = random_schedule(topology, random.Random(seed), duration_s, faults)
    return simulate(topology, seed, schedule, duration_s=duration_s, keep_dir=keep_dir)


def run_campaign(
    config: str | Path,
    seeds: range,
    *,
    faults: int,
    duration_s: float,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
) -> CampaignResult:
    """Every seed of ``seeds`` on the topology of ``config``; with
    ``workers`` > 1, in that many processes (spawned, so a seed runs there
    exactly as here, with this process's ``PYTHONHASHSEED``)."""
    result = CampaignResult()
    started = time.monotonic()
    jobs = [(str(config), seed, faults, duration_s) for seed in seeds]
    if workers > 1:
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            outcomes = pool.map(_run_job, jobs, chunksize=4)
            _collect(result, outcomes, len(jobs), started, progress)
    else:
        _collect(result, map(_run_job, jobs), len(jobs), started, progress)
    result.wall_s = time.monotonic() - started
    return result


@functools.cache
def _topology(config: str) -> Topology:
    return resolve(load(config))


def _run_job(job: tuple[str, int, int, float]) -> Outcome:
    config, seed, faults, duration_s = job
    return run_seed(_topology(config), seed, faults=faults, duration_s=duration_s)


def _collect(
    result: CampaignResult,
    outcomes: Iterable[Outcome],
    total: int,
    started: float,
    progress: Callable[[str], None] | None,
) -> None:
    for i, outcome in enumerate(outcomes, start=1):
        result.runs += 1
        result.virtual_s += outcome.virtual_s
        result.delivered += outcome.delivered
        if not outcome.ok:
            result.failures.append(outcome)
            if progress is not None:
                progress(outcome.summary())
        if progress is not None and (i % 50 == 0 or i == total):
            elapsed = time.monotonic() - started
            progress(
                f"[{i}/{total}] {len(result.failures)} failed, {i / elapsed:.1f} runs/s, "
                f"about {(total - i) * elapsed / i:.0f} s left"
            )


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
        os.execv(sys.executable, [sys.executable, "-m", "semiactive", *argv])  # noqa: S606
