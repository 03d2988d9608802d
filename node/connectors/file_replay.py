"""A file source's rows released as the replay's schedule makes them due, a
block at a time.

The file is read in blocks (:func:`~.sources.read_blocks`: numpy's arrays
for a CSV of numbers, lists of elements otherwise). A source asks
:meth:`FileReplay.take` what is due at a moment and gets a slice of the
current block (record blocks stay records: no tuple per row), how long to
wait for the next row, or the end. Which rows go and their watermarks are
the row-at-a-time replay's: a row is due ``ReplayClock.wall_ms`` after
the start (a millisecond early is on time), none due after the stop goes,
and a release is closed by the next row's ts - 1 (rows of one instant may
span two releases), or by its last ts at the end of the file. Pure: the
caller reads the clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from semiactive.node.connectors.csv_numeric import NumericBlock
from semiactive.node.connectors.replay_clock import ReplayClock
from semiactive.node.engine.elements import Element
from semiactive.node.sections.record_rows import RecordLayout, RecordRows

ON_TIME_MS = 1.0  # a row due this little after now goes now


@dataclass(frozen=True)
class Release:
    rows: Sequence[Element]
    watermark: int
    due_ms: float  # when the first row was due, ms after the start


def as_records(block: NumericBlock, layout: RecordLayout) -> RecordRows:
    """A CSV block of numbers as wire records: the same rows, no tuple per row."""
    records = np.empty(len(block), dtype=layout.dtype)
    records["ts"] = block.ts
    for i, column in enumerate(block.columns):
        records[f"v{i}"] = column
    return RecordRows(records, block.first_seq, layout)


class FileReplay:
    """The rows of ``blocks`` (seqs consecutive from 1) after ``after_seq``
    (those a source started again has already emitted), on ``clock``'s
    schedule from the file's first row."""

    def __init__(self, blocks: Iterable[Sequence[Element]], clock: ReplayClock, after_seq: int = 0) -> None:
        self._blocks = iter(blocks)
        self._clock = clock
        self._after = after_seq
        self.first_ts: int | None = None
        self._block: Sequence[Element] | None = None
        self._ts: list[int] = []
        self._pos = 0
        self._next_block()

    def _next_block(self) -> None:
        """Move to the next block holding a row past ``after_seq`` (None at the end)."""
        self._block = None
        for block in self._blocks:
            if not len(block):
                continue
            first_seq = block.first_seq if isinstance(block, RecordRows) else int(block[0][1])
            ts = block.ts.tolist() if isinstance(block, RecordRows) else [int(r[0]) for r in block]
            if self.first_ts is None:
                self.first_ts = ts[0]  # the schedule's origin, also for a source started again
            skip = max(0, self._after - first_seq + 1)
            if skip < len(block):
                self._block, self._ts, self._pos = block, ts, skip
                return

    def _due_ms(self, ts: int) -> float:
        assert self.first_ts is not None
        return self._clock.wall_ms(ts - self.first_ts)

    def take(self, elapsed_ms: float, stop_ms: float, most: int) -> Release | float | None:
        """At ``elapsed_ms`` after the start: the rows due (at most ``most``,
        none due after ``stop_ms``), else the ms until the next row is due,
        else None (the file's end, or the next row is past the stop)."""
        block, ts, lo = self._block, self._ts, self._pos
        if block is None:
            return None
        first_due = self._due_ms(ts[lo])
        if first_due > stop_ms + ON_TIME_MS:
            self._block = None
            return None
        if first_due - elapsed_ms > ON_TIME_MS:
            return first_due - elapsed_ms
        limit = min(elapsed_ms, stop_ms) + ON_TIME_MS
        # The first row past ``limit`` in (lo, hi): due times grow with ts.
        left, right = lo + 1, min(len(ts), lo + max(1, most))
        while left < right:
            mid = (left + right) // 2
            if self._due_ms(ts[mid]) > limit:
                right = mid
            else:
                left = mid + 1
        end = left
        rows = block[lo:end]
        last_ts = ts[end - 1]
        self._pos = end
        if end == len(ts):
            self._next_block()
        following = None if self._block is None else self._ts[self._pos]
        return Release(rows, last_ts if following is None else following - 1, first_due)
