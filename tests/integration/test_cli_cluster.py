"""The cluster commands of the CLI as a user runs them: ``semiactive demo``,
``semiactive cluster up`` (its run directory and live progress line),
Ctrl-C and SIGTERM, which drain and leave no process behind, and a killed
launcher, whose nodes stop by themselves."""

from __future__ import annotations

import json
import os
import pstats
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.processes import ROOT, assert_no_processes, chain_config, read_jsonl, semiactive, write_config
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

SELECT = ["REGISTER QUERY s1 AS SELECT id, val FROM s0 WHERE val % 3 != 0"]


def _reference(source: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for row in source:
        if row["val"] % 3 != 0:
            out.append({"seq": len(out) + 1, "ts": row["ts"], "id": row["id"], "val": row["val"]})
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def test_demo_is_verified_against_the_reference(tmp_path: Path) -> None:
    run_dir = tmp_path / "demo"
    result = semiactive("demo", "--duration", "3", "--run-dir", str(run_dir), timeout=90)
    assert_no_processes(str(run_dir))
    assert result.returncode == 0, result.stderr
    assert "sink: " in result.stdout and "identical to the reference" in result.stdout, result.stdout
    assert len(read_jsonl(run_dir / "sink" / "sink.jsonl")) > 2000  # 1000 tuples/s for 3 s


def test_cluster_up_writes_its_run_directory(tmp_path: Path) -> None:
    """Run from a directory of the user's, not the source tree (the
    coordinator once found its web page only from there, and died)."""
    config = write_config(tmp_path / "c.yaml", chain_config(SELECT, name="layout"))
    run_dir = tmp_path / "run"
    profiles = tmp_path / "profiles"
    result = semiactive(
        "cluster",
        "up",
        str(config),
        "--duration",
        "2.5",
        "--run-dir",
        str(run_dir),
        timeout=90,
        env={"SEMIACTIVE_PROFILE": str(profiles)},
        cwd=tmp_path,
    )
    assert_no_processes(str(run_dir))
    assert result.returncode == 0, result.stderr
    # SEMIACTIVE_PROFILE: each node wrote where its time went.
    assert sorted(p.name for p in profiles.iterdir()) == ["node-0.prof", "node-1.prof", "sink.prof"]
    functions = pstats.Stats(str(profiles / "node-1.prof")).stats  # type: ignore[attr-defined]
    assert any(path.endswith("ha/replica.py") and name == "run" for path, _, name in functions)
    assert f"run directory: {run_dir}" in result.stderr
    # Progress: elapsed time and rows/s, on standard error; as lines, since
    # it is no terminal here (a line rewritten in place made a log one line).
    assert "\r" not in result.stderr
    progress = [line for line in result.stderr.splitlines() if line.lstrip().startswith("t=")]
    assert progress, result.stderr
    assert "node-0 " in progress[-1] and "/s" in progress[-1] and "sink " in progress[-1]
    # The run's report on standard output.
    assert "node-0: emitted " in result.stdout and "sink: " in result.stdout, result.stdout

    cluster = json.loads((run_dir / "cluster.json").read_text())
    assert cluster["name"] == "layout"
    processes = {p["name"]: p for p in cluster["processes"]}
    assert {n: p["role"] for n, p in processes.items()} == {
        "node-0": "source",
        "node-1": "primary",
        "sink": "sink",
        "coordinator": "coordinator",
    }
    ports = set()
    for p in processes.values():
        assert isinstance(p["pid"], int) and p["pid"] > 0
        assert not _alive(p["pid"]), f"{p['name']} still runs"
        # The coordinator serves its web page too.
        assert set(p["ports"]) == {"grpc", "metrics"} | ({"http"} if p["role"] == "coordinator" else set())
        ports |= set(p["ports"].values())
    assert len(ports) == 9 and all(1024 <= port <= 65535 for port in ports)

    for name in processes:
        assert (run_dir / "logs" / f"{name}.log").is_file()
    source = read_jsonl(run_dir / "sources" / "node-0.jsonl")
    assert len(source) > 1500
    end = json.loads((run_dir / "sources" / "node-0.end.json").read_text())
    assert end["count"] == len(source) and end["watermark"] >= source[-1]["ts"]
    assert read_jsonl(run_dir / "sink" / "sink.jsonl") == _reference(source)
    # `semiactive verify`: the engine's reference and the independent SQLite oracle agree.
    verified = semiactive("verify", str(run_dir), timeout=120)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "identical to the reference" in verified.stdout
    assert "oracle: SQLite" in verified.stdout and verified.stdout.rstrip().endswith("identical")
    # The program edited after the run: verify refuses rather than judge the
    # run against a program it did not run.
    config.write_text(config.read_text().replace("val % 3 != 0", "val % 3 = 0"))
    edited = semiactive("verify", str(run_dir), timeout=120)
    assert edited.returncode == 2 and "changed since the run started" in edited.stderr, edited.stderr


def _start_cluster(config: Path, run_dir: Path, stderr: Path) -> subprocess.Popen[bytes]:
    """``cluster up`` for 60 s, returned once its progress line shows it runs."""
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "semiactive",
                "cluster",
                "up",
                str(config),
                "--duration",
                "60",
                "--run-dir",
                str(run_dir),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
    try:
        wait_until(
            lambda: _progress(proc, stderr),
            until=lambda text: "t=" in text,
            what="a progress line on stderr",
            timeout=30,
            interval=0.1,
        )
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    time.sleep(1.0)  # part of the test: a second of rows (1000/s) flowing, more than 500 to drain
    return proc


def _progress(proc: subprocess.Popen[bytes], stderr: Path) -> str:
    assert proc.poll() is None, f"cluster up ended: {stderr.read_text(errors='replace')}"
    return stderr.read_text(errors="replace")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_drains_and_leaves_no_process(tmp_path: Path, sig: signal.Signals) -> None:
    config = write_config(tmp_path / "c.yaml", chain_config(SELECT, name="interrupted"))
    run_dir = tmp_path / "run"
    stderr = tmp_path / "stderr.txt"
    proc = _start_cluster(config, run_dir, stderr)
    try:
        interrupted = time.monotonic()
        proc.send_signal(sig)
        code = proc.wait(timeout=45)
        assert time.monotonic() - interrupted < 30
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert_no_processes(str(run_dir))
    text = stderr.read_text()
    assert code == 0, text
    assert "interrupted: draining" in text
    source = read_jsonl(run_dir / "sources" / "node-0.jsonl")
    assert 500 < len(source) < 30_000  # stopped long before the 60 s
    # Drained: the sink got everything the source emitted, computed.
    assert read_jsonl(run_dir / "sink" / "sink.jsonl") == _reference(source)
    cluster = json.loads((run_dir / "cluster.json").read_text())
    assert not any(_alive(p["pid"]) for p in cluster["processes"])


def test_nodes_stop_when_their_launcher_is_killed(tmp_path: Path) -> None:
    """SIGKILL leaves the launcher no chance to clean up: the nodes notice
    they were orphaned and stop by themselves."""
    config = write_config(tmp_path / "c.yaml", chain_config(SELECT, name="orphaned"))
    run_dir = tmp_path / "run"
    proc = _start_cluster(config, run_dir, tmp_path / "stderr.txt")
    pids = [p["pid"] for p in json.loads((run_dir / "cluster.json").read_text())["processes"]]
    assert pids and all(_alive(pid) for pid in pids)
    proc.kill()
    proc.wait()
    try:
        wait_until(
            lambda: [pid for pid in pids if _alive(pid)],
            until=lambda left: not left,
            what="the nodes to stop by themselves after their launcher's kill",
            timeout=10,
            interval=0.1,
        )
    finally:
        assert_no_processes(str(run_dir))
