"""``semiactive status``: what the coordinator knows of a running cluster,
as a table or as JSON: every stage (primary, secondary, epoch, mode, batch
size, protected or not), for A-SAS every tuned edge (B, the estimates BW*
and R* against their limits, the measured backup bandwidth) and every node
(role, liveness, last report)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import Message

from semiactive.config import ConfigError
from semiactive.runtime.tls import ADMIN, CA_FILE, COORDINATOR, Security
from semiactive.wire import coordinator_pb2 as cdpb
from semiactive.wire import coordinator_pb2_grpc as cdpb_grpc
from semiactive.wire import dataplane_pb2 as pb

TIMEOUT_S = 2.0


def coordinator_of(run_dir: Path) -> str:
    """The coordinator's address from a ``cluster up`` run's ``cluster.json``."""
    try:
        doc = json.loads((run_dir / "cluster.json").read_text())
        process = next(p for p in doc["processes"] if p["role"] == "coordinator")
        return f"{process.get('host', '127.0.0.1')}:{process['ports']['grpc']}"
    except (OSError, ValueError, KeyError, StopIteration):
        raise ConfigError(
            "no coordinator in this run's cluster.json", str(run_dir / "cluster.json")
        ) from None


async def cluster_state(address: str, security: Security) -> cdpb.ClusterStatus:
    async with security.channel(address, COORDINATOR) as channel:
        state: cdpb.ClusterStatus = await cdpb_grpc.CoordinatorStub(channel).ClusterState(
            pb.Empty(), timeout=TIMEOUT_S
        )
        return state


def describe(state: cdpb.ClusterStatus) -> str:
    lines = [f"cluster {state.name} (coordinator up {state.uptime_s:.1f} s)", ""]
    lines.append(
        f"{'stage':<14}{'mode':<6}{'primary':<12}{'secondary':<12}{'epoch':>6}{'batch':>7}  protection"
    )
    for s in state.stages:
        if s.role != "stage" and not s.secondary:
            continue
        if s.role != "stage":  # a source or sink with a standby
            protection = f"{s.role}: standby up" if s.protected else f"{s.role}: STANDBY DOWN"
        else:
            protection = "-" if s.mode == "none" else "protected" if s.protected else "UNPROTECTED"
        batch = str(s.batch_size) if s.batch_size else "-"
        secondary = s.secondary or "-"
        lines.append(
            f"{s.stage:<14}{s.mode:<6}{s.primary:<12}{secondary:<12}{s.epoch:>6}{batch:>7}  {protection}"
        )
    tuned = [(s.stage, t) for s in state.stages for t in s.tuning]
    if tuned:
        lines += ["", "A-SAS (BW* eq. 2 and R* eq. 3 at the B measured under, against the limits)"]
        lines.append(
            f"{'edge':<24}{'tuner':<11}{'B':>6}{'BW* B/s':>10}{'max':>9}{'R* ms':>8}{'max':>6}{'sent':>10}"
        )
        for _, t in tuned:
            if t.measured:
                bw = f"{t.bw_estimate_bytes_per_s:>10.0f}{t.bw_max_bytes_per_s:>9.0f}"
                rec = f"{t.recovery_estimate_s * 1000:>8.1f}{t.recovery_max_s * 1000:>6.0f}"
                over = [
                    n
                    for n, o in (
                        ("BW", t.bw_estimate_bytes_per_s > t.bw_max_bytes_per_s),
                        ("R", t.recovery_estimate_s > t.recovery_max_s),
                    )
                    if o
                ]
                note = f"  over: {', '.join(over)}" if over else ""
            else:
                bw = f"{'?':>10}{t.bw_max_bytes_per_s:>9.0f}"
                rec = f"{'?':>8}{t.recovery_max_s * 1000:>6.0f}"
                note = "  (measuring)"
            lines.append(
                f"{t.edge:<24}{t.tuner:<11}{t.batch_size:>6}{bw}{rec}{t.backup_bytes_per_s:>10.0f}{note}"
            )
    lines += ["", f"{'node':<12}{'role':<11}{'stage':<14}{'liveness':<9}last report"]
    for n in state.nodes:
        age = f"{n.last_report_s:.1f} s ago" if n.last_report_s >= 0 else "never"
        away = f"  OUTAGE: {n.outage}" if n.outage else ""
        lines.append(f"{n.name:<12}{n.role or '?':<11}{n.stage or '-':<14}{n.liveness:<9}{age}{away}")
    return "\n".join(lines)


def plain(message: Message) -> dict[str, Any]:
    """A message as JSON values under its .proto field names, every field
    present, 64-bit integers as numbers (protobuf's own JSON mapping writes
    them as strings, and names in camelCase)."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            out[field.name] = dict(value)
        elif field.message_type is not None and field.is_repeated:
            out[field.name] = [plain(v) for v in value]
        elif field.message_type is not None:
            out[field.name] = plain(value)
        elif field.is_repeated:
            out[field.name] = list(value)
        else:
            out[field.name] = value
    return out


def unreachable(address: str, run_dir: Path | None, exc: grpc.aio.AioRpcError) -> str:
    """Why the coordinator does not answer, as far as this side can tell."""
    said = f"{exc.code().name}: {(exc.details() or '').splitlines()[0]}"
    doc = _cluster_json(run_dir) if run_dir is not None else None
    if doc is not None:
        pid = doc.get("launcher_pid")
        if isinstance(pid, int) and not _alive(pid):
            return f"the run in {run_dir} has ended (its launcher is gone): no coordinator to ask"
        if doc.get("t0_unix") is None:
            return f"the run in {run_dir} is starting: its coordinator does not answer yet ({said})"
        return f"the coordinator of the run in {run_dir} ({address}) does not answer: {said}"
    return (
        f"no coordinator answers at {address} ({said}): is a cluster running there? "
        "(--run-dir RUN_DIR for a `cluster up` run, --coordinator HOST:PORT or $SEMIACTIVE_COORDINATOR)"
    )


def _cluster_json(run_dir: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((run_dir / "cluster.json").read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def admin_security(run_dir: Path | None, tls_dir: Path | None) -> Security:
    """The operator's credentials: ``--tls-dir``, else a run's own
    (``RUN_DIR/tls``); insecure when the run has none (``insecure: true``)."""
    if tls_dir is None and run_dir is not None:
        tls_dir = run_dir / "tls"
        if not (tls_dir / CA_FILE).exists():
            return Security.insecure(ADMIN)
    if tls_dir is None:
        return Security.insecure(ADMIN)
    return Security.load(tls_dir, ADMIN)


def show_status(address: str, *, run_dir: Path | None, as_json: bool, tls_dir: Path | None = None) -> int:
    if run_dir is not None:
        address = coordinator_of(run_dir)
    security = admin_security(run_dir, tls_dir)
    try:
        state = asyncio.run(cluster_state(address, security))
    except grpc.aio.AioRpcError as exc:
        print(f"semiactive status: {unreachable(address, run_dir, exc)}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(plain(state), indent=2))
    else:
        print(describe(state))
    return 0
