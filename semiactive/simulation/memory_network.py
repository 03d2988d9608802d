"""gRPC in memory: the network of the deterministic simulation.

:class:`MemoryNetwork` implements :class:`semiactive.runtime.network.Network` with
channels and servers that speak the gRPC asyncio API the node code uses
(generated stubs and servicers, ``read``/``write``/``done_writing``,
``abort``, status codes, ``auth_context``), so the real daemons, senders,
roles and coordinator run over it unchanged. Messages are serialized and
parsed as on the wire; each arrives after a seeded latency, in order per
direction; a stream holds at most :data:`WINDOW` unread messages, so a
reader that stops reading stops its writer, as HTTP/2 flow control does.

:class:`Fabric` is the network between all processes, and where link
faults are injected: a **cut** resets every connection between two
processes and refuses new ones until healed (a crashed switch port, a
firewall rule); a **stall** holds their messages until healed, then
delivers them all (a congested or flapping link); ``slow`` adds latency.
Killing a process resets its connections and frees its address.

Every caller is authenticated as the process it is (``auth_context`` has
its name as a certificate's common name): the authorization rules run as
with mutual TLS.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import inspect
import logging
import random
from collections.abc import AsyncIterator, Callable, Generator
from dataclasses import dataclass
from typing import Any

import grpc

from semiactive.simulation.virtual_loop import VirtualLoop

log = logging.getLogger(__name__)

WINDOW = 64  # unread messages per direction of a stream
CONNECT_S = 0.0005  # how long a refused connection takes to fail
Serializer = Callable[[Any], bytes] | None


def rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


@dataclass(frozen=True)
class _Status:
    code: grpc.StatusCode
    details: str


class _HalfClose:
    def __repr__(self) -> str:
        return "END"


_END = _HalfClose()  # the writer's half-close


class _Pipe:
    """One direction of one call: FIFO, latency, flow control, stalls."""

    def __init__(self, call: _Call, source: str, target: str) -> None:
        self.call = call
        self.source = source
        self.target = target
        self.inbox: collections.deque[object] = collections.deque()
        self.held: list[object] = []
        self.unread = 0
        self.last_at = 0.0
        self.readers: list[asyncio.Future[None]] = []
        self.writers: list[asyncio.Future[None]] = []

    def send(self, item: object) -> None:
        fabric = self.call.fabric
        loop = fabric.loop
        now = loop.time()
        at = max(self.last_at + 1e-7, now + fabric.latency(self.source, self.target))
        self.last_at = at
        if _is_message(item):
            self.unread += 1
        loop.call_as(None, at - now, lambda: self._arrive(item))

    def _arrive(self, item: object) -> None:
        if self.call.reset is not None:
            return
        self.call.fabric.record(self.source, self.target, item)
        if self.call.fabric.stalled_between(self.source, self.target):
            self.held.append(item)
            return
        self.inbox.append(item)
        _wake(self.readers)

    def release(self) -> None:
        held, self.held = self.held, []
        self.inbox.extend(held)
        if held:
            _wake(self.readers)

    async def get(self) -> object:
        while not self.inbox:
            if self.call.reset is not None:
                raise self.call.reset_error()
            waiter = asyncio.get_running_loop().create_future()
            self.readers.append(waiter)
            await waiter
        item = self.inbox.popleft()
        if _is_message(item):
            self.unread -= 1
            _wake(self.writers)
        return item

    async def room(self) -> None:
        while self.unread >= WINDOW:
            if self.call.reset is not None:
                raise self.call.reset_error()
            waiter = asyncio.get_running_loop().create_future()
            self.writers.append(waiter)
            await waiter
        if self.call.reset is not None:
            raise self.call.reset_error()

    def wake_all(self) -> None:
        _wake(self.readers)
        _wake(self.writers)


def _is_message(item: object) -> bool:
    """A message, as opposed to a half-close or a final status (which flow
    control does not count)."""
    return item is not _END and not isinstance(item, _Status)


def _wake(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)
    waiters.clear()


class _Call:
    """One RPC between a client process and a server process."""

    def __init__(self, fabric: Fabric, client: str, address: str, method: str) -> None:
        self.fabric = fabric
        self.client = client
        self.address = address
        self.method = method
        self.server: str = fabric.owner_of(address) or f"?{address}"
        self.up = _Pipe(self, client, self.server)
        self.down = _Pipe(self, self.server, client)
        self.reset: _Status | None = None  # broken without an orderly status
        self.cancelled = False
        self.status: _Status | None = None  # the status the client read
        self.handler: asyncio.Task[None] | None = None
        self.channel_calls: dict[_Call, None] | None = None
        fabric.calls[self] = None

    def between(self, a: str, b: str) -> bool:
        return {self.client, self.server} == {a, b}

    def involves(self, name: str) -> bool:
        return name in (self.client, self.server)

    def fail(self, code: grpc.StatusCode, details: str, cancelled: bool = False) -> None:
        if self.reset is not None or self.status is not None:
            return
        self.reset = _Status(code, details)
        self.cancelled = cancelled
        self._forget()
        self.up.wake_all()
        self.down.wake_all()
        if self.handler is not None and not self.handler.done():
            self.handler.cancel()

    def reset_error(self) -> BaseException:
        assert self.reset is not None
        if self.cancelled:
            return asyncio.CancelledError()
        error: BaseException = rpc_error(self.reset.code, self.reset.details)
        return error

    def finished(self, status: _Status) -> None:
        self.status = status
        self._forget()

    def _forget(self) -> None:
        self.fabric.calls.pop(self, None)
        if self.channel_calls is not None:
            self.channel_calls.pop(self, None)


class _ClientCall:
    """The client's side of a call (what a stub's method returns)."""

    def __init__(
        self,
        channel: MemoryChannel,
        method: str,
        serialize: Serializer,
        deserialize: Serializer,
        timeout: float | None,
    ) -> None:
        self._call = channel.fabric.open(channel, method)
        self._serialize = serialize or (lambda m: m)
        self._deserialize = deserialize or (lambda b: b)
        self._half_closed = False
        self._result: asyncio.Future[None] | None = None
        if timeout is not None:
            call = self._call
            channel.fabric.loop.call_as(
                None, timeout, lambda: call.fail(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
            )

    # stream requests ---------------------------------------------------------------

    async def write(self, message: Any) -> None:
        call = self._call
        if call.status is not None:
            self._raise_for_status()
            raise asyncio.InvalidStateError("RPC already finished.")
        if self._half_closed:
            raise asyncio.InvalidStateError("RPC is half closed after calling done_writing.")
        await call.up.room()
        call.up.send(self._serialize(message))

    async def done_writing(self) -> None:
        if not self._half_closed and self._call.reset is None and self._call.status is None:
            self._half_closed = True
            self._call.up.send(_END)

    # responses ---------------------------------------------------------------------

    async def read(self) -> Any:
        call = self._call
        if call.status is not None:
            self._raise_for_status()
            return grpc.aio.EOF
        item = await call.down.get()
        if isinstance(item, _Status):
            call.finished(item)
            self._raise_for_status()
            return grpc.aio.EOF
        return self._deserialize(item)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._responses()

    async def _responses(self) -> AsyncIterator[Any]:
        while True:
            message = await self.read()
            if message is grpc.aio.EOF:
                return
            yield message

    def _raise_for_status(self) -> None:
        status = self._call.status
        if status is not None and status.code is not grpc.StatusCode.OK:
            raise rpc_error(status.code, status.details)

    async def _final(self) -> Any:
        """The single response of a unary-response call, or the end of a
        streaming one."""
        response: Any = None
        while self._call.status is None:
            message = await self.read()
            if message is not grpc.aio.EOF:
                response = message
        self._raise_for_status()
        return response

    def __await__(self) -> Generator[Any, None, Any]:
        return self._final().__await__()

    def cancel(self) -> bool:
        call = self._call
        if call.reset is not None or call.status is not None:
            return False
        call.fail(grpc.StatusCode.CANCELLED, "Locally cancelled by application!", cancelled=True)
        return True

    def done(self) -> bool:
        return self._call.reset is not None or self._call.status is not None

    async def code(self) -> grpc.StatusCode:
        with_status = self._call.status or self._call.reset
        return with_status.code if with_status is not None else grpc.StatusCode.OK

    async def details(self) -> str:
        with_status = self._call.status or self._call.reset
        return with_status.details if with_status is not None else ""


class _MultiCallable:
    def __init__(
        self, channel: MemoryChannel, method: str, serialize: Serializer, deserialize: Serializer
    ) -> None:
        self.channel = channel
        self.method = method
        self.serialize = serialize
        self.deserialize = deserialize


class _RequestStreaming(_MultiCallable):
    def __call__(
        self, request_iterator: Any = None, *, timeout: float | None = None, **_: Any
    ) -> _ClientCall:
        call = _ClientCall(self.channel, self.method, self.serialize, self.deserialize, timeout)
        if request_iterator is not None:
            raise NotImplementedError("the simulation's streams are written with write()")
        return call


class _UnaryRequest(_MultiCallable):
    def __call__(self, request: Any, *, timeout: float | None = None, **_: Any) -> _ClientCall:
        call = _ClientCall(self.channel, self.method, self.serialize, self.deserialize, timeout)
        call._call.up.send(call._serialize(request))
        call._call.up.send(_END)
        call._half_closed = True
        return call


class MemoryChannel:
    """A channel from the process ``client`` to the server at ``address``."""

    def __init__(self, fabric: Fabric, client: str, address: str) -> None:
        self.fabric = fabric
        self.client = client
        self.address = address
        self.calls: dict[_Call, None] = {}

    def _unary_request(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Serializer = None,
        **_: Any,
    ) -> _UnaryRequest:
        return _UnaryRequest(self, method, request_serializer, response_deserializer)

    def _streaming_request(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Serializer = None,
        **_: Any,
    ) -> _RequestStreaming:
        return _RequestStreaming(self, method, request_serializer, response_deserializer)

    # What generated stubs call; a response stream is read the same way
    # whatever the request side is.
    unary_unary = unary_stream = _unary_request
    stream_unary = stream_stream = _streaming_request

    async def close(self, grace: float | None = None) -> None:
        for call in list(self.calls):
            call.fail(grpc.StatusCode.CANCELLED, "Channel closed!")
        self.calls.clear()

    async def __aenter__(self) -> MemoryChannel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.status = _Status(code, details)


class _ServerContext:
    """What a servicer method gets as ``context``."""

    def __init__(self, call: _Call, deserialize: Serializer, serialize: Serializer) -> None:
        self._call = call
        self._deserialize = deserialize or (lambda b: b)
        self._serialize = serialize or (lambda m: m)
        self._ended = False

    async def read(self) -> Any:
        if self._ended:
            return grpc.aio.EOF
        item = await self._call.up.get()
        if item is _END:
            self._ended = True
            return grpc.aio.EOF
        return self._deserialize(item)  # what does not parse raises in the handler, as in gRPC

    async def write(self, message: Any) -> None:
        await self._call.down.room()
        self._call.down.send(self._serialize(message))

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: object = ()) -> None:
        raise _Aborted(code, details)

    def auth_context(self) -> dict[str, list[bytes]]:
        if not self._call.fabric.authenticated:
            return {}
        return {"x509_common_name": [self._call.client.encode()], "transport_security_type": [b"ssl"]}

    def peer(self) -> str:
        return f"memory:{self._call.client}"

    def invocation_metadata(self) -> tuple[()]:
        return ()

    def cancelled(self) -> bool:
        return self._call.cancelled

    def done(self) -> bool:
        return self._call.reset is not None or self._call.status is not None


class MemoryServer:
    """A gRPC server of one process: generated ``add_*_to_server``
    functions register their method handlers here."""

    def __init__(self, fabric: Fabric, owner: str, process: str) -> None:
        self.fabric = fabric
        self.owner = owner
        self.process = process
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}
        self.address: str | None = None
        self.serving = False

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        pass  # the registered method handlers below say the same

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        for name, handler in handlers.items():
            self.handlers[f"/{service}/{name}"] = handler

    async def start(self) -> None:
        self.serving = True

    async def stop(self, grace: float | None) -> None:
        self.serving = False
        self.fabric.unbind(self)
        for call in list(self.fabric.calls):
            if call.server == self.owner and call.address == self.address:
                call.fail(grpc.StatusCode.UNAVAILABLE, "Server shutting down")

    async def wait_for_termination(self, timeout: float | None = None) -> bool:
        return True

    def accept(self, call: _Call) -> None:
        handler = self.handlers.get(call.method)
        if handler is None:
            call.down.send(_Status(grpc.StatusCode.UNIMPLEMENTED, f"Method not found: {call.method}"))
            return
        loop = self.fabric.loop
        call.handler = loop.spawn(self.process, self._serve(call, handler))

    async def _serve(self, call: _Call, handler: grpc.RpcMethodHandler) -> None:
        context = _ServerContext(call, handler.request_deserializer, handler.response_serializer)
        try:
            if handler.request_streaming:
                request: Any = _requests(context)
            else:
                try:
                    request = await context.read()
                except Exception:  # gRPC answers this before any handler runs
                    raise _Aborted(grpc.StatusCode.INTERNAL, "Exception deserializing request!") from None
                if request is grpc.aio.EOF:
                    raise _Aborted(grpc.StatusCode.INTERNAL, "no request")
            behavior = (
                handler.stream_stream or handler.stream_unary or handler.unary_stream or handler.unary_unary
            )
            result = behavior(request, context)
            if inspect.isasyncgen(result):
                async for response in result:
                    await context.write(response)
            else:
                response = await result
                if not handler.response_streaming and response is not None:
                    await context.write(response)
            call.down.send(_Status(grpc.StatusCode.OK, ""))
        except _Aborted as exc:
            call.down.send(exc.status)
        except grpc.aio.AbortError:
            call.down.send(_Status(grpc.StatusCode.UNKNOWN, "aborted"))
        except asyncio.CancelledError:
            raise
        except grpc.aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.CANCELLED and call.reset is not None:
                return
            self.fabric.handler_errors.append(f"{self.owner} {call.method}: {exc!r}")
            call.down.send(_Status(grpc.StatusCode.UNKNOWN, f"Unexpected error: {exc!r}"))
        except Exception as exc:
            if call.reset is not None:
                return  # the connection broke under the handler
            log.exception("%s: unexpected error in %s", self.owner, call.method)
            self.fabric.handler_errors.append(f"{self.owner} {call.method}: {exc!r}")
            call.down.send(_Status(grpc.StatusCode.UNKNOWN, f"Unexpected error: {exc!r}"))


async def _requests(context: _ServerContext) -> AsyncIterator[Any]:
    while True:
        message = await context.read()
        if message is grpc.aio.EOF:
            return
        yield message


class Fabric:
    """The network between all the simulated processes, and its faults."""

    def __init__(
        self,
        loop: VirtualLoop,
        rng: random.Random,
        latency_s: tuple[float, float] = (0.0001, 0.001),
        authenticated: bool = True,
    ) -> None:
        self.loop = loop
        self.rng = rng
        self.latency_s = latency_s
        self.authenticated = authenticated
        self.servers: dict[str, MemoryServer] = {}  # by address
        self.calls: dict[_Call, None] = {}  # ordered: a fault breaks calls in a stable order
        self.cut: set[frozenset[str]] = set()
        self.stalled: set[frozenset[str]] = set()
        self.slow: dict[frozenset[str], float] = {}
        self.handler_errors: list[str] = []
        self.messages = 0
        self._trace = hashlib.blake2b(digest_size=16)

    def record(self, source: str, target: str, item: object) -> None:
        """Fold a delivery into the run's trace: two runs with the same
        trace delivered the same messages at the same virtual times."""
        self.messages += 1
        body = item if isinstance(item, bytes) else repr(item).encode()
        self._trace.update(f"{self.loop.time():.9f} {source} {target} {len(body)}|".encode())

    @property
    def trace(self) -> str:
        return self._trace.hexdigest()

    def network(self, name: str, process: str) -> MemoryNetwork:
        return MemoryNetwork(self, name, process)

    # -- links -----------------------------------------------------------------------

    def latency(self, source: str, target: str) -> float:
        low, high = self.latency_s
        return self.rng.uniform(low, high) + self.slow.get(frozenset((source, target)), 0.0)

    def connected(self, a: str, b: str) -> bool:
        return a == b or frozenset((a, b)) not in self.cut

    def stalled_between(self, a: str, b: str) -> bool:
        return a != b and frozenset((a, b)) in self.stalled

    def cut_link(self, a: str, b: str) -> None:
        self.cut.add(frozenset((a, b)))
        for call in list(self.calls):
            if call.between(a, b):
                call.fail(grpc.StatusCode.UNAVAILABLE, "Connection reset by peer (link cut)")

    def stall_link(self, a: str, b: str) -> None:
        self.stalled.add(frozenset((a, b)))

    def heal(self, a: str, b: str) -> None:
        pair = frozenset((a, b))
        self.cut.discard(pair)
        self.stalled.discard(pair)
        self.slow.pop(pair, None)
        for call in list(self.calls):
            if call.between(a, b):
                call.up.release()
                call.down.release()

    # -- processes -------------------------------------------------------------------

    def owner_of(self, address: str) -> str | None:
        server = self.servers.get(address)
        return server.owner if server is not None else None

    def bind(self, server: MemoryServer, address: str) -> int:
        current = self.servers.get(address)
        if current is not None and current is not server:
            return 0
        self.servers[address] = server
        server.address = address
        return 1

    def unbind(self, server: MemoryServer) -> None:
        if server.address is not None and self.servers.get(server.address) is server:
            del self.servers[server.address]

    def kill(self, name: str) -> None:
        """The process ``name`` died: its connections reset, its port freed."""
        for address, server in list(self.servers.items()):
            if server.owner == name:
                server.serving = False
                del self.servers[address]
        for call in list(self.calls):
            if call.involves(name):
                call.fail(grpc.StatusCode.UNAVAILABLE, f"Connection reset by peer ({name} died)")

    def open(self, channel: MemoryChannel, method: str) -> _Call:
        call = _Call(self, channel.client, channel.address, method)
        channel.calls[call] = None
        call.channel_calls = channel.calls
        self.loop.call_as(None, self.latency(call.client, call.server), lambda: self._connect(call))
        return call

    def _connect(self, call: _Call) -> None:
        if call.reset is not None:
            return
        server = self.servers.get(call.address)
        if server is None or not server.serving or not self.connected(call.client, server.owner):
            call.fail(grpc.StatusCode.UNAVAILABLE, f"failed to connect to all addresses ({call.address})")
            return
        server.accept(call)

    async def reachable(self, address: str) -> bool:
        await asyncio.sleep(CONNECT_S)
        server = self.servers.get(address)
        # A probe across a cut link times out, which a prober takes for open.
        return server is not None and server.serving


class MemoryNetwork:
    """One process's view of the :class:`Fabric`."""

    def __init__(self, fabric: Fabric, name: str, process: str) -> None:
        self.fabric = fabric
        self._name = name
        self.process = process

    @property
    def name(self) -> str:
        return self._name

    def channel(self, address: str, peer: str) -> grpc.aio.Channel:
        return MemoryChannel(self.fabric, self._name, address)  # type: ignore[return-value]

    def server(self) -> grpc.aio.Server:
        return MemoryServer(self.fabric, self._name, self.process)  # type: ignore[return-value]

    def listen(self, server: grpc.aio.Server, address: str) -> int:
        assert isinstance(server, MemoryServer)
        return self.fabric.bind(server, address)

    async def reachable(self, address: str) -> bool:
        return await self.fabric.reachable(address)
