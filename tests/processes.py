"""Helpers for tests that run real processes: run the CLI, write configs,
and make sure nothing is left running."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import yaml

from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]


def semiactive(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """Run ``semiactive ARGS`` to completion (in the source tree unless ``cwd``)."""
    return subprocess.run(
        [sys.executable, "-m", "semiactive", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=dict(os.environ, **(env or {})),
    )


def issue_tls(config_path: Path, directory: Path) -> Path:
    """Certificates for every identity of a config (as `certs init` makes),
    for tests that start nodes or a coordinator by hand."""
    from semiactive import config, topology
    from semiactive.admin.certificates import identities, issue_cluster

    issue_cluster(directory, "test", identities(topology.resolve(config.load(config_path))))
    return directory


def sync_channel(tls_dir: Path, address: str, peer: str, as_: str = "admin") -> grpc.Channel:
    """A blocking channel to ``peer`` at ``address``, authenticated as ``as_``."""
    credentials = grpc.ssl_channel_credentials(
        (tls_dir / "ca.pem").read_bytes(),
        (tls_dir / f"{as_}.key").read_bytes(),
        (tls_dir / f"{as_}.pem").read_bytes(),
    )
    return grpc.secure_channel(address, credentials, options=[("grpc.ssl_target_name_override", peer)])


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def processes_mentioning(text: str) -> list[int]:
    """PIDs of live processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def assert_no_processes(text: str, wait: float = 5.0) -> None:
    """Within ``wait`` seconds no process mentions ``text``; else those left
    are SIGKILLed and the test fails naming them."""
    try:
        wait_until(
            lambda: processes_mentioning(text),
            until=lambda left: not left,
            what=f"every process mentioning {text} to end",
            timeout=wait,
        )
    except AssertionError:
        for pid in processes_mentioning(text):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_t0(run_dir: Path) -> float:
    """The run's t0 (wall clock, s): when its sources started (``cluster.json``)."""
    return float(json.loads((run_dir / "cluster.json").read_text())["t0_unix"])


def cluster_events(run_dir: Path) -> list[dict[str, Any]]:
    """Every process's events of a run, file by file."""
    return [e for f in sorted((run_dir / "telemetry").glob("events-*.jsonl")) for e in read_jsonl(f)]


def kill_node(run_dir: Path, name: str) -> None:
    """SIGKILL one process of a running cluster, from outside it."""
    processes = json.loads((run_dir / "cluster.json").read_text())["processes"]
    os.kill(next(p["pid"] for p in processes if p["name"] == name), signal.SIGKILL)


def finish_verified(launcher: subprocess.Popen[str], run_dir: Path) -> list[dict[str, Any]]:
    """Wait for ``cluster up`` to end (killing it if it hangs), check that
    it left nothing running and exited 0, that ``semiactive verify`` finds
    the sink identical to the reference and that no row was lost; return
    the run's events."""
    try:
        _, stderr = launcher.communicate(timeout=120)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert_no_processes(str(run_dir))
    assert launcher.returncode == 0, stderr
    verified = semiactive("verify", str(run_dir), timeout=120)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "identical to the reference" in verified.stdout, verified.stdout
    events = cluster_events(run_dir)
    assert not [e for e in events if e["event"] == "rows_lost"]
    return events


def wait_for_sink(run_dir: Path, timeout: float = 60.0) -> None:
    """Until the first row reached the sink ``sink`` of the run."""
    sink = run_dir / "sink" / "sink.jsonl"
    wait_until(lambda: sink.stat().st_size > 0, what=f"a row at {sink}", timeout=timeout, ignoring=OSError)


def run_verified(
    config: Path, run_dir: Path, duration: float, kill: str | None = None, kill_after_s: float = 1.5
) -> list[dict[str, Any]]:
    """``cluster up`` for ``duration`` seconds; with ``kill``, SIGKILL that
    node from outside ``kill_after_s`` after the first row reached the sink;
    then :func:`finish_verified`."""
    launcher = subprocess.Popen(
        [sys.executable, "-m", "semiactive", "cluster", "up", str(config), "--duration", str(duration),
         "--run-dir", str(run_dir), "--quiet"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        if kill is not None:
            wait_for_sink(run_dir)
            time.sleep(kill_after_s)  # the kill's moment in the run, chosen by the caller
            kill_node(run_dir, kill)
    except BaseException:
        launcher.kill()
        raise
    return finish_verified(launcher, run_dir)


def chain_config(
    queries: list[str], *, rate: int = 1000, name: str = "test-chain", **cluster: Any
) -> dict[str, Any]:
    """source node-0 -> one stage per query (node-1, node-2, ...) -> sink.
    Query i must register query ``s{i}`` reading the previous stream."""
    stages = [{"name": f"stage-{i}", "node": f"node-{i}", "query": q} for i, q in enumerate(queries, start=1)]
    return {
        "name": name,
        **cluster,
        "sources": [
            {
                "name": "node-0",
                "stream": "s0",
                "schema": {"id": "integer", "val": "integer"},
                "tuple_bytes": 44,
                "rate": [{"at_s": 0, "tuples_per_s": rate}],
                "seed": 11,
            }
        ],
        "stages": stages,
        "sinks": [{"name": "sink", "input": f"s{len(queries)}"}],
    }


def bench_module(stem: str) -> ModuleType:
    """The benchmark script bench/STEM.py as the module ``stem``, loaded
    once (benchmarks are scripts, not a package; under its own name a
    script's ``import`` of a sibling finds it)."""
    return script_module(ROOT / "bench" / f"{stem}.py")


def script_module(path: Path) -> ModuleType:
    """A script of the source tree (a benchmark, a build step such as
    deploy/grafana/dashboards.py) as the module named by its stem, loaded
    once."""
    stem = path.stem
    if stem not in sys.modules:
        spec = importlib.util.spec_from_file_location(stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[stem] = module
        spec.loader.exec_module(module)
    return sys.modules[stem]
