"""Telemetry records of a node, for the report job, and their reader.

A sample is the node's ``NodeStatus`` (the snapshot the coordinator and
the Prometheus scrape read too) flattened into one ``nodes`` record and one
``edges`` record per edge; the node's :class:`~semiactive.runtime.events.EventLog` appends
them to ``<run-dir>/telemetry/nodes-<node>.jsonl`` and ``edges-<node>.jsonl``.
The schema is docs/telemetry.md. ``since`` (the process's start) names a
series of cumulative counters.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from semiactive.wire import control_pb2 as cpb


def sample(status: cpb.NodeStatus, t: float, since: float) -> dict[str, list[dict[str, Any]]]:
    """The records of one sample, by file kind."""
    return {"nodes": [node_record(status, t, since)], "edges": edge_records(status, t, since)}


def node_record(status: cpb.NodeStatus, t: float, since: float) -> dict[str, Any]:
    return {
        "t": t,
        "node": status.name,
        "since": since,
        "stage": status.stage,
        "role": status.role,
        "state": status.state,
        "epoch": status.epoch,
        "tuples_in": status.tuples_in,
        "tuples_out": status.tuples_out,
        "operator_rows": status.operator_rows,
        "operator_busy_s": status.operator_busy_s,
        "input_backlog_rows": status.input_backlog,
        # Every output edge reports the same log; a node without one has none.
        "output_log_rows": status.outputs[0].retained if status.outputs else 0,
        "resyncs": status.resyncs,
        "finished": status.finished,
        "latency_rows": status.latency_rows,
        "latency_sum_s": status.latency_sum_s,
    }


def edge_records(status: cpb.NodeStatus, t: float, since: float) -> list[dict[str, Any]]:
    common = {
        "t": t,
        "node": status.name,
        "since": since,
        "stage": status.stage,
        "role": status.role,
        "epoch": status.epoch,
    }
    records = [
        {
            **common,
            "edge": e.edge,
            "direction": "out",
            "seq": e.seq,
            "acked": e.acked,
            "ack_lag_rows": max(0, e.seq - e.acked),
            "retained_rows": e.retained,
            "batch_size": e.batch_size,
            "data_rows": e.data_rows,
            "data_bytes": e.data_bytes,
            "backup_rows": e.backup_rows,
            "backup_bytes": e.backup_bytes,
            "backup_batches": e.backup_batches,
            "received_rows": 0,
        }
        for e in status.outputs
    ]
    records.extend(
        {
            **common,
            "edge": e.edge,
            "direction": "in",
            "seq": e.seq,
            "acked": 0,
            "ack_lag_rows": 0,
            "retained_rows": 0,
            "batch_size": 0,
            "data_rows": 0,
            "data_bytes": 0,
            "backup_rows": 0,
            "backup_bytes": 0,
            "backup_batches": 0,
            "received_rows": e.received_rows,
        }
        for e in status.inputs
    )
    return records


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a telemetry file; a line torn by a kill mid-write
    (the last one) is skipped."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            if line.strip():
                records.append(json.loads(line))
    return records
