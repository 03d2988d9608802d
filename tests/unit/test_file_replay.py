"""A file replayed a block at a time releases the rows the row-at-a-time
replay released, with valid watermarks, whatever the blocks, the clock's
steps, the wake-ups and the stop; CSV blocks of numbers go as records."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.node.connectors.csv_numeric import NumericBlock
from semiactive.node.connectors.file_replay import ON_TIME_MS, FileReplay, Release, as_records
from semiactive.node.connectors.replay_clock import ReplayClock
from semiactive.node.connectors.sources import read_blocks
from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.node.sections.codec import RowCodec
from semiactive.node.sections.record_rows import RecordLayout, RecordRows

SCHEMA = plan.Schema((plan.Column("id", plan.INTEGER), plan.Column("val", plan.FLOAT)))
LAYOUT = RecordLayout(RowCodec(SCHEMA, plan.Kind.STREAM))


def _rows(gaps: list[int]) -> list[Element]:
    ts, out = 5, []
    for seq, gap in enumerate(gaps, start=1):
        ts += gap
        out.append((ts, seq, 1, seq * 7, seq / 4))
    return out


def _blocks(rows: list[Element], cuts: list[int], records: bool) -> list[Sequence[Element]]:
    bounds = sorted({0, len(rows), *(c % (len(rows) + 1) for c in cuts)})
    out: list[Sequence[Element]] = []
    for lo, hi in itertools.pairwise(bounds):
        part = rows[lo:hi]
        if records:
            block = NumericBlock(
                np.array([r[0] for r in part], dtype=np.int64),
                (np.array([r[3] for r in part], dtype=np.int64), np.array([r[4] for r in part])),
                lo + 1,
            )
            out.append(as_records(block, LAYOUT))
        else:
            out.append(part)
        out.append([])  # an empty block changes nothing
    return out


def _replay(
    replay: FileReplay, stop_ms: float, most: int, sleeps: list[float]
) -> list[tuple[float, Release]]:
    """Drive ``replay`` as a source does: take, emit, or sleep for at least
    the wait (longer by the next of ``sleeps``)."""
    now, out, i = 0.0, [], 0
    while (step := replay.take(now, stop_ms, most)) is not None:
        if isinstance(step, Release):
            out.append((now, step))
        else:
            assert step > ON_TIME_MS
            now += step + sleeps[i % len(sleeps)]
            i += 1
    return out


@settings(max_examples=200, deadline=None)
@given(
    gaps=st.lists(st.integers(0, 30), min_size=0, max_size=120),
    cuts=st.lists(st.integers(0, 200), max_size=6),
    records=st.booleans(),
    after=st.integers(0, 130),
    speed=st.sampled_from([0.5, 1.0, 3.0]),
    step=st.one_of(st.none(), st.tuples(st.integers(1, 400), st.sampled_from([0.25, 2.0]))),
    stop=st.one_of(st.just(float("inf")), st.floats(0, 2000)),
    most=st.integers(1, 50),
    sleeps=st.lists(st.floats(0, 40), min_size=1, max_size=5),
)
def test_blocks_release_what_rows_released_with_valid_watermarks(
    gaps: list[int],
    cuts: list[int],
    records: bool,
    after: int,
    speed: float,
    step: tuple[int, float] | None,
    stop: float,
    most: int,
    sleeps: list[float],
) -> None:
    rows = _rows(gaps)
    clock = ReplayClock(speed, [step] if step else [])
    released = _replay(FileReplay(_blocks(rows, cuts, records), clock, after), stop, most, sleeps)

    def due(row: Element) -> float:
        return clock.wall_ms(row[0] - rows[0][0])

    # Exactly the rows after ``after`` due by the stop, in order, once.
    expected = [r for r in rows if r[1] > after and due(r) <= stop + ON_TIME_MS]
    got = [tuple(r) for _, release in released for r in release.rows]
    assert got == expected
    previous = -(2**62)
    for k, (now, release) in enumerate(released):
        assert 0 < len(release.rows) <= most
        assert isinstance(release.rows, RecordRows) == records
        assert all(due(r) <= now + ON_TIME_MS for r in release.rows)  # none early
        assert release.due_ms == due(release.rows[0])
        # A watermark never passes a row still to come, and never goes back.
        later = [r for _, rel in released[k + 1 :] for r in rel.rows]
        assert previous <= release.watermark >= release.rows[-1][0] - 1
        assert not later or release.watermark < later[0][0]
        previous = release.watermark
    if released and expected[-1] == rows[-1]:
        assert released[-1][1].watermark == rows[-1][0]  # the file's end closes its last instant


def test_a_csv_of_numbers_is_replayed_as_records_and_others_as_rows(tmp_path: Any) -> None:
    numbers = tmp_path / "n.csv"
    numbers.write_text("ts,id,val\n" + "".join(f"{t},{t * 3},{t / 2}\n" for t in range(1, 3001)))
    text = tmp_path / "t.jsonl"
    text.write_text("".join(f'{{"ts": {t}, "id": {t}, "val": 1.5}}\n' for t in range(1, 11)))

    def replay_all(path: Any) -> list[Release]:
        blocks = (
            as_records(b, LAYOUT) if isinstance(b, NumericBlock) else b
            for b in read_blocks(path, SCHEMA, plan.Kind.STREAM)
        )
        replay = FileReplay(blocks, ReplayClock(1.0), after_seq=0)
        out = []
        while isinstance(step := replay.take(10_000.0, float("inf"), 1000), Release):
            out.append(step)
        assert step is None
        return out

    numeric = replay_all(numbers)
    assert [len(r.rows) for r in numeric] == [1000, 1000, 1000]
    assert all(isinstance(r.rows, RecordRows) for r in numeric)
    assert [r.watermark for r in numeric] == [1000, 2000, 3000]
    assert numeric[2].rows[-1] == (3000, 3000, 1, 9000, 1500.0)
    rows = replay_all(text)
    assert [type(r.rows) for r in rows] == [list] and len(rows[0].rows) == 10


def test_a_source_started_again_goes_on_after_what_it_emitted_on_the_first_rows_schedule() -> None:
    rows = _rows([10] * 20)  # ts 15, 25, ..., 205
    replay = FileReplay([rows[:8], rows[8:]], ReplayClock(1.0), after_seq=12)
    assert replay.first_ts == 15
    step = replay.take(100.0, float("inf"), 100)
    assert step == 120.0 - 100.0  # row 13 (ts 135) is due 120 ms after the file's first row
    release = replay.take(141.0, float("inf"), 100)
    assert isinstance(release, Release)
    assert [r[1] for r in release.rows] == [13, 14, 15] and release.watermark == 164


def test_no_row_due_after_the_stop_goes_even_in_a_late_wake_up() -> None:
    rows = _rows([10] * 50)  # due every 10 ms from 0
    released = _replay(FileReplay(_blocks(rows, [], False), ReplayClock(1.0)), 105.0, 50, [35.0])
    assert [now for now, _ in released] == [0.0, 45.0, 85.0, 125.0]  # woken 35 ms late each time
    assert [r[1] for _, release in released for r in release.rows] == list(range(1, 12))
    assert released[-1][1].watermark == rows[11][0] - 1
