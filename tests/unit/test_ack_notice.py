"""Ack notices (a consumer's Level-0/Level-1 relayed to its producer's
secondary) name an edge; one that is malformed or not an output of the
stage is refused with a log line, never an exception in the Ack handler."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from semiactive.ha.replica import Mode
from semiactive.ha.resync import ResyncPoint, StateSnapshot
from semiactive.ha.state_transfer import chunks
from semiactive.ha.views import ViewTable
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.peers import Peers
from semiactive.node.service.roles.replica import ReplicaRole
from semiactive.runtime.events import EventLog
from semiactive.runtime.messages import chunk_to_pb, point_to_pb
from semiactive.wire import dataplane_pb2 as pb
from tests.unit.ha_harness import build_topology


@pytest.fixture
def role(tmp_path: Path) -> ReplicaRole:
    topology = build_topology(tmp_path, ["REGISTER QUERY s1 AS SELECT id, val FROM s0 WHERE val > 1"])
    stage = topology.stages["stage-1"]
    return ReplicaRole(
        "sec-1",
        stage,
        topology,
        ViewTable(),
        Peers({}),
        NodeMetrics("sec-1", stage.name, "secondary"),
        EventLog("sec-1", None),
        Mode.SECONDARY,
    )


@pytest.mark.parametrize("edge", ["", "garbage", "->", "stage-9->sink", "node-0->stage-1", "stage-1->"])
def test_a_notice_for_a_malformed_or_unknown_edge_is_refused_with_a_log_line(
    role: ReplicaRole, edge: str, caplog: pytest.LogCaptureFixture
) -> None:
    notice = pb.AckNotice(edge=edge, sender="sink", epoch=0, seq=5)
    with caplog.at_level(logging.WARNING, logger="semiactive.node.service.roles.ack_notices"):
        role.on_notice(notice)
    assert f"refused an ack notice from sink for edge {edge!r}" in caplog.text
    assert all(c.acked == 0 for c in role.replica.log.edges.values())


def test_a_notice_for_an_output_edge_is_applied(role: ReplicaRole) -> None:
    (edge,) = role.stage.outputs
    role.on_notice(pb.AckNotice(edge=edge.id, sender="sink", epoch=0, seq=5))
    point = ResyncPoint(position=7, out_seq=7, cut_position=8, edge_cut={edge.id: 8})
    role.on_notice(pb.AckNotice(edge=edge.id, sender="sink", epoch=0, seq=7, point=point_to_pb(point)))
    cursors = role.replica.log.edges[edge.id]
    assert cursors.acked == 7 and cursors.point == point


def test_a_point_with_a_state_is_applied_only_once_its_state_arrived(
    role: ReplicaRole, caplog: pytest.LogCaptureFixture
) -> None:
    """The consumer sends the state a chunk per notice, then the point; a
    point whose state never arrived frees nothing (Level-0 still counts)."""
    (edge,) = role.stage.outputs
    state = StateSnapshot(40, bytes(range(256)) * 40)
    point = ResyncPoint(position=50, out_seq=9, cut_position=41, edge_cut={edge.id: 41}, state=state)
    with caplog.at_level(logging.WARNING, logger="semiactive.node.service.roles.ack_notices"):
        role.on_notice(pb.AckNotice(edge=edge.id, sender="n", epoch=0, seq=3, point=point_to_pb(point)))
    assert "never sent" in caplog.text
    cursors = role.replica.log.edges[edge.id]
    assert cursors.acked == 3 and cursors.point is None
    for chunk in chunks(state, size=1000):
        role.on_notice(pb.AckNotice(edge=edge.id, sender="n", epoch=0, seq=4, state=chunk_to_pb(chunk)))
    role.on_notice(pb.AckNotice(edge=edge.id, sender="n", epoch=0, seq=9, point=point_to_pb(point)))
    assert cursors.acked == 9 and cursors.point == point
    assert cursors.point is not None and cursors.point.state == state


def test_state_chunks_out_of_order_are_refused(role: ReplicaRole, caplog: pytest.LogCaptureFixture) -> None:
    (edge,) = role.stage.outputs
    pieces = list(chunks(StateSnapshot(40, b"x" * 3000), size=1000))
    with caplog.at_level(logging.WARNING, logger="semiactive.node.service.roles.ack_notices"):
        for chunk in (pieces[0], pieces[2], pieces[1]):
            role.on_notice(pb.AckNotice(edge=edge.id, sender="n", epoch=0, seq=1, state=chunk_to_pb(chunk)))
    assert caplog.text.count("does not continue") == 2
