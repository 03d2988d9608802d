"""``semiactive query add FILE|-`` and ``semiactive query remove NAME...``:
queries registered with a running cluster's MQO stages.

A registration is a row pushed, as ``admin``, into the cluster's registry
source (``kind: registry``); the source stamps it with its own clock and the
MQO stages reading its stream apply it in their input order, the same on
every replica. The query text is checked here first (syntax, the streams and
columns the stage reads, the stage's output columns), so that a mistake is
a located error now rather than a refusal in the stage's events
(``mqo_registration``) later.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import grpc

from semiactive import config as config_mod
from semiactive import topology as topology_mod
from semiactive.config import REGISTRY_SCHEMA
from semiactive.errors import UserError
from semiactive.mqo.query import ContinuousQuery, parse_queries
from semiactive.mqo.stage import check_registration
from semiactive.runtime.process import addresses_from
from semiactive.runtime.tls import ADMIN, process_security
from semiactive.topology import Topology
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc

TEXT_BYTES = int(REGISTRY_SCHEMA["text"][5:-1])


class RegistrationError(UserError):
    pass


def _cluster(
    config: str | None, run_dir: Path | None, endpoints: Path | None, tls_dir: Path | None
) -> tuple[Topology, Path | None, Path | None]:
    """The topology, endpoints file and TLS directory, from a ``cluster up``
    run directory or given one by one."""
    if run_dir is not None:
        try:
            meta = json.loads((run_dir / "cluster.json").read_text())
        except (OSError, ValueError) as exc:
            raise RegistrationError(f"{run_dir}: not a cluster run directory: {exc}") from None
        config = config or meta.get("config")
        endpoints = endpoints or run_dir / "endpoints.json"
        if tls_dir is None and (run_dir / "tls").is_dir():
            tls_dir = run_dir / "tls"
    if not config:
        raise RegistrationError("give --config CONFIG (and --endpoints, --tls-dir) or --run-dir RUN")
    return topology_mod.resolve(config_mod.load(config)), endpoints, tls_dir


def _registry(topology: Topology, name: str | None) -> str:
    registries = [
        s.name for s in topology.stages.values() if s.source is not None and s.source.kind == "registry"
    ]
    if name is not None:
        if name not in registries:
            raise RegistrationError(
                f"--registry {name}: no registry source of that name ({', '.join(registries)})"
            )
        return name
    if len(registries) != 1:
        found = ", ".join(registries) or "none"
        raise RegistrationError(
            f"the cluster has {len(registries)} registry sources ({found}): name one with --registry"
        )
    return registries[0]


def _check(topology: Topology, registry: str, queries: list[ContinuousQuery]) -> None:
    stream = topology.stages[registry].output
    stages = [s for s in topology.stages.values() if s.mqo is not None and s.mqo.registry == stream]
    if not stages:
        raise RegistrationError(f"no MQO stage reads the registry {registry}'s stream {stream}")
    for q in queries:
        if len(q.text.encode()) > TEXT_BYTES:
            raise RegistrationError(f"query {q.name}: longer than {TEXT_BYTES} bytes")
        for stage in stages:
            assert stage.mqo is not None
            _, refused = check_registration(stage.mqo, set(), "add", q.name, q.text)
            if refused is not None:
                raise RegistrationError(f"query {q.name}: stage {stage.name} would refuse it: {refused}")


async def _send(
    topology: Topology, registry: str, address: str, tls_dir: Path | None, rows: list[str]
) -> int:
    security = process_security(ADMIN, tls_dir, topology.config.insecure)
    channel = security.channel(address, registry)
    try:
        stub = pb_grpc.IngestStub(channel)
        reply = await stub.Send(iter([pb.IngestBatch(rows=rows)]), timeout=10)
        return int(reply.accepted)
    except grpc.aio.AioRpcError as exc:
        raise RegistrationError(
            f"registry {registry} at {address}: {exc.code().name}: {exc.details()}"
        ) from None
    finally:
        await channel.close(None)


def run_registration(
    op: str,
    items: list[str],
    *,
    config: str | None,
    run_dir: Path | None,
    endpoints: Path | None,
    tls_dir: Path | None,
    registry: str | None,
) -> int:
    """``query add FILE|-`` (``items`` = [FILE]) or ``query remove NAME...``."""
    topology, endpoints, tls_dir = _cluster(config, run_dir, endpoints, tls_dir)
    name = _registry(topology, registry)
    if op == "add":
        (path,) = items
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
        queries = parse_queries(text, "<stdin>" if path == "-" else path)
        if not queries:
            raise RegistrationError(f"{path}: no CREATE statement")
        _check(topology, name, queries)
        rows = [json.dumps({"action": "add", "name": q.name, "text": q.text}) for q in queries]
        what = ", ".join(q.name for q in queries)
    else:
        rows = [json.dumps({"action": "remove", "name": n, "text": ""}) for n in items]
        what = ", ".join(items)
    address = addresses_from(topology, endpoints)[0][name]
    accepted = asyncio.run(_send(topology, name, address, tls_dir, rows))
    verb = "registration" if op == "add" else "removal"
    print(
        f"semiactive query {op}: {verb} of {what} taken by {name} ({accepted} rows); "
        "the stages apply it in their input order (events: mqo_registration)"
    )
    return 0
