"""The telemetry report job (``semiactive report``): PySpark over the
JSON Lines every process of a run writes (docs/telemetry.md).

``runs`` finds runs and campaigns by their ``manifest.json`` (plain Python,
no Spark); ``telemetry_frames`` reads them into DataFrames with explicit
schemas; ``aggregates`` makes the tables; ``figures`` draws the SAS paper's
Figs. 4-13 and the recursive CQL paper's Figs. 8-10; ``report_job`` runs it all on a
SparkSession (local, standalone or Spark Connect) and writes Parquet,
``report.md`` and PNGs. pyspark and matplotlib are the ``report`` extra.
"""
