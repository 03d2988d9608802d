"""Runs and their telemetry as Spark DataFrames, with explicit schemas.

The schemas are docs/telemetry.md's. Integer fields the writers emit as
JSON integers are ``LongType``, anything that may be fractional is
``DoubleType`` (a float read into a long field would be null). Lines a
kill tore mid-write parse as all-null rows and are dropped; fields a record
lacks are null. Every frame gets ``run_id`` (the run directory), mapped
from the file each row came from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from semiactive.analytics.runs import Run

S, L, D, B = T.StringType(), T.LongType(), T.DoubleType(), T.BooleanType()


def _schema(*fields: tuple[str, T.DataType]) -> T.StructType:
    return T.StructType([T.StructField(name, kind, nullable=True) for name, kind in fields])


EDGES = _schema(
    ("t", D), ("node", S), ("since", D), ("stage", S), ("role", S), ("epoch", L), ("edge", S),
    ("direction", S), ("seq", L), ("acked", L), ("ack_lag_rows", L), ("retained_rows", L),
    ("batch_size", L), ("data_rows", L), ("data_bytes", L), ("backup_rows", L), ("backup_bytes", L),
    ("backup_batches", L), ("received_rows", L),
)  # fmt: skip
NODES = _schema(
    ("t", D), ("node", S), ("since", D), ("stage", S), ("role", S), ("state", S), ("epoch", L),
    ("tuples_in", L), ("tuples_out", L), ("operator_rows", L), ("operator_busy_s", D),
    ("input_backlog_rows", L), ("output_log_rows", L), ("resyncs", L), ("finished", B),
    ("latency_rows", L), ("latency_sum_s", D),
)  # fmt: skip
# Events: the union of the fields of docs/telemetry.md's events that the
# report reads; the rest of a record is ignored.
EVENTS = _schema(
    ("t", D), ("node", S), ("event", S), ("target", S), ("kind", S), ("duration_s", D),
    ("injector", S), ("stage", S), ("pid", L), ("returncode", L), ("primary", S), ("silent_ms", D),
    ("epoch", L), ("recovery_ms", D), ("warmup_ms", D), ("edge", S), ("tuner", S), ("previous", L),
    ("batch_size", L), ("reason", S),
)  # fmt: skip
TUNING = _schema(
    ("t", D), ("edge", S), ("stage", S), ("tuner", S), ("batch_size", L), ("previous", L),
    ("bw_estimate_bytes_per_s", D), ("recovery_estimate_s", D), ("bw_max_bytes_per_s", D),
    ("recovery_max_s", D), ("input_rate_per_s", D), ("backup_bytes_per_s", D), ("branch", S),
)  # fmt: skip
ENGINE = _schema(
    ("t", D), ("node", S), ("form", S), ("executor", S), ("hb_bound", L), ("subqueries", L),
    ("per_ts", L), ("tuples", L), ("cpu_s", D), ("wall_s", D), ("tuples_per_s", D),
    ("l1_dcache_misses", L), ("l1_dcache_loads", L),
)  # fmt: skip
SCHEMAS = {"edges": EDGES, "nodes": NODES, "events": EVENTS, "tuning": TUNING, "engine": ENGINE}

# One row per run: what its manifests say it varied.
RUNS = _schema(
    ("run_id", S), ("run", S), ("campaign", S), ("kind", S), ("config", S), ("t0_unix", D),
    ("mode", S), ("batch_size", L), ("operator", S), ("network_load_bytes_per_s", D), ("repeat", L),
    ("seed", L), ("scenario", S), ("tuner", S), ("kill_at_s", D), ("step_at_s", D),
    ("duration_s", D), ("bw_max_bytes_per_s", D), ("recovery_max_s", D), ("form", S),
    ("executor", S), ("hb_bound", L), ("subqueries", L), ("per_ts", L),
)  # fmt: skip
STAGES = _schema(("run_id", S), ("stage", S), ("stage_mode", S), ("stage_batch_size", L))


def _number(value: Any, kind: type) -> Any:
    """A manifest value as the column's type; None when it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return kind(value)
    if isinstance(value, str):
        try:
            return kind(float(value))
        except ValueError:
            return None
    return None


def run_row(run: Run) -> tuple[Any, ...]:
    """The ``RUNS`` row of a run."""
    p = run.param
    text = {"mode", "scenario", "tuner", "form", "executor"}
    values: dict[str, Any] = {
        "run_id": run.run_id,
        "run": run.path.name,
        "campaign": run.campaign,
        "kind": run.kind,
        "config": run.config,
        "t0_unix": run.t0_unix,
        "operator": run.operator(),
        "duration_s": _number(p("duration_s") if p("duration_s") is not None else p("duration"), float),
    }
    for f in RUNS.fields:
        if f.name in values:
            continue
        value = p(f.name)
        if f.name in text:
            values[f.name] = None if value is None else str(value)
        else:
            values[f.name] = _number(value, int if isinstance(f.dataType, T.LongType) else float)
    return tuple(values[f.name] for f in RUNS.fields)


def local_frame(
    spark: SparkSession, rows: list[tuple[Any, ...]], schema: T.StructType, path: Path
) -> DataFrame:
    """A DataFrame of rows made here, through a JSON Lines file at ``path``
    rather than ``createDataFrame``: reading it needs no Python worker on
    the executors (which a loaded machine starts slowly), only that they
    see ``path``, as they see the telemetry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    names = schema.fieldNames()
    path.write_text("".join(json.dumps(dict(zip(names, row, strict=True))) + "\n" for row in rows))
    return spark.read.schema(schema).json(str(path))


def runs_frame(spark: SparkSession, runs: list[Run], staging: Path) -> DataFrame:
    return local_frame(spark, [run_row(r) for r in runs], RUNS, staging / "runs.jsonl")


def stages_frame(spark: SparkSession, runs: list[Run], staging: Path) -> DataFrame:
    rows = [(r.run_id, s.stage, s.mode, s.batch_size) for r in runs for s in r.stages]
    return local_frame(spark, rows, STAGES, staging / "stages.jsonl")


def _directory_of(path_column: Column) -> Column:
    """The local directory of a file Spark read, from its URI
    (``file:/a%20b/c.jsonl`` -> ``/a b``). ``+`` is protected from
    ``url_decode``, which would read it as a space."""
    local = F.regexp_replace(path_column, r"^file:/+", "/")
    decoded = F.url_decode(F.replace(local, F.lit("+"), F.lit("%2B")))
    return F.regexp_extract(decoded, r"^(.*)/[^/]*$", 1)


def _directories(spark: SparkSession, files: dict[Path, str], path: Path) -> DataFrame:
    """``directory, run_id`` of the files read."""
    return local_frame(
        spark,
        sorted({(str(p.parent), run_id) for p, run_id in files.items()}),
        _schema(("directory", S), ("run_id", S)),
        path,
    )


def read(spark: SparkSession, runs: list[Run], kind: str, staging: Path) -> DataFrame:
    """Every ``<kind>-*.jsonl`` record of ``runs`` with its ``run_id``."""
    schema = SCHEMAS[kind]
    files: dict[Path, str] = {}
    for run in runs:
        for path in run.files(kind):
            files[path] = run.run_id
    out_schema = T.StructType([T.StructField("run_id", S), *schema.fields])
    if not files:
        return local_frame(spark, [], out_schema, staging / f"{kind}-none.jsonl")
    directories = _directories(spark, files, staging / f"{kind}-directories.jsonl")
    records = (
        spark.read.schema(schema)
        .option("mode", "PERMISSIVE")
        .json([str(p) for p in files])
        .withColumn("directory", _directory_of(F.col("_metadata.file_path")))
    )
    key = "event" if kind == "events" else "t"
    return (
        records.where(F.col("t").isNotNull() & F.col(key).isNotNull())
        .join(F.broadcast(directories), "directory")
        .select(*out_schema.fieldNames())
    )


ARRIVALS = _schema(("run_id", S), ("sink", S), ("t", D), ("first_seq", L), ("rows", L))


def arrivals(spark: SparkSession, runs: list[Run], staging: Path) -> DataFrame:
    """The sinks' ``<sink>.arrivals`` lines (wall time, first seq, rows of
    each batch delivered) of ``runs``: ``run_id, sink, t, first_seq, rows``."""
    files = {p: run.run_id for run in runs for p in sorted((run.path / "telemetry").glob("*.arrivals"))}
    if not files:
        return local_frame(spark, [], ARRIVALS, staging / "arrivals-none.jsonl")
    directories = _directories(spark, files, staging / "arrivals-directories.jsonl")
    fields = F.split(F.trim("value"), " +")
    lines = (
        spark.read.text([str(p) for p in files])
        .withColumn("path", F.col("_metadata.file_path"))
        .select(
            _directory_of(F.col("path")).alias("directory"),
            F.regexp_extract("path", r"([^/]+)\.arrivals$", 1).alias("sink"),
            # (a torn line has fewer fields: null, as is one that is no number)
            F.get(fields, 0).try_cast("double").alias("t"),
            F.get(fields, 1).try_cast("long").alias("first_seq"),
            F.get(fields, 2).try_cast("long").alias("rows"),
        )
    )
    return (
        lines.where(F.col("t").isNotNull() & F.col("rows").isNotNull())  # a line a kill tore
        .join(F.broadcast(directories), "directory")
        .select(*ARRIVALS.fieldNames())
    )
