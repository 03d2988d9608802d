"""The chaos planner (semiactive/campaigns/chaos.py): what a run may inject."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from semiactive import config, topology
from semiactive.campaigns.chaos import SAME_STAGE_GAP_S, plan
from semiactive.launcher.faults import Fault
from semiactive.topology import Topology

ROOT = Path(__file__).resolve().parents[2]


def _topology() -> Topology:
    return topology.resolve(config.load(str(ROOT / "examples" / "chaos-chain.yaml")))


def _double_losses(topo: Topology, faults: list[Fault]) -> int:
    """Pairs of kills of both replicas of one stage within the same-stage gap."""
    count = 0
    for stage in topo.stages.values():
        kills = [f for f in faults if f.kind == "kill" and f.node in stage.replicas]
        count += sum(
            1 for a in kills for b in kills if a.node < b.node and abs(a.at - b.at) < SAME_STAGE_GAP_S
        )
    return count


def test_faults_stay_inside_the_run_and_on_protected_replicas() -> None:
    topo = _topology()
    replicas = {n for s in topo.stages.values() for n in s.replicas if s.config is not None}
    for seed in range(200):
        faults = plan(random.Random(seed), topo, 5.0)
        assert 1 <= len(faults) <= 6
        assert all(f.node in replicas and 0.8 <= f.at <= 4.0 + 0.3 for f in faults)
        assert _double_losses(topo, faults) == 0


def test_both_replicas_of_a_stage_only_when_asked() -> None:
    topo = _topology()
    doubles = sum(_double_losses(topo, plan(random.Random(seed), topo, 5.0, True)) for seed in range(200))
    assert doubles > 20


def test_sources_are_killed_only_when_asked_and_never_twice_within_the_gap() -> None:
    topo = _topology()
    sources = {s.primary for s in topo.stages.values() if s.source is not None}
    assert sources
    assert not any(f.node in sources for seed in range(200) for f in plan(random.Random(seed), topo, 5.0))
    hits = 0
    for seed in range(200):
        faults = plan(random.Random(seed), topo, 5.0, ends=True)
        ends = sorted(f.at for f in faults if f.node in sources)
        assert all(f.kind == "kill" for f in faults if f.node in sources)
        assert all(b - a >= SAME_STAGE_GAP_S - 0.001 for a, b in itertools.pairwise(ends))
        hits += len(ends)
    assert hits > 50
