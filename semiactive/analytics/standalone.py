"""A Spark standalone cluster on this machine, from the pyspark package:
one master and one worker (``spark-class``), on loopback, on ephemeral
ports, each in a process group of its own that leaving stops (the worker's
executors with it). For the tests and the benchmark of ``semiactive
report --master spark://...``; a real deployment runs its own cluster.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
MASTER_STARTED = re.compile(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)")
WORKER_REGISTERED = re.compile(r"Successfully registered with master")
START_TIMEOUT_S = 120.0


class StandaloneError(RuntimeError):
    """The master or the worker did not start; the message quotes its log."""


def _wait_for(log: Path, pattern: re.Pattern[str], proc: subprocess.Popen[bytes]) -> re.Match[str]:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        found = pattern.search(log.read_text(errors="replace")) if log.exists() else None
        if found:
            return found
        if proc.poll() is not None:
            raise StandaloneError(f"{log.name}: exited {proc.returncode}\n{log.read_text(errors='replace')}")
        time.sleep(0.2)
    raise StandaloneError(f"{log.name}: no {pattern.pattern!r} within {START_TIMEOUT_S:.0f} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, then SIGKILL what is left of it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
            return


@contextlib.contextmanager
def local_cluster(base: Path, cores: int = 2, memory: str = "1g") -> Iterator[str]:
    """A master and one worker with ``cores`` and ``memory``; yields the
    master's URL. Logs and the worker's directory go under ``base``."""
    base.mkdir(parents=True, exist_ok=True)
    properties = base / "master.properties"
    properties.write_text("spark.master.rest.enabled false\n")
    env = dict(
        os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable
    )
    env.update(SPARK_LOG_DIR=str(base), SPARK_WORKER_DIR=str(base / "work"))
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> subprocess.Popen[bytes]:
        with (base / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(
                [spark_class, *args], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        started.append(proc)
        return proc

    local = ("--host", "127.0.0.1", "--port", "0", "--webui-port", "0")
    try:
        master = start(
            "master", "org.apache.spark.deploy.master.Master", *local, "--properties-file", str(properties)
        )
        url = _wait_for(base / "master.log", MASTER_STARTED, master).group(1)
        worker = start(
            "worker", "org.apache.spark.deploy.worker.Worker", url, *local,
            "--cores", str(cores), "--memory", memory, "--work-dir", str(base / "work"),
        )  # fmt: skip
        _wait_for(base / "worker.log", WORKER_REGISTERED, worker)
        yield url
    finally:
        for proc in reversed(started):
            _stop(proc)
