"""Connection management (the placement paper, 3.2.2): a stage running ASSIGN wants a
candidate source's rows only while some row of R names that source.

Exactness comes from the engine: ASSIGN meets a candidate's changes at an
instant with R as it was, then R's changes with the candidates as they now
are (:mod:`semiactive.node.engine.operators.assign`). With a ``[Now]`` window on the
candidates, a candidate's row at instant t therefore matters only if some
row naming it is in R before t's changes or enters R at t. So:

* when a row of R naming candidate c *arrives* at the input section (before
  the engine can process its instant t0: R was complete only below t0), c
  is wanted whole from t0 on (:meth:`ConnectionTable.named`);
* when the engine has processed up to T and no row of R naming c is in any
  ASSIGN's state nor arrived past T, c is idle from T + 1
  (:meth:`ConnectionTable.idle`): its producer then sends those rows as
  timestamps only ("elided"), which keeps every seq, position and watermark
  the same on every replica while the bytes on the link all but vanish.

An elided row outside the consumer's idle intervals (a row in flight when c
became wanted again) is never handed on: the input drops it and the rows
after it, and the producer sends them again whole
(:meth:`ConnectionTable.unwanted_elision`). An elided row reaches the
engine with placeholder values that fit no declared type, so that a row
elided in error would be missing from the result (and found by
verification), never wrong.

Only candidates read by ASSIGNs alone, through ``[Now]``, and R read
directly from an input edge (through a window and the filters the query
analyser puts before the ASSIGN: a row they drop connects nothing), are
managed; the others stay connected. The
table is pure: the replica role turns its answers into Interest messages
and rewinds (node/service/roles/connection_manager.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, pairwise

from semiactive.node.engine import expressions
from semiactive.node.engine.elements import Element
from semiactive.node.engine.operators.assign import AssignOp
from semiactive.node.engine.operators.base import Operator
from semiactive.node.engine.operators.relational import SelectOp
from semiactive.node.engine.operators.streaming import ScanOp
from semiactive.node.engine.operators.windows import RangeWindowOp

NEVER = -(2**62)
FOREVER = 2**62


class _Elided:
    """The value of every column of an elided row."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ELIDED"


ELIDED = _Elided()


def elided_stamps(rows: Sequence[Element]) -> list[int]:
    """How elided rows travel: the first row's ts, then each row's
    difference from the one before (a byte or two a row as varints)."""
    stamps = [int(r[0]) for r in rows]
    return stamps[:1] + [b - a for a, b in pairwise(stamps)]


def elided_rows(first_seq: int, deltas: Sequence[int], width: int) -> list[Element]:
    """Elements for rows sent as :func:`elided_stamps` (streams: sign +1)."""
    values = (ELIDED,) * width
    return [(ts, first_seq + i, 1, *values) for i, ts in enumerate(accumulate(deltas))]


def is_elided(row: Element) -> bool:
    return len(row) > 3 and row[3] is ELIDED


@dataclass
class Candidate:
    """One managed candidate input edge."""

    edge: str
    stream: str
    idle_from: int | None = None  # None: wanted whole (connected)
    # Instants whose rows may come elided: [start, end) per idle period.
    idle_periods: list[tuple[int, int]] = field(default_factory=list)
    last_named: int = NEVER  # latest instant of an arrived row of R naming it
    connects: int = 0
    disconnects: int = 0

    @property
    def connected(self) -> bool:
        return self.idle_from is None

    def may_elide(self, ts: int) -> bool:
        return any(start <= ts < end for start, end in self.idle_periods)


@dataclass(frozen=True)
class _Use:
    """Candidate ``k`` of one ASSIGN operator."""

    op: AssignOp
    k: int


def _consumers(operators: Sequence[Operator]) -> dict[int, list[Operator]]:
    users: dict[int, list[Operator]] = {}
    for op in operators:
        for child in op.children:
            users.setdefault(id(child), []).append(op)
    return users


Keep = Callable[[Element], bool] | None  # the rows of R an ASSIGN keeps (None: all)


@dataclass(frozen=True)
class _Selector:
    """Which column of R's rows names a source, for the rows that pass."""

    column: int
    keep: Keep


def managed_inputs(
    operators: Sequence[Operator],
) -> tuple[dict[str, list[_Selector]], dict[str, list[_Use]]]:
    """From a physical plan: per input stream of R, the columns naming
    candidates (and the filter the query analyser put before the ASSIGN);
    per managed candidate stream, the ASSIGNs reading it."""
    users = _consumers(operators)
    selectors: dict[str, list[_Selector]] = {}
    candidates: dict[str, list[_Use]] = {}
    refused: set[str] = set()
    for op in operators:
        if not isinstance(op, AssignOp):
            continue
        r_scan, keep = _scan_below(op.children[0])
        if r_scan is None:
            continue  # R is computed in the stage: its rows are not seen arriving
        names = list(op.position)
        for k, child in enumerate(op.children[1:]):
            scan = child.children[0] if isinstance(child, RangeWindowOp) and child.children else None
            ok = (
                isinstance(child, RangeWindowOp)
                and child.range_ms == 0
                and isinstance(scan, ScanOp)
                and scan.name == names[k]
                and all(isinstance(u, AssignOp) for u in users.get(id(child), []))
                and users.get(id(scan), []) == [child]
            )
            if not ok:
                refused.add(names[k])
                continue
            candidates.setdefault(names[k], []).append(_Use(op, k))
        selectors.setdefault(r_scan.name, []).append(_Selector(op.selector, keep))
    for name in refused:
        candidates.pop(name, None)
    # A stream that is R of one ASSIGN must be read whole.
    for name in selectors:
        candidates.pop(name, None)
    return selectors, candidates


def _scan_below(op: Operator) -> tuple[ScanOp | None, Keep]:
    """The input R is read from (directly, or through one window) and the
    filters between them (the query analyser's, before the ASSIGN)."""
    conditions = []
    while isinstance(op, SelectOp) and len(op.children) == 1:
        conditions.append(op.condition)
        op = op.children[0]
    keep: Keep = None
    if conditions:
        keep = expressions.build(f"lambda e: {' and '.join(f'({c})' for c in conditions)}")
    if isinstance(op, ScanOp):
        return op, keep
    if len(op.children) == 1 and isinstance(op.children[0], ScanOp):
        return op.children[0], keep
    return None, None


def _kept(keep: Keep, row: Element) -> bool:
    if keep is None:
        return True
    try:
        return bool(keep(row))
    except (ArithmeticError, ValueError, TypeError):
        return True  # the engine will say what is wrong; connecting is never wrong


class ConnectionTable:
    """The connection state of a stage's managed candidate edges.

    ``edges``: input stream name -> input edge id. The plan is read from
    ``operators`` again by :meth:`rebind` whenever the engine is rebuilt (a
    resync)."""

    def __init__(self, operators: Sequence[Operator], edges: dict[str, str]) -> None:
        self.edges = edges
        selectors, uses = managed_inputs(operators)
        self.candidates = {edges[name]: Candidate(edges[name], name) for name in uses if name in edges}
        self._by_stream = {c.stream: c for c in self.candidates.values()}
        self._selectors = {edges[name]: cols for name, cols in selectors.items() if name in edges}
        self._uses = uses

    def __bool__(self) -> bool:
        return bool(self.candidates)

    def rebind(self, operators: Sequence[Operator]) -> None:
        """The engine was rebuilt: read its ASSIGNs again (same plan)."""
        _, self._uses = managed_inputs(operators)

    def idle_from(self, edge: str) -> int | None:
        candidate = self.candidates.get(edge)
        return None if candidate is None else candidate.idle_from

    def manages(self, edge: str) -> bool:
        return edge in self.candidates

    # -- decisions ----------------------------------------------------------------------

    def named(self, edge: str, rows: Iterable[Element]) -> list[Candidate]:
        """Rows of R arrived on ``edge``: the candidates they make wanted
        again (connect now, whole from the row's instant on)."""
        selectors = self._selectors.get(edge)
        if not selectors:
            return []
        wanted: list[Candidate] = []
        by_stream = self._by_stream
        for row in rows:
            if row[2] <= 0:
                continue
            for selector in selectors:
                candidate = by_stream.get(row[3 + selector.column])
                if candidate is not None and not _kept(selector.keep, row):
                    continue
                if candidate is None:
                    continue
                if row[0] > candidate.last_named:
                    candidate.last_named = row[0]
                if candidate.idle_from is not None:
                    start = candidate.idle_from
                    candidate.idle_periods.append((start, max(start, row[0])))
                    candidate.idle_from = None
                    candidate.connects += 1
                    wanted.append(candidate)
        return wanted

    def idle(self, time: int) -> list[Candidate]:
        """The engine has processed every instant up to ``time``: the
        candidates no row of R names now or later, idle from ``time + 1``."""
        went: list[Candidate] = []
        for candidate in self.candidates.values():
            if candidate.idle_from is not None or candidate.last_named > time:
                continue
            if any(use.op.rows[use.k].counts for use in self._uses.get(candidate.stream, [])):
                continue
            candidate.idle_from = time + 1
            candidate.disconnects += 1
            candidate.idle_periods = [(s, e) for s, e in candidate.idle_periods if e > time]
            went.append(candidate)
        return went

    def unwanted_elision(self, edge: str, rows: Iterable[Element]) -> Element | None:
        """The first elided row among ``rows`` (of ``edge``) that was not in
        an idle period: it and the rows after it must come again whole."""
        candidate = self.candidates.get(edge)
        for row in rows:
            if not is_elided(row):
                continue
            if candidate is None:
                return row
            if candidate.idle_from is not None and row[0] >= candidate.idle_from:
                continue
            if not candidate.may_elide(row[0]):
                return row
        return None
