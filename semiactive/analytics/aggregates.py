"""The report's tables, as Spark transformations of the telemetry frames.

The definitions are the project's (docs/telemetry.md, semiactive/launcher/measurements.py):

- per-second bandwidth of an edge: counter deltas between consecutive
  samples of one series (node, since), spread over the seconds each
  interval covers in proportion to its overlap (linear between samples, as
  semiactive/campaigns/asas.py's ``per_second``), summed over the series
  and divided by the part of the second the samples cover (seconds covered
  less than half are left out);
- overhead of a protected stage: backup bytes / data bytes on the edges into
  it, from the producers' ``out`` records, each series' last sample up to
  the run's first fault (the whole run if none);
- a fault: ``fault_injected``, or a ``process_exited`` / ``process_frozen``
  no injection explains; its detection is the first ``failure_detected`` of
  the target as primary from the fault (one launcher polling interval
  before it for an observed one) until the target's next fault (a freeze:
  its end plus a second); detection time = that event's ``t`` minus the
  fault's, at least 0; recovery = the detector's next ``recovered``'s
  ``recovery_ms``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from semiactive.launcher.measurements import FREEZE_SLACK_S
from semiactive.launcher.supervision import OBSERVE_INTERVAL_S

EXPLAINS_WITHIN_S = 2.0  # an injection explains an exit observed up to this long after it
LATE_SLACK_S = 0.05  # ...or this long before it (the injector writes after signalling)
MIN_COVERAGE_S = 0.5  # a second needs samples over half of it for a rate
SETTING = ["kind", "operator", "network_load_bytes_per_s", "mode", "batch_size"]


def start_times(runs: DataFrame, edges: DataFrame) -> DataFrame:
    """``run_id, t0``: ``cluster.json``'s t0, else the run's first edge sample."""
    first = edges.groupBy("run_id").agg(F.min("t").alias("first_t"))
    return (
        runs.select("run_id", "t0_unix")
        .join(first, "run_id", "left")
        .select("run_id", F.coalesce("t0_unix", "first_t").alias("t0"))
    )


def intervals(edges: DataFrame) -> DataFrame:
    """Consecutive ``out`` samples of one series as intervals with deltas
    (``d_data``, ``d_backup``: bytes; ``d_data_rows``, ``d_backup_rows``)."""
    series = Window.partitionBy("run_id", "node", "since", "edge").orderBy("t")
    counters = {"data_bytes": "d_data", "backup_bytes": "d_backup", "data_rows": "d_data_rows",
                "backup_rows": "d_backup_rows"}  # fmt: skip
    prev = {c: F.lag(c).over(series) for c in ("t", "batch_size", *counters)}
    return (
        edges.where(F.col("direction") == "out")
        .select(
            "run_id",
            "node",
            "since",
            "edge",
            "role",
            "t",
            "batch_size",
            prev["t"].alias("prev_t"),
            prev["batch_size"].alias("prev_batch_size"),
            *(F.greatest(F.lit(0), F.col(c) - prev[c]).alias(d) for c, d in counters.items()),
        )
        .where(F.col("prev_t").isNotNull() & (F.col("t") > F.col("prev_t")))
    )


def spread(iv: DataFrame, width: Column) -> DataFrame:
    """Intervals (with ``t0``) over bins of ``width`` seconds after t0: a
    row per interval and bin ``k`` ([k w, (k+1) w)) it overlaps, with
    ``a``, ``b`` (its ends after t0), ``overlap`` and ``share`` (of it in
    the bin)."""
    k = F.col("k")
    return (
        iv.withColumn("a", F.col("prev_t") - F.col("t0"))
        .withColumn("b", F.col("t") - F.col("t0"))
        .withColumn("k", F.explode(F.sequence(F.floor(F.col("a") / width), F.ceil(F.col("b") / width) - 1)))
        .withColumn("overlap", F.least("b", (k + 1) * width) - F.greatest("a", k * width))
        .where(F.col("overlap") > 0)
        .withColumn("share", F.col("overlap") / (F.col("b") - F.col("a")))
    )


def per_second_bandwidth(edges: DataFrame, t0: DataFrame) -> DataFrame:
    """``run_id, edge, producer, consumer, second, main_bytes_per_s,
    backup_bytes_per_s, batch_size, coverage_s``; ``second`` k is [k, k+1)
    after the run's t0; ``batch_size`` is B in force at its end (0: no
    backup) on the producer's primary."""
    binned = spread(intervals(edges).join(t0, "run_id"), F.lit(1.0)).withColumnRenamed("k", "second")
    k = F.col("second")
    held_end = F.col("b") <= k + 1
    primary = F.col("role").isin("source", "primary")
    b_held = F.when(primary, F.when(held_end, F.col("batch_size")).otherwise(F.col("prev_batch_size")))
    b_time = F.when(primary, F.when(held_end, F.col("b")).otherwise(F.col("a")))
    per_series = binned.groupBy("run_id", "edge", "node", "since", "second").agg(
        F.sum(F.col("d_data") * F.col("share")).alias("data"),
        F.sum(F.col("d_backup") * F.col("share")).alias("backup"),
        F.sum("overlap").alias("coverage"),
        F.max_by(b_held, b_time).alias("b_held"),
        F.max(b_time).alias("b_time"),
    )
    per_edge = per_series.groupBy("run_id", "edge", "second").agg(
        F.sum("data").alias("data"),
        F.sum("backup").alias("backup"),
        F.max("coverage").alias("coverage_s"),
        F.max_by("b_held", "b_time").alias("batch_size"),
    )
    ends = F.split("edge", "->")
    return per_edge.where(F.col("coverage_s") >= MIN_COVERAGE_S).select(
        "run_id",
        "edge",
        ends.getItem(0).alias("producer"),
        ends.getItem(1).alias("consumer"),
        F.col("second").cast("long").alias("second"),
        (F.col("data") / F.col("coverage_s")).alias("main_bytes_per_s"),
        (F.col("backup") / F.col("coverage_s")).alias("backup_bytes_per_s"),
        "batch_size",
        "coverage_s",
    )


def faults(events: DataFrame, t0: DataFrame) -> DataFrame:
    """One row per fault: ``run_id, fault, target, fault_kind, origin,
    fault_t, at_s, duration_s`` (an injected freeze's), ``detected_by,
    detected_stage, detection_ms, recovery_ms``."""
    ev = events.alias("e")
    injected = ev.where(F.col("event") == "fault_injected").select(
        "run_id",
        "target",
        "kind",
        F.col("t").alias("fault_t"),
        "duration_s",
        F.coalesce("injector", "node").alias("origin"),
    )
    exited = F.col("event") == "process_exited"
    observed = ev.where(F.col("event").isin("process_exited", "process_frozen")).select(
        "run_id",
        "target",
        F.when(exited, "exit").otherwise("freeze").alias("kind"),
        F.when(exited, "kill").otherwise("stop").alias("cause"),
        F.col("t").alias("fault_t"),
    )
    i, o = injected.alias("i"), observed.alias("o")
    explains = (
        (F.col("i.run_id") == F.col("o.run_id"))
        & (F.col("i.target") == F.col("o.target"))
        & (F.col("i.kind") == F.col("o.cause"))
        & F.col("i.fault_t").between(
            F.col("o.fault_t") - EXPLAINS_WITHIN_S, F.col("o.fault_t") + LATE_SLACK_S
        )
    )
    unexplained = o.join(i, explains, "left_anti").select(
        "run_id",
        "target",
        "kind",
        "fault_t",
        F.lit(None).cast("double").alias("duration_s"),
        F.lit("observed").alias("origin"),
    )
    all_faults = injected.unionByName(unexplained).join(t0, "run_id")
    per_target = Window.partitionBy("run_id", "target").orderBy("fault_t")
    per_run = Window.partitionBy("run_id").orderBy("fault_t", "target")
    freeze_end = F.col("fault_t") + F.coalesce("duration_s", F.lit(0.0)) + FREEZE_SLACK_S
    is_timed_stop = (F.col("kind") == "stop") & (F.coalesce("duration_s", F.lit(0.0)) > 0)
    next_fault = F.coalesce(F.lead("fault_t").over(per_target), F.lit(float("inf")))
    f = (
        all_faults.withColumn("fault", F.row_number().over(per_run))
        .withColumn(
            "earliest",
            F.col("fault_t") - F.when(F.col("origin") == "observed", OBSERVE_INTERVAL_S).otherwise(0.0),
        )
        .withColumn("until", F.when(is_timed_stop, F.least(next_fault, freeze_end)).otherwise(next_fault))
        .withColumn("at_s", F.col("fault_t") - F.col("t0"))
    )
    detected = ev.where(F.col("event") == "failure_detected").select(
        F.col("run_id").alias("d_run"),
        F.col("primary").alias("d_primary"),
        F.col("t").alias("detected_t"),
        F.col("node").alias("detected_by"),
        F.col("stage").alias("detected_stage"),
    )
    matches = (
        (F.col("run_id") == F.col("d_run"))
        & (F.col("target") == F.col("d_primary"))
        & (F.col("detected_t") >= F.col("earliest"))
        & (F.col("detected_t") < F.col("until"))
    )
    first = Window.partitionBy("run_id", "fault").orderBy(F.col("detected_t").asc_nulls_last())
    with_detection = (
        f.join(detected, matches, "left")
        .withColumn("n", F.row_number().over(first))
        .where(F.col("n") == 1)
        .drop("n", "d_run", "d_primary")
    )
    recovered = ev.where(F.col("event") == "recovered").select(
        F.col("run_id").alias("r_run"),
        F.col("node").alias("r_node"),
        F.col("t").alias("recovered_t"),
        "recovery_ms",
    )
    after = (
        (F.col("run_id") == F.col("r_run"))
        & (F.col("detected_by") == F.col("r_node"))
        & (F.col("recovered_t") >= F.col("detected_t"))
    )
    first_recovery = Window.partitionBy("run_id", "fault").orderBy(F.col("recovered_t").asc_nulls_last())
    return (
        with_detection.join(recovered, after, "left")
        .withColumn("n", F.row_number().over(first_recovery))
        .where(F.col("n") == 1)
        .select(
            "run_id",
            "fault",
            "target",
            F.col("kind").alias("fault_kind"),
            "origin",
            "fault_t",
            "at_s",
            "duration_s",
            "detected_by",
            "detected_stage",
            # (greatest() skips nulls: an undetected fault must stay null)
            F.when(
                F.col("detected_t").isNotNull(),
                F.greatest(F.lit(0.0), F.col("detected_t") - F.col("fault_t")) * 1000,
            ).alias("detection_ms"),
            "recovery_ms",
        )
    )


def overhead_per_run(edges: DataFrame, fault_rows: DataFrame, stages: DataFrame) -> DataFrame:
    """``run_id, stage, main_bytes, backup_bytes, overhead, window``: per
    protected stage, the bytes on the edges into it up to the first fault."""
    first = fault_rows.groupBy("run_id").agg(F.min("fault_t").alias("first_fault"))
    last = Window.partitionBy("run_id", "node", "since", "edge").orderBy(F.col("t").desc())
    samples = (
        edges.where(F.col("direction") == "out")
        .join(first, "run_id", "left")
        .where(F.col("first_fault").isNull() | (F.col("t") <= F.col("first_fault")))
        .withColumn("n", F.row_number().over(last))
        .where(F.col("n") == 1)
    )
    protected = stages.where(F.col("stage_mode") != "none")
    per_stage = (
        samples.withColumn("stage", F.split("edge", "->").getItem(1))
        .join(protected, ["run_id", "stage"])
        .groupBy("run_id", "stage")
        .agg(
            F.sum("data_bytes").alias("main_bytes"),
            F.sum("backup_bytes").alias("backup_bytes"),
            F.max(F.col("first_fault").isNotNull()).alias("before_fault"),
        )
    )
    return per_stage.select(
        "run_id",
        "stage",
        "main_bytes",
        "backup_bytes",
        F.when(F.col("main_bytes") > 0, F.col("backup_bytes") / F.col("main_bytes")).alias("overhead"),
        F.when(F.col("before_fault"), "before the first fault").otherwise("whole run").alias("window"),
    )


def _with_setting(table: DataFrame, runs: DataFrame, stages: DataFrame, stage_column: str) -> DataFrame:
    """``table`` with its run's parameters; ``mode`` and ``batch_size`` are
    the run's when its campaign varied the mode, else those configured for
    the stage in ``stage_column``."""
    configured = stages.withColumnRenamed("stage", stage_column)
    params = runs.withColumnRenamed("mode", "run_mode").withColumnRenamed("batch_size", "run_batch_size")
    varied = F.col("run_mode").isNotNull()
    return (
        table.join(configured, ["run_id", stage_column], "left")
        .join(params, "run_id")
        .withColumn("mode", F.when(varied, F.col("run_mode")).otherwise(F.col("stage_mode")))
        .withColumn(
            "batch_size", F.when(varied, F.col("run_batch_size")).otherwise(F.col("stage_batch_size"))
        )
    )


def overhead_by_setting(per_run: DataFrame, runs: DataFrame, stages: DataFrame) -> DataFrame:
    """Per (kind, operator, network load, mode, B): runs, mean / min / max
    overhead, and the ratio of the summed bytes."""
    table = _with_setting(per_run, runs, stages, "stage").fillna({"network_load_bytes_per_s": 0.0})
    return (
        table.groupBy(*SETTING)
        .agg(
            F.count("*").alias("runs"),
            F.avg("overhead").alias("overhead_mean"),
            F.min("overhead").alias("overhead_min"),
            F.max("overhead").alias("overhead_max"),
            (F.sum("backup_bytes") / F.sum("main_bytes")).alias("overhead_of_sums"),
            F.avg("main_bytes").alias("main_bytes_mean"),
        )
        .orderBy(*SETTING)
    )


def _stats(column: str) -> list[Column]:
    c = F.col(column)
    return [
        F.avg(c).alias(f"{column}_mean"),
        F.percentile(c, 0.5).alias(f"{column}_p50"),
        F.percentile(c, 0.99).alias(f"{column}_p99"),
        F.max(c).alias(f"{column}_max"),
    ]


def recovery_by_setting(fault_rows: DataFrame, runs: DataFrame, stages: DataFrame) -> DataFrame:
    """Per (kind, operator, network load, mode, B): faults, detected,
    recovered, and detection and recovery time statistics (ms)."""
    table = _with_setting(fault_rows, runs, stages, "detected_stage").fillna(
        {"network_load_bytes_per_s": 0.0}
    )
    return (
        table.groupBy(*SETTING)
        .agg(
            F.count("*").alias("faults"),
            F.count("detection_ms").alias("detected"),
            F.count("recovery_ms").alias("recovered"),
            *_stats("detection_ms"),
            *_stats("recovery_ms"),
        )
        .orderBy(*SETTING)
    )


def _protected_edges(bandwidth: DataFrame, stages: DataFrame) -> DataFrame:
    protected = stages.where(F.col("stage_mode") != "none").select("run_id", F.col("stage").alias("consumer"))
    return bandwidth.join(protected, ["run_id", "consumer"])


def asas_bandwidth(bandwidth: DataFrame, runs: DataFrame, stages: DataFrame) -> DataFrame:
    """A-SAS campaigns' runs without a kill: backup bytes/s and B per second
    on each edge into a protected stage, mean over repeats, per (scenario,
    mode, tuner), with ``bw_max``. Seconds past the run's duration (the
    drain) and before t0 are left out."""
    free = runs.where((F.col("kind") == "asas") & F.col("kill_at_s").isNull()).select(
        "run_id", "scenario", "mode", "tuner", "duration_s", "bw_max_bytes_per_s"
    )
    rows = _protected_edges(bandwidth, stages).join(free, "run_id")
    rows = rows.where(
        (F.col("second") >= 0) & (F.col("duration_s").isNull() | (F.col("second") < F.col("duration_s")))
    )
    keys = ["scenario", "mode", "tuner", "edge", "second"]
    return (
        rows.groupBy(*keys)
        .agg(
            F.count("*").alias("runs"),
            F.avg("backup_bytes_per_s").alias("backup_bytes_per_s"),
            F.avg("main_bytes_per_s").alias("main_bytes_per_s"),
            F.max("batch_size").alias("batch_size"),
            F.max("bw_max_bytes_per_s").alias("bw_max_bytes_per_s"),
        )
        .orderBy(*keys)
    )


def asas_recovery(fault_rows: DataFrame, runs: DataFrame) -> DataFrame:
    """A-SAS campaigns' kill runs: recovery and detection per (scenario,
    mode, tuner, kill time), mean over repeats, with ``recovery_max``."""
    asas = runs.where(F.col("kind") == "asas")
    rows = fault_rows.join(
        asas.select("run_id", "scenario", "mode", "tuner", "kill_at_s", "recovery_max_s"), "run_id"
    )
    keys = ["scenario", "mode", "tuner", "kill_at_s"]
    return (
        rows.groupBy(*keys)
        .agg(
            F.count("*").alias("faults"),
            F.avg("recovery_ms").alias("recovery_ms"),
            F.max("recovery_ms").alias("recovery_ms_max"),
            F.avg("detection_ms").alias("detection_ms"),
            F.max("recovery_max_s").alias("recovery_max_s"),
        )
        .orderBy(*keys)
    )


def asas_tuning(tuning: DataFrame, t0: DataFrame, runs: DataFrame) -> DataFrame:
    """The tuner's steps: B, BW* and R* against their limits, seconds after t0."""
    return (
        tuning.join(t0, "run_id")
        .join(runs.select("run_id", "scenario", "mode", "repeat", "kill_at_s"), "run_id")
        .select(
            "run_id",
            "scenario",
            "mode",
            "tuner",
            "repeat",
            "kill_at_s",
            "edge",
            (F.col("t") - F.col("t0")).alias("at_s"),
            "batch_size",
            "previous",
            "bw_estimate_bytes_per_s",
            "bw_max_bytes_per_s",
            (F.col("recovery_estimate_s") * 1000).alias("recovery_estimate_ms"),
            (F.col("recovery_max_s") * 1000).alias("recovery_max_ms"),
            "backup_bytes_per_s",
            "input_rate_per_s",
            "branch",
        )
        .orderBy("run_id", "edge", "at_s")
    )


def engine_summary(engine: DataFrame) -> DataFrame:
    """The recursive CQL paper's figures' inputs: per (form, executor, HB bound,
    sub-queries, tuples per timestamp), CPU seconds per million tuples and
    the L1 data cache miss rate (null without hardware counters)."""
    keys = ["form", "executor", "hb_bound", "subqueries", "per_ts"]
    return (
        engine.groupBy(*keys)
        .agg(
            F.count("*").alias("repetitions"),
            (F.sum("cpu_s") / F.sum("tuples") * 1e6).alias("cpu_s_per_million"),
            F.avg("tuples_per_s").alias("tuples_per_s"),
            (F.sum("l1_dcache_misses") / F.sum("l1_dcache_loads")).alias("l1_miss_rate"),
        )
        .orderBy(*keys)
    )
