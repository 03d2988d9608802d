"""How well the deterministic simulation finds bugs: put known defects
back into the real code, one at a time, and count the random fault
schedules that catch each.

Each defect is a small patch of the running code (nothing on disk
changes): two fixes of the past reverted, and two classic HA mistakes.
For each, the same seeds run as ``semiactive simulate`` runs them; a
defect counts as found when at least one seed fails. The clean code runs
the same seeds first (it must pass them all) and gives the schedules per
second.

    python bench/sim_defects.py [--seeds 100] [--faults 3]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from semiactive import config
from semiactive.coordinator.control import Coordinator, Liveness
from semiactive.ha.resync import ResyncPoint
from semiactive.ha.views import StageView
from semiactive.node.service.roles.inbound import InboundEdgeSession
from semiactive.node.service.roles.sink import SinkRole
from semiactive.simulation.campaign import run_seed
from semiactive.topology import resolve

CONFIG = Path(__file__).resolve().parents[1] / "examples" / "sim-chain.yaml"


def _gone_only_when_down(self: Coordinator, node: str, view: StageView, now: float) -> bool:
    return self.liveness(node, now) is Liveness.DOWN


def _no_fencing(self: InboundEdgeSession) -> None:
    return None


def _sink_acks_ahead(self: SinkRole) -> ResyncPoint:
    edge = self.inputs.edges[0]
    seq = edge.last_seq + 5
    return ResyncPoint(seq, 0, seq + 1, {edge.edge: seq + 1})


def _secondary_never_reprotected(self: Coordinator, now: float) -> None:
    return None


DEFECTS: dict[str, tuple[str, Any, str, Callable[..., Any]]] = {
    # name: (what it is, class, attribute, replacement)
    "restarted secondary counts as protecting (reverts 5790ad1)": (
        "coordinator",
        Coordinator,
        "_gone",
        _gone_only_when_down,
    ),
    "no re-protection after a failure (reverts c896e90's reprotect)": (
        "coordinator",
        Coordinator,
        "_reprotect",
        _secondary_never_reprotected,
    ),
    "a replaced primary's streams are not fenced": ("node", InboundEdgeSession, "fence_stale", _no_fencing),
    "the sink acknowledges 5 rows it has not received": ("node", SinkRole, "level1", _sink_acks_ahead),
}


@contextlib.contextmanager
def patched(owner: Any, attribute: str, replacement: Callable[..., Any]) -> Iterator[None]:
    original = owner.__dict__[attribute]
    setattr(owner, attribute, replacement)
    try:
        yield
    finally:
        setattr(owner, attribute, original)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--faults", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2.0)
    args = parser.parse_args()
    topology = resolve(config.load(CONFIG))
    seeds = range(args.seeds)

    def campaign() -> tuple[list[int], float]:
        started = time.monotonic()
        failed = [
            s for s in seeds if not run_seed(topology, s, faults=args.faults, duration_s=args.duration).ok
        ]
        return failed, time.monotonic() - started

    clean, wall = campaign()
    print(f"{CONFIG.name}, {args.seeds} seeds x {args.faults} faults, {args.duration:g} virtual s each")
    print(f"clean code: {len(clean)} failing seeds, {args.seeds / wall:.2f} schedules/s ({wall:.0f} s)")
    found = 0
    print(f"{'defect':66} {'failing seeds':>14} {'first':>6}")
    for name, (_, owner, attribute, replacement) in DEFECTS.items():
        with patched(owner, attribute, replacement):
            failed, _ = campaign()
        found += bool(failed)
        first = str(failed[0]) if failed else "-"
        print(f"{name:66} {len(failed):>8}/{args.seeds:<5} {first:>6}", flush=True)
    print(f"found {found} of {len(DEFECTS)} defects")
    return 1 if clean else 0


if __name__ == "__main__":
    sys.exit(main())
