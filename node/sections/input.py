"""The input section (seed 002, 3.1): receives rows per input edge, drops
duplicate seqs, tracks watermarks, and hands the operator section its
inputs in the one deterministic order both replicas of a stage agree on.

A stage's input position (the lineage of its elements) is the edge seq when
there is one input edge. With several, rows are merged by
``(ts, edge index, seq)`` up to the smallest watermark, and numbered in that
order (ha-protocol.md, "Identifiers and determinism" 4).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

from node.codec import RowCodec
from node.engine.elements import Element

NEVER = -(2**62)
FOREVER = 2**62


class SeqGapError(ValueError):
    """Rows after a gap: something upstream lost data."""


@dataclass
class EdgeInput:
    edge: str
    stream: str  # the scan the rows feed
    index: int
    codec: RowCodec
    next_seq: int = 1
    watermark: int = NEVER
    end_of_stream: bool = False
    received: int = 0
    duplicates: int = 0
    pending: deque[Element] = field(default_factory=deque)

    def accept(self, first_seq: int, count: int, rows: bytes, watermark: int, eos: bool) -> int:
        """Take one batch; return how many new rows it brought."""
        if first_seq > self.next_seq and count:
            raise SeqGapError(
                f"edge {self.edge}: rows from seq {first_seq} but seq {self.next_seq} is missing"
            )
        new = 0
        if count:
            skip = self.next_seq - first_seq
            if skip < count:
                elements = self.codec.decode(rows, first_seq, count)
                self.pending.extend(elements[skip:] if skip else elements)
                new = count - skip
                self.next_seq = first_seq + count
            self.duplicates += min(skip, count)
            self.received += new
        if watermark > self.watermark:
            self.watermark = watermark
        if eos:
            self.end_of_stream = True
        return new

    @property
    def last_seq(self) -> int:
        return self.next_seq - 1


class InputSection:
    def __init__(self, edges: list[EdgeInput]) -> None:
        self.edges = edges
        self.by_name = {e.edge: e for e in edges}
        self.position = 0  # stage-local input position of the last row handed on

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
        return sum(len(e.pending) for e in self.edges)

    def take(self) -> tuple[dict[str, list[Element]], int]:
        """Rows ready for the operator section, per stream, and the watermark
        to advance to."""
        watermark = self.watermark()
        if len(self.edges) == 1:
            edge = self.edges[0]
            rows = list(edge.pending)
            edge.pending.clear()
            if rows:
                self.position = rows[-1][1]
            return ({edge.stream: rows} if rows else {}), watermark
        return self._merge(watermark), watermark

    def _merge(self, watermark: int) -> dict[str, list[Element]]:
        runs = []
        for e in self.edges:
            run: list[tuple[int, int, int, Element]] = []
            pending = e.pending
            while pending and pending[0][0] <= watermark:
                row = pending.popleft()
                run.append((row[0], e.index, row[1], row))
            runs.append(run)
        out: dict[str, list[Element]] = {}
        stream_of = {e.index: e.stream for e in self.edges}
        pos = self.position
        for _, index, _, row in heapq.merge(*runs):
            pos += 1
            out.setdefault(stream_of[index], []).append((row[0], pos, *row[2:]))
        self.position = pos
        return out
