"""An operator run takes at most about ``run_rows`` input rows, whole
instants only (node/sections/input.py, ha/replica.py), so that a node with a
long backlog answers heartbeats between runs. Runs cut short must change
nothing: the same output, seq for seq, and a replica rebuilt from a Level-1
point in short runs emits what the primary emits."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from semiactive.ha.output_log import UNBOUNDED
from semiactive.ha.replica import Mode, StageReplica
from semiactive.ha.resync import ResyncPoint
from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.node.sections.codec import RowCodec
from semiactive.node.sections.input import EdgeInput, InputSection
from semiactive.topology import Stage
from tests.unit.ha_harness import build_topology, source_rows
from tests.unit.test_ha_resync import STAGES

CODEC = RowCodec(plan.Schema((plan.Column("v", plan.INTEGER),)), plan.Kind.STREAM)


def _rows(*stamps: int, first_seq: int = 1) -> list[Element]:
    return [(ts, first_seq + i, 1, ts) for i, ts in enumerate(stamps)]


def _edge(name: str, index: int) -> EdgeInput:
    return EdgeInput(name, name, index, CODEC)


@pytest.mark.parametrize("exact", [True, False])
def test_a_batch_ends_at_an_instant_boundary_and_lowers_the_watermark(exact: bool) -> None:
    section = InputSection([_edge("a", 0)], exact=exact)
    section.edges[0].accept_rows(1, _rows(1, 1, 2, 2, 2, 3, 5), 5, False)
    taken, watermark = section.take(max_rows=3)
    assert [r[0] for r in taken["a"]] == [1, 1, 2, 2, 2] and watermark == 2 and section.more
    taken, watermark = section.take(max_rows=3)
    assert [r[0] for r in taken["a"]] == [3, 5] and watermark == 5 and not section.more
    assert section.position == 7


def test_merged_edges_are_cut_at_an_instant_across_edges() -> None:
    whole, short = (InputSection([_edge("a", 0), _edge("b", 1)], exact=True) for _ in range(2))
    for section in (whole, short):
        section.edges[0].accept_rows(1, _rows(1, 2, 2, 4, 6), 6, False)
        section.edges[1].accept_rows(1, _rows(2, 2, 3, 6), 6, False)
    everything, _ = whole.take()
    pieces: dict[str, list[Element]] = {"a": [], "b": []}
    marks = []
    while True:
        taken, watermark = short.take(max_rows=2)
        marks.append(watermark)
        for stream, rows in taken.items():
            pieces[stream] += rows
        if not short.more:
            break
    assert pieces == everything
    assert marks == [2, 4, 6]  # [1, 2, 2, 2, 2], [3, 4], [6, 6]


def _run_all(rep: StageReplica) -> int:
    runs = 0
    while True:
        rep.run()
        runs += 1
        if not rep.more:
            return runs


def _replica(stage: Stage, run_rows: int | None, mode: Mode = Mode.PRIMARY) -> StageReplica:
    return StageReplica("r", stage, mode, {e.id: UNBOUNDED for e in stage.outputs}, run_rows=run_rows)


@pytest.mark.parametrize("kind", list(STAGES))
def test_short_runs_give_the_same_output_and_rebuild_alike(tmp_path: Path, kind: str) -> None:
    stage = build_topology(tmp_path, [f"REGISTER QUERY s1 AS {STAGES[kind]}"]).stages["stage-1"]
    edge, out_edge = stage.inputs[0].id, stage.outputs[0].id
    rows = source_rows(300, 7)
    whole, short = _replica(stage, None), _replica(stage, 5)
    rnd = random.Random(3)
    points = []
    outputs: dict[int, list[Element]] = {id(whole): [], id(short): []}
    times = sorted({r[0] for r in rows})
    lower = -1
    end = times[-1] + 5
    for cut in [*sorted(rnd.sample(times, 4)), end + 1]:
        part = [r for r in rows if lower < r[0] < cut]
        lower = cut - 1
        for rep in (whole, short):
            start = rep.inputs.by_name[edge].next_seq
            rep.receive(edge, start, part, cut - 1, False)
        whole.run()
        assert _run_all(short) > 1 or len(part) <= 5
        for rep in (whole, short):
            outputs[id(rep)] += rep.log.get(len(outputs[id(rep)]) + 1, rep.log.head)
        acked = rnd.randint(short.log.edges[out_edge].acked, short.log.head)
        short.acknowledged(out_edge, acked, ResyncPoint(acked, 0, acked + 1, {out_edge: acked + 1}))
        point = short.level1()
        if point is not None:
            points.append(point)
    expected = outputs[id(whole)]
    # Equal but for lineage (index 1), which follows the slicing: it only
    # feeds Level-1 cuts, never an output.
    assert [r[:1] + r[2:] for r in outputs[id(short)]] == [r[:1] + r[2:] for r in expected]
    assert len(expected) == whole.log.head
    assert points
    for point in points:
        fresh = _replica(stage, 5, Mode.SECONDARY)
        fresh.resync(point)
        fresh.receive(
            edge, point.edge_cut[edge], [r for r in rows if r[1] >= point.edge_cut[edge]], end, False
        )
        _run_all(fresh)
        got = fresh.log.get(point.out_seq + 1, fresh.log.head)
        assert [r[:1] + r[2:] for r in got] == [r[:1] + r[2:] for r in expected[point.out_seq :]]


def _first_seq_at_or_after(
    section: InputSection, handed: list[tuple[int, int, int]], cut: int
) -> dict[str, int]:
    """edge_cut's definition, looked up in every row handed on."""
    answer = {e.edge: e.handed + 1 for e in section.edges}
    for edge in section.edges:
        after = [seq for pos, index, seq in handed if index == edge.index and pos >= cut]
        if after:
            answer[edge.edge] = after[0]
    return answer


@pytest.mark.parametrize("seed", range(30))
def test_the_edge_cut_remembered_between_calls_is_the_definitions(seed: int) -> None:
    """edge_cut goes on from where it stopped while the cut stays put (it
    stays put for long when a window holds old rows); it must still equal
    the definition as rows arrive, some edges fall silent, and the cut moves."""
    rng = random.Random(seed)
    section = InputSection([_edge(name, i) for i, name in enumerate("abc")], exact=True)
    handed: list[tuple[int, int, int]] = []
    next_seq = {"a": 1, "b": 1, "c": 1}
    cut = 1
    for ts in range(1, 60):
        for name in "abc":
            if name == "c" and ts > 10:
                continue  # silent after its first instants, like a table loaded once
            count = rng.randrange(0, 4) if name != "b" or ts % 7 else 0
            first = next_seq[name]
            next_seq[name] += count
            section.by_name[name].accept_rows(first, _rows(*[ts] * count, first_seq=first), ts, False)
        before = section.position
        taken, _ = section.take(max_rows=rng.choice([None, 2, 5]))
        merged = sorted((r[1], name) for name, rows in taken.items() for r in rows)
        seqs = {name: iter(range(section.by_name[name].handed - n + 1, 10**9)) for name, n in
                ((name, sum(1 for _, m in merged if m == name)) for name in "abc")}  # fmt: skip
        for pos, name in merged:
            handed.append((pos, section.by_name[name].index, next(seqs[name])))
        assert section.position == before + len(merged)
        if rng.random() < 0.2:
            cut = min(section.position + 1, cut + rng.randrange(0, 8))
        assert section.edge_cut(cut) == _first_seq_at_or_after(section, handed, cut), (ts, cut)
