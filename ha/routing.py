"""Who talks to whom under the current views (ha-protocol.md, "Flows").

For an edge ``U -> X``: U's primary sends data to X's primary and, when X
is protected by AS or SAS, backup batches to X's secondary. X's primary
acknowledges on the data stream (Level-0, Level-1) and sends Level-0 with
its latest point to U's secondary. Both the node daemon and the in-memory
simulation route by these rules.
"""

from __future__ import annotations

from ha.output_log import UNBOUNDED
from ha.replica import batch_size
from ha.views import StageView, ViewTable
from semiactive.topology import Edge, Stage, Topology


def initial_views(topology: Topology) -> ViewTable:
    return ViewTable(
        StageView(stage.name, 0, 0, stage.primary, stage.secondary) for stage in topology.stages.values()
    )


def ha_mode(stage: Stage) -> str:
    return stage.config.ha.mode if stage.config is not None else "none"


def consumer_batch_sizes(topology: Topology, producer: Stage) -> dict[str, int]:
    """Per output edge of ``producer``: the batch size its consumer asks for."""
    sizes = {}
    for edge in producer.outputs:
        consumer = topology.stages[edge.consumer]
        if consumer.config is None:
            configured = UNBOUNDED
        elif consumer.config.ha.mode == "asas":
            configured = consumer.config.ha.initial_batch_size
        else:
            configured = consumer.config.ha.batch_size
        sizes[edge.id] = batch_size(ha_mode(consumer), configured)
    return sizes


def data_target(views: ViewTable, edge: Edge) -> str:
    return views[edge.consumer].primary


def backup_target(topology: Topology, views: ViewTable, edge: Edge) -> str | None:
    """The consumer's secondary, if its mode ships backups (AS, SAS, A-SAS)."""
    if ha_mode(topology.stages[edge.consumer]) not in ("as", "sas", "asas"):
        return None
    return views[edge.consumer].secondary


def producer_secondary(views: ViewTable, edge: Edge) -> str | None:
    """Where a consumer sends Level-0 notices besides the data stream."""
    return views[edge.producer].secondary
