"""A stream edge's rows kept as their wire records, not as Python tuples.

A columnar stage (:mod:`.columnar_stage`) receives a batch, queues it,
filters it and logs its output without making a tuple per row: the bytes
are viewed as a numpy structured array (:class:`RecordRows`), the input
queue holds such blocks (:class:`RecordQueue`), the operator section reads
their columns, and the output log sends its records' bytes as they are.

:class:`RecordRows` is also a ``Sequence`` of elements ``(ts, seq, 1,
values...)``, decoded by :class:`~.codec.RowCodec` on first use, so the
code written for rows (connection management, partition masks, tests)
works on it unchanged and sees exactly the rows the row path would.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.node.sections.codec import INT_NULL, CodecError, RowCodec, WireRows
from semiactive.node.sections.column_codec import ColumnCodec


def has_record_form(schema: plan.Schema, kind: plan.Kind) -> bool:
    """Whether rows of ``schema`` can be kept as records: a stream with no
    byte column (:class:`ColumnCodec` has no column form for one)."""
    return kind is plan.Kind.STREAM and all(c.type.name is not plan.TypeName.BYTE for c in schema.columns)


class RecordLayout:
    """One stream schema's wire records: the row codec and the numpy dtype
    that views the same bytes."""

    def __init__(self, codec: RowCodec) -> None:
        self.codec = codec
        self.columns = ColumnCodec(codec.schema)
        self.dtype = self.columns.dtype
        self.fingerprint = codec.fingerprint()
        assert self.dtype.itemsize == codec.row_size
        # Integer columns that cannot hold NULL, checked as RowCodec.decode checks them.
        self.not_null = [
            (f"v{i}", c.name)
            for i, c in enumerate(codec.schema.columns)
            if c.type.name is plan.TypeName.INTEGER and not c.nullable
        ]

    def view(self, blob: bytes, first_seq: int, count: int) -> RecordRows:
        """``count`` rows of ``blob`` (no copy), numbered from ``first_seq``."""
        if len(blob) != count * self.dtype.itemsize:
            raise CodecError(
                f"batch of {len(blob)} bytes does not hold {count} rows of {self.dtype.itemsize} bytes"
            )
        records = np.frombuffer(blob, dtype=self.dtype, count=count)
        for field, name in self.not_null:
            if count and int(records[field].min()) == INT_NULL:
                raise CodecError(f"column {name} cannot be NULL, and a row holds NULL")
        return RecordRows(records, first_seq, self)

    def of(self, rows: Sequence[Element]) -> RecordRows:
        """Elements as records (numbered from the first one's seq)."""
        if isinstance(rows, RecordRows) and rows.layout.fingerprint == self.fingerprint:
            return rows
        first = int(rows[0][1]) if len(rows) else 0
        return self.view(self.codec.encode(rows), first, len(rows))


class RecordRows(WireRows):
    """Rows of one layout numbered ``first_seq``, ``first_seq + 1``, ..."""

    __slots__ = ("_rows", "first_seq", "layout", "records")

    def __init__(self, records: np.ndarray[Any, Any], first_seq: int, layout: RecordLayout) -> None:
        self.records = records
        self.first_seq = first_seq
        self.layout = layout
        self._rows: list[Element] | None = None

    def __len__(self) -> int:
        return len(self.records)

    @overload
    def __getitem__(self, index: int) -> Element: ...

    @overload
    def __getitem__(self, index: slice) -> RecordRows: ...

    def __getitem__(self, index: int | slice) -> Element | RecordRows:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("record rows are sliced with step 1 only")
            return RecordRows(self.records[start:stop], self.first_seq + start, self.layout)
        if self._rows is not None:
            return self._rows[index]
        n = len(self.records)
        at = index + n if index < 0 else index
        if not 0 <= at < n:
            raise IndexError("record index out of range")
        return self.layout.codec.decode(self.records[at : at + 1].tobytes(), self.first_seq + at, 1)[0]

    def __iter__(self) -> Iterator[Element]:
        return iter(self.rows())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return self.rows() == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RecordRows({len(self)} rows from seq {self.first_seq})"

    def rows(self) -> list[Element]:
        """The elements, decoded once."""
        if self._rows is None:
            self._rows = self.layout.codec.decode(self.records.tobytes(), self.first_seq, len(self))
        return self._rows

    @property
    def ts(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        return self.records["ts"]  # type: ignore[no-any-return]

    def tobytes(self) -> bytes:
        return self.records.tobytes()

    def wire_bytes(self, fingerprint: str) -> bytes | None:
        return self.records.tobytes() if fingerprint == self.layout.fingerprint else None

    def numbered(self, first_seq: int) -> RecordRows:
        return RecordRows(self.records, first_seq, self.layout)


def joined(parts: Sequence[Sequence[Element]]) -> Sequence[Element]:
    """Consecutive pieces as one: records stay records when every piece is
    of one layout, else a list of elements."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return []
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    blocks = [p for p in parts if isinstance(p, RecordRows)]
    if (
        isinstance(first, RecordRows)
        and len(blocks) == len(parts)
        and all(b.layout is first.layout for b in blocks)
    ):
        return RecordRows(np.concatenate([b.records for b in blocks]), first.first_seq, first.layout)
    out: list[Element] = []
    for p in parts:
        out.extend(p)
    return out


class RecordQueue:
    """An edge's rows received and not yet handed on, as record blocks in
    seq order (consecutive seqs, non-decreasing ts)."""

    def __init__(self) -> None:
        self._blocks: deque[RecordRows] = deque()
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __iter__(self) -> Iterator[Element]:
        for block in self._blocks:
            yield from block

    def append(self, rows: RecordRows) -> None:
        if len(rows):
            self._blocks.append(rows)
            self._len += len(rows)

    def clear(self) -> None:
        self._blocks.clear()
        self._len = 0

    def take(
        self, watermark: int | None, limit: int | None, max_rows: int | None
    ) -> tuple[Sequence[Element], int | None]:
        """The rows from the front with ts <= ``watermark`` and seq <=
        ``limit`` (None: no bound), and None; or, if they are more than
        ``max_rows``, the first ``max_rows`` of them and the rest of the
        last one's instant, and that instant (the watermark of a batch cut
        short). The row section's rules (:meth:`InputSection.take`), on
        whole blocks."""
        if not self._blocks:
            return [], None
        ready = self._count(watermark)
        if limit is not None:
            ready = min(ready, max(0, limit - self._blocks[0].first_seq + 1))
        cut_at: int | None = None
        if max_rows is not None and ready > max_rows:
            cut_at = int(self._at(max_rows - 1))
            taken = min(self._count(cut_at), ready)
            if taken == ready:
                cut_at = None
            ready = taken
        return self._pop(ready), cut_at

    def _at(self, index: int) -> np.int64:
        for block in self._blocks:
            if index < len(block):
                return block.ts[index]  # type: ignore[no-any-return]
            index -= len(block)
        raise IndexError(index)

    def _count(self, ts: int | None) -> int:
        """How many rows from the front have ts <= ``ts``."""
        if ts is None:
            return self._len
        count = 0
        for block in self._blocks:
            stamps = block.ts
            if stamps[-1] <= ts:
                count += len(block)
                continue
            return count + int(np.searchsorted(stamps, ts, side="right"))
        return count

    def _pop(self, count: int) -> Sequence[Element]:
        parts: list[RecordRows] = []
        blocks = self._blocks
        self._len -= count
        while count:
            block = blocks[0]
            if len(block) <= count:
                parts.append(blocks.popleft())
                count -= len(block)
            else:
                parts.append(block[:count])
                blocks[0] = block[count:]
                count = 0
        return joined(parts)

    def drop_from(self, seq: int) -> tuple[int, int | None]:
        """Forget the rows from ``seq`` on: how many, and the ts of the first."""
        dropped = 0
        first_ts: int | None = None
        blocks = self._blocks
        while blocks:
            block = blocks[-1]
            keep = seq - block.first_seq
            if keep >= len(block):
                break
            keep = max(keep, 0)
            first_ts = int(block.ts[keep])
            dropped += len(block) - keep
            if keep:
                blocks[-1] = block[:keep]
                break
            blocks.pop()
        self._len -= dropped
        return dropped, first_ts
