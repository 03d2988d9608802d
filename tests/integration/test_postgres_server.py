"""The test PostgreSQL server (tests/postgres_server.py) does what the sink
tests rely on: a committed row survives a SIGKILL of the postmaster, the
database is unreachable while it is down, and nothing of it is left running
after the test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest

from tests.postgres_server import postgres_server


def test_row_survives_sigkill_and_server_is_gone_at_exit(tmp_path: Path) -> None:
    with postgres_server(tmp_path) as pg:
        with psycopg.connect(pg.dsn) as conn:
            conn.execute("CREATE TABLE results (id integer PRIMARY KEY, label text)")
            conn.execute("INSERT INTO results VALUES (1, 'før')")
        pg.kill()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(pg.dsn, connect_timeout=2)
        pg.start()
        with psycopg.connect(pg.dsn) as conn:
            assert conn.execute("SELECT id, label FROM results").fetchall() == [(1, "før")]
        data_dir = pg.data_dir
    assert subprocess.run(["pgrep", "-f", str(data_dir)], capture_output=True).returncode == 1
    assert not data_dir.exists()
