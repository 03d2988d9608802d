"""``semiactive ingest``: rows from files pushed into a running cluster's
ingest source, batch by batch; a bad row stops it at its line with what was
taken and how to go on, and going on with ``--skip`` loses and repeats
nothing. The run, in the background, is ended by ``semiactive cluster
down`` (drained: the sink holds every row)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_sources_cluster import TOTALS, running_totals
from tests.processes import ROOT, assert_no_processes, read_jsonl, semiactive, write_config

pytestmark = pytest.mark.slow


def _started(run_dir: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (run_dir / "cluster.json").exists():
            t0 = json.loads((run_dir / "cluster.json").read_text()).get("t0_unix")
            if t0 is not None and time.time() > t0:
                return
        time.sleep(0.05)
    raise AssertionError("the run did not start")


def test_ingest_files_into_a_running_cluster(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "ingest.yaml",
        {
            "name": "ingest-cli",
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
    rows = [(t, f"s{t % 3}", t % 5 + 1) for t in range(0, 800, 2)]
    first, second = rows[:200], rows[200:]
    csv = tmp_path / "first.csv"
    csv.write_text("ts, sensor, temp\n" + "".join(f"{t}, {s}, {v}\n" for t, s, v in first))
    bad = list(second)
    bad[150] = (bad[150][0], "s1", "warm")  # type: ignore[assignment]
    jsonl = tmp_path / "second.jsonl"
    jsonl.write_text("".join(json.dumps({"ts": t, "sensor": s, "temp": v}) + "\n" for t, s, v in bad))
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "semiactive", "cluster", "up", str(config), "--duration", "120"]
    launcher = subprocess.Popen(
        [*command, "--run-dir", str(run_dir), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        _started(run_dir)
        wrong = semiactive("ingest", str(csv), "--run-dir", str(run_dir), "--source", "gates")
        assert (wrong.returncode, wrong.stderr.strip()) == (
            2,
            "semiactive: --source gates: no source of that name in this run (gate)",
        )
        taken = semiactive("ingest", str(csv), "--run-dir", str(run_dir), "--source", "gate", "--batch", "64")
        assert taken.returncode == 0, taken.stderr
        assert taken.stdout.strip() == "gate took 200 rows (through line 201), last seq 200"
        # Batches of 100: the second holds the bad row (line 151), refused whole.
        stopped = semiactive(
            "ingest", str(jsonl), "--run-dir", str(run_dir), "--source", "gate", "--batch", "100"
        )
        assert stopped.returncode == 2
        assert stopped.stderr.strip() == (
            f"semiactive: {jsonl}:151: refused by gate: column temp: 'warm' is not integer; "
            "100 rows taken by this command; go on with --skip 100"
        )
        jsonl.write_text("".join(json.dumps({"ts": t, "sensor": s, "temp": v}) + "\n" for t, s, v in second))
        resumed = semiactive(
            "ingest", str(jsonl), "--run-dir", str(run_dir), "--source", "gate", "--skip", "100", "--end"
        )
        assert resumed.returncode == 0, resumed.stderr
        assert (
            resumed.stdout.strip()
            == f"gate took 100 rows (through line 200), last seq {len(rows)}; the stream has ended"
        )
        # `cluster down` from here: the drain of Ctrl-C, then the run's report.
        down = semiactive("cluster", "down", str(run_dir), timeout=90)
        assert down.returncode == 0, down.stderr
        assert "has stopped" in down.stdout and "out: " in down.stdout, down.stdout
        assert launcher.wait(timeout=30) == 0
    finally:
        if launcher.poll() is None:
            launcher.kill()
        launcher.communicate()
        assert_no_processes(str(run_dir))
    assert read_jsonl(run_dir / "sink" / "out.jsonl") == running_totals(rows)
    again = semiactive("cluster", "down", str(run_dir))
    assert (again.returncode, again.stdout.strip()) == (0, f"the run in {run_dir} has already ended")
