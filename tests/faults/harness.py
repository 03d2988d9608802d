"""Run a protected chain as real processes with real signals sent from
outside (the nemesis, a separate process that knows only cluster.json),
and check the sink against the failure-free reference."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from semiactive import config, topology
from semiactive.launcher.measurements import analyse
from semiactive.oracle.verify import check_run
from tests.processes import ROOT, assert_no_processes, chain_config, semiactive, write_config

SELECTION = [
    "REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 100",
    "REGISTER QUERY s2 AS SELECT id, val * 2 AS v FROM s1 WHERE val % 3 != 0",
    "REGISTER QUERY s3 AS SELECT * FROM s2",
]
AGGREGATE = [
    "REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 0",
    "REGISTER QUERY s2 AS ISTREAM(SELECT SUM(val) AS total, COUNT(*) AS n FROM s1 [Rows 100 Slide 10])",
    "REGISTER QUERY s3 AS SELECT * FROM s2 WHERE total >= 0",
]
# Stage 2's window runs on the columnar engine (ColumnarWindowSection).
RANGE_AGGREGATE = [
    "REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 0",
    "REGISTER QUERY s2 AS ISTREAM(SELECT SUM(val) AS total, COUNT(*) AS n FROM s1 [Range 100 Slide 10])",
    "REGISTER QUERY s3 AS SELECT * FROM s2 WHERE total >= 0",
]
# Stage 2 groups by the key stage 1 computes; the grouped window runs on
# the columnar engine.
GROUPED_WINDOW = [
    "REGISTER QUERY s1 AS SELECT id, val, val % 8 AS k FROM s0 WHERE val >= 0",
    "REGISTER QUERY s2 AS DSTREAM(SELECT k, SUM(val) AS total, COUNT(*) AS n FROM s1 [Range 100 Slide 10] "
    "GROUP BY k)",
    "REGISTER QUERY s3 AS SELECT * FROM s2 WHERE total >= 0",
]
GROUPED_PARTITION = [
    "REGISTER QUERY s1 AS SELECT id, val, val % 8 AS k FROM s0 WHERE val >= 0",
    "REGISTER QUERY s2 AS ISTREAM(SELECT k, SUM(val) AS total, MIN(val) AS lo "
    "FROM s1 [Partition By k Rows 20] GROUP BY k)",
    "REGISTER QUERY s3 AS SELECT * FROM s2 WHERE total >= 0",
]
# Exact float sums and float MIN / MAX, grouped, on the columnar engine.
FLOAT_SUMS = [
    "REGISTER QUERY s1 AS SELECT id, val, val * 0.1 AS f, val % 8 AS k FROM s0 WHERE val >= 0",
    "REGISTER QUERY s2 AS ISTREAM(SELECT k, SUM(f) AS total, AVG(f) AS mean, MAX(f) AS top "
    "FROM s1 [Range 100 Slide 10] GROUP BY k)",
    "REGISTER QUERY s3 AS SELECT * FROM s2 WHERE total >= 0",
]
JOIN = [
    "REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 0",
    "REGISTER QUERY s2 AS ISTREAM(SELECT s1.id, s1.val, t0.val AS v2 FROM s1 [Rows 20], t0 [Range 30] "
    "WHERE s1.val % 50 = t0.val % 50)",
    "REGISTER QUERY s3 AS SELECT * FROM s2",
]


def protected_chain(
    tmp: Path,
    queries: list[str],
    mode: str = "sas",
    batch: int = 100,
    second_source: bool = False,
    spares: Sequence[str] = ("spare-1", "spare-2"),
    *,
    modes: Sequence[tuple[str, int]] | None = None,
    rate: int = 1000,
    second_rate: int = 300,
    **cluster: Any,
) -> Path:
    """source -> node-1 -> node-2 -> node-3 -> sink, stage i protected by
    ``sec-i`` (all in ``mode`` with ``batch``, or ``modes[i - 1]``);
    standing spares for re-protection (two by default); ``cluster``:
    top-level settings (timers)."""
    cfg: dict[str, Any] = chain_config(queries, rate=rate, name=f"faults-{mode}", **cluster)
    if second_source:
        cfg["sources"].append(
            {
                "name": "node-t",
                "stream": "t0",
                "schema": {"id": "integer", "val": "integer"},
                "rate": [{"at_s": 0, "tuples_per_s": second_rate}],
                "seed": 5,
            }
        )
    for i, stage in enumerate(cfg["stages"], start=1):
        stage_mode, stage_batch = modes[i - 1] if modes else (mode, batch)
        stage["ha"] = {"mode": stage_mode, "batch_size": stage_batch, "secondary": f"sec-{i}"}
    cfg["spares"] = list(spares)
    return write_config(tmp / f"chain-{mode}.yaml", cfg)


def run(config_path: Path, run_dir: Path, *faults: str, duration: float = 4.0) -> dict[str, Any]:
    """``cluster up``, with ``faults`` (``--kill``, ``node-2@1.5``, ...)
    injected by the nemesis from outside (the launcher is told nothing);
    assert the run exited 0 and the sink equals the reference; return the
    run's telemetry."""
    result, _ = run_with_nemesis(config_path, run_dir, *faults, duration=duration)
    assert result.returncode == 0, result.stderr
    checks = check_run(topology.resolve(config.load(config_path)), run_dir)
    for check in checks:
        assert check.ok, check.describe() + "\n" + result.stderr
        assert check.delivered > 0
    report = analyse(topology.resolve(config.load(config_path)), run_dir)
    return {"stderr": result.stderr, "events": events(run_dir), "bandwidth": report.bandwidth}


def assert_exact(config_path: Path, run_dir: Path, stderr: str) -> int:
    """Every sink of the run equals the reference (a durable sink's table or
    subject read back); return the first sink's row count."""
    checks = check_run(topology.resolve(config.load(config_path)), run_dir)
    assert checks
    for check in checks:
        assert check.ok, check.describe() + "\n" + stderr
    return checks[0].delivered


def assert_on_record_blocks(run_dir: Path, stage: str) -> None:
    """Every replica of ``stage`` said at start-up that it runs on record
    blocks (the columnar path), none that it runs on rows."""
    said = [
        line
        for path in (run_dir / "logs").glob("*.log")
        for line in path.read_text(errors="replace").splitlines()
        if f"stage {stage} runs on " in line
    ]
    assert said and all(line.endswith("runs on record blocks") for line in said), said


def written_t0(run_dir: Path) -> float | None:
    """The run's t0 (unix s) once the launcher has written it, else None (to poll
    for; tests.processes.run_t0 reads it when it must be there)."""
    try:
        t0 = json.loads((run_dir / "cluster.json").read_text()).get("t0_unix")
    except (OSError, ValueError):
        return None
    return float(t0) if t0 else None


def events(run_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in (run_dir / "telemetry").glob("events-*.jsonl"):
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted(out, key=lambda e: float(e["t"]))


def start_launcher(config_path: Path, run_dir: Path, duration: float) -> subprocess.Popen[str]:
    """``cluster up`` in the background, told of no fault."""
    command = ["cluster", "up", str(config_path), "--duration", str(duration), "--run-dir", str(run_dir)]
    return subprocess.Popen(
        [sys.executable, "-m", "semiactive", *command, "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def finish(launcher: subprocess.Popen[str], run_dir: Path) -> subprocess.CompletedProcess[str]:
    """Wait for the launcher's end (kill it past 3 minutes); nothing may be
    left running."""
    try:
        out, err = launcher.communicate(timeout=180)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate()
        assert_no_processes(str(run_dir))
    return subprocess.CompletedProcess(launcher.args, launcher.returncode, out, err)


def run_with_nemesis(
    config_path: Path, run_dir: Path, *faults: str, duration: float = 5.0
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``cluster up`` told of no fault, and ``semiactive nemesis`` with
    ``faults`` (``--kill node-2@1.5``, ...) as a separate process that knows
    only the run's ``cluster.json``. Returns the launcher's result and its
    report."""
    launcher = start_launcher(config_path, run_dir, duration)
    try:
        nemesis = semiactive("nemesis", str(run_dir), *faults, timeout=120)
    finally:
        result = finish(launcher, run_dir)
    assert nemesis.returncode == 0, nemesis.stderr + "\n" + result.stderr
    return result, json.loads((run_dir / "telemetry" / "report.json").read_text())
