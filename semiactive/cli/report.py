"""``semiactive report``: the Spark job over runs' telemetry (Parquet
tables, report.md, the papers' figures); pyspark and matplotlib are the
``report`` extra."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from semiactive.cli.common import USAGE_ERROR

if TYPE_CHECKING:
    from semiactive.cli.common import Subcommands


def register(sub: Subcommands) -> None:
    report = sub.add_parser(
        "report", help="the Spark job over runs' telemetry: Parquet tables, report.md, the papers' figures"
    )
    report.add_argument("inputs", nargs="+", type=Path, metavar="RUN_DIR_OR_CAMPAIGN_DIR")
    report.add_argument(
        "--master",
        help="Spark master: local[N] (default local[2]), spark://HOST:PORT, sc://HOST:PORT (Spark Connect)",
    )
    report.add_argument("--out", type=Path, help="output directory (default: INPUT/report, or report-<time>)")
    report.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    try:
        from semiactive.analytics.report_job import run_report
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("pyspark", "py4j", "matplotlib"):
            raise
        print(f"semiactive report: needs {exc.name}: pip install 'semiactive[report]'", file=sys.stderr)
        return USAGE_ERROR
    inputs: list[Path] = args.inputs
    out = args.out or (
        inputs[0] / "report" if len(inputs) == 1 else Path(f"report-{time.strftime('%Y%m%d-%H%M%S')}")
    )
    run_report(inputs, out, master=args.master)
    return 0
