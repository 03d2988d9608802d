"""``cluster up --run-dir`` refuses a directory that holds a previous run:
its files would mix with the new run's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from semiactive.errors import UserError
from semiactive.launcher.cluster import run_cluster
from tests.processes import ROOT


def test_a_run_directory_holding_a_previous_run_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cluster.json").write_text("{}")
    with pytest.raises(UserError, match="holds a previous run"):
        asyncio.run(
            run_cluster(
                str(ROOT / "examples" / "paper-chain.yaml"), duration=1, run_dir=tmp_path, kills=[], stops=[]
            )
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.json"]


@pytest.mark.parametrize("seconds", [0, -1, float("inf"), float("nan")])
def test_a_duration_that_is_no_positive_number_of_seconds_is_refused(tmp_path: Path, seconds: float) -> None:
    with pytest.raises(UserError, match="--duration"):
        asyncio.run(
            run_cluster(str(ROOT / "examples" / "paper-chain.yaml"), duration=seconds, run_dir=tmp_path / "r")
        )
    assert not (tmp_path / "r").exists()
