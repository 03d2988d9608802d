"""Build topologies for HA tests from CQL, and run stage replicas directly."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import yaml

from semiactive import config, topology
from semiactive.ha.output_log import UNBOUNDED
from semiactive.ha.replica import Mode, StageReplica, StateCapture, capture_now
from semiactive.node.engine.elements import Element
from semiactive.topology import Stage, Topology
from tests.processes import chain_config


def build_topology(
    tmp: Path,
    queries: list[str],
    modes: list[tuple[str, int]] | None = None,
    second_source: bool = False,
) -> Topology:
    """source(s) -> one stage per query -> sink; ``modes[i]`` = (ha mode, B)
    of stage i+1, whose secondary is ``sec-(i+1)``."""
    cfg: dict[str, Any] = chain_config(queries)
    if second_source:
        cfg["sources"].append(
            {"name": "node-t", "stream": "t0", "schema": {"id": "integer", "val": "integer"}, "seed": 5}
        )
    for i, (mode, size) in enumerate(modes or []):
        if mode != "none":
            cfg["stages"][i]["ha"] = {"mode": mode, "batch_size": size, "secondary": f"sec-{i + 1}"}
    path = tmp / "ha.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return topology.resolve(config.load(path))


def source_rows(n: int, seed: int, per_ts: int = 2) -> list[Element]:
    """Rows of the chain's source schema (id, val, pad) with seq = position."""
    rnd = random.Random(seed)
    ts = 0
    rows = []
    for i in range(n):
        if i % per_ts == 0:
            ts += rnd.choice([1, 1, 2, 4])
        rows.append((ts, i + 1, 1, i, rnd.randrange(1000), "x"))
    return rows


def replica(
    stage: Stage,
    mode: Mode = Mode.PRIMARY,
    name: str = "r",
    snapshot_rows: int = 0,
    snapshot_phase: int = 0,
    capture: StateCapture = capture_now,
    capacity: int = 1_000_000,
    columnar: bool = False,
) -> StageReplica:
    return StageReplica(
        name,
        stage,
        mode,
        {e.id: UNBOUNDED for e in stage.outputs},
        capacity=capacity,
        snapshot_rows=snapshot_rows,
        snapshot_phase=snapshot_phase,
        capture=capture,
        columnar=columnar,
    )


def feed(rep: StageReplica, inputs: dict[str, list[Element]], rnd: random.Random, end: int) -> list[int]:
    """Feed every input edge in random time chunks, running after each;
    return the output heads after each run."""
    times = sorted({r[0] for rows in inputs.values() for r in rows})
    cuts = sorted(rnd.sample(times, min(len(times), rnd.randint(1, 12)))) if times else []
    heads = []
    lower = -1
    for cut in [*cuts, end + 1]:
        for edge, rows in inputs.items():
            part = [r for r in rows if lower < r[0] < cut]
            if part:
                rep.receive(edge, part[0][1], part, cut - 1, False)
            else:
                rep.receive(edge, rep.inputs.by_name[edge].next_seq, [], cut - 1, False)
        rep.run()
        heads.append(rep.log.head)
        lower = cut - 1
    return heads
