"""``semiactive cluster down RUN_DIR``: a run started in the background is
drained and stopped from another command, exactly; a run that has ended is
said to have; no run is a usage error."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from semiactive import config, topology
from semiactive.oracle.verify import check_run
from tests.processes import ROOT, assert_no_processes, chain_config, semiactive, write_config

pytestmark = pytest.mark.slow

SELECT = ["REGISTER QUERY s1 AS SELECT * FROM s0 WHERE val >= 100"]


def test_cluster_down_drains_a_background_run_and_stops_it(tmp_path: Path) -> None:
    config_path = write_config(tmp_path / "c.yaml", chain_config(SELECT, name="down"))
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "semiactive", "cluster", "up", str(config_path), "--duration", "120"]
    launcher = subprocess.Popen(
        [*command, "--run-dir", str(run_dir), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # a condition: the run has started (t0)
            if (run_dir / "cluster.json").exists():
                with_t0 = json.loads((run_dir / "cluster.json").read_text()).get("t0_unix")
                if with_t0 is not None and time.time() > with_t0 + 1:
                    break
            time.sleep(0.05)
        else:
            raise AssertionError("the run did not start")
        down = semiactive("cluster", "down", str(run_dir), timeout=90)
        assert down.returncode == 0, down.stderr
        assert "has stopped" in down.stdout and "sink:" in down.stdout, down.stdout
        assert launcher.wait(timeout=30) == 0  # drained: every row delivered
    finally:
        if launcher.poll() is None:
            launcher.kill()
        launcher.communicate()
        assert_no_processes(str(run_dir))
    for check in check_run(topology.resolve(config.load(config_path)), run_dir):
        assert check.ok and check.delivered > 0, check.describe()
    again = semiactive("cluster", "down", str(run_dir))
    assert (again.returncode, again.stdout.strip()) == (0, f"the run in {run_dir} has already ended")


def test_cluster_down_without_a_run_is_a_usage_error(tmp_path: Path) -> None:
    result = semiactive("cluster", "down", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip() == f"semiactive: {tmp_path}: no run there (no readable cluster.json)"
