"""The upstream output queue with its three cursors (ha-protocol.md).

One log per output stream of a stage, shared by every consumer edge; each
edge has its own cursors ``cut <= backed_up + 1`` and ``backed_up <= head``:

- seqs before ``cut`` are acknowledged (Level-1, or Level-0 when the edge is
  not protected) and may be freed;
- ``(backed_up, head]`` is the paper's output queue: not yet shipped to the
  consumer's secondary. :meth:`take_backup` ships it in whole batches of B rows;
  a cut that passes ``backed_up`` drops those rows unsent (SAS's saving);
- ``[cut, backed_up]`` is retained in memory only, so that a new primary or a
  fresh secondary can be fed from here (replay from ``cut``).

The log frees storage below the smallest cut over all edges. It is bounded:
when it holds ``capacity`` rows, :attr:`full` tells the producer to wait
(backpressure, never loss). Before that, :meth:`pressure` names the
consumers whose cuts hold it, so that they capture their state early
(docs/ha.md, "Pressure").
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from semiactive.ha.resync import ResyncPoint
from semiactive.node.engine.elements import Element
from semiactive.node.sections.entry_times import UNKNOWN, EntryTimes
from semiactive.node.sections.record_rows import RecordRows, joined

UNBOUNDED = 2**62


@dataclass
class EdgeCursors:
    cut: int  # first seq the consumer may still need
    backed_up: int  # last seq shipped to the consumer's secondary
    batch_size: int = UNBOUNDED  # B; 1 for AS, UNBOUNDED for UB / no backup
    dropped_unsent: int = 0  # rows released before being shipped (SAS saving)
    shipped: int = 0  # rows shipped to the secondary
    batches: int = 0  # backup batches shipped (A-SAS's B_send counts these)
    cuts: int = 0  # Level-1 cuts that advanced
    uncut_rows: int = 0  # sum over those cuts of the rows that waited for them
    acked: int = 0  # the consumer's Level-0: it has every seq up to here
    point: ResyncPoint | None = None  # the consumer's latest Level-1 point


class OutputLog:
    def __init__(self, capacity: int = 1_000_000, first_seq: int = 1) -> None:
        """``first_seq``: the seq of the first row this log will hold (a
        replica that resynchronised continues its primary's numbering)."""
        self.capacity = capacity
        # The rows stored, in consecutive pieces: element lists (extended
        # in place) and a columnar stage's record blocks, kept as they are.
        self._parts: list[Sequence[Element]] = []
        self._starts: list[int] = []  # seq of each part's first row
        self._base = first_seq  # oldest seq stored
        self.head = first_seq - 1  # last appended seq
        self.watermark = -(2**62)
        self.end_of_stream = False
        self.edges: dict[str, EdgeCursors] = {}
        # ts of the last appended row: kept apart from _items, which may have
        # been freed by the time the stream finishes.
        self.last_ts: int | None = None
        # Set by the replica that owns the log: its own producer is pressed
        # and this log's consumers are what hold the replica's cut; then the
        # output seq they should have processed before they capture (that
        # of the replica's newest state; 0: at once).
        self.pressed = False
        self.relief_seq = 0
        self.entered = EntryTimes()  # when the rows entered the system (sink latency)

    # -- producer side --------------------------------------------------------

    def append(
        self, elements: Sequence[Element], watermark: int | None = None, entered: float = UNKNOWN
    ) -> None:
        """``entered``: when the oldest input they came from entered the
        system (unix seconds; 0 unknown)."""
        if len(elements):
            self.entered.mark(self.head + 1, entered)
            if isinstance(elements, RecordRows):
                self._parts.append(elements.numbered(self.head + 1))
                self._starts.append(self.head + 1)
                self.last_ts = int(elements.ts[-1])
            else:
                last = self._parts[-1] if self._parts else None
                if isinstance(last, list):
                    last.extend(elements)
                else:
                    self._parts.append(list(elements))
                    self._starts.append(self.head + 1)
                self.last_ts = elements[-1][0]
            self.head += len(elements)
        if watermark is not None and watermark > self.watermark:
            self.watermark = watermark

    def finish(self, watermark: int) -> None:
        """End of stream. The final watermark covers every row: nothing more
        can arrive at any instant, including the last row's."""
        last_ts = self.last_ts if self.last_ts is not None else watermark
        self.watermark = max(self.watermark, watermark, last_ts)
        self.end_of_stream = True

    @property
    def first(self) -> int:
        """Oldest seq still stored."""
        return self._base

    @property
    def retained(self) -> int:
        return self.head - self._base + 1

    @property
    def full(self) -> bool:
        return self.retained >= self.capacity

    def get(self, first: int, last: int) -> Sequence[Element]:
        """Rows ``first..last`` (inclusive), clipped to what is stored:
        :class:`RecordRows` where a columnar stage's records hold them all."""
        first = max(first, self._base)
        last = min(last, self.head)
        if first > last:
            return []
        k = bisect.bisect_right(self._starts, first) - 1
        pieces: list[Sequence[Element]] = []
        while first <= last:
            part, start = self._parts[k], self._starts[k]
            end = min(last, start + len(part) - 1)
            pieces.append(part[first - start : end - start + 1])
            first = end + 1
            k += 1
        return joined(pieces)

    def reset(self, out_seq: int) -> None:
        """Start over after ``out_seq`` (a replica rebuilt from a resync
        point continues its primary's numbering): drop every row, keep the
        consumers' cursors."""
        self._parts = []
        self._starts = []
        self._base = out_seq + 1
        self.head = out_seq
        self.end_of_stream = False
        self.entered.clear()
        for cursors in self.edges.values():
            cursors.cut = max(cursors.cut, out_seq + 1)
            cursors.backed_up = max(cursors.backed_up, out_seq)

    # -- consumer edges --------------------------------------------------------

    def add_edge(self, edge: str, batch_size: int = UNBOUNDED, cut: int | None = None) -> EdgeCursors:
        start = self._base if cut is None else max(cut, self._base)
        cursors = EdgeCursors(cut=start, backed_up=start - 1, batch_size=batch_size)
        self.edges[edge] = cursors
        return cursors

    def acknowledge(
        self, edge: str, seq: int, point: ResyncPoint | None = None, backup_sent: int | None = None
    ) -> None:
        """A consumer's Level-0 (``seq``) and, if given, Level-1 (``point``):
        rows before the point's cut for this edge are no longer needed.
        ``backup_sent``: the last seq the edge's backup stream has written
        to the consumer's secondary (None: no stream connected)."""
        cursors = self.edges[edge]
        if seq > cursors.acked:
            cursors.acked = seq
        if point is not None and edge in point.edge_cut:
            # A point with a lower cut would need rows already released (a
            # new primary whose own state snapshots lag its predecessor's).
            held = cursors.point
            if held is None or (
                point.position >= held.position and point.edge_cut[edge] >= held.edge_cut.get(edge, 0)
            ):
                cursors.point = point
            cut = point.edge_cut[edge]
            if point.state is not None and cursors.batch_size != UNBOUNDED:
                cut = self._state_cut(edge, cut, backup_sent)
            self.release(edge, cut)

    def _state_cut(self, edge: str, cut: int, backup_sent: int | None) -> int:
        """Where a cut that a state carries may go now. Past rows the
        consumer's secondary has not received, the backup stream would send
        it the point instead, and it would be rebuilt from the whole state
        (a restore and a warm-up, at every snapshot). So unsent rows (fewer
        than B) are shipped, not dropped, and the cut waits for the stream
        to have written them; it follows at later acknowledgements. A
        secondary behind by more than half the log is rebuilt rather than
        left to stop its producer."""
        cursors = self.edges[edge]
        received = cursors.backed_up if backup_sent is None else min(cursors.backed_up, backup_sent)
        if cut - 1 <= received or cut - 1 - received > self.capacity // 2:
            return cut
        if cut - 1 > cursors.backed_up:
            self.take_backup(edge, force=True)
        return received + 1

    def backup_written(self, edge: str, backup_sent: int) -> bool:
        """The edge's backup stream has written up to ``backup_sent``: a cut
        from a state that waited for it (:meth:`_state_cut`) goes on; return
        whether it moved."""
        cursors = self.edges[edge]
        point = cursors.point
        if point is None or point.state is None or cursors.cut >= point.edge_cut.get(edge, 0):
            return False
        before = cursors.cut
        self.release(edge, self._state_cut(edge, point.edge_cut[edge], backup_sent))
        return cursors.cut != before

    def needed_from(self) -> int:
        """The first seq some consumer may still need: the smallest cut its
        Level-1 points gave (1 for a consumer that gave none yet); unbounded
        without consumers."""
        if not self.edges:
            return UNBOUNDED
        return min(c.cut if c.point is not None else 1 for c in self.edges.values())

    def pressure(self, edge: str) -> int:
        """The first seq the consumer of ``edge`` holds, if it should
        capture its state now to let the log go on; else 0. Pressed: it holds
        half the log in rows it already received (a consumer merely behind
        is not: no capture would free rows it has not processed), or this
        log is :attr:`pressed` from upstream and its cut is the oldest."""
        cursors = self.edges[edge]
        cut = cursors.cut if cursors.point is not None else 1
        held = cursors.acked - cut + 1
        if held * 2 >= self.capacity or (self.pressed and held > 0 and cut == self.needed_from()):
            return cut
        return 0

    def start_for(self, edge: str, next_seq: int) -> tuple[ResyncPoint | None, int]:
        """Where to start feeding a receiver that wants ``next_seq``: there,
        if this log still has it; otherwise at the cut, after the resync point
        that lets the receiver rebuild its state from the cut."""
        cursors = self.edges[edge]
        if next_seq >= cursors.cut or cursors.point is None:
            return None, max(next_seq, self._base)
        return cursors.point, cursors.cut

    def release(self, edge: str, cut: int) -> None:
        """The consumer of ``edge`` no longer needs seqs before ``cut``."""
        cursors = self.edges[edge]
        if cut <= cursors.cut:
            return
        if self.pressed and cursors.point is not None and cursors.cut == self.needed_from():
            # The cut that held the log moved: pressure from upstream is
            # passed on again only once the replica has looked anew
            # (StageReplica._forward_pressure); pressing this consumer at
            # its new cut now would make it capture twice for one pressure.
            self.pressed = False
        cut = min(cut, self.head + 1)
        cursors.cuts += 1
        cursors.uncut_rows += self.head - cursors.cut + 1
        cursors.cut = cut
        if cursors.backed_up < cut - 1:
            cursors.dropped_unsent += cut - 1 - cursors.backed_up
            cursors.backed_up = cut - 1
        self._free()

    def take_backup(self, edge: str, force: bool = False) -> tuple[int, Sequence[Element]]:
        """The rows to ship to the edge's secondary now, with the first seq:
        the unsent rows that fill whole batches of ``batch_size`` (all of
        them with ``force``, Algorithm 1 lines 18-19), else nothing.

        Rows arrive in blocks, so one call may fill several batches; they go
        in one message but count as the batches they are, and the rest
        waits for its batch to fill, as in the paper where rows arrive one
        by one. Shipping the whole block as one batch would make B_send
        (eq. 2) count a 5-row block at B = 1 as one row's bandwidth."""
        cursors = self.edges[edge]
        unsent = self.head - cursors.backed_up
        count = unsent if force else unsent - unsent % cursors.batch_size
        if count <= 0:
            return cursors.backed_up + 1, []
        first = cursors.backed_up + 1
        rows = self.get(first, first + count - 1)
        cursors.backed_up += count
        cursors.shipped += count
        cursors.batches += -(-count // cursors.batch_size)  # a forced partial batch counts as one
        return first, rows

    def unsent(self, edge: str) -> int:
        return self.head - self.edges[edge].backed_up

    def _free(self) -> None:
        if not self.edges:
            return
        low = min(c.cut for c in self.edges.values())
        if low <= self._base:
            return
        parts, starts = self._parts, self._starts
        whole = bisect.bisect_right(starts, low) - 1  # parts before this one are all below low
        if whole > 0:
            del parts[:whole], starts[:whole]
        if parts:
            part, start = parts[0], starts[0]
            drop = min(low, start + len(part)) - start
            if isinstance(part, RecordRows):
                parts[0] = part[drop:]
            elif isinstance(part, list) and (drop >= 4096 or drop * 2 >= len(part)):
                # Deleting a list prefix is O(n); do it in chunks, not per ack.
                del part[:drop]
            else:
                drop = 0
            starts[0] = start + drop
            if not len(parts[0]):
                del parts[0], starts[0]
        self._base = starts[0] if starts else self.head + 1
        self.entered.forget_before(self._base)
