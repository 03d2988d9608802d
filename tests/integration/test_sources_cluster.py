"""Sources in a real cluster: a file replay, the gRPC ingest endpoint, and a
stage with an emulated operator cost. Each run's sink must equal a reference
computed here in plain Python from what went in."""

from __future__ import annotations

import contextlib
import itertools
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from semiactive.wire import control_pb2 as cpb
from semiactive.wire import control_pb2_grpc as cpb_grpc
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc
from tests.processes import (
    ROOT,
    assert_no_processes,
    issue_tls,
    read_jsonl,
    semiactive,
    sync_channel,
    write_config,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

TOTALS = (
    "REGISTER QUERY totals AS\n"
    "  ISTREAM(SELECT sensor, SUM(temp) AS total FROM readings [Range Unbounded] GROUP BY sensor)\n"
)


def running_totals(rows: list[tuple[int, str, int]], key: str = "sensor") -> list[dict[str, Any]]:
    """The reference of TOTALS: per instant, in order of each group's first
    row in that instant, the new total of every group whose total changed."""
    totals: dict[Any, int] = {}
    out: list[dict[str, Any]] = []
    for ts, instant in itertools.groupby(rows, key=lambda r: r[0]):
        before: dict[Any, int | None] = {}
        for _, group, value in instant:
            before.setdefault(group, totals.get(group))
            totals[group] = totals.get(group, 0) + value
        for group, old in before.items():
            if totals[group] != old:
                out.append({"seq": len(out) + 1, "ts": ts, key: group, "total": totals[group]})
    return out


def _cluster_up(config: Path, run_dir: Path, duration: float | None) -> subprocess.CompletedProcess[str]:
    """``cluster up``; without ``duration``, as long as it lasts by itself."""
    lasting = ["--duration", str(duration)] if duration is not None else []
    result = semiactive(
        "cluster", "up", str(config), *lasting, "--run-dir", str(run_dir), "--quiet", timeout=90
    )
    assert_no_processes(str(run_dir))
    assert result.returncode == 0, result.stderr
    return result


# -- file replay ---------------------------------------------------------------------------------


def test_file_replay_through_a_stage_to_a_sink(tmp_path: Path) -> None:
    # Three rows per instant (instants 0, 2, 4, ... ms), sometimes two of one
    # sensor in one instant: a total must be emitted once per instant.
    rows = [(i // 3 * 2, f"s{i * 7 % 4}", 1 + i * 13 % 17) for i in range(600)]
    data = tmp_path / "readings.csv"
    data.write_text("ts,sensor,temp\n" + "".join(f"{t},{s},{v}\n" for t, s, v in rows))
    config = write_config(
        tmp_path / "file.yaml",
        {
            "name": "file-replay",
            "sources": [
                {
                    "name": "replay",
                    "stream": "readings",
                    "kind": "file",
                    "path": data.name,  # relative to the configuration file
                    "schema": {"sensor": "char(4)", "temp": "integer"},
                }
            ],
            "stages": [{"name": "sum", "node": "n1", "query": TOTALS}],
            "sinks": [{"name": "out", "input": "totals"}],
        },
    )
    run_dir = tmp_path / "run"
    # Without --duration a run of file sources lasts until they end (the
    # replay takes 0.4 s); it used to stop at 10 s, whatever the files held.
    result = _cluster_up(config, run_dir, None)
    assert "stops it there" not in result.stderr
    assert json.loads((run_dir / "manifest.json").read_text())["params"]["duration_s"] is None
    logged = read_jsonl(run_dir / "sources" / "replay.jsonl")
    assert logged == [
        {"seq": i, "ts": t, "sensor": s, "temp": v} for i, (t, s, v) in enumerate(rows, start=1)
    ]
    expected = running_totals(rows)
    assert len(expected) > 500
    assert read_jsonl(run_dir / "sink" / "out.jsonl") == expected


def test_a_bad_data_file_is_a_usage_error_before_anything_starts(tmp_path: Path) -> None:
    data = tmp_path / "readings.csv"
    data.write_text("ts,sensor,temp\n0,s1,20\n5,s2,warm\n")
    config = tmp_path / "file.yaml"
    config.write_text(
        "sources:\n"
        "  - name: replay\n"
        "    stream: readings\n"
        "    kind: file\n"
        "    path: readings.csv\n"
        "    schema: {sensor: char(4), temp: integer}\n"
        "stages:\n"
        f"  - name: sum\n    node: n1\n    query: {json.dumps(TOTALS)}\n"
        "sinks:\n"
        "  - {name: out, input: totals}\n"
    )
    run_dir = tmp_path / "run"
    args = ("cluster", "up", str(config), "--duration", "1", "--run-dir", str(run_dir), "--quiet")
    result = semiactive(*args, timeout=60)
    assert (result.returncode, result.stderr) == (
        2,
        f"semiactive: {config}:5: sources[0].path: {data}:3: column temp: 'warm' is not integer\n",
    )
    assert not run_dir.exists()
    data.unlink()
    result = semiactive(*args, timeout=60)
    assert result.returncode == 2
    assert (
        result.stderr
        == f"semiactive: {config}:5: sources[0].path: {data}: cannot open: No such file or directory\n"
    )
    assert_no_processes(str(run_dir))


# -- a stage with an operator cost ----------------------------------------------------------------


def test_a_stage_with_cost_ms_delivers_the_exact_reference(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "cost.yaml",
        {
            "name": "cost",
            "sources": [
                {"name": "src", "stream": "s0", "rate": [{"at_s": 0, "tuples_per_s": 1000}], "seed": 3}
            ],
            "stages": [
                {
                    "name": "heavy",
                    "node": "n1",
                    "cost_ms": 0.2,
                    "query": "REGISTER QUERY buckets AS ISTREAM(SELECT val % 4 AS bucket, SUM(val) AS total "
                    "FROM s0 GROUP BY val % 4)",
                }
            ],
            "sinks": [{"name": "out", "input": "buckets"}],
        },
    )
    run_dir = tmp_path / "run"
    started = time.monotonic()
    _cluster_up(config, run_dir, 2.0)
    assert time.monotonic() - started < 30
    source = read_jsonl(run_dir / "sources" / "src.jsonl")
    assert len(source) > 1000
    expected = running_totals([(r["ts"], r["val"] % 4, r["val"]) for r in source], key="bucket")
    assert read_jsonl(run_dir / "sink" / "out.jsonl") == expected


# -- the ingest endpoint --------------------------------------------------------------------------


class Nodes:
    """``semiactive node`` processes started by hand (``cluster up`` runs for
    a fixed duration; an ingest test decides itself when the stream ends)."""

    def __init__(self, tmp_path: Path, config: Path, names: list[str]) -> None:
        self.config = config
        self.run_dir = tmp_path / "run"
        self.ports: dict[str, int] = {}
        for name in names:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.ports[name] = s.getsockname()[1]
        self.endpoints = tmp_path / "endpoints.json"
        self.endpoints.write_text(
            json.dumps({n: {"host": "127.0.0.1", "port": p} for n, p in self.ports.items()})
        )
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.channels: dict[str, grpc.Channel] = {}
        self.tls = issue_tls(config, tmp_path / "tls")

    def start(self) -> None:
        (self.run_dir / "logs").mkdir(parents=True)
        for name in self.ports:
            with (self.run_dir / "logs" / f"{name}.log").open("wb") as log:
                self.procs[name] = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "semiactive",
                        "node",
                        "--config",
                        str(self.config),
                        "--name",
                        name,
                        "--endpoints",
                        str(self.endpoints),
                        "--run-dir",
                        str(self.run_dir),
                        "--start-now",
                        "--tls-dir",
                        str(self.tls),
                    ],
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self.channels[name] = sync_channel(self.tls, f"127.0.0.1:{self.ports[name]}", name)
        wait_until(
            self.not_answering,
            until=lambda names: not names,
            what=lambda: (
                "every node to answer (last seen: those that did not)\n"
                + "\n".join(f"--- {name}: {self.log(name)}" for name in self.ports)
            ),
            timeout=20,
        )

    def not_answering(self) -> list[str]:
        """The nodes that do not answer Status yet (one that died fails)."""
        down = []
        for name in self.ports:
            assert self.procs[name].poll() is None, f"{name} died: {self.log(name)}"
            try:
                self.status(name)
            except grpc.RpcError:
                down.append(name)
        return down

    def log(self, name: str) -> str:
        return (self.run_dir / "logs" / f"{name}.log").read_text(errors="replace")[-2000:]

    def status(self, name: str) -> cpb.NodeStatus:
        reply: cpb.NodeStatus = cpb_grpc.ControlStub(self.channels[name]).Status(pb.Empty(), timeout=1)
        return reply

    def wait(self, name: str, what: str, ready: Any, timeout: float = 15) -> cpb.NodeStatus:
        status: cpb.NodeStatus = wait_until(
            lambda: self.status(name),
            until=ready,
            what=lambda: f"{name}'s {what}\n{self.log(name)}",
            timeout=timeout,
        )
        return status

    def stop(self) -> dict[str, int | None]:
        """Ask every node to exit; their exit codes."""
        for name in self.procs:
            control = cpb_grpc.ControlStub(self.channels[name])
            with contextlib.suppress(grpc.RpcError):
                control.Stop(cpb.StopRequest(exit=True, now=True), timeout=2)
        codes: dict[str, int | None] = {}
        for name, proc in self.procs.items():
            try:
                codes[name] = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                codes[name] = None
        return codes

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        for channel in self.channels.values():
            channel.close()


@pytest.fixture
def ingest_cluster(tmp_path: Path) -> Iterator[Nodes]:
    config = write_config(
        tmp_path / "ingest.yaml",
        {
            "name": "ingest",
            "sources": [
                {
                    "name": "gate",
                    "stream": "readings",
                    "kind": "ingest",
                    "schema": {"sensor": "char(4)", "temp": "integer"},
                }
            ],
            "stages": [{"name": "sum", "node": "n1", "query": TOTALS}],
            "sinks": [{"name": "out", "input": "totals"}],
        },
    )
    nodes = Nodes(tmp_path, config, ["gate", "n1", "out"])
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.close()
        assert_no_processes(str(nodes.run_dir))


def _batch(rows: list[dict[str, Any]], watermark: int | None = None, eos: bool = False) -> pb.IngestBatch:
    batch = pb.IngestBatch(rows=[json.dumps(r) for r in rows], end_of_stream=eos)
    if watermark is not None:
        batch.watermark = watermark
    return batch


def test_ingest_rows_pushed_over_grpc(ingest_cluster: Nodes) -> None:
    nodes = ingest_cluster
    ingest = pb_grpc.IngestStub(nodes.channels["gate"])
    rows = [(t, f"s{t % 3}", t % 5 + 1) for t in range(0, 400, 2) for _ in range(2)]
    as_json: list[dict[str, Any]] = [{"ts": t, "sensor": s, "temp": v} for t, s, v in rows]
    # One call with two batches (the second with an explicit watermark), then
    # a second call: the stream goes on across calls.
    reply = ingest.Send(
        iter([_batch(as_json[:100]), _batch(as_json[100:250], watermark=as_json[249]["ts"])]), timeout=10
    )
    assert (reply.accepted, reply.last_seq) == (250, 250)
    reply = ingest.Send(iter([_batch(as_json[250:])]), timeout=10)
    assert (reply.accepted, reply.last_seq) == (len(rows) - 250, len(rows))

    # Bad rows: INVALID_ARGUMENT saying what is wrong; nothing of the batch is taken.
    last_ts = rows[-1][0]
    bad_batches = [
        (pb.IngestBatch(rows=["{oops"]), "bad ingest batch"),
        (_batch([{"ts": last_ts, "sensor": "s1"}]), "row 0: missing temp"),
        (_batch([{"ts": last_ts, "sensor": "s1", "temp": 1.5}]), "row 0: column temp: '1.5' is not integer"),
        (
            _batch([{"ts": last_ts, "sensor": "toolong", "temp": 1}]),
            "row 0: column sensor: 'toolong' is longer",
        ),
        (_batch([{"ts": "soon", "sensor": "s1", "temp": 1}]), "row 0: ts must be an integer"),
        (
            _batch([{"ts": last_ts, "sensor": "s1", "temp": 1}, {"ts": 3, "sensor": "s1", "temp": 1}]),
            "row 1: ts 3",
        ),
        (_batch([{"ts": last_ts - 5, "sensor": "s1", "temp": 1}]), f"row 0: ts {last_ts - 5} is not after"),
        (pb.IngestBatch(rows=["[1, 2]"]), "row 0: expected a JSON object"),
        (
            _batch([{"ts": 2**70, "sensor": "s1", "temp": 1}]),
            "row 0: ts 1180591620717411303424 is out of range",
        ),
        (_batch([{"ts": last_ts + 2, "sensor": "s1", "temp": 1}], watermark=3), "goes back in time"),
    ]
    for batch, message in bad_batches:
        with pytest.raises(grpc.RpcError) as err:
            ingest.Send(iter([batch]), timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value
        assert message in (err.value.details() or ""), err.value.details()
    assert nodes.status("gate").tuples_out == len(rows)

    # A bad batch among good ones: refused whole, the call goes on, and it
    # ends in INVALID_ARGUMENT naming it, with what was taken.
    more = [(last_ts + 2, "s1", 1), (last_ts + 4, "s2", 2)]
    more_json: list[dict[str, Any]] = [{"ts": t, "sensor": s, "temp": v} for t, s, v in more]
    with pytest.raises(grpc.RpcError) as err:
        ingest.Send(iter([pb.IngestBatch(rows=["{oops"]), _batch(more_json)]), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value
    details = err.value.details() or ""
    assert "batch 1: unreadable row" in details and "1 of 2 batches refused; 2 rows accepted" in details
    assert dict(err.value.trailing_metadata())["accepted"] == "2"
    rows += more
    as_json += more_json
    last_ts = rows[-1][0]
    assert nodes.status("gate").tuples_out == len(rows)

    # Let the stage acknowledge everything before the stream ends: the end
    # must still cover the last instant's rows.
    nodes.wait("gate", "acknowledgement", lambda s: s.outputs and s.outputs[0].acked == len(rows))
    reply = ingest.Send(iter([pb.IngestBatch(end_of_stream=True)]), timeout=10)
    assert (reply.accepted, reply.last_seq) == (0, len(rows))
    with pytest.raises(grpc.RpcError) as err:
        ingest.Send(iter([_batch([{"ts": last_ts + 10, "sensor": "s1", "temp": 1}])]), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "ended" in (err.value.details() or "")

    for name in ("out", "n1", "gate"):  # delivered and acknowledged all along the chain
        nodes.wait(name, "end of stream", lambda s: s.finished)
    assert nodes.stop() == {"gate": 0, "n1": 0, "out": 0}
    logged = read_jsonl(nodes.run_dir / "sources" / "gate.jsonl")
    assert logged == [{"seq": i, **row} for i, row in enumerate(as_json, start=1)]
    expected = running_totals(rows)
    assert expected[-1]["ts"] == last_ts
    assert read_jsonl(nodes.run_dir / "sink" / "out.jsonl") == expected
