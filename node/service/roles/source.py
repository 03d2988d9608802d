"""The source role: emits one stream on schedule into its output log.

Synthetic and file sources pace themselves against the wall clock from the
cluster's start time; an ingest source takes rows that external producers
push over gRPC. Every emitted tuple can be logged to
``<run-dir>/sources/<name>.jsonl``, with the final watermark in
``<name>.end.json``, so a run can be checked against an independent
reference computation.

A synthetic or file source generates the same rows in every incarnation,
so one killed and started again goes on from what its consumers may still
need (:mod:`~semiactive.node.service.roles.source_progress`): it generates the
rows before that again for its row log only, and sends the rest. A stop
ends the stream at the rows due by the stop's time, so that a source
started again and stopped later ends no earlier than the one it replaces.

A broker source reads its Kafka topic or NATS subject (a
:class:`~semiactive.node.connectors.broker_feed.BrokerReader`) through a
:class:`~semiactive.node.connectors.broker_feed.BrokerFeed`, which
numbers the rows the same in every incarnation; it keeps the feed's
checkpoint with its freed point, and commits that point's positions to the
broker. Rejected messages go to its dead letters and are counted; a stop
reads until the broker has nothing more, then emits what the merge holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from semiactive.config import SourceConfig
from semiactive.ha.output_log import OutputLog
from semiactive.node.connectors.broker_feed import BrokerFeed, BrokerMessage, BrokerReader
from semiactive.node.connectors.event_time_merge import MergeCheckpoint
from semiactive.node.connectors.file_replay import FileReplay, Release, as_records
from semiactive.node.connectors.jsonl import LineWriter
from semiactive.node.connectors.message_rows import Rejected, json_text
from semiactive.node.connectors.replay_clock import ReplayClock
from semiactive.node.connectors.sources import (
    TS_MAX,
    TS_MIN,
    RateSchedule,
    SourceDataError,
    SyntheticSource,
    convert,
    read_blocks,
)
from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.node.sections.codec import RowCodec
from semiactive.node.sections.record_rows import RecordLayout, RecordRows, has_record_form
from semiactive.node.service.outbound import Outbound
from semiactive.node.service.roles.source_progress import SourceProgress, reopen_row_log
from semiactive.runtime import clock
from semiactive.runtime.atomic_file import write_json

log = logging.getLogger(__name__)

NEVER = -(2**62)
REGISTRY_TICK_S = 0.05
PROGRESS_INTERVAL_S = 0.1
BROKER_READ_MOST = 4096  # messages a read takes at most
BROKER_READ_WAIT_S = 0.05  # how long a read waits for the first
BROKER_DRAIN_WAIT_S = 0.5  # after a stop: a read that finds nothing in this long ends the stream
REJECTS_LOGGED = 10  # per reason; the rest are only counted
OUTAGE_POLL_S = 0.1  # how often a broker's outage is looked at besides after each read


# A broker source's reader, opened, and per partition where a first start reads.
PreparedReader = tuple[BrokerReader, dict[int, int]]


async def open_reader(config: SourceConfig, name: str) -> PreparedReader | None:
    """Open a broker source's reader (None: not a broker source)."""
    reader: BrokerReader
    # Imported here: only a broker source's process pays for its client.
    if config.kafka is not None:
        from semiactive.node.connectors.kafka import KafkaReader

        reader = KafkaReader(config.kafka, name)
    elif config.nats is not None:
        from semiactive.node.connectors.nats_source import NatsReader

        reader = NatsReader(config.nats, name)
    else:
        return None
    return reader, await reader.open()


class SourceRole:
    def __init__(
        self,
        name: str,
        config: SourceConfig,
        schema: plan.Schema,
        log_: OutputLog,
        outbound: Outbound,
        run_dir: Path | None,
        progress: SourceProgress | None = None,
        checkpoint: MergeCheckpoint | None = None,
        on_rejected: Callable[[str], None] = lambda reason: None,
        on_outage: Callable[[str | None], None] = lambda error: None,
    ) -> None:
        """``progress``: where a restartable source keeps its freed point;
        the output log ``log_`` starts after the point it had (0 for a
        first start). ``checkpoint``: where a broker source started again
        reads from. ``on_rejected``: a message went to the dead letters,
        for this reason; ``on_outage``: the broker went away (why) or came
        back (None)."""
        self.name = name
        self.config = config
        self.schema = schema
        self.log = log_
        self.outbound = outbound
        self.started = asyncio.Event()
        self.stopping = asyncio.Event()
        self.stop_ms = float("inf")  # when the stop came, ms from t0: the stream ends there
        self._stop_at_start = False  # a stop before t0 was known: the stream ends at the start
        self.t0 = 0.0  # wall-clock time (unix s) of event time 0
        self.emitted = 0
        self.watermark = NEVER
        self.lag_ms = 0.0  # how far behind schedule the source was when it stopped
        self.error: str | None = None
        self._log: IO[str] | None = None
        self._lines = LineWriter(schema, plan.Kind.STREAM)
        # A synthetic source of integers and text emits record blocks (no tuple per row).
        self._layout: RecordLayout | None = None
        if has_record_form(schema, plan.Kind.STREAM):
            self._layout = RecordLayout(RowCodec(schema, plan.Kind.STREAM))
        self._run_dir = run_dir
        self.progress = progress
        self.checkpoint = checkpoint
        self.on_rejected = on_rejected
        self.on_outage = on_outage
        self.reader: BrokerReader | None = None
        self.feed: BrokerFeed | None = None
        self.rejected: dict[str, int] = {}
        self.outage: str | None = None
        # Rows up to here were sent by an earlier incarnation and freed.
        self.resume = log_.first - 1
        self.emitted = self.resume
        if run_dir is not None and config.log:
            (run_dir / "sources").mkdir(parents=True, exist_ok=True)
            path = run_dir / "sources" / f"{name}.jsonl"
            if progress is not None and path.exists():
                self._log, self.emitted = reopen_row_log(path, self.resume)
            else:
                self._log = path.open("w", buffering=1 << 16)

    async def open(self, prepared: PreparedReader | None = None) -> None:
        """Connect a broker source (a UserError, naming what, if its broker
        does not answer in time or has no such topic). ``prepared``: a
        reader :func:`open_reader` opened beforehand (a standby's, so that
        its takeover does not wait for the broker's first answers)."""
        if prepared is None:
            prepared = await open_reader(self.config, self.name)
        if prepared is None:
            return
        reader, positions = prepared
        start = self.checkpoint or MergeCheckpoint.first(positions)
        if set(start.partitions) != set(positions):
            log.warning(
                "%s: the topic has partitions %s, the checkpoint %s: reading those of the checkpoint",
                self.name,
                sorted(positions),
                sorted(start.partitions),
            )
        self.reader = reader
        self.feed = BrokerFeed(self.schema, self.config.format, self.config.max_delay_ms, start)

    def start(self, t0: float) -> None:
        if not self.started.is_set():
            self.t0 = t0
            self.started.set()

    def stop(self) -> None:
        if not self.stopping.is_set():
            if self.started.is_set():
                self.stop_ms = self.elapsed_ms()
            else:
                self._stop_at_start = True
            self.stopping.set()

    async def run(self) -> None:
        """Produce the stream; then keep the freed point until the node exits."""
        keeper = asyncio.create_task(self._keep_progress()) if self.progress is not None else None
        try:
            await self._produce()
            if self.reader is not None and self.feed is not None and self.error is None:
                # Once every consumer has the whole stream, the broker is
                # told it was all read: a later run starts after it.
                while not self.outbound.done:
                    await asyncio.sleep(0.05)
                await self.reader.commit_now(self.feed.positions())
            if keeper is not None:
                await keeper
        finally:
            if keeper is not None:
                keeper.cancel()
            if self.reader is not None:
                await self.reader.close()

    async def _keep_progress(self) -> None:
        """Record the output log's freed point as it moves. The row log is
        flushed first: the rows a restarted source does not generate again
        must be in it."""
        assert self.progress is not None
        while True:
            await asyncio.sleep(PROGRESS_INTERVAL_S)
            freed = min(self.log.first - 1, self.emitted)
            checkpoint = None
            if self.feed is not None and self.reader is not None:
                checkpoint = self.feed.checkpoint_through(freed)
                if checkpoint is None or not await self.reader.settle():
                    continue
                freed = checkpoint.seq
            if freed > self.progress.saved:
                if self._log is not None:
                    self._log.flush()
                try:
                    state = checkpoint.to_json() if checkpoint is not None else None
                    self.progress.save(freed, state, self.t0 if self.started.is_set() else None)
                except OSError as exc:
                    log.warning("%s: cannot record progress: %s", self.name, exc)
                    continue
            if checkpoint is not None and self.reader is not None:
                self.reader.commit({p: start.position for p, start in checkpoint.partitions.items()})

    async def _produce(self) -> None:
        await self.started.wait()
        delay = self.t0 - clock.wall()
        if delay > 0:
            await asyncio.sleep(delay)
        if self._stop_at_start:
            # A source started again and stopped before its Start ends no
            # earlier than the one it replaces, which was stopped before.
            self.stop_ms = self.elapsed_ms()
        try:
            if self.config.kind == "synthetic":
                await self._synthetic()
            elif self.config.kind == "file":
                await self._file()
            elif self.config.kind == "registry":
                await self._registry()
            elif self.config.kind in ("kafka", "nats"):
                await self._broker()
            else:
                await self.stopping.wait()
        except SourceDataError as exc:
            self.error = str(exc)
            log.error("%s", exc)
        self._finish()

    def _emit(self, rows: Sequence[Element], watermark: int, entered: float) -> None:
        """``entered``: when the first row entered the system: its due time
        on a generator's or a replay's schedule (a source behind schedule
        counts as latency), its arrival for an ingest call."""
        if rows:
            self.emitted += len(rows)
            if self._log is not None:
                self._log.write(self._lines.lines(rows))
            if isinstance(rows, RecordRows) and rows.first_seq <= self.resume:
                rows = rows[self.resume - rows.first_seq + 1 :]  # generated again for the row log only
            elif rows[0][1] <= self.resume:
                rows = [r for r in rows if r[1] > self.resume]
        self.watermark = max(self.watermark, watermark)
        self.log.append(rows, self.watermark, entered)
        self.outbound.appended()

    def _finish(self) -> None:
        self.log.finish(self.watermark)
        self.outbound.appended()
        self.watermark = self.log.watermark
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._run_dir is not None:
            end = {
                "watermark": self.watermark,
                "count": self.emitted,
                "t0": self.t0,
                "lag_ms": round(self.lag_ms, 1),
                "ended_unix": clock.wall(),
            }
            (self._run_dir / "sources").mkdir(parents=True, exist_ok=True)
            write_json(self._run_dir / "sources" / f"{self.name}.end.json", end)

    def elapsed_ms(self) -> float:
        return (clock.wall() - self.t0) * 1000

    async def _synthetic(self) -> None:
        schedule = RateSchedule.of((p.at_s, p.tuples_per_s) for p in self.config.rate)
        gen = SyntheticSource(self.schema, schedule, self.config.seed)
        gen.seek(self.emitted)
        batch = max(1, self.log.capacity // 4)
        # On schedule, wake at most every linger_ms: rows due meanwhile would
        # wait that long for their frame anyway (EdgeSender), and a wake-up
        # per row took a 1,000 tuples/s source 38-40% of a core (28-29% so).
        tick_ms = self.outbound.topology.config.linger_ms
        while True:
            await self.outbound.wait_room()
            due = gen.due(min(self.elapsed_ms(), self.stop_ms))
            self.lag_ms = max(0.0, self.elapsed_ms() - gen.next_ts())
            if due:
                count = min(due, batch)
                due_ts = gen.next_ts()
                block = gen.take_records(count, self._layout) if self._layout is not None else None
                rows = gen.take(count) if block is None else block
                self._emit(rows, gen.next_ts() - 1, self.t0 + due_ts / 1000)
                await asyncio.sleep(0)
                continue
            if self.stopping.is_set():
                break
            wait_ms = gen.next_ts() - self.elapsed_ms()
            self.lag_ms = max(0.0, -wait_ms)
            if wait_ms > 0:
                asleep_ms = min(max(wait_ms, tick_ms), 50)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), timeout=asleep_ms / 1000)

    async def _broker(self) -> None:
        """Read the broker until a stop; then, in each partition, the
        messages produced before the stop, or to its end (a partition
        whose messages have no producer's time)."""
        reader, feed = self.reader, self.feed
        assert reader is not None and feed is not None
        await reader.assign(feed.positions())
        watch = asyncio.create_task(self._watch_outage(reader))
        try:
            await self._read_broker(reader, feed)
        finally:
            watch.cancel()

    async def _watch_outage(self, reader: BrokerReader) -> None:
        """Report the broker's outages while the loop may be held elsewhere
        (a dead letter waits for the broker to store it, however long it is
        away); the loop also looks after every read."""
        while True:
            await asyncio.sleep(OUTAGE_POLL_S)
            self._broker_outage(reader.outage)

    async def _read_broker(self, reader: BrokerReader, feed: BrokerFeed) -> None:
        partitions = set(feed.positions())
        ended: set[int] = set()  # partitions read through the stop
        while True:
            await self.outbound.wait_room()
            draining = self.stopping.is_set()
            wait = BROKER_DRAIN_WAIT_S if draining else BROKER_READ_WAIT_S
            messages = await reader.read(BROKER_READ_MOST, wait)
            self._broker_outage(reader.outage)
            now = clock.wall()
            taken = feed.take(self._before_stop(messages, ended) if draining else messages, now)
            for message, why in taken.rejected:
                await self._reject(message, why)
            self._emit(taken.rows, feed.watermark, taken.entered or now)
            # The end of each partition at the stop, not a pause: a source
            # started again during the drain must read at least as far as
            # the one it replaces, whose rows its consumers may have.
            if draining and (
                ended >= partitions or (not messages and await reader.caught_up(partitions - ended))
            ):
                break
        end = feed.end()
        if end.rows:
            self._emit(end.rows, end.rows[-1][0], end.entered)

    def _before_stop(self, messages: list[BrokerMessage], ended: set[int]) -> list[BrokerMessage]:
        """``messages`` produced before the stop; a partition's first one
        produced after it ends that partition (it and the rest stay in the
        broker for a later run)."""
        cutoff = self.t0 + self.stop_ms / 1000
        kept = []
        for m in messages:
            if m.partition in ended:
                continue
            if m.produced > cutoff:
                ended.add(m.partition)
                continue
            kept.append(m)
        return kept

    async def _reject(self, message: BrokerMessage, why: Rejected) -> None:
        assert self.reader is not None
        await self.reader.dead_letter(message, why.reason, why.detail)
        seen = self.rejected.get(why.reason, 0)
        self.rejected[why.reason] = seen + 1
        self.on_rejected(why.reason)
        if seen < REJECTS_LOGGED:
            log.warning(
                "%s: message at %d:%d rejected (%s): %s%s",
                self.name,
                message.partition,
                message.position,
                why.reason,
                why.detail,
                "; further ones of this reason are only counted" if seen + 1 == REJECTS_LOGGED else "",
            )

    def _broker_outage(self, error: str | None) -> None:
        if error != self.outage and (error is None or self.outage is None):
            self.on_outage(error)
        self.outage = error

    async def _registry(self) -> None:
        """A registry's event time is the wall clock: its watermark follows
        it, so that the stages reading it never wait for a registration."""
        while not self.stopping.is_set():
            await self.outbound.wait_room()
            now = int(self.elapsed_ms()) - 1
            if now > self.watermark:
                self._emit([], now, clock.wall())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), timeout=REGISTRY_TICK_S)

    async def _file(self) -> None:
        """Replay the file a block at a time (:class:`FileReplay`); a CSV
        of numbers goes as record blocks, as a generator's does."""
        assert self.config.path is not None
        schedule = ReplayClock(
            self.config.speed, [(st.from_s * 1000, st.speed) for st in self.config.speed_steps]
        )
        replay = FileReplay(self._file_blocks(self.config.path), schedule, self.emitted)
        most = max(1, self.log.capacity // 4)
        tick_ms = self.outbound.topology.config.linger_ms  # as _synthetic's
        while True:
            await self.outbound.wait_room()
            now = self.elapsed_ms()
            step = replay.take(now, self.stop_ms, most)
            if step is None:
                return
            if isinstance(step, Release):
                self.lag_ms = max(0.0, now - step.due_ms)
                self._emit(step.rows, step.watermark, self.t0 + step.due_ms / 1000)
                await asyncio.sleep(0)
            else:
                self.lag_ms = 0.0
                await asyncio.sleep(min(max(step, tick_ms), 50) / 1000)

    def _file_blocks(self, path: str) -> Iterator[Sequence[Element]]:
        for block in read_blocks(path, self.schema, plan.Kind.STREAM):
            if isinstance(block, list):
                yield block
            elif self._layout is not None:
                yield as_records(block, self._layout)
            else:
                yield list(block.elements())

    def ingest(self, rows: list[dict[str, Any]], watermark: int | None, eos: bool) -> int:
        """Rows pushed by an external producer, as JSON objects with ``ts``
        and every column. Without an explicit watermark the stream is taken
        as complete up to just before the last row's ts."""
        if self.stopping.is_set():
            raise SourceDataError("the stream has ended; no more rows are taken")
        elements: list[Element] = []
        seq = self.log.head
        floor = self.watermark
        registry = self.config.kind == "registry"
        if registry and (watermark is not None or eos):
            raise SourceDataError("a registry takes no watermark or end of stream: it follows the clock")
        for i, row in enumerate(rows):
            where = f"row {i}"
            if not isinstance(row, dict):
                raise SourceDataError(f"{where}: expected a JSON object")
            if registry:  # the registry stamps registrations with its own clock
                row = {
                    **row,
                    "ts": max(int(self.elapsed_ms()), floor + 1, elements[-1][0] if elements else 0),
                }
            try:
                ts = int(row["ts"])
                if isinstance(row["ts"], bool) or ts != row["ts"]:
                    raise ValueError(row["ts"])
            except KeyError:
                raise SourceDataError(f"{where}: missing ts") from None
            except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
                raise SourceDataError(f"{where}: ts must be an integer") from None
            if not TS_MIN <= ts <= TS_MAX:
                raise SourceDataError(f"{where}: ts {ts} is out of range [{TS_MIN}, {TS_MAX}]")
            try:
                values = [convert(json_text(row[c.name]), c, where) for c in self.schema.columns]
            except KeyError as exc:
                raise SourceDataError(f"{where}: missing {exc.args[0]}") from None
            if ts <= floor or (elements and ts < elements[-1][0]):
                raise SourceDataError(
                    f"{where}: ts {ts} is not after {max(floor, elements[-1][0] if elements else floor)}"
                )
            seq += 1
            elements.append((ts, seq, 1, *values))
        if watermark is not None and not (
            max(floor, elements[-1][0] - 1 if elements else floor) <= watermark <= TS_MAX
        ):
            raise SourceDataError(f"watermark {watermark} goes back in time or is out of range")
        mark = watermark if watermark is not None else (elements[-1][0] - 1 if elements else self.watermark)
        self._emit(elements, mark, clock.wall())
        if eos:
            self.stop()
        return len(elements)
