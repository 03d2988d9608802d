"""``semiactive ingest FILE|- --source NAME (--run-dir RUN | --endpoint HOST:PORT)``:
rows from a CSV (with a header) or JSON Lines file pushed into an ``ingest``
source of a running cluster.

One ``Ingest.Send`` call per batch, so that what was taken is known batch by
batch: a refused batch stops the command at its line (exit 2, as bad input
anywhere), a source that goes away stops it too (exit 1), and both say how
many rows were taken and how to go on (``--skip N`` skips the N data rows
already taken). Rows travel as JSON objects: ``ts`` as an integer, every
other field as it was read; the source checks them against its schema.
"""

from __future__ import annotations

import asyncio
import csv
import io
import itertools
import json
import re
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import grpc

from semiactive.errors import UserError
from semiactive.runtime.tls import ADMIN, CA_FILE, Security
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc

PROGRESS_S = 2.0
CALL_TIMEOUT_S = 30.0
_ROW_IN_BATCH = re.compile(r"batch 1: row (\d+): (.*?)(?: \(1 of 1 batches refused;.*)?$", re.S)


@dataclass(frozen=True)
class Line:
    """One data row and the line of the file it was on."""

    number: int
    row: dict[str, Any]


@dataclass(frozen=True)
class Target:
    source: str
    address: str
    security: Security


def read_lines(handle: Iterable[str], where: str, kind: str) -> Iterator[Line]:
    """Data rows of a CSV (``kind`` csv) or JSON Lines file, numbered by line."""
    if kind == "csv":
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            return
        names = [h.strip() for h in header]
        if "ts" not in names:
            raise UserError(f"{where}:1: no ts column (columns: {', '.join(names)})")
        for fields in reader:
            if not fields:
                continue
            if len(fields) != len(names):
                raise UserError(
                    f"{where}:{reader.line_num}: {len(fields)} fields, the header has {len(names)}"
                )
            row: dict[str, Any] = dict(zip(names, (f.strip() for f in fields), strict=True))
            row["ts"] = _ts(row["ts"], f"{where}:{reader.line_num}")
            yield Line(reader.line_num, row)
        return
    for number, text in enumerate(handle, start=1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except ValueError as exc:
            raise UserError(f"{where}:{number}: not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise UserError(f"{where}:{number}: expected a JSON object")
        yield Line(number, row)


def _ts(text: str, where: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UserError(f"{where}: ts {text!r} is not an integer") from None


def kind_of(path: str, first: str, given: str | None) -> str:
    """csv or jsonl: as given, else by the file's extension, else by its first character."""
    if given is not None:
        return given
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    return "jsonl" if first.lstrip().startswith("{") else "csv"


def target_of(
    source: str, run_dir: Path | None, endpoint: str | None, tls_dir: Path | None, identity: str
) -> Target:
    """Where the source listens and who this command is: a run's own
    credentials (admin), or ``--tls-dir`` with ``--as``."""
    if run_dir is not None:
        try:
            doc = json.loads((run_dir / "cluster.json").read_text())
        except (OSError, ValueError):
            raise UserError(f"{run_dir}: no run there (no readable cluster.json)") from None
        processes = {p.get("name"): p for p in doc.get("processes", []) if isinstance(p, dict)}
        sources = sorted(
            str(n) for n, p in processes.items() if p.get("started_as", p.get("role")) == "source"
        )
        if source not in sources:
            raise UserError(f"--source {source}: no source of that name in this run ({', '.join(sources)})")
        p = processes[source]
        endpoint = f"{p.get('host', '127.0.0.1')}:{p['ports']['grpc']}"
        if tls_dir is None and (run_dir / "tls" / CA_FILE).exists():
            tls_dir = run_dir / "tls"
    if endpoint is None:
        raise UserError("give --run-dir RUN (a `cluster up` run) or --endpoint HOST:PORT")
    security = Security.load(tls_dir, identity) if tls_dir is not None else Security.insecure(identity)
    return Target(source, endpoint, security)


async def push(lines: Iterator[Line], target: Target, *, batch: int, skip: int, end: bool, where: str) -> int:
    """Send ``lines`` (past the first ``skip``) in batches; the exit status."""
    taken = 0
    last_line = 0
    last_seq = 0
    shown = time.monotonic()
    async with target.security.channel(target.address, target.source) as channel:
        stub = pb_grpc.IngestStub(channel)

        async def send(rows: list[Line], eos: bool) -> int | None:
            """The rows taken; None when the command must stop (said)."""
            nonlocal last_seq
            message = pb.IngestBatch(rows=[json.dumps(r.row) for r in rows], end_of_stream=eos)
            try:
                reply = await stub.Send(iter([message]), timeout=CALL_TIMEOUT_S)
            except grpc.aio.AioRpcError as exc:
                details = exc.details() or ""
                if exc.code() is grpc.StatusCode.INVALID_ARGUMENT:
                    match = _ROW_IN_BATCH.match(details.removeprefix("bad ingest batch: "))
                    at = f"{where}:{rows[int(match.group(1))].number}: " if match and rows else f"{where}: "
                    reason = match.group(2) if match else details
                    raise UserError(
                        f"{at}refused by {target.source}: {reason}; {_resume(taken, skip)}"
                    ) from None
                print(
                    f"semiactive ingest: {target.source} at {target.address}: {exc.code().name}: "
                    f"{details.splitlines()[0] if details else ''}; {_resume(taken, skip)}",
                    file=sys.stderr,
                )
                return None
            last_seq = int(reply.last_seq)
            return int(reply.accepted)

        pending: list[Line] = []
        for n, line in enumerate(lines):
            if n < skip:
                continue
            pending.append(line)
            if len(pending) >= batch:
                accepted = await send(pending, False)
                if accepted is None:
                    return 1
                taken += accepted
                last_line = pending[-1].number
                pending = []
                if time.monotonic() - shown >= PROGRESS_S:
                    shown = time.monotonic()
                    print(f"taken {taken:,} rows (through line {last_line})", file=sys.stderr, flush=True)
        if pending or end:
            accepted = await send(pending, end)
            if accepted is None:
                return 1
            taken += accepted
            last_line = pending[-1].number if pending else last_line
    through = f" (through line {last_line})" if last_line else ""
    ended = "; the stream has ended" if end else ""
    print(f"{target.source} took {taken:,} rows{through}, last seq {last_seq}{ended}")
    return 0


def _resume(taken: int, skip: int) -> str:
    return f"{taken:,} rows taken by this command; go on with --skip {skip + taken}"


def run_ingest(
    path: str,
    *,
    source: str,
    run_dir: Path | None,
    endpoint: str | None,
    tls_dir: Path | None,
    identity: str = ADMIN,
    file_format: str | None = None,
    batch: int = 1000,
    skip: int = 0,
    end: bool = False,
) -> int:
    if batch < 1 or skip < 0:
        raise UserError("--batch must be >= 1 and --skip >= 0")
    target = target_of(source, run_dir, endpoint, tls_dir, identity)
    if path == "-":
        stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", newline="")
        return _push_all(stdin, "<stdin>", "-", target, file_format, batch=batch, skip=skip, end=end)
    try:
        with Path(path).open(encoding="utf-8", newline="") as handle:
            return _push_all(handle, path, path, target, file_format, batch=batch, skip=skip, end=end)
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror}") from None


def _push_all(
    handle: TextIO,
    where: str,
    path: str,
    target: Target,
    given: str | None,
    *,
    batch: int,
    skip: int,
    end: bool,
) -> int:
    first = handle.readline()
    lines = read_lines(itertools.chain([first], handle), where, kind_of(path, first, given))
    return asyncio.run(push(lines, target, batch=batch, skip=skip, end=end, where=where))
