"""Who talks to whom under the current views (ha-protocol.md, "Flows").

For an edge ``U -> X``: U's primary sends data to X's primary and, when X
is protected by AS or SAS, backup batches to X's secondary. X's primary
acknowledges on the data stream (Level-0, Level-1) and sends Level-0 with
its latest point to U's secondary. The node daemon routes by these rules.
"""

from __future__ import annotations

from semiactive.ha.replica import batch_size
from semiactive.ha.stage import EdgeSpec, StageGraph, StageSpec
from semiactive.ha.views import StageView, ViewTable


def initial_views(topology: StageGraph) -> ViewTable:
    return ViewTable(
        StageView(stage.name, 0, 0, stage.primary, stage.secondary) for stage in topology.stages.values()
    )


def consumer_batch_sizes(topology: StageGraph, producer: StageSpec) -> dict[str, int]:
    """Per output edge of ``producer``: the batch size its consumer asks for."""
    sizes = {}
    for edge in producer.outputs:
        consumer = topology.stages[edge.consumer]
        sizes[edge.id] = batch_size(consumer.ha_mode, consumer.ha_batch_size)
    return sizes


def data_target(views: ViewTable, edge: EdgeSpec) -> str:
    return views[edge.consumer].primary


def backup_target(topology: StageGraph, views: ViewTable, edge: EdgeSpec) -> str | None:
    """The consumer's secondary, if its mode ships backups (AS, SAS, A-SAS)."""
    if not topology.stages[edge.consumer].ha_mode.ships_backups:
        return None
    return views[edge.consumer].secondary


def producer_secondary(views: ViewTable, edge: EdgeSpec) -> str | None:
    """Where a consumer sends Level-0 notices besides the data stream."""
    return views[edge.producer].secondary
