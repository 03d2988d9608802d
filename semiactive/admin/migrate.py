"""``semiactive migrate STAGE --to NODE``: move a running stage to a spare.

Asks the coordinator (``Migrate``), then, with ``--wait``, follows the
cluster state until the stage's primary is the target at a higher epoch,
printing each phase. Exit 0 when moved (or accepted, without --wait), 1
when refused or not done in time.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import grpc

from semiactive.admin.status import TIMEOUT_S, admin_security, cluster_state, coordinator_of
from semiactive.runtime.tls import COORDINATOR, Security
from semiactive.wire import coordinator_pb2 as cdpb
from semiactive.wire import coordinator_pb2_grpc as cdpb_grpc


async def _migrate(address: str, security: Security, stage: str, target: str, wait_s: float) -> int:
    async with security.channel(address, COORDINATOR) as channel:
        reply: cdpb.MigrateReply = await cdpb_grpc.CoordinatorStub(channel).Migrate(
            cdpb.MigrateRequest(stage=stage, target=target), timeout=TIMEOUT_S
        )
    if not reply.accepted:
        print(f"semiactive migrate: refused: {reply.message}", file=sys.stderr)
        return 1
    print(f"migrating {stage} to {target}", flush=True)
    if wait_s <= 0:
        return 0
    started = time.monotonic()
    last = ""
    while time.monotonic() - started < wait_s:
        state = await cluster_state(address, security)
        row = next(s for s in state.stages if s.stage == stage)
        now = f"primary {row.primary}, secondary {row.secondary or '-'}, epoch {row.epoch}"
        if now != last:
            print(f"  {time.monotonic() - started:6.2f} s  {now}", flush=True)
            last = now
        node = next((n for n in state.nodes if n.name == target), None)
        if row.primary == target and node is not None and node.role == "primary" and node.stage == stage:
            print(f"{stage} runs on {target} ({time.monotonic() - started:.2f} s)")
            return 0
        await asyncio.sleep(0.1)
    print(f"semiactive migrate: {stage} not on {target} after {wait_s:.0f} s", file=sys.stderr)
    return 1


def migrate(
    address: str,
    *,
    run_dir: Path | None,
    stage: str,
    target: str,
    wait_s: float,
    tls_dir: Path | None = None,
) -> int:
    if run_dir is not None:
        address = coordinator_of(run_dir)
    security = admin_security(run_dir, tls_dir)
    try:
        return asyncio.run(_migrate(address, security, stage, target, wait_s))
    except grpc.aio.AioRpcError as exc:
        print(
            f"semiactive migrate: coordinator {address}: {exc.code().name}: {exc.details()}", file=sys.stderr
        )
        return 1
