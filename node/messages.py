"""Conversions between the HA protocol's dataclasses and their protobuf
messages; the pure core never sees protobuf."""

from __future__ import annotations

from ha.resync import ResyncPoint
from ha.views import StageView
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import dataplane_pb2 as pb


def point_to_pb(point: ResyncPoint) -> pb.ResyncPoint:
    return pb.ResyncPoint(
        position=point.position,
        out_seq=point.out_seq,
        cut_position=point.cut_position,
        edge_cut=point.edge_cut,
        counters=[pb.Counters(values=list(c)) for c in point.counters],
        time=point.time,
    )


def point_from_pb(message: pb.ResyncPoint) -> ResyncPoint:
    return ResyncPoint(
        position=message.position,
        out_seq=message.out_seq,
        cut_position=message.cut_position,
        edge_cut=dict(message.edge_cut),
        counters=tuple(tuple(c.values) for c in message.counters),
        time=message.time,
    )


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
