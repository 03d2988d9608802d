"""When rows entered the system, by seq: what sink latency is measured from.

A source stamps each batch of rows it emits with the moment they entered
(their schedule for a generator or a file replay, the arrival for an ingest
call); the stamp travels with every batch on the wire (``Batch.entered_unix``)
and a stage stamps what it emits with the oldest stamp among the rows it
processed for it. A sink's latency is its arrival time minus the stamp:
from the row's entry, whatever the speed or the clock of its event time.

The stamps are marks ``(first seq, time)``, each holding for the seqs up to
the next mark; unknown (0) for rows that came without one (a log rebuilt
from a state snapshot, a peer of an older version).
"""

from __future__ import annotations

import bisect

UNKNOWN = 0.0
_COMPACT = 1024  # forgotten marks kept before the list is compacted


class EntryTimes:
    def __init__(self) -> None:
        self._seqs: list[int] = []
        self._times: list[float] = []
        self._start = 0  # marks before it are forgotten

    def mark(self, seq: int, entered: float) -> None:
        """Rows from ``seq`` on entered at ``entered`` (unix seconds; 0:
        unknown). A mark at or before an earlier one replaces the later ones
        (the rows from there are received or numbered again)."""
        seqs, times = self._seqs, self._times
        while len(seqs) > self._start and seqs[-1] >= seq:
            seqs.pop()
            times.pop()
        if len(seqs) > self._start and times[-1] == entered:
            return
        seqs.append(seq)
        times.append(entered)

    def at(self, seq: int) -> float:
        """When the row ``seq`` entered (``UNKNOWN`` before the first mark)."""
        i = bisect.bisect_right(self._seqs, seq, lo=self._start) - 1
        return self._times[i] if i >= self._start else UNKNOWN

    def oldest(self, first: int, last: int) -> float:
        """The earliest known entry among rows ``first..last``."""
        lo = max(bisect.bisect_right(self._seqs, first, lo=self._start) - 1, self._start)
        hi = bisect.bisect_right(self._seqs, last, lo=self._start)
        return min((t for t in self._times[lo:hi] if t), default=UNKNOWN)

    def forget_before(self, seq: int) -> None:
        """Rows before ``seq`` are gone: keep only the marks that may still
        hold for ``seq`` or later."""
        seqs = self._seqs
        start = self._start
        while start + 1 < len(seqs) and seqs[start + 1] <= seq:
            start += 1
        self._start = start
        if start >= _COMPACT:
            del self._seqs[:start]
            del self._times[:start]
            self._start = 0

    def clear(self) -> None:
        self._seqs.clear()
        self._times.clear()
        self._start = 0
