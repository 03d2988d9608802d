"""The input section (the SAS paper, 3.1): receives rows per input edge, drops
duplicate seqs, tracks watermarks, and hands the operator section its
inputs in the one deterministic order both replicas of a stage agree on.

A stage's input position (the lineage of its elements) is the edge seq when
there is one input edge. With several, rows are merged by
``(ts, edge index, seq)`` up to the smallest watermark and numbered in that
order (ha-protocol.md, "Identifiers and determinism" 4); a position map
translates a position back to per-edge seqs for Level-1 acknowledgements.

In ``exact`` mode (protected stages) only rows up to the watermark are handed
on, so that "processed up to position p" is a state both replicas can reach.

An edge's new rows must come in non-decreasing ts order and after the
watermark it already received (which said the edge was complete up to it):
a batch that breaks this is refused whole (:class:`RowOrderError`) before it
changes anything, since the engine would compute wrong windows from it.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from semiactive.node.engine.elements import VALUES, Element
from semiactive.node.sections.codec import CodecError, RowCodec
from semiactive.node.sections.connections import ELIDED
from semiactive.node.sections.entry_times import UNKNOWN, EntryTimes
from semiactive.node.sections.record_rows import RecordLayout, RecordQueue, RecordRows

NEVER = -(2**62)
FOREVER = 2**62
_TS = operator.itemgetter(0)


class SeqGapError(ValueError):
    """Rows after a gap: the producer skipped rows this input needs."""


class RowOrderError(ValueError):
    """New rows out of ts order (``reason`` "ts_decreasing") or at or below
    the edge's watermark ("ts_below_watermark")."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class EdgeInput:
    edge: str
    stream: str  # the scan the rows feed
    index: int
    codec: RowCodec
    # An edge to one partition: rows of other partitions come elided; they
    # take positions (so cuts and acknowledgements stay the whole stream's)
    # but are not handed to the operator section.
    drops_elided: bool = False
    next_seq: int = 1
    watermark: int = NEVER
    end_of_stream: bool = False
    received: int = 0
    duplicates: int = 0
    handed: int = 0  # last seq handed to the operator section
    last_ts: int = NEVER  # ts of the last new row received
    pending: deque[Element] = field(default_factory=deque)
    entered: EntryTimes = field(default_factory=EntryTimes)  # of the rows received
    # A columnar stage's edge (one stream input, no partition routing):
    # rows are queued as record blocks here instead of ``pending``.
    layout: RecordLayout | None = None
    records: RecordQueue = field(default_factory=RecordQueue)

    @property
    def queued(self) -> int:
        return len(self.pending) + len(self.records)

    def accept(
        self, first_seq: int, count: int, rows: bytes, watermark: int, eos: bool, entered: float = UNKNOWN
    ) -> int:
        """Take one encoded batch; return how many new rows it brought.
        ``entered``: when its first row entered the system (0 unknown)."""
        skip = self.next_seq - first_seq
        elements: Sequence[Element] = []
        if count and skip < count:
            layout = self.layout
            elements = (
                self.codec.decode(rows, first_seq, count)
                if layout is None
                else layout.view(rows, first_seq, count)
            )
        return self.accept_rows(first_seq, elements, watermark, eos, count, entered)

    def accept_rows(
        self,
        first_seq: int,
        rows: Sequence[Element],
        watermark: int,
        eos: bool,
        count: int | None = None,
        entered: float = UNKNOWN,
    ) -> int:
        """Take rows ``(ts, seq, sign, values...)`` numbered from ``first_seq``
        (a columnar edge's as :class:`RecordRows`; elements are turned into them)."""
        count = len(rows) if count is None else count
        if first_seq > self.next_seq and count:
            raise SeqGapError(
                f"edge {self.edge}: rows from seq {first_seq} but seq {self.next_seq} is missing"
            )
        new = 0
        if count:
            skip = self.next_seq - first_seq
            if skip < count:
                fresh = rows[skip:] if skip > 0 else rows
                records = self._as_records(fresh)
                if records is not None:
                    records = records.numbered(first_seq + max(skip, 0))
                    self._check_record_order(records)
                    self.entered.mark(records.first_seq, entered)
                    self.records.append(records)
                    self.last_ts = int(records.ts[-1])
                else:
                    self._check_order(fresh)
                    self.entered.mark(first_seq + max(skip, 0), entered)
                    self.pending.extend(fresh)
                    self.last_ts = fresh[-1][0]
                new = count - max(skip, 0)
                self.next_seq = first_seq + count
            self.duplicates += min(max(skip, 0), count)
            self.received += new
        if first_seq > self.next_seq:
            # Only a stream that delivered every row before first_seq may
            # move time on (a stale stream after a restart may not).
            return new
        if watermark > self.watermark:
            self.watermark = watermark
        if eos:
            self.end_of_stream = True
        return new

    def _as_records(self, rows: Sequence[Element]) -> RecordRows | None:
        """``rows`` as records if this edge keeps records. Rows that have
        none (a partition's, elided) turn the edge back to rows for good,
        the records queued included."""
        if self.layout is None:
            return None
        try:
            return self.layout.of(rows)
        except CodecError:
            self.pending.extend(self.records)
            self.records.clear()
            self.layout = None
            return None

    def _check_order(self, rows: Sequence[Element]) -> None:
        self._check_first(rows[0][0])
        stamps = [self.last_ts, *map(_TS, rows)]
        if any(map(operator.gt, stamps, stamps[1:])):
            at = next(i for i in range(1, len(stamps)) if stamps[i] < stamps[i - 1])
            self._decreasing(stamps[at - 1], stamps[at])

    def _check_record_order(self, rows: RecordRows) -> None:
        """:meth:`_check_order` on the ts column, with no row made."""
        stamps = rows.ts
        self._check_first(int(stamps[0]))
        if self.last_ts > stamps[0]:
            self._decreasing(self.last_ts, int(stamps[0]))
        down = np.flatnonzero(stamps[1:] < stamps[:-1])
        if len(down):
            at = int(down[0])
            self._decreasing(int(stamps[at]), int(stamps[at + 1]))

    def _check_first(self, first: int) -> None:
        if first <= self.watermark:
            raise RowOrderError(
                f"edge {self.edge}: row at ts {first} is at or below the watermark {self.watermark} "
                "the edge already received",
                "ts_below_watermark",
            )

    def _decreasing(self, before: int, after: int) -> None:
        raise RowOrderError(
            f"edge {self.edge}: row at ts {after} comes after one at ts {before} "
            "(timestamps must not decrease)",
            "ts_decreasing",
        )

    @property
    def last_seq(self) -> int:
        return self.next_seq - 1

    def truncate(self, seq: int) -> None:
        """Forget the queued rows from ``seq`` on, to receive them again
        (connection management: rows elided that are wanted whole). They
        must not have been handed on; time goes back to before the first."""
        pending = self.pending
        assert seq > self.handed, "rows already handed on cannot come again"
        first_ts: int | None = None
        while pending and pending[-1][1] >= seq:
            first_ts = pending.pop()[0]
            self.received -= 1  # it will be received again
        if self.records:
            dropped, first_ts = self.records.drop_from(seq)
            self.received -= dropped
        if first_ts is None:
            return
        self.next_seq = seq
        self.watermark = min(self.watermark, first_ts - 1)
        self.last_ts = min(self.last_ts, first_ts)
        self.end_of_stream = False

    def restart(self, next_seq: int) -> None:
        """Start over at ``next_seq`` (a resync): forget what is queued."""
        self.next_seq = next_seq
        self.handed = next_seq - 1
        self.pending.clear()
        self.records.clear()
        self.entered.clear()
        self.watermark = NEVER
        self.last_ts = NEVER
        self.end_of_stream = False


class InputSection:
    def __init__(self, edges: list[EdgeInput], exact: bool = False) -> None:
        self.edges = edges
        self.by_name = {e.edge: e for e in edges}
        self.exact = exact
        self.position = 0  # stage-local input position of the last row handed on
        # Multi-edge stages: (position, edge index, seq) of every handed row
        # still needed for translating positions; trimmed by forget_before().
        self._positions: deque[tuple[int, int, int]] = deque()
        # edge_cut's last answer: (cut position, first seq per edge found at
        # or after it, next position to look at). The cut stays put for long
        # (a window holding old rows pins it); looking again from the cut at
        # every acknowledgement cost as much as the history since, when an
        # edge had sent nothing after it.
        self._cut: tuple[int, dict[str, int], int] | None = None
        self.more = False  # the last take() left ready rows (cut short by max_rows)
        self.entered = UNKNOWN  # when the oldest row of the last take() entered the system

    @property
    def end_of_stream(self) -> bool:
        return all(e.end_of_stream for e in self.edges)

    def watermark(self) -> int:
        """Every input is complete up to this instant."""
        if not self.edges:
            return NEVER
        if self.end_of_stream:
            return max(e.watermark for e in self.edges)
        return min(FOREVER if e.end_of_stream else e.watermark for e in self.edges)

    @property
    def backlog(self) -> int:
        return sum(e.queued for e in self.edges)

    def take(
        self, max_position: int | None = None, max_rows: int | None = None
    ) -> tuple[dict[str, Sequence[Element]], int]:
        """Rows ready for the operator section, per stream, and the watermark
        to advance to; :attr:`entered` is then when the oldest of them
        entered the system (0 unknown). ``max_position`` stops at that
        position (a warm-up). ``max_rows`` ends the batch at the first instant boundary after that
        many rows (an instant's rows are never split) and lowers the
        watermark to that instant, so that one operator run stays short;
        :attr:`more` then says that ready rows were left."""
        handed = [e.handed for e in self.edges]
        taken = self._take(max_position, max_rows)
        entered = UNKNOWN
        for edge, before in zip(self.edges, handed, strict=True):
            if edge.handed > before:
                at = edge.entered.oldest(before + 1, edge.handed)
                entered = min(entered, at) if entered and at else entered or at
                edge.entered.forget_before(edge.handed + 1)
        self.entered = entered
        return taken

    def _take(
        self, max_position: int | None, max_rows: int | None
    ) -> tuple[dict[str, Sequence[Element]], int]:
        self.more = False
        watermark = self.watermark()
        if len(self.edges) == 1 and self.edges[0].layout is not None:
            edge = self.edges[0]
            rows, cut_at = edge.records.take(
                watermark if self.exact else None, max_position if self.exact else None, max_rows
            )
            if cut_at is not None:
                self.more = True
                watermark = min(watermark, cut_at)
            if not rows:
                return {}, watermark
            last = rows.first_seq + len(rows) - 1 if isinstance(rows, RecordRows) else rows[-1][1]
            self.position = edge.handed = last
            return {edge.stream: rows}, watermark
        if len(self.edges) == 1 and not self.exact:
            edge = self.edges[0]
            pending = edge.pending
            if max_rows is None or len(pending) <= max_rows:
                rows = list(pending)
                pending.clear()
            else:
                rows = [pending.popleft() for _ in range(max_rows)]
                while pending and pending[0][0] == rows[-1][0]:
                    rows.append(pending.popleft())
                if pending:
                    self.more = True
                    watermark = min(watermark, rows[-1][0])
            if rows:
                self.position = edge.handed = rows[-1][1]
                if edge.drops_elided:
                    rows = _own(rows)
            return ({edge.stream: rows} if rows else {}), watermark
        if len(self.edges) == 1:
            edge = self.edges[0]
            limit = FOREVER if max_position is None else max_position
            part: list[Element] = []
            pending = edge.pending
            if (
                pending
                and pending[-1][0] <= watermark
                and pending[-1][1] <= limit
                and (max_rows is None or len(pending) <= max_rows)
            ):
                # The usual case: everything queued is complete.
                part = list(pending)
                pending.clear()
            while pending and pending[0][0] <= watermark and pending[0][1] <= limit:
                if max_rows is not None and len(part) >= max_rows and pending[0][0] > part[-1][0]:
                    self.more = True
                    watermark = part[-1][0]
                    break
                part.append(pending.popleft())
            if part:
                self.position = edge.handed = part[-1][1]
                if edge.drops_elided:
                    part = _own(part)
            return ({edge.stream: part} if part else {}), watermark
        merged, watermark = self._merge(watermark, max_position, max_rows)
        return dict(merged), watermark

    def _merge(
        self, watermark: int, max_position: int | None, max_rows: int | None
    ) -> tuple[dict[str, list[Element]], int]:
        """The edges' rows merged by (ts, edge index, seq) up to ``watermark``,
        numbered by stage position; a k-way merge over the queues' heads, so
        a batch cut short costs only what it takes."""
        heads = [(e.pending[0][0], e.index, e.pending[0][1], e) for e in self.edges if e.pending]
        heads = [h for h in heads if h[0] <= watermark]
        heapq.heapify(heads)
        out: dict[str, list[Element]] = {}
        pos = self.position
        taken = 0
        last_ts = None
        while heads:
            ts, index, seq, edge = heads[0]
            if max_position is not None and pos >= max_position:
                break
            if max_rows is not None and taken >= max_rows and ts != last_ts:
                self.more = True
                assert last_ts is not None
                watermark = last_ts
                break
            row = edge.pending.popleft()
            if edge.pending and edge.pending[0][0] <= watermark:
                nxt = edge.pending[0]
                heapq.heapreplace(heads, (nxt[0], index, nxt[1], edge))
            else:
                heapq.heappop(heads)
            pos += 1
            taken += 1
            last_ts = ts
            edge.handed = seq
            self._positions.append((pos, index, seq))
            if edge.drops_elided and row[VALUES] is ELIDED:
                continue
            out.setdefault(edge.stream, []).append((row[0], pos, *row[2:]))
        self.position = pos
        return out, watermark

    # -- positions <-> edge seqs (Level-1) -------------------------------------

    def edge_cut(self, cut_position: int) -> dict[str, int]:
        """Per edge, the first seq at or after stage position ``cut_position``
        (for an edge with no row there yet, its next seq)."""
        if len(self.edges) == 1:
            return {self.edges[0].edge: cut_position}
        names = [e.edge for e in self.edges]
        found: dict[str, int] = {}
        scanned = cut_position
        if self._cut is not None and self._cut[0] == cut_position:
            _, found, scanned = self._cut
        entries = self._positions
        if len(found) < len(names) and entries and scanned <= entries[-1][0]:
            # Positions are consecutive: the ones not looked at yet are the
            # last ``last - start + 1`` entries.
            first, last = entries[0][0], entries[-1][0]
            start = max(scanned, first)
            if last - start < start - first:
                newer = list(itertools.islice(reversed(entries), last - start + 1))
                newer.reverse()
                todo: Iterable[tuple[int, int, int]] = newer
            else:
                todo = itertools.islice(entries, start - first, None)
            for _, index, seq in todo:
                found.setdefault(names[index], seq)
                if len(found) == len(names):
                    break
            scanned = last + 1
        self._cut = (cut_position, found, scanned)
        return {e.edge: found.get(e.edge, e.handed + 1) for e in self.edges}

    def forget_before(self, position: int) -> None:
        entries = self._positions
        while entries and entries[0][0] < position:
            entries.popleft()

    def restart(self, cut_position: int, edge_cut: dict[str, int]) -> None:
        """Start over from a resync point's cut."""
        self.position = cut_position - 1
        self._positions.clear()
        self._cut = None
        for e in self.edges:
            e.restart(edge_cut.get(e.edge, 1))


def _own(rows: list[Element]) -> list[Element]:
    """A partition's rows without the elided ones of other partitions."""
    return [r for r in rows if r[VALUES] is not ELIDED]
