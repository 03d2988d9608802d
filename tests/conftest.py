"""What tests across directories share: the test run's one SparkSession
(Spark takes seconds to start; the report tests in tests/unit and
tests/integration use the same one)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from semiactive.analytics import report_job

    session = report_job.session("local[2]", app="semiactive-tests")
    yield session
    session.stop()
