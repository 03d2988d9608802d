"""A run's timeline, as Spark tables: what the report draws for each run
outside a campaign (:mod:`semiactive.analytics.timeline_figure`).

- ``edge_timeline``: per edge, rows/s and bytes/s on the data and backup
  channels, in bins of ``width_s`` = max(``MIN_BIN_S``, the run's span /
  ``MAX_BINS``) after t0; the producers' counter deltas are spread over the
  bins as for the per-second bandwidth (:func:`aggregates.spread`), summed
  over the series of the edge's senders (a killed primary's and its
  successor's: samples taken as source or primary), over the part of
  the bin the samples cover (bins covered less than half are left out);
- ``sink_deliveries``: per sink, rows/s delivered in bins of ``fine_s`` =
  max(``FINE_BIN_S``, span / ``FINE_BINS``), from its arrivals (one line
  per batch): a failover of a tenth of a second shows as a gap;
- ``sink_latency``: per sink and sample interval, the mean source-to-sink
  latency of the rows delivered in it (from ``latency_sum_s`` and
  ``latency_rows``) and its rows/s;
- ``timeline_events``: detections, takeovers, recoveries, re-protections,
  resumes of frozen processes (faults are the ``faults`` table's).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from semiactive.analytics.aggregates import intervals, spread

MIN_BIN_S = 0.25  # the default telemetry interval
MAX_BINS = 300
FINE_BIN_S = 0.05
FINE_BINS = 1500
MARKED = ("failure_detected", "takeover", "recovered", "reprotected", "process_resumed")
COUNTERS = {
    "d_data_rows": "main_rows_per_s",
    "d_backup_rows": "backup_rows_per_s",
    "d_data": "main_bytes_per_s",
    "d_backup": "backup_bytes_per_s",
}


def bin_widths(edges: DataFrame, t0: DataFrame) -> DataFrame:
    """``run_id, t0, width_s, fine_s``."""
    last = edges.groupBy("run_id").agg(F.max("t").alias("last_t"))
    span = F.col("last_t") - F.col("t0")
    return t0.join(last, "run_id").select(
        "run_id",
        "t0",
        F.greatest(F.lit(MIN_BIN_S), span / MAX_BINS).alias("width_s"),
        F.greatest(F.lit(FINE_BIN_S), span / FINE_BINS).alias("fine_s"),
    )


def edge_timeline(edges: DataFrame, widths: DataFrame) -> DataFrame:
    """``run_id, edge, at_s`` (the bin's start), ``width_s`` and the four
    rates; ``widths``: :func:`bin_widths`."""
    w = F.col("width_s")
    # Senders only: a secondary mirrors its log's cursors but sends nothing.
    sent = intervals(edges).where(F.col("role").isin("source", "primary"))
    binned = spread(sent.join(widths.drop("fine_s"), "run_id"), w)
    per_series = binned.groupBy("run_id", "edge", "node", "since", "k", "width_s").agg(
        *(F.sum(F.col(d) * F.col("share")).alias(d) for d in COUNTERS),
        F.sum("overlap").alias("coverage"),
    )
    per_edge = per_series.groupBy("run_id", "edge", "k", "width_s").agg(
        *(F.sum(d).alias(d) for d in COUNTERS),
        F.max("coverage").alias("coverage_s"),
    )
    return (
        per_edge.where((F.col("k") >= 0) & (F.col("coverage_s") >= w / 2))
        .select(
            "run_id",
            "edge",
            (F.col("k") * w).alias("at_s"),
            "width_s",
            *((F.col(d) / F.col("coverage_s")).alias(rate) for d, rate in COUNTERS.items()),
        )
        .orderBy("run_id", "edge", "at_s")
    )


def sink_deliveries(arrivals: DataFrame, widths: DataFrame) -> DataFrame:
    """``run_id, sink, at_s`` (the bin's start), ``width_s, rows_per_s``;
    bins without a delivery are absent (none: 0 rows/s)."""
    w = F.col("fine_s")
    k = F.floor((F.col("t") - F.col("t0")) / w)
    return (
        arrivals.join(widths, "run_id")
        .withColumn("k", k)
        .where(F.col("k") >= 0)
        .groupBy("run_id", "sink", "k", "fine_s")
        .agg(F.sum("rows").alias("rows"))
        .select(
            "run_id",
            "sink",
            (F.col("k") * w).alias("at_s"),
            F.col("fine_s").alias("width_s"),
            (F.col("rows") / w).alias("rows_per_s"),
        )
        .orderBy("run_id", "sink", "at_s")
    )


def sink_latency(nodes: DataFrame, t0: DataFrame) -> DataFrame:
    """``run_id, sink, at_s`` (the interval's end), ``interval_s, rows,
    rows_per_s, latency_ms`` (null: nothing delivered)."""
    series = Window.partitionBy("run_id", "node", "since").orderBy("t")
    prev = {c: F.lag(c).over(series) for c in ("t", "latency_rows", "latency_sum_s")}
    rows = F.col("latency_rows") - prev["latency_rows"]
    total = F.col("latency_sum_s") - prev["latency_sum_s"]
    return (
        nodes.where((F.col("role") == "sink") & F.col("latency_rows").isNotNull())
        .join(t0, "run_id")
        .select(
            "run_id",
            F.col("node").alias("sink"),
            (F.col("t") - F.col("t0")).alias("at_s"),
            (F.col("t") - prev["t"]).alias("interval_s"),
            rows.alias("rows"),
            F.when(rows > 0, total / rows * 1000).alias("latency_ms"),
        )
        .where(F.col("interval_s").isNotNull() & (F.col("interval_s") > 0) & (F.col("at_s") > 0))
        .withColumn("rows_per_s", F.col("rows") / F.col("interval_s"))
        .orderBy("run_id", "sink", "at_s")
    )


def timeline_events(events: DataFrame, t0: DataFrame) -> DataFrame:
    """``run_id, at_s, event, node, target, stage, epoch``: the marked events."""
    return (
        events.where(F.col("event").isin(*MARKED))
        .join(t0, "run_id")
        .select(
            "run_id",
            (F.col("t") - F.col("t0")).alias("at_s"),
            "event",
            "node",
            "target",
            "stage",
            "epoch",
        )
        .orderBy("run_id", "at_s")
    )
