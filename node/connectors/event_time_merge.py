"""Rows of several broker partitions as one stream in event-time order,
the same in every incarnation of the reader.

The engine needs a source's rows in non-decreasing ``ts`` and numbered
``seq`` 1, 2, ... without gaps; a reader killed and started again must give
the rows its consumers may still need the seqs they had. Messages arrive
from the partitions (Kafka partitions; a NATS stream is one) in an order
that depends on timing, so the order of emission must not:

- Each partition has its own bounded disorder: a row is *late* (rejected)
  when its ts is below the partition's highest ts so far minus
  ``max_delay_ms``. That decision depends only on the partition's own
  message order, which the broker keeps.
- A partition's watermark is its highest ts minus ``max_delay_ms`` minus 1;
  the stream's is the lowest over partitions. Rows are held until the
  stream's watermark reaches them and are then emitted in the order of
  their *key* ``(ts, partition, position)``. A row that is not late is above
  every partition watermark it could be compared with, so the rows come
  out exactly in key order, whatever the interleaving of arrivals: the
  emitted stream is a prefix of the sorted non-late rows.

So a :class:`MergeCheckpoint` after ``seq`` needs only where to read each
partition again (the oldest row still held there, or the next unread
position), the partition's highest ts before that position, and the last
key emitted: rows read again at or before that key were emitted already.

A partition without messages holds the stream's watermark (and so its
rows) until it has some, as in Flink without idleness; a stop emits what is
held.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

NEVER = -(2**62)

Key = tuple[int, int, int]  # (ts, partition, position)


@dataclass(frozen=True)
class PartitionStart:
    position: int  # next position to read; a negative one is the broker's symbolic start
    seen: int = NEVER  # the partition's highest ts before ``position``


@dataclass(frozen=True)
class MergeCheckpoint:
    """Where a reader goes on so that its next row gets ``seq + 1``."""

    seq: int
    last_key: Key | None
    partitions: dict[int, PartitionStart]

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "last_key": list(self.last_key) if self.last_key is not None else None,
            "partitions": {str(p): [s.position, s.seen] for p, s in sorted(self.partitions.items())},
        }

    @classmethod
    def from_json(cls, data: Any) -> MergeCheckpoint:
        """Raises ValueError (or KeyError, TypeError) for anything else
        than what :meth:`to_json` wrote."""
        last = data["last_key"]
        if last is not None:
            a, b, c = (int(x) for x in last)
            last = (a, b, c)
        parts = {int(p): PartitionStart(int(v[0]), int(v[1])) for p, v in data["partitions"].items()}
        seq = int(data["seq"])
        if seq < 0:
            raise ValueError(f"negative seq {seq}")
        return cls(seq, last, parts)

    @classmethod
    def first(cls, positions: dict[int, int]) -> MergeCheckpoint:
        return cls(0, None, {p: PartitionStart(pos) for p, pos in positions.items()})


class EventTimeMerge:
    def __init__(self, start: MergeCheckpoint, max_delay_ms: int) -> None:
        self.delay = max_delay_ms
        self.last_key = start.last_key
        self._seen = {p: s.seen for p, s in start.partitions.items()}
        self._next = {p: s.position for p, s in start.partitions.items()}
        # Held rows as (key, values, the partition's highest ts before
        # it), unordered: a batch's ready rows are cut out and sorted at
        # once (C loops), cheaper than a heap operation per row.
        self._held: list[tuple[Key, tuple[Any, ...], int]] = []

    @property
    def partitions(self) -> Iterable[int]:
        return self._next.keys()

    @property
    def held(self) -> int:
        return len(self._held)

    def highest(self, partition: int) -> int:
        """The highest ts ``partition`` has had."""
        return self._seen[partition]

    def position(self, partition: int) -> int:
        """The next position to read in ``partition``."""
        return self._next[partition]

    def passed(self, partition: int, position: int) -> None:
        """A message that is no row (rejected before it came here) was read."""
        self._next[partition] = position + 1

    def push(self, partition: int, position: int, ts: int, values: tuple[Any, ...]) -> bool:
        """A row read at ``position``; False if it is late (rejected)."""
        seen = self._seen[partition]
        self._next[partition] = position + 1
        if ts < seen - self.delay:
            return False
        if ts > seen:
            self._seen[partition] = ts
        key = (ts, partition, position)
        if self.last_key is not None and key <= self.last_key:
            return True  # read again after a restart: emitted before
        self._held.append((key, values, seen))
        return True

    @property
    def watermark(self) -> int:
        """Every row still to come has a greater ts."""
        low = min(self._seen.values(), default=NEVER)
        return NEVER if low == NEVER else low - self.delay - 1

    def ready(self) -> list[tuple[Key, tuple[Any, ...]]]:
        """The held rows the watermark has passed, in key order."""
        return self._pop(self.watermark)

    def flush(self) -> list[tuple[Key, tuple[Any, ...]]]:
        """Every held row, in key order (the stream ends)."""
        return self._pop(2**63)

    def _pop(self, through: int) -> list[tuple[Key, tuple[Any, ...]]]:
        held = self._held
        ready = [item for item in held if item[0][0] <= through]
        if not ready:
            return []
        self._held = [item for item in held if item[0][0] > through] if len(ready) < len(held) else []
        ready.sort(key=_key)  # keys are unique: values are never compared
        self.last_key = ready[-1][0]
        return [(key, values) for key, values, _ in ready]

    def checkpoint(self, seq: int) -> MergeCheckpoint:
        """Where to go on after the rows emitted so far, the last being ``seq``."""
        oldest: dict[int, tuple[int, int]] = {}
        for (_, partition, position), _, seen in self._held:
            found = oldest.get(partition)
            if found is None or position < found[0]:
                oldest[partition] = (position, seen)
        parts = {}
        for p, next_position in self._next.items():
            position, seen = oldest.get(p, (next_position, self._seen[p]))
            parts[p] = PartitionStart(position, seen)
        return MergeCheckpoint(seq, self.last_key, parts)


def _key(item: tuple[Key, tuple[Any, ...], int]) -> Key:
    return item[0]
