"""The Grafana dashboards of a cluster, as code (grafana-foundation-sdk).

Three dashboards with fixed uids, over the Prometheus datasource that
``deploy/grafana/provisioning/datasources/`` provisions (uid
``semiactive-prometheus``): the cluster overview, high availability, and
node detail; each has the template variables ``stage`` and ``node``.
docs/operations.md lists the metrics they read.

``python deploy/grafana/dashboards.py [DIR]`` (``make dashboards``), a build
step and never imported by the package, writes them
to ``deploy/grafana/dashboards/<uid>.json``, which Grafana loads through
``deploy/grafana/provisioning/dashboards/``; the JSON is committed and
never edited by hand (tests/unit/test_dashboards.py compares it with this).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import common, prometheus, stat, timeseries
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as common_model
from grafana_foundation_sdk.models import dashboard as model

DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="semiactive-prometheus")
DEFAULT_DIR = Path(__file__).resolve().parent / "dashboards"
TAGS = ["semiactive"]

# Label matchers every query narrows to the selected stages and nodes.
STAGE = 'stage=~"$stage"'
NODE = 'node=~"$node"'
STAGE_NODE = f"{STAGE}, {NODE}"
INTO_STAGE = 'edge=~".*->$stage"'  # edges into the selected stages
RATE = "[$__rate_interval]"
RANGE = "[$__range]"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    queries: Sequence[Query]
    unit: str = "short"
    kind: str = "timeseries"  # or "stat"
    width: int = 12
    height: int = 8


def q(expr: str, legend: str = "") -> Query:
    return Query(expr, legend)


def rate(metric: str, matchers: str, by: str) -> str:
    return f"sum by ({by}) (rate({metric}{{{matchers}}}{RATE}))"


def increase(metric: str, matchers: str, by: str, window: str = RATE) -> str:
    return f"sum by ({by}) (increase({metric}{{{matchers}}}{window}))"


def quantile(phi: float, histogram: str, matchers: str, by: str, window: str = RATE) -> str:
    return (
        f"histogram_quantile({phi}, sum by (le, {by}) (increase({histogram}_bucket{{{matchers}}}{window})))"
    )


def overhead(by: str, matchers: str, cumulative: bool = False) -> str:
    """Backup bytes over data bytes: per unit of time, or since each
    producer started (what the telemetry's overhead is)."""

    def side(channel: str) -> str:
        series = f'semiactive_edge_sent_bytes_total{{channel="{channel}", {matchers}}}'
        return f"sum by ({by}) ({series})" if cumulative else f"sum by ({by}) (rate({series}{RATE}))"

    return f"{side('backup')} / {side('data')}"


# -- the dashboards ------------------------------------------------------------------------------


def overview_rows() -> list[tuple[str, list[Panel]]]:
    return [
        (
            "Cluster",
            [
                Panel(
                    "Nodes alive",
                    "Nodes reporting to the coordinator.",
                    [q("semiactive_coordinator_nodes_alive")],
                    kind="stat",
                    width=4,
                    height=4,
                ),
                Panel(
                    "Stages protected",
                    "HA stages whose secondary is alive and serves them.",
                    [q(f"sum(semiactive_coordinator_stage_protected{{{STAGE}}})")],
                    kind="stat",
                    width=4,
                    height=4,
                ),
                Panel(
                    "Stages unprotected",
                    "HA stages without a serving secondary (re-protection pending).",
                    [q(f"sum(1 - semiactive_coordinator_stage_protected{{{STAGE}}})")],
                    kind="stat",
                    width=4,
                    height=4,
                ),
                Panel(
                    "Failovers",
                    "Takeovers since the cluster started (sum of the stages' epochs).",
                    [q(f"sum(semiactive_coordinator_failovers_total{{{STAGE}}})")],
                    kind="stat",
                    width=4,
                    height=4,
                ),
                Panel(
                    "Targets up",
                    "Processes Prometheus scrapes successfully.",
                    [q('sum(up{job=~"semiactive.*"})')],
                    kind="stat",
                    width=4,
                    height=4,
                ),
                Panel(
                    "Rows lost",
                    "Rows a consumer needed that its producer had already freed: never expected.",
                    [q("sum(semiactive_rows_lost_total)")],
                    kind="stat",
                    width=4,
                    height=4,
                ),
                Panel(
                    "Epoch per stage",
                    "A stage's epoch goes up by one at every takeover.",
                    [q(f"semiactive_coordinator_stage_epoch{{{STAGE}}}", "{{stage}}")],
                    width=12,
                ),
                Panel(
                    "Primary per stage",
                    "Who serves each stage, from the coordinator's newest view.",
                    [
                        q(
                            f"semiactive_coordinator_stage_info{{{STAGE}}}",
                            "{{stage}}: {{primary}} / {{secondary}}",
                        )
                    ],
                    width=12,
                ),
            ],
        ),
        (
            "Throughput",
            [
                Panel(
                    "Rows out per stage",
                    "Rows each stage's primary (or source) writes on its data channels.",
                    [
                        q(
                            rate("semiactive_edge_sent_rows_total", f'channel="data", {STAGE}', "stage"),
                            "{{stage}}",
                        )
                    ],
                    unit="rowsps",
                ),
                Panel(
                    "Rows in per stage and node",
                    "Rows admitted on input edges (primaries and secondaries).",
                    [
                        q(
                            rate("semiactive_edge_received_rows_total", STAGE_NODE, "stage, node"),
                            "{{stage}} {{node}}",
                        )
                    ],
                    unit="rowsps",
                ),
                Panel(
                    "Bandwidth per channel",
                    "Bytes per second on data and backup channels.",
                    [q(rate("semiactive_edge_sent_bytes_total", STAGE, "channel"), "{{channel}}")],
                    unit="Bps",
                ),
                Panel(
                    "Backup bandwidth overhead",
                    "Backup bytes over data bytes, all edges.",
                    [q(overhead("", STAGE).replace("sum by () ", "sum "), "overhead")],
                    unit="percentunit",
                ),
                Panel(
                    "Sink latency",
                    "Source-to-sink latency of delivered rows.",
                    [
                        q(quantile(0.5, "semiactive_sink_latency_seconds", NODE, "node"), "p50 {{node}}"),
                        q(quantile(0.99, "semiactive_sink_latency_seconds", NODE, "node"), "p99 {{node}}"),
                    ],
                    unit="s",
                    width=24,
                ),
            ],
        ),
        (
            "Queues",
            [
                Panel(
                    "Input backlog",
                    "Rows received, not yet processed.",
                    [q(f"semiactive_input_backlog_rows{{{STAGE_NODE}}}", "{{node}}")],
                    width=8,
                ),
                Panel(
                    "Output log",
                    "Rows retained in the output log (not yet cut by Level-1).",
                    [q(f"semiactive_output_log_rows{{{STAGE_NODE}}}", "{{node}}")],
                    width=8,
                ),
                Panel(
                    "Level-0 ack lag",
                    "Rows produced, not yet acknowledged by the consumer.",
                    [q(f"max by (edge) (semiactive_edge_ack_lag_rows{{{STAGE}}})", "{{edge}}")],
                    width=8,
                ),
            ],
        ),
    ]


def ha_rows() -> list[tuple[str, list[Panel]]]:
    return [
        (
            "Backup bandwidth",
            [
                Panel(
                    "Backup overhead per edge",
                    "Backup bytes over data bytes per second, per edge into the selected stages.",
                    [q(overhead("edge", INTO_STAGE), "{{edge}}")],
                    unit="percentunit",
                ),
                Panel(
                    "Backup overhead per edge, since the producer started",
                    "Cumulative backup bytes over data bytes of each edge's producer: what the "
                    "telemetry (edges-*.jsonl) reports.",
                    [q(overhead("edge", INTO_STAGE, cumulative=True), "{{edge}}")],
                    unit="percentunit",
                ),
                Panel(
                    "Data and backup bandwidth per edge",
                    "Bytes per second per edge into the selected stages and channel.",
                    [
                        q(
                            rate("semiactive_edge_sent_bytes_total", INTO_STAGE, "edge, channel"),
                            "{{edge}} {{channel}}",
                        )
                    ],
                    unit="Bps",
                    width=24,
                ),
            ],
        ),
        (
            "Batch size and Adaptive SAS",
            [
                Panel(
                    "B in force",
                    "Rows per backup batch on each edge into the selected stages, as the producer "
                    "applies it (0: no backup).",
                    [
                        q(
                            f"max by (edge) (semiactive_edge_backup_batch_size_rows{{{INTO_STAGE}}})",
                            "{{edge}}",
                        )
                    ],
                ),
                Panel(
                    "B decided by the tuner",
                    "A-SAS: the batch size the coordinator's tuner decided, and how often it changed it.",
                    [
                        q(f"semiactive_asas_batch_size_rows{{{STAGE}}}", "B {{edge}} ({{tuner}})"),
                        q(
                            increase("semiactive_asas_batch_size_changes_total", STAGE, "edge", RANGE),
                            "changes {{edge}}",
                        ),
                    ],
                ),
                Panel(
                    "BW* against bw_max",
                    "A-SAS: estimated backup bandwidth (eq. 2), its limit, the measured one.",
                    [
                        q(f"semiactive_asas_bandwidth_estimate_bytes_per_second{{{STAGE}}}", "BW* {{edge}}"),
                        q(f"semiactive_asas_bandwidth_limit_bytes_per_second{{{STAGE}}}", "bw_max {{edge}}"),
                        q(
                            f"semiactive_asas_backup_bandwidth_bytes_per_second{{{STAGE}}}",
                            "measured {{edge}}",
                        ),
                    ],
                    unit="Bps",
                ),
                Panel(
                    "R* against recovery_max",
                    "A-SAS: estimated recovery time (eq. 3) and its limit.",
                    [
                        q(f"semiactive_asas_recovery_estimate_seconds{{{STAGE}}}", "R* {{edge}}"),
                        q(f"semiactive_asas_recovery_limit_seconds{{{STAGE}}}", "recovery_max {{edge}}"),
                    ],
                    unit="s",
                ),
            ],
        ),
        (
            "Failovers and recovery",
            [
                Panel(
                    "Failovers per stage",
                    "Takeovers since the cluster started (the stage's epoch, from the coordinator).",
                    [q(f"semiactive_coordinator_failovers_total{{{STAGE}}}", "{{stage}}")],
                    kind="stat",
                    width=8,
                ),
                Panel(
                    "Protected",
                    "1 while the stage has a live secondary serving it.",
                    [q(f"semiactive_coordinator_stage_protected{{{STAGE}}}", "{{stage}}")],
                    width=8,
                ),
                Panel(
                    "Re-protections",
                    "Spares the coordinator assigned as new secondaries, in the time range.",
                    [
                        q(
                            increase("semiactive_coordinator_reprotections_total", STAGE, "stage", RANGE),
                            "{{stage}}",
                        )
                    ],
                    width=8,
                ),
                Panel(
                    "Detection time",
                    "How long the primary had been silent when its secondary declared it failed "
                    "(median and maximum bucket over the time range).",
                    [
                        q(
                            quantile(0.5, "semiactive_failure_detection_seconds", STAGE, "stage", RANGE),
                            "p50 {{stage}}",
                        ),
                        q(
                            quantile(1.0, "semiactive_failure_detection_seconds", STAGE, "stage", RANGE),
                            "max {{stage}}",
                        ),
                    ],
                    unit="s",
                    width=8,
                ),
                Panel(
                    "Recovery time",
                    "From detection to reproducing the old primary's output (median and maximum "
                    "bucket over the time range).",
                    [
                        q(
                            quantile(0.5, "semiactive_recovery_seconds", STAGE, "stage", RANGE),
                            "p50 {{stage}}",
                        ),
                        q(
                            quantile(1.0, "semiactive_recovery_seconds", STAGE, "stage", RANGE),
                            "max {{stage}}",
                        ),
                    ],
                    unit="s",
                    width=8,
                ),
                Panel(
                    "Takeovers",
                    "Takeovers per stage and node in each interval (from the nodes' events).",
                    [q(f"sum by (stage, node) (increase(semiactive_takeovers_total{{{STAGE}}}{RATE}))")],
                    width=8,
                ),
                Panel(
                    "Heartbeats missed",
                    "Heartbeats of a secondary its primary did not answer within the interval.",
                    [
                        q(
                            rate("semiactive_heartbeats_missed_total", STAGE_NODE, "stage, node"),
                            "{{stage}} {{node}}",
                        )
                    ],
                    unit="short",
                    width=8,
                ),
                Panel(
                    "Level-0 ack lag per edge",
                    "Rows produced on each edge into the selected stages, not yet acknowledged.",
                    [q(f"max by (edge) (semiactive_edge_ack_lag_rows{{{INTO_STAGE}}})", "{{edge}}")],
                    width=8,
                ),
                Panel(
                    "Level-1 lag per edge",
                    "Rows retained on each edge into the selected stages, not yet cut by Level-1.",
                    [q(f"max by (edge) (semiactive_edge_retained_rows{{{INTO_STAGE}}})", "{{edge}}")],
                    width=8,
                ),
            ],
        ),
    ]


def node_rows() -> list[tuple[str, list[Panel]]]:
    by = "node, edge"
    return [
        (
            "Node",
            [
                Panel(
                    "Role",
                    "What each node serves now.",
                    [
                        q(
                            f"semiactive_node_info{{{STAGE_NODE}}}",
                            "{{node}}: {{role}} of {{stage}} ({{state}})",
                        )
                    ],
                    kind="stat",
                    width=12,
                    height=4,
                ),
                Panel(
                    "Epoch",
                    "The stage's epoch as each node holds it.",
                    [q(f"semiactive_stage_epoch{{{STAGE_NODE}}}", "{{node}}")],
                    kind="stat",
                    width=12,
                    height=4,
                ),
                Panel(
                    "CPU",
                    "CPU seconds per second of the process.",
                    [q(f"rate(process_cpu_seconds_total{{{NODE}}}{RATE})", "{{node}}")],
                    unit="percentunit",
                    width=8,
                ),
                Panel(
                    "Memory",
                    "Resident memory of the process.",
                    [q(f"process_resident_memory_bytes{{{NODE}}}", "{{node}}")],
                    unit="bytes",
                    width=8,
                ),
                Panel(
                    "Operator",
                    "Share of time the operator section is busy.",
                    [q(f"rate(semiactive_operator_busy_seconds_total{{{STAGE_NODE}}}{RATE})", "{{node}}")],
                    unit="percentunit",
                    width=8,
                ),
            ],
        ),
        (
            "Edges",
            [
                Panel(
                    "Rows out per edge and channel",
                    "Rows written per output edge and channel.",
                    [
                        q(
                            rate("semiactive_edge_sent_rows_total", STAGE_NODE, f"{by}, channel"),
                            "{{node}} {{edge}} {{channel}}",
                        )
                    ],
                    unit="rowsps",
                ),
                Panel(
                    "Bytes out per edge and channel",
                    "Bytes written per output edge and channel.",
                    [
                        q(
                            rate("semiactive_edge_sent_bytes_total", STAGE_NODE, f"{by}, channel"),
                            "{{node}} {{edge}} {{channel}}",
                        )
                    ],
                    unit="Bps",
                ),
                Panel(
                    "Rows in per edge",
                    "Rows admitted per input edge.",
                    [q(rate("semiactive_edge_received_rows_total", STAGE_NODE, by), "{{node}} {{edge}}")],
                    unit="rowsps",
                ),
                Panel(
                    "Acknowledgement lag",
                    "Per output edge: rows not yet acknowledged (Level-0) and not yet cut (Level-1).",
                    [
                        q(f"semiactive_edge_ack_lag_rows{{{STAGE_NODE}}}", "L0 {{node}} {{edge}}"),
                        q(f"semiactive_edge_retained_rows{{{STAGE_NODE}}}", "L1 {{node}} {{edge}}"),
                    ],
                ),
                Panel(
                    "Queues",
                    "Rows waiting in the input section and retained in the output log.",
                    [
                        q(f"semiactive_input_backlog_rows{{{STAGE_NODE}}}", "input {{node}}"),
                        q(f"semiactive_output_log_rows{{{STAGE_NODE}}}", "output log {{node}}"),
                    ],
                ),
                Panel(
                    "Backup batch size",
                    "Rows per backup batch B in force per output edge (0: no backup).",
                    [q(f"semiactive_edge_backup_batch_size_rows{{{STAGE_NODE}}}", "{{node}} {{edge}}")],
                ),
            ],
        ),
        (
            "Health",
            [
                Panel(
                    "Heartbeats",
                    "Heartbeats a secondary sent to its primary, and those unanswered, per second.",
                    [
                        q(rate("semiactive_heartbeats_sent_total", STAGE_NODE, "node"), "sent {{node}}"),
                        q(rate("semiactive_heartbeats_missed_total", STAGE_NODE, "node"), "missed {{node}}"),
                    ],
                    width=8,
                ),
                Panel(
                    "Refused and dropped",
                    "Requests refused, frames refused, duplicate rows dropped, per second.",
                    [
                        q(
                            rate("semiactive_requests_refused_total", NODE, "node, request"),
                            "{{node}} {{request}}",
                        ),
                        q(
                            rate("semiactive_frames_refused_total", NODE, "node, reason"),
                            "{{node}} {{reason}}",
                        ),
                        q(rate("semiactive_duplicate_tuples_total", NODE, "node"), "duplicates {{node}}"),
                    ],
                    width=8,
                ),
                Panel(
                    "Resyncs and rows lost",
                    "Times a replica rebuilt from a resync point; rows lost (never expected).",
                    [
                        q(f"semiactive_resyncs_total{{{STAGE_NODE}}}", "resyncs {{node}}"),
                        q(f"sum by (node) (semiactive_rows_lost_total{{{NODE}}})", "lost {{node}}"),
                    ],
                    width=8,
                ),
            ],
        ),
    ]


DASHBOARDS: dict[str, tuple[str, str, Callable[[], list[tuple[str, list[Panel]]]]]] = {
    "semiactive-overview": (
        "semiactive: cluster overview",
        "Throughput, bandwidth, queues and latency of the whole cluster.",
        overview_rows,
    ),
    "semiactive-ha": (
        "semiactive: high availability",
        "Backup overhead, batch size B, A-SAS estimates against their limits, failovers, "
        "detection and recovery times.",
        ha_rows,
    ),
    "semiactive-node": (
        "semiactive: node detail",
        "One node's process, edges, queues and health.",
        node_rows,
    ),
}


# -- building -------------------------------------------------------------------------------------


def variable(name: str, query: str, label: str) -> dash.QueryVariable:
    return (
        dash.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(query)
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .current(model.VariableOption(selected=True, text=["All"], value=["$__all"]))
    )


def build_panel(panel: Panel, id_: int) -> timeseries.Panel | stat.Panel:
    builder: timeseries.Panel | stat.Panel
    if panel.kind == "stat":
        builder = (
            stat.Panel()
            .reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
            .graph_mode(common_model.BigValueGraphMode.NONE)
            .text_mode(common_model.BigValueTextMode.VALUE_AND_NAME)
        )
    else:
        builder = (
            timeseries.Panel()
            .legend(
                common.VizLegendOptions()
                .display_mode(common_model.LegendDisplayMode.LIST)
                .placement(common_model.LegendPlacement.BOTTOM)
                .show_legend(True)
            )
            .tooltip(
                common.VizTooltipOptions()
                .mode(common_model.TooltipDisplayMode.MULTI)
                .sort(common_model.SortOrder.DESCENDING)
            )
        )
    builder.id(id_).title(panel.title).description(panel.description).datasource(DATASOURCE)
    builder.unit(panel.unit).span(panel.width).height(panel.height)
    for i, query in enumerate(panel.queries):
        target = prometheus.Dataquery().expr(query.expr).ref_id(chr(ord("A") + i)).datasource(DATASOURCE)
        if query.legend:
            target.legend_format(query.legend)
        builder.with_target(target)
    return builder


def build(uid: str) -> model.Dashboard:
    title, description, rows = DASHBOARDS[uid]
    board = (
        dash.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .refresh("5s")
        .time("now-15m", "now")
        .timezone("browser")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .with_variable(variable("stage", "label_values(semiactive_node_info, stage)", "Stage"))
        .with_variable(variable("node", 'label_values(semiactive_node_info{stage=~"$stage"}, node)', "Node"))
    )
    for uid_other, (other, _, _) in DASHBOARDS.items():
        if uid_other != uid:
            board.link(
                dash.DashboardLink(other)
                .type(model.DashboardLinkType.LINK)
                .url(f"/d/{uid_other}")
                .include_vars(True)
                .keep_time(True)
            )
    ids = iter(range(1, 1000))
    for row, panels in rows():
        board.with_row(dash.Row(row).id(next(ids)))
        for panel in panels:
            board.with_panel(build_panel(panel, next(ids)))
    return board.build()


def render(uid: str) -> str:
    """The dashboard's JSON, as committed."""
    return json.dumps(build(uid), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def expressions(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query of a dashboard's JSON, rows' panels included."""
    out = []
    for panel in board.get("panels", []):
        out.extend(expressions(panel))
        out.extend((panel.get("title", ""), target["expr"]) for target in panel.get("targets") or [])
    return out


def write(directory: Path = DEFAULT_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for uid in DASHBOARDS:
        path = directory / f"{uid}.json"
        path.write_text(render(uid))
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR):
        print(path)
