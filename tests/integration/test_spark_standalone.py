"""The report job on a real Spark standalone cluster: a master and a
worker started from the pyspark package (``spark-class``, on loopback,
ephemeral ports, killed at the end), ``semiactive report --master
spark://...`` run as a user would, and its Parquet tables the same as local
mode's on the same campaigns (the hand-checked ones of
tests/unit/test_report_aggregates.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from semiactive.analytics import report_job
from semiactive.analytics.standalone import local_cluster
from tests.processes import assert_no_processes, semiactive
from tests.unit.test_report_aggregates import _asas, _engine, _sweep

# Four JVMs (master, worker, driver, executor): about a minute, several when
# the 2-core machine is loaded (at load average 12 it took 300 s).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    """A master and one worker (2 cores) on loopback; the master's URL."""
    base = tmp_path / "spark"
    with local_cluster(base) as url:
        yield url
    assert_no_processes(str(base))


def _normalised(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    def value(v: Any) -> Any:
        return round(v, 9) if isinstance(v, float) else v

    return sorted((tuple(sorted((k, value(v)) for k, v in r.items())) for r in rows), key=repr)


def test_the_report_on_a_standalone_cluster_makes_local_modes_tables(
    standalone: str,
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    campaigns = tmp_path / "campaigns"
    _sweep(campaigns)
    _asas(campaigns)
    _engine(campaigns)
    result = semiactive(
        "report", str(campaigns), "--master", standalone, "--out", str(tmp_path / "cluster"), timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert f"on {standalone}" in result.stderr
    # The worker ran the job's executor.
    apps = list((tmp_path / "spark" / "work").glob("app-*"))
    assert len(apps) == 1, apps

    local = report_job.run_report([campaigns], tmp_path / "local", spark=spark, progress=lambda line: None)
    for name in report_job.TABLES:
        on_cluster = [
            r.asDict() for r in spark.read.parquet(str(tmp_path / "cluster" / "tables" / name)).collect()
        ]
        assert _normalised(on_cluster) == _normalised(local.tables[name]), name
    assert sum(len(rows) for rows in local.tables.values()) > 30
    figures = sorted(p.name for p in (tmp_path / "cluster" / "figures").glob("*.png"))
    assert (
        figures == sorted(p.name for p in (tmp_path / "local" / "figures").glob("*.png"))
        and len(figures) >= 6
    )
