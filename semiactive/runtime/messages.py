"""Conversions between the HA protocol's dataclasses and their protobuf
messages; the pure core never sees protobuf."""

from __future__ import annotations

from semiactive.ha.resync import ResyncPoint
from semiactive.ha.state_transfer import Chunk, StateAssembler, StateTransferError
from semiactive.ha.views import StageView
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import dataplane_pb2 as pb


def point_to_pb(point: ResyncPoint) -> pb.ResyncPoint:
    """The point; a state it carries is referred to by position (its bytes
    travel apart, as :func:`chunk_to_pb` messages)."""
    message = pb.ResyncPoint(
        position=point.position,
        out_seq=point.out_seq,
        cut_position=point.cut_position,
        edge_cut=point.edge_cut,
        counters=[pb.Counters(values=list(c)) for c in point.counters],
        time=point.time,
    )
    if point.state is not None:
        message.state_position = point.state.position
    return message


def point_from_pb(message: pb.ResyncPoint, states: StateAssembler | None = None) -> ResyncPoint:
    """The point, with the state it refers to taken from ``states`` (what
    the same peer sent before). Raises
    :class:`~semiactive.ha.state_transfer.StateTransferError` if that state is not
    there."""
    point = ResyncPoint(
        position=message.position,
        out_seq=message.out_seq,
        cut_position=message.cut_position,
        edge_cut=dict(message.edge_cut),
        counters=tuple(tuple(c.values) for c in message.counters),
        time=message.time,
    )
    if not message.HasField("state_position"):
        return point
    if states is None:
        raise StateTransferError("a resync point with a state where no state was expected")
    return states.resolve(point, message.state_position)


def chunk_to_pb(chunk: Chunk) -> pb.StateChunk:
    return pb.StateChunk(position=chunk.position, total=chunk.total, offset=chunk.offset, data=chunk.data)


def chunk_from_pb(message: pb.StateChunk) -> Chunk:
    return Chunk(message.position, message.total, message.offset, message.data)


def view_to_pb(view: StageView) -> cpb.StageView:
    return cpb.StageView(
        stage=view.stage,
        epoch=view.epoch,
        version=view.version,
        primary=view.primary,
        secondary=view.secondary or "",
    )


def view_from_pb(message: cpb.StageView) -> StageView:
    return StageView(
        message.stage, message.epoch, message.version, message.primary, message.secondary or None
    )
