"""The input section (dedup, gaps, watermarks, the deterministic merge) and
the output log's cursors (node/sections/input.py, ha/output_log.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from semiactive.ha.output_log import UNBOUNDED, OutputLog
from semiactive.ha.resync import ResyncPoint, StateSnapshot
from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.node.sections.codec import RowCodec
from semiactive.node.sections.input import NEVER, EdgeInput, InputSection, SeqGapError
from semiactive.node.sections.operator import CostSchedule

SCHEMA = plan.Schema((plan.Column("v", plan.INTEGER),))
CODEC = RowCodec(SCHEMA, plan.Kind.STREAM)


def _edge(name: str = "a->b", stream: str = "s", index: int = 0) -> EdgeInput:
    return EdgeInput(name, stream, index, CODEC)


def _send(
    edge: EdgeInput, first_seq: int, rows: list[tuple[int, int]], watermark: int, eos: bool = False
) -> int:
    """Rows as ``(ts, v)``, numbered from first_seq, through the codec."""
    elements = [(ts, first_seq + i, 1, v) for i, (ts, v) in enumerate(rows)]
    return edge.accept(first_seq, len(rows), CODEC.encode(elements), watermark, eos)


def _values(rows: Sequence[Element]) -> list[tuple[Any, ...]]:
    return [(r[0], r[1], r[3]) for r in rows]  # (ts, seq or position, v)


# -- EdgeInput ------------------------------------------------------------------------------------


def test_edge_drops_duplicate_seqs() -> None:
    edge = _edge()
    assert _send(edge, 1, [(1, 10), (2, 20), (3, 30)], 3) == 3
    # A reconnecting producer resends 2..3 and adds 4..5: only 4..5 are new.
    assert _send(edge, 2, [(2, 20), (3, 30), (4, 40), (5, 50)], 5) == 2
    # Everything again: nothing new.
    assert _send(edge, 1, [(1, 10), (2, 20), (3, 30), (4, 40), (5, 50)], 5) == 0
    assert _values(list(edge.pending)) == [(1, 1, 10), (2, 2, 20), (3, 3, 30), (4, 4, 40), (5, 5, 50)]
    assert (edge.received, edge.duplicates, edge.last_seq, edge.next_seq) == (5, 2 + 5, 5, 6)


def test_edge_gap_raises_and_changes_nothing() -> None:
    edge = _edge()
    _send(edge, 1, [(1, 10), (2, 20)], 2)
    with pytest.raises(SeqGapError, match="rows from seq 4 but seq 3 is missing"):
        _send(edge, 4, [(4, 40)], 4)
    assert edge.next_seq == 3 and len(edge.pending) == 2 and edge.watermark == 2
    # An empty batch from beyond our position is no gap, but it must not
    # move time on either: the rows before it have not arrived (a stale
    # stream after a restart sends such batches).
    assert edge.accept(9, 0, b"", 7, False) == 0
    assert edge.watermark == 2
    # At our position it carries the watermark.
    assert edge.accept(3, 0, b"", 7, False) == 0
    assert edge.watermark == 7


def test_edge_watermark_is_monotone_and_eos_sticks() -> None:
    edge = _edge()
    assert edge.watermark == NEVER
    _send(edge, 1, [(5, 1)], 8)
    _send(edge, 2, [(9, 1)], 6)  # a lower watermark is ignored
    assert edge.watermark == 8
    edge.accept(3, 0, b"", 12, True)
    edge.accept(3, 0, b"", 11, False)
    assert edge.watermark == 12 and edge.end_of_stream


# -- InputSection ---------------------------------------------------------------------------------


def test_single_edge_positions_are_edge_seqs() -> None:
    edge = _edge()
    section = InputSection([edge])
    _send(edge, 1, [(1, 10), (4, 40)], 3)
    rows, watermark = section.take()
    assert watermark == 3
    assert _values(rows["s"]) == [(1, 1, 10), (4, 2, 40)]
    assert section.position == 2 and section.backlog == 0


def test_merge_by_ts_edge_index_seq_up_to_the_smallest_watermark() -> None:
    a, b = _edge("x->m", "A", 0), _edge("y->m", "B", 1)
    section = InputSection([b, a])  # the edge index decides, not the list order
    _send(a, 1, [(1, 11), (3, 12), (3, 13), (5, 14)], 4)
    _send(b, 1, [(1, 21), (2, 22), (3, 23), (6, 24)], 3)
    rows, watermark = section.take()
    assert watermark == 3
    # Order: A@1, B@1, B@2, A@3 (seq 2), A@3 (seq 3), B@3; positions 1..6 in
    # that order. A@5 and B@6 wait for the watermark to pass them.
    assert _values(rows["A"]) == [(1, 1, 11), (3, 4, 12), (3, 5, 13)]
    assert _values(rows["B"]) == [(1, 2, 21), (2, 3, 22), (3, 6, 23)]
    assert section.position == 6 and section.backlog == 2
    # B moves to 5: A@5 goes (position 7), B@6 still waits.
    _send(b, 5, [], 5)
    rows, watermark = section.take()
    assert watermark == 4  # A's watermark is now the smaller one
    assert rows == {}
    _send(a, 5, [], 6)
    rows, watermark = section.take()
    assert watermark == 5
    assert _values(rows["A"]) == [(5, 7, 14)] and "B" not in rows
    assert section.position == 7


def test_merge_order_does_not_depend_on_arrival_batches() -> None:
    def run(batches: list[tuple[str, int, list[tuple[int, int]], int]]) -> list[tuple[str, int, int, int]]:
        a, b = _edge("x->m", "A", 0), _edge("y->m", "B", 1)
        section = InputSection([a, b])
        edges = {"A": a, "B": b}
        out = []
        for name, first, rows, mark in batches:
            _send(edges[name], first, rows, mark)
            taken, _ = section.take()
            out += [(n, *row) for n, part in taken.items() for row in _values(part)]
        return sorted(out, key=lambda r: r[2])

    a_rows, b_rows = [(1, 1), (2, 2), (2, 3), (4, 4)], [(2, 5), (2, 6), (3, 7), (4, 8)]
    one = run([("A", 1, a_rows, 4), ("B", 1, b_rows, 4)])
    other = run(
        [("B", 1, b_rows[:1], 1), ("A", 1, a_rows[:3], 3), ("B", 2, b_rows[1:], 4), ("A", 4, a_rows[3:], 4)]
    )
    assert one == other
    assert [r[3] for r in one] == [1, 2, 3, 5, 6, 7, 4, 8]


def test_end_of_stream_watermark_rule() -> None:
    a, b = _edge("x->m", "A", 0), _edge("y->m", "B", 1)
    section = InputSection([a, b])
    assert section.watermark() == NEVER
    _send(a, 1, [(2, 1)], 2)
    _send(b, 1, [(3, 2)], 9)
    assert section.watermark() == 2
    # A finished edge no longer holds the others back...
    a.accept(2, 0, b"", 4, True)
    assert section.watermark() == 9
    assert not section.end_of_stream
    # ... and when every edge has finished, the inputs are complete up to
    # the largest final watermark.
    b.accept(2, 0, b"", 10, True)
    assert section.end_of_stream and section.watermark() == 10
    rows, watermark = section.take()
    assert watermark == 10 and section.backlog == 0
    assert (_values(rows["A"]), _values(rows["B"])) == ([(2, 1, 1)], [(3, 2, 2)])


# -- OutputLog ------------------------------------------------------------------------------------


def _rows(first: int, count: int) -> list[Element]:
    return [(seq * 10, seq, 1, seq) for seq in range(first, first + count)]


def test_backup_batches_of_b_rows() -> None:
    log = OutputLog()
    cursors = log.add_edge("e", batch_size=3)
    log.append(_rows(1, 2), 20)
    assert log.take_backup("e") == (1, [])  # 2 < B unsent rows: wait
    log.append(_rows(3, 2), 40)
    first, rows = log.take_backup("e")
    assert (first, [r[1] for r in rows]) == (1, [1, 2, 3])  # one whole batch; 4 waits for its own
    assert (cursors.backed_up, cursors.shipped, cursors.batches, log.unsent("e")) == (3, 3, 1, 1)
    log.append(_rows(5, 1), 50)
    assert log.take_backup("e") == (4, [])
    first, rows = log.take_backup("e", force=True)
    assert (first, [r[1] for r in rows]) == (4, [4, 5])
    assert cursors.batches == 2


def test_a_block_fills_as_many_batches_as_it_holds() -> None:
    """Eq. 2 prices B_send x B rows: a block of 7 rows at B = 1 is 7
    batches, at B = 3 two batches (6 rows) with one row left to wait."""
    log = OutputLog()
    one = log.add_edge("one", batch_size=1)
    three = log.add_edge("three", batch_size=3)
    log.append(_rows(1, 7), 70)
    assert [r[1] for r in log.take_backup("one")[1]] == [1, 2, 3, 4, 5, 6, 7]
    assert [r[1] for r in log.take_backup("three")[1]] == [1, 2, 3, 4, 5, 6]
    assert (one.batches, one.shipped, three.batches, three.shipped) == (7, 7, 2, 6)
    assert log.unsent("three") == 1


def test_backup_batch_of_one_ships_every_row() -> None:
    log = OutputLog()
    log.add_edge("e", batch_size=1)
    shipped = []
    for seq in range(1, 4):
        log.append(_rows(seq, 1))
        shipped.append(log.take_backup("e"))
    assert [(first, [r[1] for r in rows]) for first, rows in shipped] == [(1, [1]), (2, [2]), (3, [3])]


def test_unbounded_batch_ships_only_when_forced() -> None:
    log = OutputLog()
    log.add_edge("e", batch_size=UNBOUNDED)
    log.append(_rows(1, 1000))
    assert log.take_backup("e") == (1, [])
    first, rows = log.take_backup("e", force=True)
    assert first == 1 and len(rows) == 1000


def test_cut_passing_backed_up_drops_unsent_rows() -> None:
    log = OutputLog()
    cursors = log.add_edge("e", batch_size=4)
    log.append(_rows(1, 5))
    assert [r[1] for r in log.take_backup("e")[1]] == [1, 2, 3, 4]
    log.append(_rows(6, 3))  # 5, 6, 7, 8 unsent
    # The consumer needs nothing before 8: 5, 6 and 7 are never shipped.
    log.release("e", 8)
    assert (cursors.cut, cursors.backed_up, cursors.dropped_unsent) == (8, 7, 3)
    assert log.take_backup("e", force=True) == (8, [_rows(8, 1)[0]])
    # A cut at or behind the current one changes nothing.
    log.release("e", 3)
    assert cursors.cut == 8 and cursors.dropped_unsent == 3
    # A cut beyond the head stops after the head.
    log.release("e", 100)
    assert cursors.cut == 9


def test_a_point_with_a_state_ships_unsent_rows_instead_of_dropping_them() -> None:
    """Dropping them would rebuild the consumer's secondary from the whole
    state at every snapshot; they are shipped, and the cut follows at the
    next acknowledgement."""
    log = OutputLog()
    cursors = log.add_edge("e", batch_size=4)
    log.append(_rows(1, 5))
    log.take_backup("e")  # 1..4; 5 waits for its batch
    log.append(_rows(6, 3))  # 5, 6, 7, 8 unsent
    point = ResyncPoint(20, 3, 8, {"e": 8}, state=StateSnapshot(7, b"{}"))
    log.acknowledge("e", 5, point)
    assert (cursors.cut, cursors.backed_up, cursors.dropped_unsent, cursors.point) == (5, 8, 0, point)
    log.acknowledge("e", 8, point)
    assert (cursors.cut, cursors.dropped_unsent) == (8, 0)
    # Without a state, SAS's saving as before.
    log.append(_rows(9, 3))
    log.acknowledge("e", 9, ResyncPoint(21, 4, 11, {"e": 11}))
    assert (cursors.cut, cursors.dropped_unsent) == (11, 2)


def test_a_point_with_a_state_waits_for_the_backup_stream_to_have_written_the_rows() -> None:
    """Shipped is not enough: rows the stream has not yet written would
    reach the secondary after the cut passed them, so the stream would send
    it the point and it would be rebuilt from the state. A secondary far
    behind is let go rather than stopping the producer."""
    log = OutputLog(capacity=40)
    cursors = log.add_edge("e", batch_size=4)
    log.append(_rows(1, 8))
    log.take_backup("e")  # 1..8 handed to the backup stream
    point = ResyncPoint(20, 3, 9, {"e": 9}, state=StateSnapshot(8, b"{}"))
    log.acknowledge("e", 8, point, backup_sent=5)
    assert (cursors.cut, cursors.point) == (6, point)
    log.acknowledge("e", 8, point, backup_sent=8)
    assert cursors.cut == 9
    # No stream connected: only shipping is waited for, as before.
    log.append(_rows(9, 4))
    log.take_backup("e")
    log.acknowledge("e", 12, ResyncPoint(30, 4, 13, {"e": 13}, state=StateSnapshot(12, b"{}")))
    assert cursors.cut == 13
    # More than half the log behind: the cut passes, the secondary is rebuilt.
    log.append(_rows(13, 26))
    log.take_backup("e")
    far = ResyncPoint(40, 5, 39, {"e": 39}, state=StateSnapshot(38, b"{}"))
    log.acknowledge("e", 38, far, backup_sent=13)
    assert cursors.cut == 39


def test_the_cursors_count_what_a_sas_tuner_measures() -> None:
    # B_send counts batches shipped; each cut that advances adds the rows
    # that waited for it (from the previous cut to the head).
    log = OutputLog()
    cursors = log.add_edge("e", batch_size=2)
    log.append(_rows(1, 5))
    log.take_backup("e")  # two batches; 5 waits
    log.append(_rows(6, 1))
    log.take_backup("e")  # 5, 6: the third
    log.release("e", 5)  # rows 1..6 waited for this cut
    log.append(_rows(7, 3))
    log.take_backup("e")  # 7, 8; 9 waits
    log.release("e", 9)  # rows 5..9 waited
    log.release("e", 9)  # no advance: not counted
    assert (cursors.batches, cursors.shipped, cursors.cuts, cursors.uncut_rows) == (4, 8, 2, 11)


def test_release_frees_below_the_smallest_cut_of_all_edges() -> None:
    log = OutputLog()
    log.add_edge("e1")
    log.add_edge("e2")
    log.append(_rows(1, 6))
    log.release("e1", 7)
    assert log.first == 1 and log.retained == 6  # e2 still needs everything
    assert [r[1] for r in log.get(2, 3)] == [2, 3]
    log.release("e2", 5)
    assert log.first == 5 and log.retained == 2
    assert [r[1] for r in log.get(1, 100)] == [5, 6]  # clipped to what is stored
    assert log.get(7, 9) == []


def test_full_at_capacity_until_released() -> None:
    log = OutputLog(capacity=4)
    log.add_edge("e")
    log.append(_rows(1, 3))
    assert not log.full
    log.append(_rows(4, 1))
    assert log.full
    log.release("e", 5)
    assert not log.full and log.retained == 0


def test_finish_makes_the_watermark_cover_the_last_row() -> None:
    log = OutputLog()
    log.add_edge("e")
    log.append([(5, 1, 1, 0), (7, 2, 1, 0)], 6)
    log.finish(6)
    assert log.end_of_stream and log.watermark == 7
    # Also when the rows were acknowledged and freed before the end.
    log = OutputLog()
    log.add_edge("e")
    log.append([(5, 1, 1, 0), (7, 2, 1, 0)], 6)
    log.release("e", 3)
    assert log.retained == 0
    log.finish(6)
    assert log.watermark == 7
    # A larger final watermark wins; an empty log takes the given one.
    log = OutputLog()
    log.append([(5, 1, 1, 0)], 4)
    log.finish(50)
    assert log.watermark == 50
    empty = OutputLog()
    empty.finish(3)
    assert empty.watermark == 3 and empty.end_of_stream


def test_the_cost_of_a_row_follows_its_timestamp_not_the_clock() -> None:
    schedule = CostSchedule(0.05, [(10.0, 1.0), (20.0, 0.0)])
    rows = [(ts, i, 1, 0) for i, ts in enumerate([0, 9_999, 10_000, 15_000, 20_000])]
    assert schedule.total_ms(rows) == pytest.approx(0.05 + 0.05 + 1.0 + 1.0 + 0.0)
    assert schedule and not CostSchedule()
    assert CostSchedule(0.2).total_ms(rows) == pytest.approx(1.0)
