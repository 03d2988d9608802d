"""``semiactive mqo run``: the MQO paper's shared execution over files, in this process.

Reads a file of ``CREATE ... MASTER ...`` queries and one CSV or JSON Lines
file per stream (a ``ts`` column, non-decreasing; the other columns are the
stream's: those its ``REGISTER STREAM`` declares, of those types, or else
every column, typed int, float or text as they parse), runs them with one of
the methods of :class:`semiactive.mqo.executor.Method` and writes ``DIR/<query>.jsonl``
(one object per result: ``ts`` is the master arrival, columns qualified as
``Quote.name``), ``DIR/clusters.jsonl`` (every (re)clustering) and
``DIR/stats.json`` (join probes, intermediate tuples, results and
processing seconds per unit of event time; writing the results is not
counted). ``static`` and ``dynamic`` learn their first clusters from the
arrival log of the first ``--log-period`` ticks of the input.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from semiactive.mqo.clocks import Clock, daily_clock, parse_clock
from semiactive.mqo.executor import Method, MqoError, SharedExecutor
from semiactive.mqo.nodes import NEVER
from semiactive.mqo.query import ContinuousQuery, QueryFile, StreamDeclaration, parse_query_file
from semiactive.mqo.relations import Row
from semiactive.mqo.similarity import ArrivalLog
from semiactive.node.connectors.sources import EXTRA_FIELDS, SourceDataError, csv_reader, read_rows
from semiactive.node.cql import plan

RESERVED = {"clusters"}
Change = tuple[int, ContinuousQuery | str]


@dataclass
class Stream:
    name: str
    columns: list[str]
    rows: list[Row]


@dataclass
class UnitStats:
    unit: int
    seconds: float = 0.0
    probes: int = 0
    intermediate: int = 0
    results: int = 0
    executions: int = 0
    delivered: int = 0


@dataclass
class RunResult:
    units: list[UnitStats]
    executor: SharedExecutor

    def summary(self) -> dict[str, Any]:
        seconds = [u.seconds for u in self.units]
        return {
            "units": len(self.units),
            "seconds": sum(seconds),
            "mean_seconds_per_unit": sum(seconds) / max(len(seconds), 1),
            "probes": sum(u.probes for u in self.units),
            "intermediate": sum(u.intermediate for u in self.units),
            "results": sum(u.results for u in self.units),
            "executions": sum(u.executions for u in self.units),
            "delivered": sum(u.delivered for u in self.units),
            "handover": asdict(self.executor.handover),
            "reclusterings": len(self.executor.history) - 1,
        }


def _typed(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_stream(name: str, path: Path, declared: StreamDeclaration | None = None) -> Stream:
    """A stream file: CSV with a header, or JSON Lines; ``ts`` non-decreasing.
    A ``declared`` stream has the declared columns (others in the file are
    ignored), each value checked against its type as ``query run`` does."""
    if declared is not None:
        rows: list[Row] = []
        for ts, seq, _sign, *values in read_rows(path, declared.schema, plan.Kind.STREAM):
            if ts < 0:
                raise SourceDataError(f"{path}: row {seq}: ts {ts} is negative; expected ticks from 0")
            rows.append((ts, seq, *values))
        return Stream(name, [c.name for c in declared.columns], rows)
    try:
        handle = path.open(newline="")
    except OSError as exc:
        raise SourceDataError(f"{path}: cannot open: {exc.strerror}") from None
    rows = []
    columns: list[str] = []
    with handle:
        records: Iterator[tuple[int, Mapping[str, Any]]]
        if path.suffix in (".jsonl", ".json", ".ndjson"):
            records = ((n, _json(path, n, line)) for n, line in enumerate(handle, 1) if line.strip())
        else:
            reader = csv_reader(handle)
            columns = [c for c in reader.fieldnames or [] if c != "ts"]
            if "ts" not in (reader.fieldnames or []):
                raise SourceDataError(f"{path}:1: no ts column in the header")
            records = ((reader.line_num, _csv_record(path, reader.line_num, r)) for r in reader)
        last = None
        for line, record in records:
            if not columns and not rows:
                columns = [c for c in record if c != "ts"]
            ts = record.get("ts")
            if not isinstance(ts, int) or isinstance(ts, bool) or ts < 0:
                raise SourceDataError(f"{path}:{line}: ts {ts!r}: expected a non-negative integer")
            if last is not None and ts < last:
                raise SourceDataError(f"{path}:{line}: ts {ts} is before the previous row's {last}")
            if set(record) - {"ts"} != set(columns):
                raise SourceDataError(
                    f"{path}:{line}: columns {sorted(record)} differ from {['ts', *columns]}"
                )
            last = ts
            rows.append((ts, len(rows) + 1, *(record[c] for c in columns)))
    return Stream(name, columns, rows)


def _csv_record(path: Path, line: int, row: Mapping[str, Any]) -> dict[str, Any]:
    if EXTRA_FIELDS in row:
        raise SourceDataError(f"{path}:{line}: more fields than the header has ({len(row) - 1})")
    if any(v is None for v in row.values()):
        raise SourceDataError(f"{path}:{line}: fewer fields than the header has ({len(row)})")
    return {k: _typed(v) for k, v in row.items()}


def _json(path: Path, line: int, text: str) -> dict[str, Any]:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceDataError(f"{path}:{line}: not JSON: {exc.msg}") from None
    if not isinstance(record, dict):
        raise SourceDataError(f"{path}:{line}: expected a JSON object")
    return record


def clocks_for(
    queries: Sequence[ContinuousQuery],
    streams: Mapping[str, Stream],
    specs: Sequence[str],
    declared: Mapping[str, Clock] | None = None,
) -> dict[str, Clock]:
    """The clocks the queries' masters name: ``declared`` (REGISTER CLOCK),
    ``--clock`` specs (which replace a declared clock of the same name) and
    the daily ``Clock_H``."""
    clocks = dict(declared or {})
    clocks.update({c.name: c for c in map(parse_clock, specs)})
    for q in queries:
        for m in q.masters:
            if m not in streams and m not in clocks:
                daily = daily_clock(m)
                if daily is None:
                    raise MqoError(
                        f"query {q.name}: master {m!r} is no --stream, no clock (REGISTER CLOCK or --clock) "
                        "and no Clock_H (H = 0..23)"
                    )
                clocks[m] = daily
    return clocks


def instants(
    streams: Mapping[str, Stream], clocks: Mapping[str, Clock]
) -> list[tuple[int, dict[str, list[Row]]]]:
    """Every instant with an arrival or a clock tick, in order."""
    at: dict[int, dict[str, list[Row]]] = defaultdict(dict)
    for s in streams.values():
        for row in s.rows:
            at[row[0]].setdefault(s.name, []).append(row)
    if at and clocks:
        start, end = min(at) - 1, max(at)
        for clock in clocks.values():
            for t in clock.ticks(start, end):
                at.setdefault(t, {})
    return sorted(at.items())


def arrival_log(streams: Mapping[str, Stream], clocks: Mapping[str, Clock], period: int) -> ArrivalLog:
    """The log the optimiser learns from: the input's first ``period`` ticks."""
    start = min((s.rows[0][0] for s in streams.values() if s.rows), default=0) - 1
    times = {
        name: np.array([r[0] for r in s.rows if r[0] <= start + period], dtype=np.int64)
        for name, s in streams.items()
    }
    return ArrivalLog(start, start + period, times, clocks)


def run(
    queries: Sequence[ContinuousQuery],
    streams: Mapping[str, Stream],
    clocks: Mapping[str, Clock],
    method: Method,
    *,
    theta: float = 0.5,
    unit: int = 1000,
    log_period: int = 10_000,
    recluster_every: int | None = None,
    recluster_at: Sequence[int] = (),
    patience: int = 1,
    results: ResultFiles | None = None,
    changes: Sequence[Change] = (),
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Run ``queries`` over complete streams; a change ``(t, query)`` registers
    a query, ``(t, name)`` removes one, before the first instant >= t."""
    executor = SharedExecutor(
        queries,
        {name: s.columns for name, s in streams.items()},
        clocks,
        method=method,
        theta=theta,
        log_period=log_period,
        check_every=recluster_every,
        patience=patience,
        recluster_at=recluster_at,
        initial_log=arrival_log(streams, clocks, log_period)
        if method in (Method.STATIC, Method.DYNAMIC)
        else None,
    )
    pending = sorted(changes, key=lambda c: c[0])
    units: dict[int, UnitStats] = {}
    steps = instants(streams, clocks)
    shown = 0
    # Window relations and buffers are many long-lived tuples: with CPython's
    # default thresholds full collections rescan them every few thousand
    # allocations (pauses of tens of ms in a unit); young collections stay.
    thresholds = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    try:
        for n, (t, arrivals) in enumerate(steps):
            while pending and pending[0][0] <= t:
                change = pending.pop(0)[1]
                if isinstance(change, str):
                    executor.remove(change)
                else:
                    executor.add(change)
            stats = executor.stats
            before = (stats.probes, stats.intermediate, stats.results, stats.executions, stats.delivered)
            started = time.perf_counter()
            out = executor.process(t, arrivals)
            elapsed = time.perf_counter() - started
            u = units.setdefault(t // unit, UnitStats(t // unit))
            u.seconds += elapsed
            u.probes += stats.probes - before[0]
            u.intermediate += stats.intermediate - before[1]
            u.results += stats.results - before[2]
            u.executions += stats.executions - before[3]
            u.delivered += stats.delivered - before[4]
            if results is not None:
                for name, combos in out.items():
                    if combos:
                        results.add(name, executor.rows(name, t, combos))
            if progress is not None and (n + 1) * 10 // len(steps) > shown:
                shown = (n + 1) * 10 // len(steps)
                progress(f"mqo {method}: {shown * 10}% ({n + 1:,} instants, unit {t // unit})")
    finally:
        gc.set_threshold(*thresholds)
    return RunResult([units[k] for k in sorted(units)], executor)


class ResultFiles:
    """``DIR/<query>.jsonl``, appended in batches: thousands of queries
    cannot all keep a file open, and a run's results need not fit in memory."""

    FLUSH_LINES = 50_000

    def __init__(self, out: Path) -> None:
        self.out = out
        self.pending: dict[str, list[str]] = {}
        self.lines = 0
        out.mkdir(parents=True, exist_ok=True)

    def start(self, names: Sequence[str]) -> None:
        for name in names:
            (self.out / f"{name}.jsonl").write_text("")

    def add(self, name: str, rows: list[dict[str, Any]]) -> None:
        if name not in self.pending:
            self.pending[name] = []
        self.pending[name] += [json.dumps(row, separators=(",", ":")) + "\n" for row in rows]
        self.lines += len(rows)
        if self.lines >= self.FLUSH_LINES:
            self.flush()

    def flush(self) -> None:
        for name, lines in self.pending.items():
            with (self.out / f"{name}.jsonl").open("a") as f:
                f.write("".join(lines))
        self.pending.clear()
        self.lines = 0


def write_outputs(result: RunResult, out: Path, params: Mapping[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "clusters.jsonl").open("w") as f:
        for h in result.executor.history:
            # Clusters formed before the first instant (at start, or a query
            # added before it) have no instant: null, not the executor's
            # "before any time" sentinel.
            record = {**asdict(h), "at": None if h.at == NEVER else h.at}
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
    stats = {"params": dict(params), **result.summary(), "per_unit": [asdict(u) for u in result.units]}
    (out / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")


def load_queries(path: str) -> list[ContinuousQuery]:
    return list(load_query_file(path).queries)


def load_query_file(path: str) -> QueryFile:
    """A file of queries (``-``: standard input) with its declarations."""
    text = sys.stdin.read() if path == "-" else _read_text(Path(path))
    loaded = parse_query_file(text, "<stdin>" if path == "-" else path)
    for q in loaded.queries:
        if q.name in RESERVED:
            raise MqoError(f"{path}: query name {q.name!r} is reserved (it names an output file)")
    return loaded


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise MqoError(f"{path}: cannot read: {exc}") from None


def _timed(spec: str, option: str) -> tuple[int, str]:
    at, _sep, what = spec.partition(":")
    try:
        return int(at), what
    except ValueError:
        raise MqoError(
            f"{option} {spec!r}: expected TICKS:{'FILE' if option == '--add' else 'NAME'}"
        ) from None


def main(
    query_file: str,
    *,
    stream_specs: Sequence[str],
    clock_specs: Sequence[str],
    method: str,
    out: Path,
    theta: float,
    unit: int,
    log_period: int,
    recluster_every: int | None,
    recluster_at: Sequence[int],
    patience: int,
    add: Sequence[str],
    remove: Sequence[str],
    err: IO[str] = sys.stderr,
) -> int:
    loaded = load_query_file(query_file)
    queries = list(loaded.queries)
    streams: dict[str, Stream] = {}
    for spec in stream_specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise SourceDataError(f"--stream {spec!r}: expected NAME=FILE")
        if name in loaded.clocks:
            raise MqoError(f"--stream {spec!r}: {name} is a clock (REGISTER CLOCK in {loaded.file})")
        streams[name] = read_stream(name, Path(path), loaded.streams.get(name))
    if unit <= 0 or log_period <= 0 or (recluster_every is not None and recluster_every <= 0):
        raise MqoError("--unit, --log-period and --recluster-every must be positive")
    changes: list[Change] = []
    for spec in add:
        at, path = _timed(spec, "--add")
        changes += [(at, q) for q in load_queries(path)]
    for spec in remove:
        at, name = _timed(spec, "--remove")
        changes.append((at, name))
    later = [q for _, q in changes if isinstance(q, ContinuousQuery)]
    for q in [*queries, *later]:
        for name in (*q.sources, *q.masters):
            declared = loaded.streams.get(name)
            if declared is not None and name not in streams:
                raise MqoError(
                    f"query {q.name}: stream {name} is declared ({loaded.file}:{declared.line}) "
                    f"but has no data: give --stream {name}=FILE"
                )
    clocks = clocks_for([*queries, *later], streams, clock_specs, loaded.clocks)

    files = ResultFiles(out)
    files.start([q.name for q in [*queries, *later]])
    result = run(
        queries,
        streams,
        clocks,
        Method(method),
        theta=theta,
        unit=unit,
        log_period=log_period,
        recluster_every=recluster_every,
        recluster_at=recluster_at,
        patience=patience,
        changes=changes,
        results=files,
        progress=lambda line: print(line, file=err),
    )
    files.flush()
    params = {
        "method": method,
        "theta": theta,
        "unit": unit,
        "log_period": log_period,
        "recluster_every": recluster_every,
        "recluster_at": list(recluster_at),
        "queries": len(queries),
    }
    write_outputs(result, out, params)
    s = result.summary()
    print(
        f"{len(result.executor.queries)} queries, {s['units']} units, {s['results']:,} results, "
        f"{s['mean_seconds_per_unit'] * 1000:.2f} ms per unit, {s['probes']:,} probes, "
        f"{s['intermediate']:,} intermediate, {len(result.executor.clusters)} clusters -> {out}"
    )
    return 0
