"""The sink role: the end of an edge like any other (ha-protocol.md): it
acknowledges, drops duplicate seqs, and writes what it received: as JSON
Lines to ``<run-dir>/sink/<name>.jsonl``, or into a :class:`DurableOutput`
(a PostgreSQL table, a NATS JetStream subject), which it acknowledges only
once committed there, so that a sink killed and started again goes on
where its output ends. It also measures latency: from when the rows
entered the system (their source's stamp, carried by every batch) to their
arrival here (their commit, for a durable output)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Protocol

from semiactive.errors import UserError
from semiactive.ha.resync import ResyncPoint
from semiactive.node.connectors.jsonl import LineWriter, formatter
from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.node.sections.input import InputSection
from semiactive.node.sections.record_rows import RecordLayout, has_record_form
from semiactive.node.service.metrics import NodeMetrics
from semiactive.runtime import clock
from semiactive.runtime.atomic_file import write_json

# A durable output's writes: rows taken and not yet written before the
# inbound streams wait; rows per write (a transaction, a batch of publishes).
UNWRITTEN_LIMIT = 8192
WRITE_ROWS = 8192


class DurableOutput(Protocol):
    """Where a durable sink writes (a PostgreSQL table, a NATS subject):
    what it holds survives the sink, and says where a restart goes on."""

    committed: int  # the highest seq it holds for this run

    async def prepare(self) -> None:
        """Connect ahead of :meth:`open` where that saves time (a standby
        waiting to serve); a failure is left for :meth:`open` to report."""

    async def open(self) -> int: ...

    def describe(self) -> str: ...

    async def write(self, rows: Sequence[Element]) -> None: ...

    async def close(self) -> None: ...


class SinkRole:
    def __init__(
        self,
        name: str,
        inputs: InputSection,
        metrics: NodeMetrics,
        run_dir: Path | None,
        split_by: str | None = None,
        output: DurableOutput | None = None,
    ) -> None:
        self.name = name
        self.inputs = inputs
        edge = inputs.edges[0]
        self.metrics = metrics
        self.output = output
        self.fmt = formatter(edge.codec.schema, edge.codec.kind)
        self._lines = LineWriter(edge.codec.schema, edge.codec.kind)
        if (
            len(inputs.edges) == 1
            and not edge.drops_elided
            and has_record_form(edge.codec.schema, edge.codec.kind)
        ):
            # Rows stay the wire's records until written (no tuple per row).
            edge.layout = RecordLayout(edge.codec)
        self.latencies = array("d")
        self.delivered = 0
        # Cumulative, for the status: rows whose latency was measured, and its sum.
        self.latency_rows = 0
        self.latency_sum_s = 0.0
        self.run_dir = run_dir
        self._out: IO[str] | None = None
        self._arrivals: IO[str] | None = None
        if run_dir is not None:
            (run_dir / "sink").mkdir(parents=True, exist_ok=True)
            (run_dir / "telemetry").mkdir(parents=True, exist_ok=True)
            if output is None:
                self._out = (run_dir / "sink" / f"{name}.jsonl").open("w", buffering=1 << 16)
            # One line per delivered batch: wall time, first seq, count (output
            # gaps); appended to by a sink started again.
            self._arrivals = (run_dir / "telemetry" / f"{name}.arrivals").open("a", buffering=1 << 14)
        self._reported = False
        # A durable output's writes: taken rows in take order, committed by one task
        # (see received()); how many taken rows are not committed yet.
        self._writes: asyncio.Queue[tuple[Sequence[Element], float]] = asyncio.Queue()
        self._unwritten = 0
        self._written = asyncio.Event()  # set after each write: a waiting call looks again
        self._writer: asyncio.Task[None] | None = None
        self.split: SplitFiles | None = None
        if run_dir is not None and split_by is not None:
            self.split = SplitFiles(run_dir / "sink" / name, edge.codec.schema, split_by)

    async def open(self, fresh: bool = False) -> None:
        """Before it serves: a durable sink goes on after what is committed.
        ``fresh``: the first start of a run, which finds nothing of its run
        (a run directory of the same name as an earlier run's would
        otherwise skip what that run wrote)."""
        if self.output is None:
            return
        committed = await self.output.open()
        if committed and fresh:
            await self.output.close()
            raise UserError(
                f"{self.output.describe()} already holds rows 1..{committed} of this run's name: "
                "start the run in a directory of another name, or delete those rows"
            )
        if committed:
            edge = self.inputs.edges[0].edge
            self.inputs.restart(committed + 1, {edge: committed + 1})
        self._writer = asyncio.create_task(self._write_taken(), name=f"{self.name} writer")

    # -- receiver (for the inbound session) ----------------------------------------------

    def next_seq(self, edge: str) -> int:
        return self.inputs.by_name[edge].next_seq

    def idle_from(self, edge: str) -> int | None:
        return None  # a sink wants every row

    def manages(self, edge: str) -> bool:
        return False

    def layout(self, edge: str) -> RecordLayout | None:
        return self.inputs.by_name[edge].layout

    def receive(
        self,
        edge: str,
        first_seq: int,
        rows: Sequence[Element],
        watermark: int,
        eos: bool,
        count: int,
        entered: float = 0.0,
    ) -> int:
        return self.inputs.by_name[edge].accept_rows(first_seq, rows, watermark, eos, count, entered)

    def receive_point(self, edge: str, point: ResyncPoint) -> set[str]:
        return set()  # a sink keeps no state: it never needs to rebuild

    def pressed(self, edge: str, from_seq: int, through_seq: int) -> None:
        pass  # its cut is what it received: nothing to capture

    def level1(self) -> ResyncPoint:
        """A sink needs nothing before what it has: cut = received + 1 (for
        a durable output: committed + 1; its producer keeps the rest for a restart)."""
        edges = self.inputs.edges
        if self.output is not None:
            # One edge (topology refuses more): its seqs are the positions.
            committed = self.output.committed
            return ResyncPoint(committed, 0, committed + 1, {edges[0].edge: committed + 1})
        position = edges[0].last_seq if len(edges) == 1 else self.inputs.position
        return ResyncPoint(position, 0, position + 1, {e.edge: e.last_seq + 1 for e in edges})

    async def received(self) -> None:
        # One edge: every row as it comes, numbered by its seq. Several (the
        # partitions of a partitioned stage): merged by (ts, edge, seq) up to
        # their common watermark and numbered in that order.
        taken, _ = self.inputs.take()
        rows = next(iter(taken.values()), [])
        self.inputs.forget_before(self.inputs.position + 1)
        if rows and self.output is not None:
            # Rows taken are no longer in the input section: they must be
            # committed whatever happens to this call. The inbound stream
            # calling it is cancelled when its peer dies (a producer killed
            # mid-commit lost a row so), and two streams (old and new
            # primary) may call it at once: one writer task commits in take
            # order, everything taken meanwhile in one transaction, and this
            # call waits only while too much is unwritten (backpressure).
            # Waiting for each call's own commit made a transaction per
            # inbound batch of a few rows: seconds of latency at 1,000 rows/s.
            self._unwritten += len(rows)
            self._writes.put_nowait((rows, self.inputs.entered))
            while self._unwritten > UNWRITTEN_LIMIT:
                self._written.clear()
                await self._written.wait()
        elif rows:
            self._deliver(rows, self.inputs.entered)
        if self.finished:
            self.close()

    async def _write_taken(self) -> None:
        assert self.output is not None
        while True:
            taken = [await self._writes.get()]
            count = len(taken[0][0])
            while not self._writes.empty() and count < WRITE_ROWS:
                taken.append(self._writes.get_nowait())
                count += len(taken[-1][0])
            await self.output.write([row for rows, _ in taken for row in rows])
            self._unwritten -= count
            for rows, entered in taken:
                self._deliver(rows, entered)
            self._written.set()
            if self.finished:
                self.close()

    def _deliver(self, rows: Sequence[Element], entered: float) -> None:
        """Rows written: to the files, the arrivals, the latency."""
        fmt = self.fmt
        if self._out is not None:
            self._out.write(self._lines.lines(rows))
            self._out.flush()
        if self.split is not None:
            self.split.write(rows, fmt)
        if self._arrivals is not None:
            self._arrivals.write(f"{clock.wall():.4f} {rows[0][1]} {len(rows)}\n")
            if self.output is not None:
                # A durable sink may be killed and go on: what it wrote
                # before must not be lost with its buffer (output gaps).
                self._arrivals.flush()
        self.delivered += len(rows)
        if entered:
            # From the entry of the oldest row they came from, for each
            # row of this take: an upper bound, by at most the take's span.
            latency = max(0.0, clock.wall() - entered)
            self.latencies.extend(itertools.repeat(latency, len(rows)))
            self.latency_rows += len(rows)
            self.latency_sum_s += latency * len(rows)
            self.metrics.latency.observe(latency)

    @property
    def finished(self) -> bool:
        return self.inputs.end_of_stream and not self.inputs.backlog and not self._unwritten

    async def aclose(self) -> None:
        self.close()
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        if self.output is not None:
            await self.output.close()

    def close(self) -> None:
        if self.split is not None:
            self.split.close()
        if self._arrivals is not None:
            self._arrivals.close()
            self._arrivals = None
        if self._out is not None:
            self._out.close()
            self._out = None
        if not self._reported:
            self._reported = True
            self.write_report()

    def write_report(self) -> None:
        if self.run_dir is None:
            return
        data = sorted(self.latencies)
        # A durable output holds what every incarnation of its sink committed (seqs
        # 1..committed); latencies are this incarnation's.
        delivered = self.output.committed if self.output is not None else self.delivered
        report: dict[str, float | int | None] = {"delivered": delivered}
        for q in (0.5, 0.9, 0.99, 0.999):
            report[f"p{int(q * 1000) / 10:g}_ms"] = (
                data[min(len(data) - 1, int(q * len(data)))] * 1000 if data else None
            )
        report["max_ms"] = data[-1] * 1000 if data else None
        (self.run_dir / "telemetry").mkdir(parents=True, exist_ok=True)
        write_json(self.run_dir / "telemetry" / f"{self.name}.latency.json", report)


class SplitFiles:
    """One JSON Lines file per value of a text column (``split_by``); values
    that are not identifiers (a peer's garbage) go to no file, only counted."""

    LIMIT = 4096  # open files

    def __init__(self, directory: Path, schema: plan.Schema, column: str) -> None:
        if column not in schema.names or not schema.columns[schema.names.index(column)].type.is_text:
            raise ValueError(f"split_by {column!r}: the stream has no text column of that name")
        self.directory = directory
        self.index = 3 + schema.names.index(column)
        self.files: dict[str, IO[str]] = {}
        self.rejected = 0
        directory.mkdir(parents=True, exist_ok=True)

    def write(self, rows: Sequence[Element], fmt: Callable[[int, Element], str]) -> None:
        lines: dict[str, list[str]] = {}
        for r in rows:
            value = r[self.index]
            if not isinstance(value, str) or not _SPLIT_VALUE.match(value):
                self.rejected += 1
                continue
            lines.setdefault(value, []).append(fmt(r[1], r))
        for value, text in lines.items():
            f = self.files.get(value)
            if f is None:
                if len(self.files) >= self.LIMIT:
                    self.rejected += len(text)
                    continue
                f = self.files[value] = (self.directory / f"{value}.jsonl").open("a", buffering=1 << 14)
            f.write("".join(text))

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        self.files.clear()


_SPLIT_VALUE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
