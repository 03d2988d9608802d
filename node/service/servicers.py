"""The node's gRPC control and ingest endpoints: thin shells that check
who calls (mutual TLS names the caller) and hand the request to the
:class:`~semiactive.node.service.daemon.NodeDaemon`."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.message import DecodeError

from semiactive.node.connectors.sources import SourceDataError
from semiactive.node.service.roles.source import SourceRole
from semiactive.runtime import authorization
from semiactive.runtime.messages import view_from_pb
from semiactive.runtime.tls import caller
from semiactive.topology import NodeRole
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import control_pb2_grpc as cpb_grpc
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from semiactive.node.service.daemon import NodeDaemon

log = logging.getLogger(__name__)


class ControlServicer(cpb_grpc.ControlServicer):
    def __init__(self, node: NodeDaemon) -> None:
        self.node = node

    async def _check(
        self, context: grpc.aio.ServicerContext[Any, Any], what: str, refusal: str | None
    ) -> None:
        if refusal is not None:
            self.node.record_refusal(what, caller(context), refusal)
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal)

    async def Status(self, request: pb.Empty, context: object) -> cpb.NodeStatus:
        return self.node.status()

    async def Start(self, request: cpb.StartRequest, context: grpc.aio.ServicerContext[Any, Any]) -> pb.Empty:
        await self._check(context, "start", authorization.may_control(caller(context), "start"))
        self.node.start(request.t0_unix)
        return pb.Empty()

    async def Stop(self, request: cpb.StopRequest, context: grpc.aio.ServicerContext[Any, Any]) -> pb.Empty:
        await self._check(context, "stop", authorization.may_control(caller(context), "stop"))
        self.node.stop(request.exit, request.now)
        return pb.Empty()

    async def UpdateView(
        self, request: cpb.StageView, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.Empty:
        try:
            view = view_from_pb(request)
        except (ValueError, KeyError) as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad view: {exc}")
        refusal = authorization.may_change_view(caller(context), self.node.views, view)
        await self._check(context, "view", refusal)
        self.node.apply_view(request)
        return pb.Empty()

    async def Heartbeat(
        self, request_iterator: AsyncIterator[cpb.Ping], context: grpc.aio.ServicerContext[cpb.Ping, cpb.Pong]
    ) -> AsyncIterator[cpb.Pong]:
        """Pongs only while this node is the primary of the pinged stage: a
        node restarted under a dead primary's name, or a primary since
        fenced, must not look like the primary its secondary watches."""
        who = caller(context)
        try:
            async for ping in request_iterator:
                yield await self._pong(context, who, ping)
        except DecodeError:  # refused without a traceback in the log
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "undecodable ping")

    async def _pong(
        self, context: grpc.aio.ServicerContext[cpb.Ping, cpb.Pong], who: str | None, ping: cpb.Ping
    ) -> cpb.Pong:
        node = self.node
        if who is not None and ping.sender != who:
            await self._check(context, "heartbeat", f"{who} pings as {ping.sender!r}")
        stage = node.stage.name if node.stage is not None else ""
        if node.role != NodeRole.PRIMARY or (ping.stage and ping.stage != stage):
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, f"{node.name} is not the primary of {ping.stage}"
            )
        return cpb.Pong(n=ping.n, epoch=node.views[stage].epoch)


def _json_row(text: str) -> Any:
    """One ingested row; what no JSON parser could take (a number of more
    than 4300 digits, nesting deeper than the recursion limit) is bad
    input like any syntax error."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise SourceDataError(f"unreadable row: {str(exc)[:200]}") from None


class IngestServicer(pb_grpc.IngestServicer):
    def __init__(self, source: SourceRole) -> None:
        self.source = source

    async def Send(
        self, request_iterator: object, context: grpc.aio.ServicerContext[pb.IngestBatch, pb.IngestReply]
    ) -> pb.IngestReply:
        refusal = authorization.may_ingest(caller(context))
        if refusal is not None:
            log.warning("refused ingest: %s", refusal)
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal)
        accepted = 0
        refused: list[str] = []
        batches = 0
        try:
            async for batch in request_iterator:  # type: ignore[attr-defined]
                batches += 1
                try:
                    rows = [_json_row(r) for r in batch.rows]
                    watermark = batch.watermark if batch.HasField("watermark") else None
                    await self.source.outbound.wait_room()
                    accepted += self.source.ingest(rows, watermark, batch.end_of_stream)
                except (json.JSONDecodeError, SourceDataError, AttributeError) as exc:
                    # Refused whole; the call goes on with the next batch.
                    refused.append(f"batch {batches}: {exc}")
        except DecodeError:  # refused without a traceback in the log
            refused.append(f"batch {batches + 1}: undecodable")
        head = self.source.log.head
        if refused:
            # An error status, so that no producer takes a refusal for a
            # success; what was taken is in the trailers and the message.
            context.set_trailing_metadata((("accepted", str(accepted)), ("last-seq", str(head))))
            shown = "; ".join(refused[:5]) + (f"; and {len(refused) - 5} more" if len(refused) > 5 else "")
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"bad ingest batch: {shown} ({len(refused)} of {batches} batches refused; "
                f"{accepted} rows accepted, last seq {head})",
            )
        return pb.IngestReply(accepted=accepted, last_seq=head)
