"""Ack notices: a consumer's Level-0 and Level-1 (and, a chunk per notice,
the operator state a later point refers to), relayed to its producer's
secondary (ha-protocol.md "Flows"). They trim the secondary's output
queue as the acknowledgements trim the primary's log."""

from __future__ import annotations

import logging

from semiactive.ha.replica import StageReplica
from semiactive.ha.state_transfer import StateAssembler, StateTransferError
from semiactive.ha.views import ViewTable
from semiactive.runtime.messages import chunk_from_pb, point_from_pb
from semiactive.topology import Stage
from semiactive.wire import dataplane_pb2 as pb

log = logging.getLogger(__name__)


class AckNoticeReceiver:
    def __init__(self, node: str, stage: Stage, views: ViewTable, replica: StageReplica) -> None:
        self.node = node
        self.stage = stage
        self.views = views
        self.replica = replica
        self._states: dict[str, StateAssembler] = {}  # per output edge, the state being sent

    def on_notice(self, notice: pb.AckNotice) -> None:
        """Apply ``notice``. One for an edge that is not one of this stage's
        outputs (malformed, or another stage's), or whose state does not add
        up, is refused with a log line: it must never raise in the Ack
        handler."""
        edge = next((e for e in self.stage.outputs if e.id == notice.edge), None)
        if edge is None or notice.edge not in self.replica.log.edges:
            log.warning(
                "%s: refused an ack notice from %s for edge %r: not an output edge of stage %s",
                self.node,
                notice.sender or "?",
                notice.edge,
                self.stage.name,
            )
            return
        if self.views.stale(edge.consumer, notice.epoch):
            return
        states = self._states.setdefault(notice.edge, StateAssembler())
        point = None
        try:
            if notice.HasField("state"):
                states.add(chunk_from_pb(notice.state))
            elif notice.HasField("point"):
                point = point_from_pb(notice.point, states)
        except StateTransferError as exc:
            # Without the state, rows before the point's cut stay.
            log.warning(
                "%s: a notice from %s on %s not applied: %s", self.node, notice.sender, notice.edge, exc
            )
        self.replica.acknowledged(notice.edge, notice.seq, point)
