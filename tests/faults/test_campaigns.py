"""The long campaigns are CLI commands; the suite runs a small default of
each: a few chaos runs and a reduced sweep."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from semiactive.campaigns.nemesis import read_history
from tests.faults.harness import AGGREGATE, SELECTION, protected_chain
from tests.processes import assert_no_processes, semiactive

pytestmark = pytest.mark.slow


def test_chaos_runs_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    config = protected_chain(tmp_path, AGGREGATE)
    out = tmp_path / "chaos"
    result = semiactive(
        "chaos", str(config), "--runs", "2", "--seed", "7", "--duration", "4", "--out", str(out), timeout=300
    )
    assert_no_processes(str(out))
    assert result.returncode == 0, result.stderr
    assert "lost: 0, duplicated: 0, wrong or out of order: 0" in result.stdout
    # Every run plans at least one fault, injected by a separate nemesis (a
    # nemesis that did not know the campaign as the launcher injected none).
    injected = re.search(r"runs: 2 \(nemesis\), faults injected: (\d+), failed runs: 0", result.stdout)
    assert injected is not None and int(injected[1]) >= 2, result.stdout
    for run in ("chaos-0000", "chaos-0001"):  # named after the campaign's directory
        history = read_history(out / run)
        assert history and not any("skipped" in r for r in history), history


def test_sweep_writes_overhead_and_recovery_per_mode(tmp_path: Path) -> None:
    config = protected_chain(tmp_path, SELECTION)
    out = tmp_path / "sweep"
    result = semiactive(
        "experiment",
        "sweep",
        str(config),
        "--modes",
        "as,ub,sas",
        "--batch-sizes",
        "500",
        "--kill",
        "node-2@2.5",
        "--duration",
        "4",
        "--out",
        str(out),
        timeout=600,
    )
    assert_no_processes(str(out))
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    by_mode = {(r["mode"], r["batch_size"]): r for r in rows}
    assert set(by_mode) == {("as", ""), ("ub", ""), ("sas", "500")}
    assert all(r["identical"] == "True" for r in rows)
    assert float(by_mode[("ub", "")]["overhead"]) == 0.0
    assert float(by_mode[("as", "")]["overhead"]) > 0.9
    assert float(by_mode[("sas", "500")]["overhead"]) < float(by_mode[("as", "")]["overhead"])
    assert all(r["recovery_ms"] for r in rows)
    assert "SAS B=500" in result.stdout
