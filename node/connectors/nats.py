"""A sink's NATS JetStream subject: one message per row, acknowledged by
the stream before the sink's progress moves (docs/connectors.md).

Exactly once across a kill of the sink: it acknowledges upstream (Level-1)
only seqs whose messages the stream has stored, so its producer's output
log keeps the rest; a sink started again reads the last message of its
subject (headers ``Semiactive-Run`` and ``Semiactive-Seq``) and asks for the
next seq. Messages are published in seq order on one connection, so what
the stream stored of a batch cut short is a prefix of it. Each carries
``Nats-Msg-Id`` = subject, run and seq: a message published again (a batch
retried after a lost answer) is dropped by the stream's deduplication.

The payload is the row as a file sink writes it (a JSON object with
``seq``, ``ts``, ``op`` for a relation, and the columns). The server may go
away while the sink runs: a write is retried with backoff until the stream
has it, and the sink's input waits meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from semiactive.config import NatsSinkConfig
from semiactive.errors import UserError
from semiactive.node.connectors.jsonl import formatter
from semiactive.node.connectors.retrying import connect_within, first_line, until_done
from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element

try:
    import nats
    import nats.errors
    import nats.js.errors
    from nats.js.api import StorageType
except ImportError:  # pragma: no cover - the extra is part of every test install
    nats = None  # type: ignore[assignment]


RUN = "Semiactive-Run"
SEQ = "Semiactive-Seq"
MSG_ID = "Nats-Msg-Id"
ACK_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 3.0
# Publishes in flight at once (the client's own bound is 4,000).
CHUNK = 2048


class NatsUnavailable(UserError):
    """The server could not be reached within the sink's start-up wait."""


def require_client(what: str = "sink") -> None:
    if nats is None:
        raise UserError(f"a nats {what} needs nats-py: pip install 'semiactive[nats]'")


def unreachable(stream: str, url: str, timeout_s: float) -> Callable[[BaseException], Exception]:
    """The start-up error of a sink or source whose server did not answer."""

    def error(exc: BaseException) -> Exception:
        return NatsUnavailable(
            f"cannot reach NATS stream {stream} at {url} after {timeout_s:g} s: {first_line(exc)}"
        )

    return error


def subject_matches(pattern: str, subject: str) -> bool:
    """Whether a stream subject ``pattern`` (``*``: one token, ``>``: the
    rest) takes ``subject``."""
    want, have = pattern.split("."), subject.split(".")
    for i, part in enumerate(want):
        if part == ">":
            return len(have) > i
        if i >= len(have) or (part != "*" and part != have[i]):
            return False
    return len(want) == len(have)


T = TypeVar("T")


async def _quiet(_: Exception) -> None:
    """The client's error callback: the sink logs what matters itself."""


async def connect(url: str, closed: asyncio.Event | None = None) -> Any:
    """One attempt, bounded: the client's own connect retries a refused
    server for minutes whatever ``allow_reconnect`` says. A connection
    lost later is not reconnected behind the sink's back: its next write
    connects again and reads the progress first. ``closed`` is set when
    the connection closes (see :func:`unless_closed`)."""

    async def on_closed() -> None:
        if closed is not None:
            closed.set()

    return await asyncio.wait_for(
        nats.connect(
            servers=[url],
            connect_timeout=2,
            allow_reconnect=False,
            max_reconnect_attempts=1,
            reconnect_time_wait=0.1,
            error_cb=_quiet,
            closed_cb=on_closed,
        ),
        CONNECT_TIMEOUT_S,
    )


async def unless_closed(call: Awaitable[T], closed: asyncio.Event) -> T:
    """``call`` (a request to the server), or ConnectionClosedError as soon
    as ``closed`` is set: nats-py leaves a request on a connection the
    server dropped waiting out its whole timeout (seconds in which a
    source saw no outage and read nothing)."""
    task = asyncio.ensure_future(call)
    waiter = asyncio.ensure_future(closed.wait())
    try:
        await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            task.add_done_callback(_retrieved)
    if not task.done():
        raise nats.errors.ConnectionClosedError
    return task.result()


def _retrieved(task: asyncio.Future[Any]) -> None:
    """A request given up on: its outcome is read so asyncio does not log it."""
    if not task.cancelled():
        task.exception()


class NatsSubject:
    """The subject one sink publishes to, for one run."""

    def __init__(
        self,
        config: NatsSinkConfig,
        run: str,
        schema: plan.Schema,
        kind: plan.Kind,
        on_outage: Callable[[str | None], None] | None = None,
    ) -> None:
        require_client()
        self.config = config
        self.run = run
        self.committed = 0  # the highest seq the stream stored for this run
        self._fmt = formatter(schema, kind)
        self._on_outage = on_outage
        self._nc: Any = None
        self._js: Any = None
        self._closed = asyncio.Event()  # set when the connection closes

    def describe(self) -> str:
        return f"NATS subject {self.config.subject} (run {self.run!r})"

    async def open(self) -> int:
        """Connect (waiting up to ``connect_timeout_s``), create the stream
        if absent, and return the highest seq it holds for this run."""
        cfg = self.config
        unavailable = unreachable(cfg.stream, cfg.url, cfg.connect_timeout_s)
        await connect_within(self._connect, self._disconnect, ERRORS, cfg.connect_timeout_s, unavailable)
        return self.committed

    async def prepare(self) -> None:
        """Connect now; :meth:`open` then only reads the progress."""
        with contextlib.suppress(*ERRORS):
            self._closed = asyncio.Event()
            self._nc = await connect(self.config.url, self._closed)

    async def _connect(self) -> None:
        cfg = self.config
        if self._nc is None or not self._nc.is_connected:
            self._closed = asyncio.Event()
            self._nc = await connect(cfg.url, self._closed)
        self._js = self._nc.jetstream(timeout=ACK_TIMEOUT_S)
        try:
            info = await self._js.stream_info(cfg.stream)
        except nats.js.errors.NotFoundError:
            info = await self._js.add_stream(
                name=cfg.stream, subjects=[cfg.subject], storage=StorageType.FILE
            )
        subjects = info.config.subjects or []
        if not any(subject_matches(s, cfg.subject) for s in subjects):
            raise UserError(
                f"NATS stream {cfg.stream} does not take subject {cfg.subject} "
                f"(its subjects: {', '.join(subjects) or 'none'})"
            )
        self.committed = await self._last_seq()

    async def _last_seq(self) -> int:
        try:
            msg = await self._js.get_last_msg(self.config.stream, self.config.subject)
        except nats.js.errors.NotFoundError:
            return 0
        headers = msg.headers or {}
        if headers.get(RUN) != self.run:
            return 0  # another run's: this one has written nothing yet
        return int(headers.get(SEQ, 0))

    async def write(self, rows: Sequence[Element]) -> None:
        """Publish ``rows`` (seqs above :attr:`committed`, in order) until
        the stream has stored every one, however long the server is away.
        After a lost connection the progress is read again."""

        async def attempt() -> None:
            if self._js is None:
                await self._connect()
            fresh = [r for r in rows if r[1] > self.committed]
            for first in range(0, len(fresh), CHUNK):
                await self._publish(fresh[first : first + CHUNK])

        what = f"NATS stream {self.config.stream}"
        await until_done(attempt, self._disconnect, ERRORS, what, self._on_outage)

    async def _publish(self, rows: Sequence[Element]) -> None:
        cfg, fmt = self.config, self._fmt
        futures = []
        for row in rows:
            seq = row[1]
            headers = {MSG_ID: f"{cfg.subject}:{self.run}:{seq}", RUN: self.run, SEQ: str(seq)}
            payload = fmt(seq, row)[:-1].encode()
            futures.append(await self._js.publish_async(cfg.subject, payload, headers=headers))
        acks = asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), ACK_TIMEOUT_S)
        done = await unless_closed(acks, self._closed)
        for result in done:
            if isinstance(result, BaseException):
                raise result
        self.committed = rows[-1][1]

    async def _disconnect(self) -> None:
        nc, self._nc, self._js = self._nc, None, None
        if nc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), 2)

    async def close(self) -> None:
        await self._disconnect()


ERRORS: tuple[type[BaseException], ...] = (OSError, TimeoutError, asyncio.TimeoutError)
if nats is not None:
    ERRORS += (nats.errors.Error, nats.js.errors.Error)


def read_subject(config: NatsSinkConfig, run: str) -> list[dict[str, Any]]:
    """What the sink published for ``run``, in seq order, as the JSON Lines
    records a file sink writes (``semiactive verify`` compares either)."""
    require_client()

    async def read() -> list[dict[str, Any]]:
        nc = await connect(config.url)
        try:
            js = nc.jetstream(timeout=10)
            records = []
            seq = 1
            while True:
                try:
                    msg = await js.get_msg(config.stream, seq=seq, subject=config.subject, next=True)
                except nats.js.errors.NotFoundError:
                    break
                if (msg.headers or {}).get(RUN) == run:
                    records.append(json.loads(msg.data))
                seq = msg.seq + 1
            return sorted(records, key=lambda r: r["seq"])
        finally:
            await nc.close()

    return asyncio.run(read())
