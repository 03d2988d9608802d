"""The coordinator's web page (the placement paper's GUI): ``--http PORT``.

Plain HTTP/1.1 on the coordinator's host, read-only: ``/`` is the page,
``/state`` one JSON snapshot (:class:`semiactive.coordinator.live_view.LiveView`),
``/events`` a Server-Sent Events stream of snapshots (every half second)
and control events as they happen. Hardened like the metrics endpoint:
GET and HEAD only, a bounded request head read within 10 s, at most
``MAX_STREAMS`` open streams (more are answered 503).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from importlib import resources
from typing import Any

from semiactive.coordinator.live_view import LiveView
from semiactive.runtime import clock
from semiactive.runtime.metrics_endpoint import bind

log = logging.getLogger(__name__)

MAX_STREAMS = 16
PERIOD_S = 0.5
PAGE = "index.html"


class WebServer:
    def __init__(self, view: LiveView) -> None:
        self.view = view
        self.streams = 0
        self.page = (resources.files("semiactive.coordinator") / "web" / PAGE).read_bytes()

    async def serve(self, host: str, port: int) -> asyncio.Server:
        return await asyncio.start_server(self._answer, sock=bind(host, port))

    async def sample(self) -> None:
        """Record rates, u and failovers for the page's history, forever."""
        while True:
            self.view.sample(clock.wall(), clock.monotonic())
            await asyncio.sleep(PERIOD_S)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
            method, target = ([*head.split(b"\r\n", 1)[0].decode("latin-1").split(), "", ""])[:2]
            path = target.split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                await _reply(writer, "405 Method Not Allowed", b"read-only\n", "text/plain", method)
            elif path == "/":
                await _reply(writer, "200 OK", self.page, "text/html; charset=utf-8", method)
            elif path == "/state":
                body = json.dumps(self.view.snapshot(clock.monotonic())).encode()
                await _reply(writer, "200 OK", body, "application/json", method)
            elif path == "/events" and method == "GET":
                await self._stream(reader, writer)
            else:
                await _reply(writer, "404 Not Found", b"/, /state, /events\n", "text/plain", method)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        except Exception:  # a page must never take the coordinator down
            log.exception("web: cannot answer")
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.streams >= MAX_STREAMS:
            await _reply(writer, "503 Service Unavailable", b"too many open streams\n", "text/plain", "GET")
            return
        self.streams += 1
        pending: deque[dict[str, Any]] = deque(maxlen=1000)
        self.view.listeners.append(pending)
        try:
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                b"Connection: close\r\n\r\n"
            )
            while not reader.at_eof() and not writer.is_closing():
                while pending:
                    writer.write(_sse("log", pending.popleft()))
                writer.write(_sse("state", self.view.snapshot(clock.monotonic())))
                await asyncio.wait_for(writer.drain(), 5.0)  # a reader that stopped reading is dropped
                await asyncio.sleep(PERIOD_S)
        finally:
            self.view.listeners.remove(pending)
            self.streams -= 1


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


async def _reply(writer: asyncio.StreamWriter, status: str, body: bytes, kind: str, method: str) -> None:
    header = (
        f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
        "Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
    )
    writer.write(header.encode() + (body if method != "HEAD" else b""))
    await writer.drain()
