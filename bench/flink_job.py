"""The Flink side of bench/flink_comparison.py, run by the Flink venv's
Python (PyFlink's Table API: the job runs in the JVM, no Python per row).

    python flink_job.py PARALLELISM INPUT.csv OUTPUT_DIR

A headerless CSV of ``ts,id,val`` (ts integer ms, ascending) -> WHERE val
>= 0 -> SUM(val) over a 100-ms window sliding by 10 ms -> a CSV of
``window_end_ms,total``. A tuple's event time is ``ts - 1`` ms so that the
hopping window ending at e (``[e-100, e)``) holds ts in ``[e-99, e]``: what
semiactive's ``[Range 100 Slide 10]`` holds at instant e with half-open
bounds. Prints one JSON line: seconds to set up, seconds of the job.
"""

from __future__ import annotations

import json
import sys
import time

from pyflink.table import EnvironmentSettings, TableEnvironment


def main() -> None:
    parallelism, source, sink = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    started = time.perf_counter()
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", str(parallelism))
    env.get_config().set("table.local-time-zone", "UTC")
    env.execute_sql(
        f"""CREATE TABLE readings (ts BIGINT, id BIGINT, val BIGINT,
              et AS TO_TIMESTAMP_LTZ(ts - 1, 3), WATERMARK FOR et AS et)
            WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv')"""
    )
    env.execute_sql(
        f"""CREATE TABLE sums (window_end STRING, total BIGINT)
            WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv')"""
    )
    submitted = time.perf_counter()
    env.execute_sql(
        """INSERT INTO sums
           SELECT CAST(window_end AS STRING), SUM(val)
           FROM TABLE(HOP(TABLE readings, DESCRIPTOR(et), INTERVAL '0.01' SECOND, INTERVAL '0.1' SECOND))
           WHERE val >= 0
           GROUP BY window_start, window_end"""
    ).wait()
    done = time.perf_counter()
    print(json.dumps({"setup_s": submitted - started, "job_s": done - submitted}))


if __name__ == "__main__":
    main()
