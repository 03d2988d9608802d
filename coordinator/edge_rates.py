"""Rows/s and bytes/s per edge and the sinks' latency, for the web page of
any cluster (pure).

:class:`EdgeRates` follows the statuses the nodes last reported (the
coordinator keeps each node's last one): per sender (a source or a primary)
and output edge, its cumulative data and backup counters over the reports
of the last ``WINDOW_S``, as rates, summed over the edge's senders heard
from within ``STALE_S`` (a killed primary's last report does not count
forever); per sink, the mean source-to-sink latency of the rows delivered
over the window. Counters that went down belong to a restarted process:
its window starts again. Each :meth:`sample` adds a point to a bounded
history.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from semiactive.wire import control_pb2 as cpb

WINDOW_S = 1.0
MIN_SPAN_S = 0.3  # reports closer than this give no rate
STALE_S = 0.5  # nodes report every 0.1 s or more often
HISTORY = 240  # samples kept (2 minutes at the page's 0.5 s)
SENDERS = ("source", "primary")


class Reported(Protocol):
    """What the coordinator keeps of a node (``NodeRecord``)."""

    status: cpb.NodeStatus | None
    reported_at: float | None


@dataclass(frozen=True)
class EdgeRate:
    edge: str
    rows_per_s: float
    bytes_per_s: float
    backup_rows_per_s: float
    backup_bytes_per_s: float


Counters = tuple[float, float, float, float]  # data rows, data bytes, backup rows, backup bytes


def _push(window: deque[tuple[float, Counters]], at: float, values: Counters) -> None:
    if window and at <= window[-1][0]:
        return  # the same report again
    if window and any(v < w for v, w in zip(values, window[-1][1], strict=True)):
        window.clear()  # a restarted process: a new series
    window.append((at, values))
    while len(window) > 2 and at - window[1][0] >= WINDOW_S:
        window.popleft()


def _rates(window: deque[tuple[float, Counters]]) -> Counters | None:
    (t0, first), (t1, last) = window[0], window[-1]
    if t1 - t0 < MIN_SPAN_S:
        return None
    d = [(b - a) / (t1 - t0) for a, b in zip(first, last, strict=True)]
    return d[0], d[1], d[2], d[3]


class EdgeRates:
    def __init__(self, edges: Iterable[str]) -> None:
        self.edges = list(edges)
        self.senders: dict[tuple[str, str], deque[tuple[float, Counters]]] = {}
        self.sinks: dict[str, deque[tuple[float, Counters]]] = {}
        self.current: dict[str, EdgeRate] = {}
        self.latency_ms: dict[str, float | None] = {}
        # (wall time, rows/s per edge, latency per sink)
        self.history: deque[tuple[float, dict[str, float], dict[str, float | None]]] = deque(maxlen=HISTORY)

    def sample(self, nodes: Iterable[Reported], now: float | None, wall: float) -> None:
        """Take the reports in; ``now``: the coordinator's clock (None: the
        newest report's time)."""
        records = [r for r in nodes if r.status is not None and r.reported_at is not None]
        if now is None:
            now = max((r.reported_at for r in records if r.reported_at is not None), default=0.0)
        sums: dict[str, list[float]] = {}
        for record in records:
            st, at = record.status, record.reported_at
            assert st is not None and at is not None
            if st.role in SENDERS:
                for out in st.outputs:
                    window = self.senders.setdefault((st.name, out.edge), deque())
                    values = (out.data_rows, out.data_bytes, out.backup_rows, out.backup_bytes)
                    _push(
                        window, at, (float(values[0]), float(values[1]), float(values[2]), float(values[3]))
                    )
                    rates = _rates(window) if now - at < STALE_S else None
                    if rates is not None:
                        total = sums.setdefault(out.edge, [0.0] * 4)
                        sums[out.edge] = [a + b for a, b in zip(total, rates, strict=True)]
            elif st.role == "sink":
                window = self.sinks.setdefault(st.name, deque())
                _push(window, at, (float(st.latency_rows), st.latency_sum_s, 0.0, 0.0))
                (_, (rows0, sum0, _, _)), (_, (rows1, sum1, _, _)) = window[0], window[-1]
                fresh = now - at < STALE_S and rows1 > rows0
                self.latency_ms[st.name] = (sum1 - sum0) / (rows1 - rows0) * 1000 if fresh else None
        self.current = {edge: EdgeRate(edge, *sums.get(edge, (0.0, 0.0, 0.0, 0.0))) for edge in self.edges}
        self.history.append((wall, {e: r.rows_per_s for e, r in self.current.items()}, dict(self.latency_ms)))
