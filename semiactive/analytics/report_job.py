"""``semiactive report``: the Spark job over runs' telemetry.

Creates the SparkSession (``local[2]`` by default; a ``spark://`` master or
an ``sc://`` Spark Connect URL when given), builds the tables of
:mod:`semiactive.analytics.aggregates`, writes each as Parquet under ``OUT/tables/``,
draws the figures into ``OUT/figures/`` and writes ``OUT/report.md``.
Progress goes to stderr, one line per step.

Executors read the telemetry files by path, so a cluster's workers must
see the run directories at the same paths (one machine, or a shared
filesystem), and write the Parquet output the same way.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from semiactive.analytics import aggregates as agg
from semiactive.analytics import figures as figs
from semiactive.analytics import telemetry_frames as frames
from semiactive.analytics import timeline, timeline_figure
from semiactive.analytics.markdown import write_report
from semiactive.analytics.runs import TIMELINES, ReportInputError, Run, discover, outside_campaigns

DEFAULT_MASTER = "local[2]"
SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.session.timeZone": "UTC",
    # A campaign's telemetry is megabytes: whole-stage code generation and
    # adaptive re-planning cost more per query than they save (measured: a
    # warm report of five runs 24 s with them, 5 s without, on 2 cores).
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.driver.memory": "1g",
    "spark.executor.memory": "1g",
    "spark.sql.parquet.compression.codec": "snappy",
    "spark.log.level": "ERROR",
    "spark.ui.showConsoleProgress": "false",
    # Python workers (createDataFrame's rows) run this interpreter, also
    # on a standalone worker of the same machine.
    "spark.pyspark.python": sys.executable,
    "spark.pyspark.driver.python": sys.executable,
}
# Tables written, in order; the first ones feed the later ones.
TABLES = (
    "runs",
    "stages",
    "edge_bandwidth",
    "faults",
    "edge_timeline",
    "sink_deliveries",
    "sink_latency",
    "timeline_events",
    "overhead_runs",
    "overhead_by_setting",
    "recovery_by_setting",
    "asas_bandwidth",
    "asas_recovery",
    "asas_tuning",
    "engine_runs",
    "engine_summary",
)


def session(master: str | None = None, app: str = "semiactive-report") -> SparkSession:
    """A quiet SparkSession: local by default, a ``spark://`` master, or
    (``sc://``) a Spark Connect server. (``getOrCreate``: in a process that
    already has a session, that one, whatever ``master`` says.)"""
    master = master or DEFAULT_MASTER
    # Loopback unless told otherwise (and no warning that the host name
    # resolves to it).
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if master.startswith("sc://"):
        try:
            return SparkSession.builder.remote(master).appName(app).getOrCreate()
        except ImportError as exc:  # pyspark's PySparkImportError is one
            raise ReportInputError(
                f"--master {master}: the Spark Connect client is missing ({exc}): "
                "pip install 'semiactive[report]'"
            ) from exc
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    if master.startswith("spark://"):
        # Two cores per worker on the test machines; one executor each.
        builder = builder.config("spark.cores.max", "2").config("spark.executor.cores", "2")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def build_tables(spark: SparkSession, runs: list[Run], staging: Path) -> dict[str, DataFrame]:
    """Every table of the report, lazily (nothing runs until written);
    ``staging``: a directory for the run list the executors read."""
    run_df = frames.runs_frame(spark, runs, staging).cache()
    stages = frames.stages_frame(spark, runs, staging).cache()
    edges = frames.read(spark, runs, "edges", staging).cache()
    events = frames.read(spark, runs, "events", staging).cache()
    tuning = frames.read(spark, runs, "tuning", staging)
    engine = frames.read(spark, runs, "engine", staging)
    alone = outside_campaigns(runs)[:TIMELINES]
    mine = F.col("run_id").isin([r.run_id for r in alone])
    sinks = frames.read(spark, alone, "nodes", staging).where(F.col("role") == "sink")
    t0 = agg.start_times(run_df, edges).cache()
    widths = timeline.bin_widths(edges.where(mine), t0).cache()
    bandwidth = agg.per_second_bandwidth(edges, t0).cache()
    fault_rows = agg.faults(events, t0).cache()
    overhead = agg.overhead_per_run(edges, fault_rows, stages).cache()
    engine_runs = engine.join(run_df.select("run_id", "run", "campaign"), "run_id")
    return {
        "runs": run_df,
        "stages": stages,
        "edge_bandwidth": bandwidth,
        "faults": fault_rows,
        "edge_timeline": timeline.edge_timeline(edges.where(mine), widths),
        "sink_deliveries": timeline.sink_deliveries(frames.arrivals(spark, alone, staging), widths),
        "sink_latency": timeline.sink_latency(sinks, t0),
        "timeline_events": timeline.timeline_events(events.where(mine), t0),
        "overhead_runs": overhead,
        "overhead_by_setting": agg.overhead_by_setting(overhead, run_df, stages),
        "recovery_by_setting": agg.recovery_by_setting(fault_rows, run_df, stages),
        "asas_bandwidth": agg.asas_bandwidth(bandwidth, run_df, stages),
        "asas_recovery": agg.asas_recovery(fault_rows, run_df),
        "asas_tuning": agg.asas_tuning(tuning, t0, run_df),
        "engine_runs": engine_runs,
        "engine_summary": agg.engine_summary(engine),
    }


def figures_line(figures: list[figs.Figure]) -> str:
    """``1 timeline, 0 campaign figures drawn (13 need a campaign)``."""
    timelines = sum(1 for f in figures if f.kind == "timeline" and f.path is not None)
    campaign = [f for f in figures if f.kind == "campaign"]
    drawn = sum(1 for f in campaign if f.path is not None)
    return (
        f"{timelines} timeline{'s' * (timelines != 1)}, {drawn} campaign figure{'s' * (drawn != 1)} drawn"
        f" ({len(campaign) - drawn} need a campaign)"
    )


@dataclass
class ReportResult:
    """What a report run made: the collected tables, the figures, timings."""

    out: Path
    runs: int
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    figures: list[figs.Figure] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def run_report(
    inputs: list[Path],
    out: Path,
    *,
    master: str | None = None,
    spark: SparkSession | None = None,
    progress: Callable[[str], None] | None = None,
) -> ReportResult:
    """The whole job. ``spark``: an existing session to use (and leave
    running); otherwise one is made for ``master`` and stopped at the end."""
    say = progress or (lambda line: print(f"report: {line}", file=sys.stderr, flush=True))
    started = time.monotonic()
    runs = discover(inputs)
    say(f"{len(runs)} runs under {', '.join(str(p) for p in inputs)}")
    own = spark is None
    t = time.monotonic()
    if spark is None:
        try:
            spark = session(master)
        except ReportInputError:
            raise
        except Exception as exc:  # a master Spark cannot parse or reach: one line, not a JVM trace
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ReportInputError(f"--master {master}: Spark did not start: {first[:300]}") from exc
    result = ReportResult(out, len(runs))
    result.seconds["session"] = time.monotonic() - t
    shown = (master or DEFAULT_MASTER) if own else spark.conf.get("spark.master", master or DEFAULT_MASTER)
    say(f"Spark {spark.version} on {shown} ({result.seconds['session']:.1f} s)")
    try:
        (out / "tables").mkdir(parents=True, exist_ok=True)
        tables = build_tables(spark, runs, out / "staging")
        t = time.monotonic()
        for name in TABLES:
            df = tables[name].coalesce(1).cache()
            df.write.mode("overwrite").parquet(str(out / "tables" / name))
            result.tables[name] = [row.asDict() for row in df.collect()]
            df.unpersist()
            say(f"table {name}: {len(result.tables[name])} rows")
        result.seconds["tables"] = time.monotonic() - t
    finally:
        if own:
            spark.stop()
        else:
            spark.catalog.clearCache()  # the frames build_tables cached
        shutil.rmtree(out / "staging", ignore_errors=True)
    t = time.monotonic()
    (out / "figures").mkdir(parents=True, exist_ok=True)
    result.figures = timeline_figure.draw(result.tables, out / "figures")
    result.figures += figs.draw(result.tables, out / "figures")
    result.seconds["figures"] = time.monotonic() - t
    say(figures_line(result.figures))
    result.seconds["total"] = time.monotonic() - started
    write_report(result, inputs, str(shown))
    say(f"wrote {out / 'report.md'} ({result.seconds['total']:.1f} s)")
    return result
