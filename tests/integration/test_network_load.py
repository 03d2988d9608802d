"""Experiment 3's network (semiactive/launcher/netlab.py) on real namespaces, tc and
iperf3: the tbf cap holds, nothing outlives a lab (not even a SIGKILLed
creator's), a cluster runs in it where the nemesis finds its nodes, and a
sweep under load verifies and records the load."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from semiactive import config, topology
from semiactive.campaigns.nemesis import Nemesis, pid_of, read_history, runs
from semiactive.launcher.cluster import run_cluster
from semiactive.launcher.faults import Fault, FaultKind
from semiactive.launcher.measurements import RunReport
from semiactive.launcher.netlab import STATE_DIR, NetworkLab, clean_stale
from semiactive.oracle.verify import check_run
from tests.processes import ROOT, assert_no_processes, semiactive
from tests.waiting import wait_until_async

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leftovers")]
CHAIN = ROOT / "examples" / "paper-chain-ha.yaml"


@pytest.fixture(scope="module", autouse=True)
def _lab_possible() -> None:
    reason = NetworkLab.why_unavailable()
    if reason is not None:
        pytest.skip(f"no network lab on this machine: {reason} (run as root after `make iperf3`)")


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def _left_behind(tag: str) -> list[str]:
    names = _namespaces() | _links() | {p.name for p in STATE_DIR.glob("*.json")}
    return sorted(n for n in names if n.startswith(tag))


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    """Fails a test whose labs left anything behind (namespaces, links)."""
    before = _namespaces() | _links()
    yield
    new = (_namespaces() | _links()) - before
    assert not [n for n in new if n.startswith("sa")], f"left behind: {new}"


def _started(run_dir: Path, run: asyncio.Task[int]) -> dict[str, Any] | None:
    if run.done():
        raise AssertionError(f"the run ended before it started (exit {run.result()})")
    try:
        doc: dict[str, Any] = json.loads((run_dir / "cluster.json").read_text())
    except (OSError, ValueError):
        return None
    return doc if doc.get("t0_unix") else None


def test_the_links_are_capped_and_teardown_leaves_nothing() -> None:
    with NetworkLab(["a", "b"], rate_bit_s=100e6) as lab:
        assert {n.netns for n in lab.nodes.values()} <= _namespaces()
        assert lab.bridge in _links()
        measured = lab.measure("a", "b", 1.0) * 8
        assert 50e6 < measured <= 102e6, f"{measured / 1e6:.1f} Mbit/s through a 100 Mbit/s link"
        load = lab.load("a", "b", 2e6)
        time.sleep(1.0)  # a second of load, to be measured
        assert load.running
        pids = [load.client.pid, load.server.pid]
    assert _left_behind(lab.tag) == []
    achieved = load.achieved
    assert achieved is not None and abs(achieved - 2e6) < 0.1 * 2e6
    assert all(not Path(f"/proc/{pid}").exists() for pid in pids)


def test_a_lab_whose_creator_was_killed_is_removed_by_the_next() -> None:
    script = (
        "import os; from semiactive.launcher.netlab import NetworkLab\n"
        "lab = NetworkLab(['a', 'b']); lab.create(); lab.load('a', 'b', 1e6)\n"
        "print(lab.tag, flush=True); os.kill(os.getpid(), 9)\n"
    )
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    tag = killed.stdout.strip()
    assert killed.returncode == -9 and tag and _left_behind(tag), killed.stderr
    assert tag in clean_stale()
    assert _left_behind(tag) == []


async def test_nodes_run_in_their_namespaces_where_the_nemesis_finds_them(tmp_path: Path) -> None:
    """cluster.json records each node's own pid (``ip netns exec`` execs),
    so the nemesis's lookup (by pid, checked against the command line) hits
    the node, in its namespace, and the secondary takes over across the bridge."""
    topo = topology.resolve(config.load(str(CHAIN)))
    run_dir = tmp_path / "run"
    reports: list[RunReport] = []
    with NetworkLab(list(topo.nodes)) as lab:
        run = asyncio.create_task(
            run_cluster(
                str(CHAIN),
                duration=3.0,
                run_dir=run_dir,
                progress=False,
                report_to=reports,
                reprotect=False,
                network=lab,
            )
        )
        doc = await wait_until_async(lambda: _started(run_dir, run), what="the run's start", timeout=120)
        for p in doc["processes"]:
            name, pid = p["name"], p["pid"]
            if name == "coordinator":
                assert p["host"] == lab.host_address
                continue
            assert p["host"] == lab.nodes[name].address
            assert runs(pid, name), f"pid {pid} is not {name}"
            netns = os.stat(f"/run/netns/{lab.nodes[name].netns}").st_ino
            assert os.stat(f"/proc/{pid}/ns/net").st_ino == netns, f"{name} is not in its namespace"
        await asyncio.sleep(doc["t0_unix"] + 1.5 - time.time())  # the kill's moment in the run
        fault = Fault("node-2", 1.5, FaultKind.KILL)
        Nemesis(run_dir, [fault]).inject(fault)
        code = await run
    assert_no_processes(str(run_dir))
    assert code == 0
    (record,) = read_history(run_dir)
    assert record["pid"] == pid_of(doc, "node-2") and "skipped" not in record
    (fault_seen,) = reports[0].faults
    assert fault_seen.node == "node-2" and fault_seen.recovery_ms is not None
    assert all(c.ok for c in check_run(topo, run_dir))


def test_a_sweep_under_load_verifies_and_records_the_load(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    args = ["experiment", "sweep", str(CHAIN), "--modes", "sas", "--batch-sizes", "100", "--repeat", "1"]
    args += ["--network-load", "40MB/s", "--kill", "node-2@2", "--duration", "3", "--out", str(out)]
    result = semiactive(*args, timeout=120)
    assert_no_processes(str(out))
    assert result.returncode == 0, result.stderr
    (row,) = list(csv.DictReader((out / "sweep.csv").open()))
    assert row["identical"] == "True" and row["recovery_ms"]
    assert float(row["network_load_bytes_per_s"]) == 40e6
    assert abs(float(row["achieved_load_bytes_per_s"]) - 40e6) < 0.1 * 40e6
    assert "40MB/s    SAS B=100" in result.stdout


def test_a_sweep_without_a_lab_says_why_and_exits_2(tmp_path: Path) -> None:
    args = ["experiment", "sweep", str(CHAIN), "--modes", "sas", "--batch-sizes", "100"]
    tools = {str(Path(shutil.which(t) or "/").parent) for t in ("ip", "tc")}
    if str(Path(shutil.which("iperf3") or "/").parent) in tools:
        pytest.skip("iperf3 is installed beside ip and tc: a PATH cannot hide it alone")
    hidden = {"PATH": os.pathsep.join(sorted(tools))}
    no_iperf = semiactive(*args, "--network-load", "40MB/s", "--out", str(tmp_path), env=hidden)
    assert no_iperf.returncode == 2
    assert "--network-load: `iperf3` is not installed" in no_iperf.stderr
    bad = semiactive(*args, "--network-load", "40MB", "--out", str(tmp_path))
    assert bad.returncode == 2 and "--network-load '40MB'" in bad.stderr
