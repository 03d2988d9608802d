"""Where tuples come from: pure, deterministic generators. The daemon paces
them against the wall clock; the tuples themselves never depend on it.

- :class:`SyntheticSource`: seeded pseudo-random tuples on a rate schedule
  (e.g. 100 tuples/s, then 1000 tuples/s from 10 s). Tuple i's timestamp is
  a function of i and the schedule, its values of the seed and i's block of
  :data:`BLOCK` tuples, so a re-run emits the same stream and a source
  started again can begin anywhere (:meth:`SyntheticSource.seek`).
- :class:`FileSource`: replay of a CSV or JSON Lines file with a ``ts``
  column (integer ms, non-decreasing); a relation's file has an ``op``
  column with ``+`` or ``-``.

Every value read is checked against its column's type (:func:`convert`):
an integer must fit the range that travels (``plan.INT_MIN..INT_MAX``), a
float must be finite, text must fit its ``char(n)``. Synthetic values are
in range by construction.
"""

from __future__ import annotations

import bisect
import csv
import functools
import itertools
import json
import math
import operator
import random
import string
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np

from semiactive.errors import UserError
from semiactive.node.connectors import csv_numeric
from semiactive.node.connectors.csv_numeric import NumericBlock
from semiactive.node.cql import plan
from semiactive.node.engine.columnar.batch import python_values
from semiactive.node.sections.record_rows import RecordLayout, RecordRows

# An input integer outside the range (plan.INT_MIN..INT_MAX) would either
# stop the sender or silently become NULL downstream.
INT_MIN, INT_MAX = plan.INT_MIN, plan.INT_MAX
# Event time stays clear of the engine's "before any time" and "forever"
# sentinels (+-2**62), so that every ts is a real instant.
TS_MIN = -(2**62) + 1
TS_MAX = 2**62 - 1


class SourceDataError(UserError, ValueError):
    """A row of an input file that does not match the stream's schema."""


def _shown(value: str) -> str:
    """A value for an error message, cut short if it is long."""
    return repr(value) if len(value) <= 40 else repr(value[:37] + "...")


def check_ts(ts: int, where: str) -> int:
    """``ts`` if it is an instant the cluster can carry, else a
    :class:`SourceDataError` at ``where``."""
    if not TS_MIN <= ts <= TS_MAX:
        raise SourceDataError(f"{where}: ts {ts} is out of range [{TS_MIN}, {TS_MAX}]")
    return ts


@dataclass(frozen=True)
class Phase:
    start_ms: int
    rate: float  # tuples per second


class RateSchedule:
    """Maps tuple index to timestamp: within a phase starting at T with rate
    r, the j-th tuple has ts = T + floor(j * 1000 / r). Exact arithmetic, so
    phase boundaries never drift."""

    @classmethod
    def of(cls, phases: Iterable[tuple[float, float]]) -> RateSchedule:
        """From ``(at_s, tuples_per_s)`` pairs, as a configuration gives them."""
        return cls([Phase(int(at_s * 1000), rate) for at_s, rate in phases])

    def __init__(self, phases: Sequence[Phase]) -> None:
        self.starts = [p.start_ms for p in phases]
        self.rates = [Fraction(p.rate).limit_denominator(10**6) for p in phases]
        # ts = start + floor(j * 1000 / (n/d)) = start + j * 1000 d // n: integers
        # only (a Fraction per tuple cost a generator 18% of its CPU).
        self._ms_num = [1000 * r.denominator for r in self.rates]
        self._ms_den = [r.numerator for r in self.rates]
        # Index of the first tuple of each phase.
        self.first_index: list[int] = []
        index = 0
        for k, rate in enumerate(self.rates):
            self.first_index.append(index)
            if k + 1 < len(self.rates):
                index += math.ceil((self.starts[k + 1] - self.starts[k]) * rate / 1000)

    def _phase_of_index(self, i: int) -> int:
        return bisect.bisect_right(self.first_index, i) - 1

    def ts(self, i: int) -> int:
        k = self._phase_of_index(i)
        return self.starts[k] + (i - self.first_index[k]) * self._ms_num[k] // self._ms_den[k]

    def ts_range(self, start: int, stop: int) -> list[int]:
        """``[ts(i) for i in range(start, stop)]``, a phase at a time."""
        out: list[int] = []
        while start < stop:
            k = self._phase_of_index(start)
            end = min(stop, self.first_index[k + 1]) if k + 1 < len(self.first_index) else stop
            first, num, den, at = self.first_index[k], self._ms_num[k], self._ms_den[k], self.starts[k]
            out.extend([at + x // den for x in range((start - first) * num, (end - first) * num, num)])
            start = end
        return out

    def count_until(self, ms: float) -> int:
        """How many tuples have ts <= ms."""
        if ms < 0:
            return 0
        x = math.floor(ms)
        k = bisect.bisect_right(self.starts, x) - 1
        n = self.first_index[k] + math.ceil((x - self.starts[k] + 1) * self.rates[k] / 1000)
        if k + 1 < len(self.first_index):
            n = min(n, self.first_index[k + 1])
        return n


# The synthetic generator draws each block of this many tuples from its own
# seed: a source started again at tuple i draws fewer than BLOCK tuples to get
# there (at most 0.6 s on the 2-core VM). The first block's seed is the source's, as before
# blocks existed, so that a short run's values stay those of earlier runs.
BLOCK = 65_536
# Fewer tuples than this are drawn by ``randrange`` and encoded: numpy's
# draws cost about 60 us a call whatever the count (the generator's state
# is read and set back), ``randrange`` and the codec 16 us for one tuple;
# a source at 1,000 tuples/s takes one every millisecond.
SMALL_TAKE = 32


class SyntheticSource:
    """Tuples for a schema: ``id`` counts from 0, other integers are uniform
    in [0, 1000), floats in [0, 1000), text random letters. The last char
    column (``pad``, added by the topology when ``tuple_bytes`` asks for it)
    is a fixed filler."""

    def __init__(self, schema: plan.Schema, schedule: RateSchedule, seed: int) -> None:
        self.schema = schema
        self.schedule = schedule
        self.seed = seed
        self.index = 0
        self._rng = random.Random(seed)
        self._columns = [self._column(c) for c in schema.columns]
        self._draws = [draw for kind, draw in self._columns if kind == "drawn"]
        self._in_numpy: bool | None = None  # take_records can draw every column

    def seek(self, index: int) -> None:
        """Go on at tuple ``index`` (0-based) as if every tuple before it had
        been taken."""
        block = index // BLOCK
        self._reseed(block)
        self.index = block * BLOCK
        if index > self.index:
            self.take(index - self.index)

    def _column(self, column: plan.Column) -> tuple[str, Any]:
        """How a column's values are made: ``("id", None)`` the tuple's
        index, ``("filler", text)`` a constant, ``("drawn", draw)`` a call
        of ``draw()`` per tuple."""
        rng = self._rng
        name = column.type.name
        if column.name == "id" and name is plan.TypeName.INTEGER:
            return "id", None
        if column.name == "pad" and name is plan.TypeName.CHAR:
            return "filler", ("semiactive" * (column.type.length // 10 + 1))[: column.type.length]
        if name is plan.TypeName.INTEGER:
            return "drawn", functools.partial(rng.randrange, 1000)
        if name is plan.TypeName.FLOAT:
            return "drawn", lambda: round(rng.random() * 1000, 3)
        if name is plan.TypeName.BYTE:
            return "drawn", functools.partial(rng.choice, string.ascii_lowercase)
        length = column.type.length
        return "drawn", lambda: "".join(rng.choices(LETTERS, k=length))

    def take_records(self, count: int, layout: RecordLayout) -> RecordRows | None:
        """:meth:`take` as a block of records (seqs from the first tuple's),
        the same tuples drawn with no Python object per value; None when a
        column draws something other than integers and text (floats)."""
        if not self._draws_in_numpy():
            return None
        if count < SMALL_TAKE:
            return layout.of(self.take(count))
        first = self.index
        records = np.empty(count, dtype=layout.dtype)
        end = self.index + count
        while self.index < end:
            if self.index % BLOCK == 0:
                self._reseed(self.index // BLOCK)
            upto = min(end, (self.index // BLOCK + 1) * BLOCK)
            self._fill(records[self.index - first : upto - first], self.index, upto)
            self.index = upto
        return RecordRows(records, first + 1, layout)

    def _draws_in_numpy(self) -> bool:
        """Every drawn column is an integer (``randrange(1000)``) or text
        (``choices`` of letters), and this Python draws them as
        :func:`draws_block` emulates (checked once, against the draws
        themselves, the generator set back after)."""
        if self._in_numpy is None:
            lengths = self._drawn_lengths()
            self._in_numpy = lengths is not None
            if lengths is not None and lengths:
                state = self._rng.getstate()
                expected = [[draw() for draw in self._draws] for _ in range(64)]
                self._rng.setstate(state)
                probe = random.Random()
                probe.setstate(state)
                got = [python_values(c) for c in draws_block(probe, lengths, 64)]
                self._in_numpy = got == [list(column) for column in zip(*expected, strict=True)]
        return self._in_numpy

    def _drawn_lengths(self) -> list[int] | None:
        """Per drawn column, 0 for an integer and L for text of L letters;
        None if a column draws anything else."""
        lengths = []
        for column, (kind, _) in zip(self.schema.columns, self._columns, strict=True):
            if kind != "drawn":
                continue
            if column.type.name is plan.TypeName.INTEGER:
                lengths.append(0)
            elif column.type.name is plan.TypeName.CHAR:
                lengths.append(column.type.length)
            else:
                return None
        return lengths

    def _fill(self, out: np.ndarray[Any, Any], start: int, stop: int) -> None:
        """Tuples ``start..stop-1`` of one block into ``out``'s fields, the
        values in :meth:`_rows`'s order of draws (tuple by tuple)."""
        lengths = self._drawn_lengths()
        assert lengths is not None
        drawn = iter(draws_block(self._rng, lengths, stop - start))
        out["ts"] = self.schedule.ts_range(start, stop)
        for i, (kind, value) in enumerate(self._columns):
            if kind == "id":
                out[f"v{i}"] = np.arange(start, stop, dtype=np.int64)
            elif kind == "filler":
                out[f"v{i}"] = value.encode()
            else:
                out[f"v{i}"] = next(drawn)

    def _reseed(self, block: int) -> None:
        self._rng.seed(self.seed if block == 0 else f"{self.seed}:{block}")

    def next_ts(self) -> int:
        return self.schedule.ts(self.index)

    def take(self, count: int) -> list[tuple[Any, ...]]:
        """The next ``count`` tuples as elements ``(ts, seq, 1, values...)``."""
        out: list[tuple[Any, ...]] = []
        end = self.index + count
        while self.index < end:
            if self.index % BLOCK == 0:
                self._reseed(self.index // BLOCK)
            upto = min(end, (self.index // BLOCK + 1) * BLOCK)
            out.extend(self._rows(self.index, upto))
            self.index = upto
        return out

    def _rows(self, start: int, stop: int) -> list[tuple[Any, ...]]:
        """Tuples ``start..stop-1`` of one block, built a column at a time.
        The random values are drawn tuple by tuple, column by column within
        a tuple, as a generator making one tuple at a time would: the
        stream does not depend on how it is taken."""
        n = stop - start
        draws = self._draws
        width = len(draws)
        flat = [draw() for _ in range(n) for draw in draws] if width else []
        drawn = iter([flat[c::width] for c in range(width)])
        columns: list[Iterable[Any]] = []
        for kind, value in self._columns:
            if kind == "id":
                columns.append(range(start, stop))
            elif kind == "filler":
                columns.append(itertools.repeat(value, n))
            else:
                columns.append(next(drawn))
        ts = self.schedule.ts_range(start, stop)
        return list(zip(ts, range(start + 1, stop + 1), itertools.repeat(1, n), *columns, strict=True))

    def due(self, elapsed_ms: float) -> int:
        """How many tuples are due by ``elapsed_ms`` and not yet taken."""
        return max(0, self.schedule.count_until(elapsed_ms) - self.index)


def randrange_block(rng: random.Random, bound: int, count: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """``[rng.randrange(bound) for _ in range(count)]`` as numpy computes
    it, leaving ``rng`` where those calls leave it. CPython draws each
    value as ``getrandbits(k)`` (the top k bits of one 32-bit word of the
    Mersenne Twister, k = bound's bit length) until one is below
    ``bound``; ``getrandbits(32 * m)`` gives m words in that order. So the
    accepted words, in order, are the values; the generator is then set
    back and advanced by exactly the words they took."""
    if count == 0:
        return np.empty(0, dtype=np.int64)
    k = bound.bit_length()
    state = rng.getstate()
    parts: list[np.ndarray[Any, np.dtype[np.int64]]] = []
    words = 0  # words drawn before the current chunk
    while True:
        need = count - sum(len(p) for p in parts)
        # bound / 2**k of the words are accepted (more than half): a few
        # more than need / that share are almost always enough.
        more = need * (1 << k) // bound + need // 16 + 64
        chunk = np.frombuffer(rng.getrandbits(32 * more).to_bytes(4 * more, "little"), dtype="<u4")
        values = (chunk >> np.uint32(32 - k)).astype(np.int64)
        positions = np.flatnonzero(values < bound)
        if len(positions) >= need:
            parts.append(values[positions[:need]])
            used = words + int(positions[need - 1]) + 1
            break
        parts.append(values[positions])
        words += more
    rng.setstate(state)
    rng.getrandbits(32 * used)
    return np.concatenate(parts)


LETTERS = string.ascii_lowercase


def draws_block(rng: random.Random, lengths: Sequence[int], count: int) -> list[np.ndarray[Any, Any]]:
    """The draws of ``count`` tuples, column by column within a tuple, as
    :class:`SyntheticSource` makes them: ``randrange(1000)`` where
    ``lengths[c]`` is 0 (int64), ``"".join(choices(LETTERS, k=L))`` where
    it is L (``S{L}`` bytes); ``rng`` left where those calls leave it.
    ``choices`` takes a letter per ``random()``, two words of the Mersenne
    Twister each (53 bits: the top 27 of the first, 26 of the second); an
    integer takes words until one is accepted (:func:`randrange_block`). So
    each draw starts where the one before ended, and only the integers'
    rejected words move the starts (:func:`_draw_starts`)."""
    width = len(lengths)
    if not any(lengths):
        drawn = randrange_block(rng, 1000, count * width).reshape(count, width)
        return [drawn[:, c] for c in range(width)]
    per_tuple = sum(2 * length if length else 1 for length in lengths)
    state = rng.getstate()
    more = count * per_tuple + count * per_tuple // 16 + 64
    while True:
        words = np.frombuffer(rng.getrandbits(32 * more).to_bytes(4 * more, "little"), dtype="<u4")
        found = _draw_starts(words, lengths, count)
        if found is not None:
            break
        rng.setstate(state)
        more *= 2
    starts, used = found
    rng.setstate(state)
    rng.getrandbits(32 * used)
    out: list[np.ndarray[Any, Any]] = []
    for c, length in enumerate(lengths):
        at = starts[:, c]
        if not length:
            out.append((words[at] >> np.uint32(22)).astype(np.int64))
            continue
        first = at[:, None] + 2 * np.arange(length, dtype=np.int64)
        high = (words[first] >> np.uint32(5)).astype(np.float64)
        low = (words[first + 1] >> np.uint32(6)).astype(np.float64)
        unit = (high * 67108864.0 + low) * (1.0 / 9007199254740992.0)
        letters = (np.floor(unit * float(len(LETTERS))).astype(np.uint8) + ord("a")).astype(np.uint8)
        out.append(np.ascontiguousarray(letters).view(f"S{length}").reshape(count))
    return out


def _draw_starts(
    words: np.ndarray[Any, Any], lengths: Sequence[int], count: int
) -> tuple[np.ndarray[Any, np.dtype[np.int64]], int] | None:
    """Where each draw starts in ``words`` (count x columns), and the words
    used; None if ``words`` runs out.

    Without rejections tuple t's draw c starts at its slot, t * stride +
    offset(c). An integer draw skips the rejected words it meets (about 2%
    of them), which moves every later draw on by one; a rejected word is
    skipped if, less the skips before it, it falls on an integer's slot
    (one Python step per rejected word, not per draw). A draw then starts
    at its slot plus the skips made at slots up to its own."""
    sizes = [2 * length if length else 1 for length in lengths]
    stride = sum(sizes)
    offsets = np.cumsum([0, *sizes[:-1]]).astype(np.int64)
    integer_offsets = {int(o) for o, length in zip(offsets, lengths, strict=True) if not length}
    limit = count * stride
    skipped: list[int] = []  # the slot of each skip
    if integer_offsets:
        for word in np.flatnonzero((words >> np.uint32(22)) >= 1000).tolist():
            slot = word - len(skipped)
            if slot >= limit:
                break
            if slot % stride in integer_offsets:
                skipped.append(slot)
    used = limit + len(skipped)
    if used > len(words):
        return None
    slots = np.arange(count, dtype=np.int64)[:, None] * stride + offsets[None, :]
    moved = np.searchsorted(np.array(skipped, dtype=np.int64), slots, side="right")
    return slots + moved, used


def convert(value: str | None, column: plan.Column, where: str) -> Any:
    """An input value of ``column`` parsed and checked against its type;
    :class:`SourceDataError` at ``where`` (file:line, row) if it does not fit."""
    if value is None:
        raise SourceDataError(f"{where}: column {column.name}: no value (NULL is not an input value)")
    name = column.type.name
    if name is plan.TypeName.INTEGER:
        return _integer(value, column, where)
    if name is plan.TypeName.FLOAT:
        return _float(value, column, where)
    text = str(value)
    if name is plan.TypeName.BYTE:
        # One byte on the wire (latin-1): exactly one character.
        if len(text) != 1 or ord(text) > 0xFF:
            raise SourceDataError(f"{where}: column {column.name}: {_shown(text)} is not one byte")
        return text
    if len(text.encode()) > column.type.length:
        raise SourceDataError(f"{where}: column {column.name}: {_shown(text)} is longer than {column.type}")
    return text


def _integer(value: str, column: plan.Column, where: str) -> int:
    try:
        integer = int(value)
    except ValueError:
        raise SourceDataError(f"{where}: column {column.name}: {_shown(value)} is not integer") from None
    if not INT_MIN <= integer <= INT_MAX:
        raise SourceDataError(
            f"{where}: column {column.name}: {_shown(value)} is out of the integer range "
            f"[{INT_MIN}, {INT_MAX}] (64-bit; -2^63 is reserved for NULL)"
        )
    return integer


def _float(value: str, column: plan.Column, where: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise SourceDataError(f"{where}: column {column.name}: {_shown(value)} is not float")
    return number


def read_rows(path: str | Path, schema: plan.Schema, kind: plan.Kind) -> Iterator[tuple[Any, ...]]:
    """Elements ``(ts, seq, sign, values...)`` from a CSV (header row) or
    JSON Lines file. Raises :class:`SourceDataError` naming file and line."""
    for block in read_blocks(path, schema, kind):
        yield from block if isinstance(block, list) else block.elements()


def read_blocks(
    path: str | Path, schema: plan.Schema, kind: plan.Kind
) -> Iterator[list[tuple[Any, ...]] | NumericBlock]:
    """:func:`read_rows`'s elements a block at a time, as they are read: a
    CSV file of numbers in numpy's arrays (:mod:`.csv_numeric`), anything
    else in lists of elements. A caller that works on columns takes the
    arrays as they are."""
    path = Path(path)
    relation = kind is plan.Kind.RELATION
    try:
        handle = path.open(newline="")
    except OSError as exc:
        raise SourceDataError(f"{path}: cannot open: {exc.strerror}") from None
    with handle:
        if path.suffix in (".jsonl", ".json", ".ndjson"):
            records = (
                (n, _json_line(path, n, line)) for n, line in enumerate(handle, start=1) if line.strip()
            )
            yield from _in_blocks(_checked(path, records, schema, relation, 0))
            return
        yield from _csv_blocks(path, handle, schema, relation)


def _csv_blocks(
    path: Path, handle: IO[str], schema: plan.Schema, relation: bool
) -> Iterator[list[tuple[Any, ...]] | NumericBlock]:
    """A CSV file's elements a block at a time: numpy's blocks
    (:mod:`.csv_numeric`), and lists of elements the csv module's way
    (:func:`_csv_rows`) for a block numpy does not take; from a block with
    a quote on, to the end of the file."""
    reader = csv_reader(handle)
    header = reader.fieldnames or []
    names = [c.name for c in schema.columns]
    missing = [c for c in ["ts", *names, *(["op"] if relation else [])] if c not in header]
    if missing:
        raise SourceDataError(f"{path}:1: missing column(s) {', '.join(missing)} in the header")
    shape = None if relation else csv_numeric.layout(header, schema)
    seq, last_ts, line = 1, None, reader.line_num
    if shape is None:
        yield from _csv_rows(path, reader.reader, header, schema, relation, seq, last_ts, 0)
        return
    while lines := handle.readlines(NUMERIC_BLOCK_BYTES):
        block = csv_numeric.parse(lines, shape, seq, last_ts, (TS_MIN, TS_MAX), (INT_MIN, INT_MAX))
        if block is not None:
            yield block
            seq += len(block)
            last_ts = int(block.ts[-1])
            line += len(lines)
            continue
        # DictReader's dialect, its line numbers carried on.
        if any('"' in text for text in lines):
            # A quoted field may hold a line break: the rest of the file the csv module's way.
            raw = csv.reader(itertools.chain(lines, handle), skipinitialspace=True)
            yield from _csv_rows(path, raw, header, schema, relation, seq, last_ts, line)
            return
        # Without quotes a line is a row: these lines the csv module's way, then numpy's again.
        raw = csv.reader(lines, skipinitialspace=True)
        for rows in _csv_rows(path, raw, header, schema, relation, seq, last_ts, line):
            yield rows
            seq += len(rows)
            last_ts = rows[-1][0]
        line += len(lines)


def _checked(
    path: Path,
    records: Iterable[tuple[int, dict[str, Any]]],
    schema: plan.Schema,
    relation: bool,
    header_width: int,
    first_seq: int = 1,
    last_ts: int | None = None,
) -> Iterator[tuple[Any, ...]]:
    """Records (line, {column: text}) checked and converted one at a time:
    the reference, and where every error is found and located."""
    for seq, (line, record) in enumerate(records, start=first_seq):
        where = f"{path}:{line}"
        if EXTRA_FIELDS in record:
            raise SourceDataError(f"{where}: more fields than the header has ({header_width})")
        try:
            ts = int(record["ts"])
        except (KeyError, TypeError, ValueError):
            raise SourceDataError(f"{where}: ts must be an integer (ms)") from None
        check_ts(ts, where)
        if last_ts is not None and ts < last_ts:
            raise SourceDataError(f"{where}: ts {ts} goes back in time (previous {last_ts})")
        last_ts = ts
        sign = 1
        if relation:
            op = record.get("op")
            op = op.strip() if isinstance(op, str) else op
            if op not in ("+", "-"):
                raise SourceDataError(f"{where}: op must be + or -")
            sign = 1 if op == "+" else -1
        try:
            values = [convert(record[c.name], c, where) for c in schema.columns]
        except KeyError as exc:
            raise SourceDataError(f"{where}: missing column {exc.args[0]}") from None
        yield (ts, seq, sign, *values)


class _CsvRows(Protocol):
    """A csv.reader: its rows and the line it has read up to."""

    @property
    def line_num(self) -> int: ...
    def __iter__(self) -> Iterator[list[str]]: ...


# Lines of a CSV file converted together, a column at a time (the csv
# module's way), and the bytes of lines numpy parses together.
CSV_BLOCK = 4096
NUMERIC_BLOCK_BYTES = 1 << 20


def _csv_rows(
    path: Path,
    raw: _CsvRows,
    header: Sequence[str],
    schema: plan.Schema,
    relation: bool,
    seq: int,
    last_ts: int | None,
    line_offset: int,
) -> Iterator[list[tuple[Any, ...]]]:
    """A CSV file's rows (``raw``: a csv.reader past the header and
    ``line_offset`` lines), a block of lines at a time: the csv module's
    rows are converted a column at a time by :func:`_csv_block`; a block it
    cannot take whole (a bad value, a short or long line) goes through
    :func:`_checked` row by row, which yields the block's rows before the
    bad one and raises the located error."""
    # A name given twice is the last such column, as in DictReader's dicts.
    position = {name: i for i, name in enumerate(header)}
    while True:
        lines: list[int] = []
        rows: list[list[str]] = []
        for row in raw:
            if row:  # DictReader skips empty lines
                lines.append(line_offset + raw.line_num)
                rows.append(row)
                if len(rows) == CSV_BLOCK:
                    break
        if not rows:
            return
        taken = _csv_block(rows, len(header), position, schema, relation, seq, last_ts)
        if taken is None:
            records = [(line, _as_record(header, row)) for line, row in zip(lines, rows, strict=True)]
            # One list (CSV_BLOCK rows at most); on a bad row, the rows before it, then the error.
            for block in _in_blocks(_checked(path, records, schema, relation, len(header), seq, last_ts)):
                yield block
        else:
            block = taken
            yield block
        seq += len(block)
        last_ts = block[-1][0]


def _in_blocks(rows: Iterator[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    """Rows in lists of :data:`CSV_BLOCK`; on a bad row, the rows before
    it are yielded before the error is raised, as row by row."""
    block: list[tuple[Any, ...]] = []
    try:
        for row in rows:
            block.append(row)
            if len(block) == CSV_BLOCK:
                yield block
                block = []
    except SourceDataError:
        if block:
            yield block
        raise
    if block:
        yield block


def _as_record(header: Sequence[str], row: list[str]) -> dict[str, Any]:
    """A row as DictReader gives it: missing fields None, extra ones listed
    under :data:`EXTRA_FIELDS`."""
    record: dict[str, Any] = dict(zip(header, row, strict=False))
    if len(row) > len(header):
        record[EXTRA_FIELDS] = row[len(header) :]
    for name in header[len(row) :]:
        record[name] = None
    return record


def _csv_block(
    rows: list[list[str]],
    width: int,
    position: dict[str, int],
    schema: plan.Schema,
    relation: bool,
    first_seq: int,
    last_ts: int | None,
) -> list[tuple[Any, ...]] | None:
    """The block's elements, or None if any row is not taken as it is (the
    row path then says which and why). The conversions are the row path's
    (``int``, ``float``, the same bounds), applied by ``map`` to whole
    columns."""
    if any(len(row) != width for row in rows):
        return None
    columns = list(zip(*rows, strict=True))
    try:
        ts = list(map(int, columns[position["ts"]]))
        values: list[list[Any]] = []
        for column in schema.columns:
            texts = columns[position[column.name]]
            name = column.type.name
            if name is plan.TypeName.INTEGER:
                integers = list(map(int, texts))
                if min(integers) < INT_MIN or max(integers) > INT_MAX:
                    return None
                values.append(integers)
            elif name is plan.TypeName.FLOAT:
                floats = list(map(float, texts))
                if not all(map(math.isfinite, floats)):
                    return None
                values.append(floats)
            elif name is plan.TypeName.BYTE:
                if any(len(t) != 1 or ord(t) > 0xFF for t in texts):
                    return None
                values.append(list(texts))
            else:
                if max(map(len, map(str.encode, texts))) > column.type.length:
                    return None
                values.append(list(texts))
    except ValueError:
        return None
    if min(ts) < TS_MIN or max(ts) > TS_MAX or (last_ts is not None and ts[0] < last_ts):
        return None
    if not all(map(operator.le, ts, itertools.islice(ts, 1, None))):
        return None
    signs: Iterable[int] = itertools.repeat(1, len(rows))
    if relation:
        ops = [op.strip() for op in columns[position["op"]]]
        if not set(ops) <= {"+", "-"}:
            return None
        signs = [1 if op == "+" else -1 for op in ops]
    seqs = range(first_seq, first_seq + len(rows))
    return list(zip(ts, seqs, signs, *values, strict=True))


EXTRA_FIELDS = "\0extra"  # DictReader's key for the fields of a row longer than the header


def csv_reader(handle: IO[str]) -> csv.DictReader[str]:
    """Rows of a CSV file with a header, as ``ts, name, price`` is often
    written: spaces around a header's names and after a comma are not part
    of a name or value (quote a value to keep its leading spaces); numbers
    may also have trailing spaces. Fields past the header's are under
    ``EXTRA_FIELDS``."""
    reader = csv.DictReader(handle, restkey=EXTRA_FIELDS, skipinitialspace=True)
    if reader.fieldnames is not None:
        reader.fieldnames = [name.strip() for name in reader.fieldnames]
    return reader


def _json_line(path: Path, n: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise SourceDataError(f"{path}:{n}: not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise SourceDataError(f"{path}:{n}: expected a JSON object")
    # Values as the text convert() parses, so that 1.5 or true is no integer
    # and null stays missing; strings as they are.
    return {k: v if v is None or isinstance(v, str) else json.dumps(v) for k, v in value.items()}
