"""``semiactive cluster down RUN_DIR`` without a run there is a usage error.
(Its drain of a run in the background: tests/integration/test_ingest_cli.py.)"""

from __future__ import annotations

from pathlib import Path

from tests.processes import semiactive


def test_cluster_down_without_a_run_is_a_usage_error(tmp_path: Path) -> None:
    result = semiactive("cluster", "down", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip() == f"semiactive: {tmp_path}: no run there (no readable cluster.json)"
