"""Query similarity from an arrival log (the MQO paper, 3.1).

``USE[I, Q]`` is the set of tuples of source I inside Q's window at some
arrival on one of Q's masters during the log's period. It is a bitmap over
the log's tuples of I (one bit per logged arrival), built from index
intervals with a difference array, so 3,000 queries cost a few matrix
products, not Python sets of tuples. sim(Qa, Qb) is the smallest Jaccard
index over the sources both read (0 when they share none). Two empty USE
sets count as identical (Jaccard 1): neither query read anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from semiactive.mqo.clocks import Clock

Bitmap = npt.NDArray[np.bool_]
Times = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ArrivalLog:
    """Arrival times per stream in the period ``(start, end]``; clocks tick analytically."""

    start: int
    end: int
    times: Mapping[str, Times]
    clocks: Mapping[str, Clock]

    def arrivals(self, stream: str) -> Times:
        clock = self.clocks.get(stream)
        if clock is not None:
            return np.asarray(clock.ticks(self.start, self.end), dtype=np.int64)
        return self.times.get(stream, np.empty(0, dtype=np.int64))

    def master_times(self, masters: Sequence[str]) -> Times:
        """The distinct times at which any of ``masters`` arrives."""
        parts = [self.arrivals(m) for m in masters]
        return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)


def use_bitmap(source_times: Times, masters: Times, window: int | None) -> Bitmap:
    """Which logged tuples of a source fall in ``[s - window, s]`` for some master time s."""
    n = len(source_times)
    if window is None:
        lo = np.zeros(len(masters), dtype=np.int64)
    else:
        lo = np.searchsorted(source_times, masters - window, side="left")
    hi = np.searchsorted(source_times, masters, side="right")
    marks = np.zeros(n + 1, dtype=np.int64)
    np.add.at(marks, lo, 1)
    np.add.at(marks, hi, -1)
    return np.asarray(np.cumsum(marks[:n]) > 0)


def usage(
    masters: Sequence[str], window: int | None, sources: Sequence[str], log: ArrivalLog
) -> dict[str, Bitmap]:
    """USE[I, Q] for every source I of a query shaped (masters, window, sources)."""
    when = log.master_times(masters)
    return {s: use_bitmap(log.arrivals(s), when, window) for s in sources}


def union_usage(members: Sequence[Mapping[str, Bitmap]]) -> dict[str, Bitmap]:
    """USE of a base group: the union of its queries' USE sets, per source."""
    out: dict[str, Bitmap] = {}
    for use in members:
        for source, bits in use.items():
            out[source] = bits | out[source] if source in out else bits.copy()
    return out


def similarity_matrix(usages: Sequence[Mapping[str, Bitmap]]) -> npt.NDArray[np.float64]:
    """sim for every pair: min over shared sources of |A & B| / |A | B|; 0 without one."""
    m = len(usages)
    sim = np.full((m, m), np.inf)
    shared = np.zeros((m, m), dtype=bool)
    sources = sorted({s for use in usages for s in use})
    for source in sources:
        idx = np.array([i for i, use in enumerate(usages) if source in use])
        bits = np.stack([usages[i][source] for i in idx]).astype(np.float32)
        inter = bits @ bits.T
        size = bits.sum(axis=1)
        union = size[:, None] + size[None, :] - inter
        with np.errstate(invalid="ignore", divide="ignore"):
            jaccard = np.where(union > 0, inter / np.maximum(union, 1), 1.0)
        block = np.ix_(idx, idx)
        sim[block] = np.minimum(sim[block], jaccard)
        shared[block] = True
    sim[~shared] = 0.0
    np.fill_diagonal(sim, 1.0)
    return sim
