"""Entry marks: when rows entered the system, by seq."""

from __future__ import annotations

import pytest

from semiactive.ha.output_log import OutputLog
from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.node.sections.codec import RowCodec
from semiactive.node.sections.entry_times import UNKNOWN, EntryTimes
from semiactive.node.sections.input import EdgeInput, InputSection


def test_a_mark_holds_until_the_next_one() -> None:
    marks = EntryTimes()
    assert marks.at(1) == UNKNOWN
    marks.mark(1, 10.0)
    marks.mark(5, 11.0)
    marks.mark(9, 11.0)  # the same time: no new mark
    assert [marks.at(s) for s in (1, 4, 5, 100)] == [10.0, 10.0, 11.0, 11.0]
    assert marks.oldest(3, 7) == 10.0 and marks.oldest(5, 7) == 11.0


def test_the_oldest_of_a_range_skips_unknown_marks() -> None:
    marks = EntryTimes()
    marks.mark(1, UNKNOWN)
    marks.mark(3, 12.0)
    marks.mark(6, 11.5)
    assert marks.oldest(1, 2) == UNKNOWN
    assert marks.oldest(1, 10) == 11.5


def test_forgetting_keeps_the_mark_that_still_holds() -> None:
    marks = EntryTimes()
    for seq in range(1, 5000):
        marks.mark(seq, float(seq))
    marks.forget_before(4000)
    assert marks.at(3999) == UNKNOWN and marks.at(4000) == 4000.0 and marks.at(4999) == 4999.0
    marks.mark(4500, 1.0)  # numbered again from 4500: later marks go
    assert marks.at(4999) == 1.0 and marks.at(4499) == 4499.0


CODEC = RowCodec(plan.Schema((plan.Column("v", plan.INTEGER),)), plan.Kind.STREAM)


def _rows(first_seq: int, *stamps: int) -> list[Element]:
    return [(ts, first_seq + i, 1, ts) for i, ts in enumerate(stamps)]


@pytest.mark.parametrize("exact", [True, False])
def test_a_take_is_stamped_with_its_oldest_row_over_every_edge(exact: bool) -> None:
    a, b = EdgeInput("a", "a", 0, CODEC), EdgeInput("b", "b", 1, CODEC)
    section = InputSection([a] if not exact else [a, b], exact=exact)
    a.accept_rows(1, _rows(1, 1, 2), 2, False, entered=100.0)
    a.accept_rows(3, _rows(3, 3, 4), 10, False, entered=101.0)
    b.accept_rows(1, _rows(1, 2), 10, False, entered=99.5)
    b.accept_rows(1, _rows(1, 2), 10, False, entered=50.0)  # a duplicate: not a new mark
    section.take(max_rows=1)  # ts 1 only
    assert section.entered == 100.0
    section.take()
    assert section.entered == (99.5 if exact else 100.0)  # rows 2..4 of a: still the first mark's
    section.take()
    assert section.entered == UNKNOWN  # nothing taken


def test_the_output_log_stamps_what_a_sender_cuts_from_it() -> None:
    log = OutputLog()
    log.append(_rows(1, 1, 2), 2, entered=100.0)
    log.append(_rows(3, 3), 3)  # unknown
    log.append(_rows(4, 4, 5), 5, entered=102.0)
    ranges = ((1, 2), (3, 3), (3, 5), (2, 5))
    assert [log.entered.oldest(first, last) for first, last in ranges] == [100.0, 0.0, 102.0, 100.0]
    log.reset(5)
    assert log.entered.oldest(1, 10) == UNKNOWN
