"""The Prometheus endpoint of a process (node or coordinator): plain
HTTP/1.1 on the process's own event loop, so that a scrape reads its state
between two steps of it, never halfway. Hardened: GET and HEAD of
``/metrics`` only, a request head read within 10 s, one request per
connection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable

from prometheus_client.core import Metric
from prometheus_client.samples import Sample

log = logging.getLogger(__name__)

# What generate_latest writes (Prometheus's text format 0.0.4).
EXPOSITION_FORMAT = "text/plain; version=0.0.4; charset=utf-8"


def with_labels(family: Metric, labels: dict[str, str]) -> Metric:
    out = Metric(family.name, family.documentation, family.type, family.unit)
    out.samples = [
        Sample(s.name, {**labels, **s.labels}, s.value, s.timestamp, s.exemplar) for s in family.samples
    ]
    return out


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (SO_REUSEADDR, as gRPC binds); ``host`` may be a
    name, an IPv4 or a bracketed IPv6 address."""
    host = host.strip("[]")
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(16)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def serve_metrics(host: str, port: int, render: Callable[[], bytes]) -> asyncio.Server:
    """Serve ``render()`` at ``/metrics`` on the running loop; the caller
    closes the server."""
    return await asyncio.start_server(lambda r, w: _answer(r, w, render), sock=bind(host, port))


async def _answer(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, render: Callable[[], bytes]
) -> None:
    """One HTTP/1.1 request, then close: GET or HEAD of ``/metrics`` (or
    ``/``); anything else 404 or 405."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
        method, target = ([*head.split(b"\r\n", 1)[0].decode("latin-1").split(), "", ""])[:2]
        path = target.split("?", 1)[0]
        kind = "text/plain; charset=utf-8"
        if method not in ("GET", "HEAD"):
            status, body = "405 Method Not Allowed", b"GET /metrics\n"
        elif path in ("/metrics", "/"):
            try:
                status, body, kind = "200 OK", render(), EXPOSITION_FORMAT
            except Exception as exc:  # a scrape must not take the node down; say why it failed
                log.exception("metrics: cannot render")
                status, body = "500 Internal Server Error", f"cannot render metrics: {exc!r}\n".encode()
        else:
            status, body = "404 Not Found", b"GET /metrics\n"
        header = (
            f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        )
        writer.write(header.encode() + (body if method != "HEAD" else b""))
        await writer.drain()
    except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
