"""A live local cluster scraped by a real Prometheus server (Debian's
``prometheus``): every endpoint passes ``promtool check metrics``, every
PromQL expression of every dashboard panel returns data, and the backup
overhead the metrics show agrees with the telemetry within 2%.

The cluster (``semiactive cluster up``) is the paper's chain with its middle
stage under Adaptive SAS; its primary is killed mid-run, so failover,
detection and recovery panels have something to show. Prometheus scrapes
every process (targets from the run's ``cluster.json``) every second.
``make prometheus`` installs Prometheus when root; otherwise this skips."""

from __future__ import annotations

import functools
import json
import math
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from semiactive.launcher.ports import PortAllocator
from semiactive.runtime.telemetry import read_jsonl
from tests.processes import ROOT, assert_no_processes, script_module, write_config
from tests.waiting import wait_until

dashboards = script_module(ROOT / "deploy" / "grafana" / "dashboards.py")

PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        PROMETHEUS is None or PROMTOOL is None,
        reason="prometheus not installed: `make prometheus` installs Debian's prometheus (as root)",
    ),
]

SCRAPE_S = 1
RATE_INTERVAL = f"{4 * SCRAPE_S}s"  # Grafana's $__rate_interval for this scrape interval
KILLED, TAKES_OVER, STAGE = "node-2", "node-4", "select-2"
EDGE = "select-1->select-2"  # into the A-SAS stage: it has a backup channel
PRODUCER = "node-1"
CONFIG: dict[str, Any] = {
    "name": "prometheus-scraped",
    "heartbeat_ms": 250,
    "ack_interval_ms": 250,
    "sources": [
        {
            "name": "node-0",
            "stream": "readings",
            "schema": {"id": "integer", "val": "integer"},
            "tuple_bytes": 44,
            "rate": [{"at_s": 0, "tuples_per_s": 400}],
            "seed": 7,
        }
    ],
    "stages": [
        {
            "name": "select-1",
            "node": "node-1",
            "query": "REGISTER QUERY s1 AS SELECT * FROM readings WHERE val >= 0",
        },
        {
            "name": STAGE,
            "node": KILLED,
            "ha": {
                "mode": "asas",
                "secondary": TAKES_OVER,
                "bw_max": "30KB/s",
                "recovery_max_ms": 80,
                "priority": "recovery",
                "interval_ms": 50,
                "tuner": "model",
            },
            "query": "REGISTER QUERY s2 AS ISTREAM(SELECT * FROM s1 [Rows 100] WHERE val >= 0)",
        },
        {
            "name": "select-3",
            "node": "node-3",
            "query": "REGISTER QUERY s3 AS SELECT * FROM s2 WHERE val >= 0",
        },
    ],
    "sinks": [{"name": "sink", "input": "s3"}],
}


class Prometheus:
    """A Prometheus server on a loopback port, scraping the targets written
    to ``targets-<job>.json`` (file service discovery)."""

    def __init__(self, directory: Path) -> None:
        assert PROMETHEUS is not None
        self.directory = directory
        self.port = PortAllocator().take()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = directory / "prometheus.yml"
        jobs = [
            {
                "job_name": job,
                "file_sd_configs": [
                    {"files": [str(directory / f"targets-{job}.json")], "refresh_interval": "1s"}
                ],
            }
            for job in ("semiactive-nodes", "semiactive-coordinator")
        ]
        global_ = {"scrape_interval": f"{SCRAPE_S}s", "scrape_timeout": f"{SCRAPE_S}s"}
        self.config.write_text(yaml.safe_dump({"global": global_, "scrape_configs": jobs}))
        checked = promtool("check", "config", str(self.config))
        assert checked.returncode == 0, checked
        self.log = (directory / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={self.config}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def targets(self, job: str, addresses: list[str]) -> None:
        path = self.directory / f"targets-{job}.json"
        path.with_suffix(".tmp").write_text(json.dumps([{"targets": addresses}]))
        path.with_suffix(".tmp").replace(path)

    def ready(self, timeout: float = 20.0) -> None:
        wait_until(
            self._ready,
            what="prometheus to be ready",
            timeout=timeout,
            interval=0.2,
            ignoring=(urllib.error.URLError, ConnectionError),
        )

    def _ready(self) -> bool:
        assert self.process.poll() is None, (self.directory / "prometheus.log").read_text()
        with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
            return bool(response.status == 200)

    def api(self, path: str, **params: str | float) -> Any:
        query = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as error:
            body = json.loads(error.read())
        assert body["status"] == "success", f"{path} {params}: {body}"
        return body["data"]

    def query(self, expr: str, at: float) -> list[dict[str, Any]]:
        data = self.api("query", query=expr, time=at)
        assert data["resultType"] == "vector", (expr, data)
        result: list[dict[str, Any]] = data["result"]
        return result

    def value(self, expr: str, at: float) -> float:
        result = self.query(expr, at)
        return sum(float(r["value"][1]) for r in result) if result else 0.0

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def promtool(*args: str, text: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], input=text, capture_output=True, timeout=30)


def processes(run_dir: Path) -> list[dict[str, Any]] | None:
    try:
        doc = json.loads((run_dir / "cluster.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    listed: list[dict[str, Any]] = doc["processes"]
    return listed if all(p["pid"] for p in listed) else None


def scrape(address: str) -> bytes | None:
    try:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
            body: bytes = response.read()
            return body
    except (urllib.error.URLError, ConnectionError):
        return None


def substitute(expr: str, stage: str, node: str, range_: str) -> str:
    """What Grafana sends for a panel's query with these variable values."""
    for name, value in (
        ("$__rate_interval", RATE_INTERVAL),
        ("$__range", range_),
        ("$stage", stage),
        ("$node", node),
    ):
        expr = expr.replace(name, value)
    assert "$" not in expr, expr
    return expr


def panel_queries() -> Iterator[tuple[str, str, str]]:
    for uid in dashboards.DASHBOARDS:
        board = json.loads((ROOT / "deploy" / "grafana" / "dashboards" / f"{uid}.json").read_text())
        for title, expr in dashboards.expressions(board):
            yield uid, title, expr


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    config = write_config(tmp_path / "cluster.yaml", CONFIG)
    run_dir = tmp_path / "run"
    with (tmp_path / "cluster.log").open("wb") as log:
        launcher = subprocess.Popen(
            [
                *(sys.executable, "-m", "semiactive", "cluster", "up", str(config)),
                *("--duration", "40", "--run-dir", str(run_dir), "--kill", f"{KILLED}@5"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )
    try:
        yield launcher, run_dir
    finally:
        if launcher.poll() is None:
            launcher.send_signal(signal.SIGTERM)  # drains and stops every process
            try:
                launcher.wait(20)
            except subprocess.TimeoutExpired:
                launcher.kill()
                launcher.wait()
        assert_no_processes(str(run_dir))


def test_a_live_cluster_scraped_by_prometheus(
    tmp_path: Path, cluster: tuple[subprocess.Popen[bytes], Path]
) -> None:
    launcher, run_dir = cluster
    prometheus = Prometheus(tmp_path)
    try:
        listed = wait_until(lambda: processes(run_dir), what="cluster.json", timeout=30, interval=0.25)
        addresses = {p["name"]: f"{p['host']}:{p['ports']['metrics']}" for p in listed}
        prometheus.targets("semiactive-coordinator", [addresses.pop("coordinator")])
        prometheus.targets("semiactive-nodes", sorted(addresses.values()))
        prometheus.ready()
        started = time.time()

        # promtool check metrics on every endpoint (each process's metrics
        # port, as cluster.json lists it), once it answers.
        for p in listed:
            address = f"{p['host']}:{p['ports']['metrics']}"
            text = wait_until(
                functools.partial(scrape, address),
                what=f"{p['name']}'s metrics at {address}",
                timeout=30,
                interval=0.25,
            )
            checked = promtool("check", "metrics", text=text)
            assert checked.returncode == 0 and not checked.stdout + checked.stderr, (p["name"], checked)

        # The kill, its detection, the takeover and the recovery, as the
        # scrapes saw them; then a few more scrapes for the rate windows.
        wait_until(
            lambda: (
                prometheus.value(f'semiactive_coordinator_failovers_total{{stage="{STAGE}"}}', time.time())
                >= 1
                and prometheus.value(f'semiactive_recovery_seconds_count{{stage="{STAGE}"}}', time.time())
                >= 1
            ),
            what="the failover in Prometheus",
            timeout=45,
            interval=0.25,
        )
        time.sleep(4 * SCRAPE_S + 0.5)  # four more scrapes: a rate window of data after the failover
        assert launcher.poll() is None, (tmp_path / "cluster.log").read_text()
        now = time.time()
        range_ = f"{math.ceil(now - started) + 5}s"

        # Every panel's every query, with the variables at "All" (what a
        # dashboard opens with), returns data: at least one finite value.
        empty = []
        count = 0
        for uid, title, expr in panel_queries():
            count += 1
            result = prometheus.query(substitute(expr, ".*", ".*", range_), now)
            if not any(math.isfinite(float(r["value"][1])) for r in result):
                empty.append(f"{uid} / {title}: {expr} -> {result}")
        assert count >= 50 and not empty, "\n".join(empty)
        # With one stage and node chosen, every query is still valid PromQL.
        for _, _, expr in panel_queries():
            prometheus.query(substitute(expr, STAGE, TAKES_OVER, range_), now)
        # The template variables have values.
        assert {STAGE, "select-1", "node-0", "sink"} <= set(
            prometheus.api("label/stage/values", **{"match[]": "semiactive_node_info"})
        )
        assert {KILLED, TAKES_OVER, PRODUCER} <= set(
            prometheus.api("label/node/values", **{"match[]": 'semiactive_node_info{stage=~".*"}'})
        )

        check_overhead_against_telemetry(prometheus, run_dir, addresses[PRODUCER], now)
    finally:
        prometheus.stop()


def check_overhead_against_telemetry(prometheus: Prometheus, run_dir: Path, address: str, now: float) -> None:
    """The HA dashboard's cumulative overhead of the A-SAS edge against the
    producer's telemetry (edges-<node>.jsonl, backup bytes over data bytes)
    around the same moment: the latest scrape of the last 30 s that has a
    telemetry sample on each side, whose counters bound what the panel shows
    (both read the node's status snapshot; early in a run the ratio moves by
    a few percent between two samples, so a single nearest sample is not a
    fair reference). A scrape's samples carry the time it started, but the
    node answers on its event loop, maybe later: the snapshot it serves lies
    within the scrape's duration (``scrape_duration_seconds``) after it, so
    the later sample is the first one past that."""
    samples = [
        r
        for r in read_jsonl(run_dir / "telemetry" / f"edges-{PRODUCER}.jsonl")
        # Before its first row an edge has no overhead to compare.
        if r["edge"] == EDGE and r["direction"] == "out" and r["data_bytes"] > 0
    ]
    assert samples, f"no telemetry samples of {EDGE} after its first row"
    series = prometheus.api(
        "query", query=f'semiactive_edge_sent_bytes_total{{edge="{EDGE}", node="{PRODUCER}"}}[30s]', time=now
    )["result"]
    assert {s["metric"]["channel"] for s in series} == {"data", "backup"}, series
    scrapes = sorted(set.intersection(*({float(t) for t, _ in s["values"]} for s in series)))
    (durations,) = prometheus.api(
        "query", query=f'scrape_duration_seconds{{instance="{address}"}}[30s]', time=now
    )["result"]
    answered = {float(t): float(t) + float(d) for t, d in durations["values"]}
    bracketed = [
        (t, earlier[-1], later[0])
        for t in scrapes
        if t in answered
        and (earlier := [r for r in samples if r["t"] <= t])
        and (later := [r for r in samples if r["t"] >= answered[t]])
    ]
    assert bracketed, (scrapes, [r["t"] for r in samples])
    scraped_at, before, after = bracketed[-1]
    assert after["t"] - before["t"] < 3.0, (before, after)

    panel = next(
        expr
        for _, title, expr in panel_queries()
        if title == "Backup overhead per edge, since the producer started"
    )
    result = prometheus.query(substitute(panel, STAGE, ".*", "1m"), scraped_at)
    shown = {r["metric"]["edge"]: float(r["value"][1]) for r in result}[EDGE]
    # Both counters only grow, but their ratio does not move one way: a
    # backup batch raises it, data rows lower it. So the snapshot the scrape
    # served bounds it by the least backup over the most data, and back.
    low = before["backup_bytes"] / after["data_bytes"]
    high = after["backup_bytes"] / before["data_bytes"]
    assert low > 0.05, (before, after)  # the edge has a backup channel that carries rows
    assert low * (1 - 1e-9) <= shown <= high * (1 + 1e-9), (shown, low, high, before, after, scraped_at)


def test_panel_queries_are_substituted_like_grafana() -> None:
    expr = 'sum by (edge) (rate(x{edge=~".*->$stage", node=~"$node"}[$__rate_interval])) + y[$__range]'
    assert substitute(expr, ".*", "node-1", "30s") == (
        'sum by (edge) (rate(x{edge=~".*->.*", node=~"node-1"}[4s])) + y[30s]'
    )
    assert re.fullmatch(r"\d+s", RATE_INTERVAL)
