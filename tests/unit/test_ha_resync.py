"""Level-1 cuts and resync, per operator kind, without any transport.

A primary processes its input in random chunks; at random moments the
consumers acknowledge some output seq Y and the primary computes its
Level-1 point. A fresh replica rebuilt from that point (rows from the cut
on, no earlier state) must then emit, after the point's output seq, exactly
what the primary emitted: same seqs, same timestamps, same values.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from semiactive.ha.output_log import UNBOUNDED
from semiactive.ha.replica import CaptureLost, Mode, StageReplica
from semiactive.ha.resync import ResyncPoint, StateBytes
from semiactive.node.engine import state
from semiactive.node.engine.elements import Element
from semiactive.node.engine.state_codec import StateFormatError
from semiactive.node.sections.operator import ColumnarWindowSection
from semiactive.topology import Stage
from tests.unit.ha_harness import build_topology, feed, replica, source_rows

STAGES = {
    "selection": "SELECT id, val FROM s0 WHERE val % 3 != 0",
    "rows aggregate with slide": "ISTREAM(SELECT SUM(val) AS s, COUNT(*) AS n FROM s0 [Rows 20 Slide 7])",
    # DSTREAM emits the row that left: a rebuild adopting the primary's
    # phase must see the window as it was up to slide - 1 tuples back.
    "rows slide DSTREAM (fused)": "DSTREAM(SELECT SUM(val) AS s, COUNT(*) AS n FROM s0 [Rows 20 Slide 7])",
    "rows slide DSTREAM": (
        "DSTREAM(SELECT MAX(val) AS hi, SUM(val) * 2 AS s2 "
        "FROM (SELECT * FROM s0 WHERE val < 600) [Rows 9 Slide 4] AS x)"
    ),
    "range aggregate": "ISTREAM(SELECT AVG(val) AS a, MAX(val) AS hi FROM s0 [Range 9])",
    "sliding range": "RSTREAM(SELECT COUNT(*) AS n FROM s0 [Range 12 Slide 5])",
    "group by over rows": "ISTREAM(SELECT val % 4 AS k, MIN(val) AS lo FROM s0 [Rows 15] GROUP BY val % 4)",
    "partition window": "ISTREAM(SELECT val % 5 AS k, val FROM s0 [Partition By id Rows 1])",
    "distinct": "DSTREAM(SELECT DISTINCT val % 7 AS k FROM s0 [Rows 9])",
    "self join": (
        "ISTREAM(SELECT a.id, b.val FROM s0 [Rows 6] AS a, s0 [Now] AS b WHERE a.val % 10 = b.val % 10)"
    ),
    "now window": "ISTREAM(SELECT val / 100 AS bucket FROM s0 [Now])",
    "unbounded group by": (
        "ISTREAM(SELECT val % 4 AS k, SUM(val) AS s FROM s0 [Range Unbounded] GROUP BY val % 4)"
    ),
    "nested aggregate": (
        "ISTREAM(SELECT MAX(s) AS m FROM (ISTREAM(SELECT SUM(val) AS s FROM s0 [Rows 4])) [Rows 3] AS x)"
    ),
}


def _check(
    stage: Stage, inputs: dict[str, list[Element]], seed: int, snapshot_rows: int = 0, columnar: bool = False
) -> tuple[int, int]:
    rnd = random.Random(seed)
    end = max(r[0] for rows in inputs.values() for r in rows) + 5
    primary = replica(stage, snapshot_rows=snapshot_rows, columnar=columnar)
    points: list[ResyncPoint] = []
    out_edge = stage.outputs[0].id
    expected: list[tuple[object, ...]] = []
    for chunk_end in [*sorted(rnd.sample(range(1, end), 6)), end]:
        part = {
            e: [r for r in rows if r[0] <= chunk_end and r[1] >= primary.inputs.by_name[e].next_seq]
            for e, rows in inputs.items()
        }
        for edge, rows in part.items():
            primary.receive(
                edge, rows[0][1] if rows else primary.inputs.by_name[edge].next_seq, rows, chunk_end, False
            )
        primary.run()
        expected += primary.log.get(len(expected) + 1, primary.log.head)
        # A stateless consumer that has everything up to ``acked``.
        acked = rnd.randint(primary.log.edges[out_edge].acked, primary.log.head)
        consumer = ResyncPoint(acked, 0, acked + 1, {out_edge: acked + 1})
        primary.acknowledged(out_edge, acked, consumer)
        point = primary.level1()
        if point is not None:
            assert point.out_seq <= acked
            assert point.state is None or point.cut_position == point.state.position + 1
            if points:
                assert point.cut_position >= points[-1].cut_position
            points.append(point)
    assert len(expected) == primary.log.head
    for point in points:
        fresh = replica(stage, Mode.SECONDARY, "fresh", columnar=columnar)
        fresh.resync(point)
        rest = {e: [r for r in rows if r[1] >= point.edge_cut[e]] for e, rows in inputs.items()}
        feed(fresh, rest, rnd, end)
        got = fresh.log.get(point.out_seq + 1, fresh.log.head)
        want = expected[point.out_seq :]
        assert [r[:1] + r[2:] for r in got] == [r[:1] + r[2:] for r in want], (
            point.position,
            point.cut_position,
        )
    # Count points in the middle of the output, not only at its start, and
    # those that carry a state (a window reaching back past snapshot_rows).
    return sum(1 for p in points if p.out_seq > 0), sum(p.state is not None for p in points)


@pytest.mark.parametrize("snapshot_rows", [0, 9])
@pytest.mark.parametrize("kind", list(STAGES))
def test_a_replica_rebuilt_from_any_level1_point_emits_what_the_primary_emits(
    tmp_path: Path, kind: str, snapshot_rows: int
) -> None:
    """With ``snapshot_rows``, points past a window's rows carry the
    operator state, and the rebuild starts from it."""
    topo = build_topology(tmp_path, [f"REGISTER QUERY s1 AS {STAGES[kind]}"])
    stage = topo.stages["stage-1"]
    checked = with_state = 0
    for seed in range(6):
        rows = source_rows(160, seed)
        counts = _check(stage, {stage.inputs[0].id: rows}, seed, snapshot_rows)
        checked += counts[0]
        with_state += counts[1]
    assert checked >= 12
    if snapshot_rows and kind in (
        "rows aggregate with slide",
        "rows slide DSTREAM (fused)",
        "group by over rows",
        "unbounded group by",
    ):
        assert with_state >= 6


# The columnar engine's windows with lineage (ColumnarWindowSection).
COLUMNAR = {
    "range aggregate": STAGES["range aggregate"],
    "sliding range": STAGES["sliding range"],
    "rows aggregate with slide": STAGES["rows aggregate with slide"],
    "rows slide DSTREAM": STAGES["rows slide DSTREAM"],
    "rows": (
        "DSTREAM(SELECT SUM(val) AS s, MIN(val) AS lo "
        "FROM (SELECT * FROM s0 WHERE val >= 200) [Rows 11] AS x)"
    ),
    "now": "ISTREAM(SELECT COUNT(*) AS n, MAX(val) AS hi FROM s0 [Now])",
    "wide sliding range": (
        "ISTREAM(SELECT SUM(val) AS s FROM (SELECT val FROM s0 WHERE val < 700) [Range 30 Slide 7] AS x)"
    ),
    # GROUP BY (the id is val % 4 here, see _grouped): each group's row
    # compared with its previous one, per group.
    "group by over range": "ISTREAM(SELECT id, SUM(val) AS s, COUNT(*) AS n FROM s0 [Range 9] GROUP BY id)",
    "group by over sliding range": (
        "DSTREAM(SELECT id, MAX(val) AS hi, AVG(val) AS a FROM s0 [Range 12 Slide 5] GROUP BY id)"
    ),
    "group by over now": "ISTREAM(SELECT id, COUNT(*) AS n FROM s0 [Now] GROUP BY id)",
    "group by over rows": "DSTREAM(SELECT id, MIN(val) AS lo FROM s0 [Rows 15] GROUP BY id)",
    "group by over rows with slide": (
        "ISTREAM(SELECT id, SUM(val) AS s FROM s0 [Rows 20 Slide 7] GROUP BY id)"
    ),
    # A text key (the pad is one of three, see _grouped).
    "group by text over sliding range": (
        "DSTREAM(SELECT pad, MAX(val) AS hi, COUNT(*) AS n FROM s0 [Range 12 Slide 5] GROUP BY pad)"
    ),
    "group by text over rows with slide": (
        "ISTREAM(SELECT pad, id, SUM(val) AS s FROM s0 [Rows 20 Slide 7] GROUP BY pad, id)"
    ),
    "group by over partition": (
        "ISTREAM(SELECT id, SUM(val) AS s, MIN(val) AS lo FROM s0 [Partition By id Rows 3] AS x GROUP BY id)"
    ),
    "group by text over partition": (
        "DSTREAM(SELECT pad, COUNT(*) AS n, AVG(val) AS a "
        "FROM s0 [Partition By pad Rows 4] AS x GROUP BY pad)"
    ),
    "group by over rows slide DSTREAM": (
        "DSTREAM(SELECT id, SUM(val) * 2 AS s2, COUNT(*) AS n "
        "FROM (SELECT * FROM s0 WHERE val < 800) [Rows 9 Slide 4] AS x GROUP BY id)"
    ),
}


def _grouped(rows: list[Element]) -> list[Element]:
    """The harness's rows with a few ids (val % 4) and pads (val % 3):
    groups that recur."""
    pads = ("a", "b\u20ac", "")
    return [(*r[:3], int(r[4]) % 4, r[4], pads[int(r[4]) % 3]) for r in rows]  # type: ignore[call-overload]


@pytest.mark.parametrize("kind", list(COLUMNAR))
def test_a_columnar_window_stage_rebuilt_from_any_level1_point_emits_what_its_primary_emits(
    tmp_path: Path, kind: str
) -> None:
    """The window's state lives in the columnar engine: its cut (the oldest
    carried tuple) must let a rebuild from rows reach the primary's state."""
    topo = build_topology(tmp_path, [f"REGISTER QUERY s1 AS {COLUMNAR[kind]}"])
    stage = topo.stages["stage-1"]
    assert isinstance(replica(stage, columnar=True).operator, ColumnarWindowSection)
    checked = 0
    for seed in range(6):
        rows = _grouped(source_rows(160, seed))
        checked += _check(stage, {stage.inputs[0].id: rows}, seed, columnar=True)[0]
    assert checked >= 12


def test_a_state_snapshot_lets_the_cut_of_an_unbounded_window_move_on(tmp_path: Path) -> None:
    """Without snapshots, a [Range Unbounded] aggregate pins the cut at its
    first row for good; with them, the cut follows the snapshots."""
    topo = build_topology(tmp_path, [f"REGISTER QUERY s1 AS {STAGES['unbounded group by']}"])
    stage = topo.stages["stage-1"]
    edge, out = stage.inputs[0].id, stage.outputs[0].id
    rows = source_rows(1000, 3, per_ts=1)
    cuts = {}
    for snapshot_rows in (0, 100):
        rep = replica(stage, snapshot_rows=snapshot_rows)
        for start in range(0, 1000, 10):
            part = rows[start : start + 10]
            rep.receive(edge, part[0][1], part, part[-1][0], False)
            rep.run()
        head = rep.log.head
        rep.acknowledged(out, head, ResyncPoint(head, 0, head + 1, {out: head + 1}))
        point = rep.level1()
        assert point is not None
        cuts[snapshot_rows] = (point.cut_position, point.state is not None)
    assert cuts[0] == (1, False)
    assert cuts[100][1] and 900 < cuts[100][0] <= 1001


def test_a_snapshot_phase_moves_every_capture_not_only_the_first(tmp_path: Path) -> None:
    """Partitions see the same input positions: a phase keeps their
    captures apart for the whole run."""
    topo = build_topology(tmp_path, [f"REGISTER QUERY s1 AS {STAGES['unbounded group by']}"])
    stage = topo.stages["stage-1"]
    edge = stage.inputs[0].id
    rows = source_rows(400, 3, per_ts=1)
    captured: dict[int, list[int]] = {}
    for phase in (0, 50):
        rep = replica(stage, snapshot_rows=100, snapshot_phase=phase)
        positions = captured[phase] = []
        for row in rows:
            rep.receive(edge, row[1], [row], row[0], False)
            rep.run()
            if rep.captured is not None and (not positions or positions[-1] != rep.captured.position):
                positions.append(rep.captured.position)
    assert captured[0] == [100, 200, 300, 400]
    assert captured[50] == [50, 150, 250, 350]


class _DeferredCaptures:
    """A replica of the unbounded aggregate whose captures complete when
    the test says (as a forked child's do): ``taken`` holds each one's
    bytes and callback."""

    def __init__(self, tmp_path: Path, rows: int) -> None:
        topo = build_topology(tmp_path, [f"REGISTER QUERY s1 AS {STAGES['unbounded group by']}"])
        self.stage = topo.stages["stage-1"]
        self.edge, self.out = self.stage.inputs[0].id, self.stage.outputs[0].id
        self.rows = source_rows(rows, 3, per_ts=1)
        self.taken: list[tuple[bytes, Callable[[StateBytes | BaseException], None]]] = []
        self.rep = replica(
            self.stage,
            snapshot_rows=100,
            capture=lambda engine, done: self.taken.append((state.capture(engine), done)),
        )

    def point_after(self, upto: int) -> ResyncPoint:
        """Feed the rows up to ``upto``, one run each; everything acknowledged."""
        rep, out = self.rep, self.out
        for row in self.rows[rep.inputs.position : upto]:
            rep.receive(self.edge, row[1], [row], row[0], False)
            rep.run()
        head = rep.log.head
        rep.acknowledged(out, head, ResyncPoint(head, 0, head + 1, {out: head + 1}))
        point = rep.level1()
        assert point is not None
        return point


def test_a_capture_taken_later_holds_the_cut_until_it_completes(tmp_path: Path) -> None:
    """A capture that completes later (the node forks for it): the cut
    waits at the previous state, then moves to the new one, from which a
    rebuilt replica emits what the primary emits; a capture that completes
    after a rebuild is ignored, and one that failed fails the next run."""
    deferred = _DeferredCaptures(tmp_path, 500)
    rep, taken, point_after, edge, rows = (
        deferred.rep,
        deferred.taken,
        deferred.point_after,
        deferred.edge,
        deferred.rows,
    )
    assert point_after(150).cut_position == 1  # the capture at 100 is not in yet
    assert len(taken) == 1
    data, done = taken.pop()
    done(data)
    first = point_after(180)
    assert first.state is not None and first.state.position == 100 and first.cut_position == 101
    point_after(260)  # a capture at 200, still being taken: the cut stays at the first state
    assert len(taken) == 1 and point_after(270).cut_position == 101

    rebuilt, reference = replica(deferred.stage), replica(deferred.stage)
    rebuilt.resync(first)
    for target, part in ((rebuilt, rows[100:300]), (reference, rows[:300])):
        for row in part:
            target.receive(edge, row[1], [row], row[0], False)
            target.run()
    emitted = reference.log.get(first.out_seq + 1, reference.log.head)
    assert emitted and rebuilt.log.get(first.out_seq + 1, rebuilt.log.head) == emitted

    late = taken.pop()
    rep.resync(first)  # rebuilt: the capture it started before is not its state
    late[1](late[0])
    assert rep.captured is not None and rep.captured.position == 100
    for row in rows[100:210]:
        rep.receive(edge, row[1], [row], row[0], False)
        rep.run()
    taken.pop()[1](RuntimeError("the child died"))
    with pytest.raises(RuntimeError, match="the child died"):
        rep.run()


def test_a_lost_capture_is_taken_again_and_the_cut_waits_at_the_previous_state(tmp_path: Path) -> None:
    """A child killed from outside (CaptureLost) is no error: the cut stays
    where it was and the capture is taken again."""
    deferred = _DeferredCaptures(tmp_path, 400)
    taken = deferred.taken
    assert deferred.point_after(150).cut_position == 1 and len(taken) == 1
    taken.pop()[1](CaptureLost("killed by signal 9"))
    assert deferred.point_after(151).cut_position == 1  # no state: the first row; the run did not fail
    assert deferred.rep.captures_lost == 1 and len(taken) == 1  # taken again at once: its rows were due
    data, done = taken.pop()
    done(data)
    assert deferred.point_after(160).cut_position == 152


def test_a_point_whose_state_is_not_of_this_program_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    one = build_topology(tmp_path, [f"REGISTER QUERY s1 AS {STAGES['unbounded group by']}"]).stages["stage-1"]
    two = build_topology(tmp_path / "other", [f"REGISTER QUERY s1 AS {STAGES['distinct']}"]).stages["stage-1"]
    rep = replica(one, snapshot_rows=5)
    rows = source_rows(50, 1)
    rep.receive(one.inputs[0].id, 1, rows, rows[-1][0], False)
    rep.run()
    head = rep.log.head
    out = one.outputs[0].id
    rep.acknowledged(out, head, ResyncPoint(head, 0, head + 1, {out: head + 1}))
    point = rep.level1()
    assert point is not None and point.state is not None
    other = replica(two, Mode.SECONDARY)
    before = (other.inputs, other.operator, other.log.head)
    with pytest.raises(StateFormatError):
        other.resync(
            ResyncPoint(point.position, 0, point.cut_position, {two.inputs[0].id: 1}, state=point.state)
        )
    assert (other.inputs, other.operator, other.log.head) == before
    assert other.warmup is None


def test_windows_hold_the_cut_back_and_stateless_stages_do_not(tmp_path: Path) -> None:
    """Level-1 per operator kind: a selection needs nothing before the
    acknowledged output; a 20-row window needs its 20 rows."""
    topo = build_topology(
        tmp_path,
        [
            "REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 0",
            "REGISTER QUERY s2 AS ISTREAM(SELECT SUM(val) AS s FROM s1 [Rows 20])",
        ],
    )
    rows = source_rows(200, 1, per_ts=1)
    # After 200 rows: the selection needs nothing older than row 201; the
    # 20-row window still holds rows 181..200.
    for name, cut in (("stage-1", 201), ("stage-2", 181)):
        stage = topo.stages[name]
        rep = replica(stage)
        edge = stage.inputs[0].id
        rep.receive(edge, 1, rows, rows[-1][0], False)
        rep.run()
        out_edge = stage.outputs[0].id
        head = rep.log.head
        rep.acknowledged(out_edge, head, ResyncPoint(head, 0, head + 1, {out_edge: head + 1}))
        point = rep.level1()
        assert point is not None
        assert point.position == 200
        assert point.cut_position == cut
        assert point.edge_cut[edge] == cut


def test_two_input_stage_translates_the_cut_to_each_edge(tmp_path: Path) -> None:
    topo = build_topology(
        tmp_path,
        [
            "REGISTER QUERY s1 AS ISTREAM(SELECT s0.id, t0.val FROM s0 [Rows 5], t0 [Range 3] "
            "WHERE s0.val % 7 = t0.val % 7)"
        ],
        second_source=True,
    )
    stage = topo.stages["stage-1"]
    a, b = stage.inputs
    for seed in range(5):
        rows_a = source_rows(120, seed)
        rows_b = source_rows(90, seed + 100)
        assert _check(stage, {a.id: rows_a, b.id: rows_b}, seed)[0] > 0
        assert _check(stage, {a.id: rows_a, b.id: rows_b}, seed, snapshot_rows=3)[0] > 0


def test_a_secondary_forgets_input_positions_its_consumers_no_longer_need(tmp_path: Path) -> None:
    """A secondary sends no Level-1, yet its table of input positions (an
    entry per input row of a multi-input stage) must not grow for the whole
    run: the consumers' notices tell it the cut, as they tell the primary."""
    topo = build_topology(
        tmp_path,
        [
            "REGISTER QUERY s1 AS ISTREAM(SELECT s0.id, t0.val FROM s0 [Rows 5], t0 [Range 3] "
            "WHERE s0.val = t0.val)"
        ],
        second_source=True,
    )
    stage = topo.stages["stage-1"]
    a, b = stage.inputs
    out = stage.outputs[0].id
    secondary = StageReplica("r", stage, Mode.SECONDARY, {out: UNBOUNDED})
    rows = {a.id: source_rows(3000, 1), b.id: source_rows(3000, 2)}
    end = max(r[0] for part in rows.values() for r in part)
    step = end // 30 + 1
    for upto in range(step, end + step + 1, step):
        for edge, part in rows.items():
            fresh = [r for r in part if upto - step < r[0] <= upto]
            secondary.receive(edge, secondary.inputs.by_name[edge].next_seq, fresh, upto, False)
        secondary.run()
        head = secondary.log.head
        secondary.acknowledged(out, head, ResyncPoint(head, 0, head + 1, {out: head + 1}))
        secondary.forget_unneeded()
    assert secondary.inputs.position == 6000
    assert len(secondary.inputs._positions) < 600  # a few instants' worth, not 6,000
