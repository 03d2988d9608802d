"""A real PostgreSQL server (Debian's binaries) with a database ``results``,
that a test can stop, SIGKILL and start again: a sink meets a database that
goes away and comes back. ``make postgres`` installs it when root; otherwise
the tests skip, saying why. initdb refuses to run as root, so as root the
cluster belongs to ``postgres`` and lives under the system temp dir (pytest's
tmp_path is below a 0700 directory that user cannot enter)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.loopback import free_port

USER, DATABASE = "semiactive", "results"


def _version(bin_dir: Path) -> list[int]:
    return [int(x) for x in bin_dir.parent.name.split(".") if x.isdigit()]


def _bin_dir() -> Path:
    """Where initdb and pg_ctl are: pg_config's bindir, else the newest
    /usr/lib/postgresql/*/bin (Debian puts neither on PATH)."""
    candidates: list[Path] = []
    if pg_config := shutil.which("pg_config"):
        with contextlib.suppress(subprocess.CalledProcessError, OSError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True)
            candidates.append(Path(out.stdout.strip()))
    versions = Path("/usr/lib/postgresql").glob("*/bin")
    candidates += sorted(versions, key=_version, reverse=True)
    for d in candidates:
        if (d / "initdb").is_file() and (d / "pg_ctl").is_file():
            return d
    pytest.skip("initdb/pg_ctl not found: `make postgres` installs Debian's postgresql (as root)")


def _exists(pid: int) -> bool:
    """Running or a zombie not yet reaped: PostgreSQL's own test (kill 0), by
    which a postmaster's zombie still holds the data directory."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _children(pid: int) -> list[int]:
    """The postmaster's processes (checkpointer, backends, ...): they outlive
    a SIGKILLed postmaster briefly, and a new one refuses to start while they
    still hold the old shared memory."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def _copy_log(log: Path, to: Path) -> None:
    """The server's log outlives its data directory, for a failed test's reader."""
    with contextlib.suppress(OSError):
        shutil.copyfile(log, to)


@dataclass(frozen=True)
class PostgresServer:
    """One cluster: its state is its data directory (postmaster.pid), so
    the test can stop, kill and start it through this handle."""

    dsn: str
    port: int
    data_dir: Path
    bin_dir: Path
    as_postgres: bool

    def _run(self, tool: str, *args: str) -> None:
        user = ["runuser", "-u", "postgres", "--"] if self.as_postgres else []
        cmd = [*user, str(self.bin_dir / tool), "-D", str(self.data_dir), *args]
        done = subprocess.run(cmd, cwd=self.data_dir, capture_output=True, text=True)
        if done.returncode:
            log = self.data_dir / "server.log"
            tail = log.read_text()[-3000:] if log.exists() else ""
            raise RuntimeError(
                f"{tool} {args} failed ({done.returncode}): {done.stdout}{done.stderr}\n{tail}"
            )

    def postmaster_pid(self) -> int | None:
        """The running postmaster's pid, None when none runs."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
            if _exists(pid):
                return pid
        return None

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.data_dir} -c listen_addresses=127.0.0.1 -c fsync=on"
        self._run("pg_ctl", "-w", "-t", "30", "-o", opts, "-l", str(self.data_dir / "server.log"), "start")

    def stop(self) -> None:
        """Fast shutdown (clients disconnected, a checkpoint written); none
        when no server runs."""
        if self.postmaster_pid() is not None:
            self._run("pg_ctl", "-m", "fast", "-w", "stop")

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL the postmaster, as a crash would; returns once it and its
        processes are gone and reaped (pg_ctl leaves the postmaster to PID 1,
        which may reap late), so start() can follow at once."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        left = [pid, *_children(pid)]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while left := [p for p in left if _exists(p)]:
            if time.monotonic() > deadline:
                for p in left:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(p, signal.SIGKILL)
                raise RuntimeError(f"postgres processes {left} still there {timeout} s after SIGKILL")
            time.sleep(0.02)


@contextlib.contextmanager
def postgres_server(tmp_dir: Path) -> Iterator[PostgresServer]:
    """A started server with an empty database ``results``; stopped and its
    directory removed at exit (its log kept as ``tmp_dir/postgres.log``)."""
    bin_dir = _bin_dir()
    as_postgres = os.geteuid() == 0
    data_dir = Path(tempfile.mkdtemp(prefix="semiactive-pg-", dir=None if as_postgres else tmp_dir))
    port = free_port()
    server = PostgresServer(
        f"postgresql://{USER}@127.0.0.1:{port}/{DATABASE}", port, data_dir, bin_dir, as_postgres
    )
    with contextlib.ExitStack() as cleanup:  # every step runs, in reverse, even if one before fails
        cleanup.callback(shutil.rmtree, data_dir, ignore_errors=True)
        cleanup.callback(_copy_log, data_dir / "server.log", tmp_dir / "postgres.log")
        cleanup.callback(server.kill)
        cleanup.callback(server.stop)
        if as_postgres:
            data_dir.chmod(0o755)
            shutil.chown(data_dir, "postgres", "postgres")
        server._run("initdb", "-A", "trust", "-U", USER, "--no-sync", "-E", "UTF8", "--locale=C")
        server.start()
        with psycopg.connect(f"postgresql://{USER}@127.0.0.1:{port}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
        yield server
