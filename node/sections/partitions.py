"""Which operator partition a row belongs to (partitioned stages), pure.

A partitioned stage runs as ``count`` partitions, each on its own node. A
producer routes each row of a partitioned input to one partition: by a hash
of the key columns' values, or round-robin by the row's seq in the
producer's log when the stage has no keys for that input. Every process
(producer, partition, the reference computation) must agree on the answer,
so the hash is our own arithmetic on the values, never Python's ``hash()``
(randomised per process for text). Numbers that compare equal hash equal
(``3`` and ``3.0``), so an equi-join of an integer and a float column can be
co-partitioned.

Rows of a partitioned input that are not a partition's own still reach it,
as timestamps only (elided, ``node/sections/connections.py``): its seqs, positions,
acknowledgements and cuts stay those of the whole stream, so the HA
protocol needs no change, and a partition that owns none of many rows still
frees its producer's log.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from semiactive.node.engine.elements import VALUES, Element

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix(x: int) -> int:
    """splitmix64's finaliser: every input bit moves every output bit."""
    x &= _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def value_hash(value: object) -> int:
    """A 64-bit hash of one column value, the same in every process."""
    if isinstance(value, bool):
        return _mix(int(value))
    if isinstance(value, int):
        return _mix(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return _mix(int(value))
        return _mix(struct.unpack("<q", struct.pack("<d", value))[0] ^ _GOLDEN)
    if isinstance(value, str):
        return _mix(zlib.crc32(value.encode()) ^ (len(value) << 32))
    if isinstance(value, bytes | bytearray):
        return _mix(zlib.crc32(value) ^ (len(value) << 32))
    if value is None:
        return _mix(_GOLDEN)
    raise TypeError(f"cannot partition on a {type(value).__name__} value")


def key_hash(values: Sequence[object]) -> int:
    h = 0
    for value in values:
        h = _mix(h * _GOLDEN + value_hash(value))
    return h


@dataclass(frozen=True)
class InputRouting:
    """How one input stream of a partitioned stage is split: by the values
    at ``key_positions`` (element indexes, VALUES-based), round-robin by seq
    when ``key_positions`` is empty, or not at all (``broadcast``: every
    partition receives every row, e.g. a dimension table joined to a
    partitioned stream). With ``modulo`` the one key column's integer value
    modulo the partition count chooses (a NULL key goes by its hash)."""

    key_positions: tuple[int, ...] = ()
    broadcast: bool = False
    modulo: bool = False

    def partition(self, row: Element, count: int) -> int:
        """The partition of ``row`` (an element ``(ts, seq, sign, values...)``)."""
        if not self.key_positions:
            return (int(row[1]) - 1) % count
        if len(self.key_positions) == 1:
            value = row[self.key_positions[0]]
            if self.modulo and type(value) is int:
                return value % count
            return value_hash(value) % count
        return key_hash([row[p] for p in self.key_positions]) % count

    def owned(
        self, rows: Sequence[Element], index: int, count: int, first_seq: int | None = None
    ) -> list[bool]:
        """Per row, whether partition ``index`` of ``count`` owns it. Rows
        are numbered from ``first_seq`` when given (an output log's rows
        carry their lineage where a received row carries its seq)."""
        if self.broadcast or count == 1:
            return [True] * len(rows)
        if not self.key_positions:
            if first_seq is not None:
                return [(first_seq - 1 + i) % count == index for i in range(len(rows))]
            return [(int(r[1]) - 1) % count == index for r in rows]
        if len(self.key_positions) == 1 and not self.modulo:
            p = self.key_positions[0]
            return [value_hash(r[p]) % count == index for r in rows]
        return [self.partition(r, count) == index for r in rows]


@dataclass(frozen=True)
class PartitionSpec:
    """One partition of a partitioned stage: its ``index`` of ``count``, and
    per input stream how rows are routed (a stream absent is broadcast)."""

    index: int
    count: int
    routing: dict[str, InputRouting]

    def routing_of(self, stream: str) -> InputRouting:
        return self.routing.get(stream, InputRouting(broadcast=True))

    def owned(self, stream: str, rows: Sequence[Element]) -> list[bool]:
        return self.routing_of(stream).owned(rows, self.index, self.count)


def key_positions(columns: Sequence[str], names: Sequence[str]) -> tuple[int, ...]:
    """Element indexes of ``columns`` in a schema with column ``names``."""
    return tuple(VALUES + list(names).index(c) for c in columns)


def owned_bitmap(owned: Sequence[bool]) -> bytes:
    """``Batch.owned``: bit i (LSB first) set when row i is the partition's."""
    bits = 0
    for i, mine in enumerate(owned):
        if mine:
            bits |= 1 << i
    return bits.to_bytes((len(owned) + 7) // 8, "little")


def owned_flags(bitmap: bytes, count: int) -> list[bool]:
    """The inverse of :func:`owned_bitmap`; ValueError if it does not hold
    exactly ``count`` rows."""
    if len(bitmap) != (count + 7) // 8:
        raise ValueError(f"an owned bitmap of {len(bitmap)} bytes for {count} rows")
    bits = int.from_bytes(bitmap, "little")
    if bits >> count:
        raise ValueError(f"owned bits set beyond the batch's {count} rows")
    return [bool(bits >> i & 1) for i in range(count)]
