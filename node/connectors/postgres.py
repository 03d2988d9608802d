"""A sink's PostgreSQL table: rows go in one transaction per batch, and
what is committed is the sink's progress (docs/connectors.md).

Exactly once across a kill of the sink: it acknowledges upstream (Level-1)
only the seqs a transaction has committed, so its producer's output log
keeps the rest; a sink started again reads the highest seq committed for
its run and asks for the next one. The rows themselves are the progress
record (no second table to keep in step), and the primary key (run, seq)
makes a row written twice an error in the database, never a duplicate.

The database may go away while the sink runs: a write is retried with
backoff until it commits, and the sink's input waits meanwhile (its
producer's log fills, then the producer waits: backpressure, no loss).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from semiactive.config import PostgresSinkConfig
from semiactive.errors import UserError
from semiactive.node.connectors.retrying import connect_within, first_line, until_done
from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element

try:
    import psycopg
    from psycopg import sql
except ImportError:  # pragma: no cover - the extra is part of every test install
    psycopg = None  # type: ignore[assignment]


_SQL_TYPES = {
    plan.TypeName.INTEGER: "bigint",
    plan.TypeName.FLOAT: "double precision",
    plan.TypeName.CHAR: "text",
    plan.TypeName.BYTE: "text",
}


class PostgresUnavailable(UserError):
    """The database could not be reached within the sink's start-up wait."""


def _require_client() -> None:
    if psycopg is None:
        raise UserError("a postgres sink needs psycopg 3: pip install 'semiactive[postgres]'")


def run_name(run_dir: Path | None, cluster: str) -> str:
    """What tells one run's rows from another's in the table: the run
    directory's name (a new run numbers from seq 1 again), or without one (a
    deployment) the cluster's name, so that a restarted container goes on."""
    return run_dir.resolve().name if run_dir is not None else cluster


def table_columns(schema: plan.Schema, kind: plan.Kind) -> list[tuple[str, str]]:
    """(name, SQL type) of the table's columns: run, seq, ts, the sign of a
    relation's change (``op``: +1 or -1), then the stream's columns."""
    columns = [("run", "text"), ("seq", "bigint"), ("ts", "bigint")]
    if kind is plan.Kind.RELATION:
        columns.append(("op", "smallint"))
    columns += [(c.name, _SQL_TYPES[c.type.name]) for c in schema.columns]
    return columns


def table_rows(rows: Sequence[Element], run: str, kind: plan.Kind) -> list[tuple[Any, ...]]:
    """Elements ``(ts, seq, sign, *values)`` as rows of :func:`table_columns`."""
    if kind is plan.Kind.RELATION:
        return [(run, r[1], r[0], r[2], *r[3:]) for r in rows]
    return [(run, r[1], r[0], *r[3:]) for r in rows]


class PostgresTable:
    """The table one sink writes, for one run (``run`` names it: a new run
    starts at seq 1 again, a restarted sink of the same run goes on)."""

    def __init__(
        self,
        config: PostgresSinkConfig,
        run: str,
        schema: plan.Schema,
        kind: plan.Kind,
        on_outage: Callable[[str | None], None] | None = None,
    ) -> None:
        _require_client()
        self.config = config
        self.run = run
        self.kind = kind
        self.columns = table_columns(schema, kind)
        self.committed = 0  # the highest seq committed for this run
        self._on_outage = on_outage  # called with the error, then with None once it is back
        self._conn: psycopg.AsyncConnection[Any] | None = None
        table = sql.Identifier(config.table)
        names = sql.SQL(", ").join(sql.Identifier(name) for name, _ in self.columns)
        self._copy = sql.SQL("COPY {} ({}) FROM STDIN").format(table, names)
        self._create = sql.SQL("CREATE TABLE IF NOT EXISTS {} ({}, PRIMARY KEY (run, seq))").format(
            table,
            sql.SQL(", ").join(
                sql.SQL("{} {} NOT NULL" if name in ("run", "seq", "ts") else "{} {}").format(
                    sql.Identifier(name), sql.SQL(sql_type)
                )
                for name, sql_type in self.columns
            ),
        )
        self._progress = sql.SQL("SELECT coalesce(max(seq), 0) FROM {} WHERE run = %s").format(table)

    def describe(self) -> str:
        return f"PostgreSQL table {self.config.table} (run {self.run!r})"

    async def open(self) -> int:
        """Connect (waiting up to ``connect_timeout_s``), create the table if
        absent, and return the highest seq already committed for this run."""
        cfg = self.config

        def unavailable(exc: BaseException) -> Exception:
            return PostgresUnavailable(
                f"cannot reach PostgreSQL table {cfg.table} after "
                f"{cfg.connect_timeout_s:g} s: {first_line(exc)}"
            )

        await connect_within(
            self._connect, self._disconnect, (psycopg.Error,), cfg.connect_timeout_s, unavailable
        )
        return self.committed

    async def prepare(self) -> None:
        """Connect now; :meth:`open` then only reads the progress (a
        standby's takeover saves the connection's 20 ms)."""
        with contextlib.suppress(psycopg.Error):
            self._conn = await psycopg.AsyncConnection.connect(self.config.dsn, connect_timeout=5)

    async def _connect(self) -> None:
        conn = self._conn
        if conn is None or conn.closed:
            conn = await psycopg.AsyncConnection.connect(self.config.dsn, connect_timeout=5)
            self._conn = conn
        async with conn.transaction():
            # Two sinks of one table starting at once: CREATE TABLE IF NOT
            # EXISTS is not safe against itself without the lock.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.config.table,))
            await conn.execute(self._create)
            cur = await conn.execute(self._progress, (self.run,))
            found = await cur.fetchone()
        self.committed = int(found[0]) if found is not None else 0

    async def write(self, rows: Sequence[Element]) -> None:
        """Commit ``rows`` (seqs above :attr:`committed`, in order) in one
        transaction; retry until it commits, however long the database is
        away. After a lost connection the progress is read again: a commit
        whose answer was lost is not written twice."""

        async def attempt() -> None:
            if self._conn is None or self._conn.closed:
                await self._connect()
            fresh = [r for r in rows if r[1] > self.committed]
            if fresh:
                await self._commit(fresh)

        what = f"table {self.config.table}"
        await until_done(attempt, self._disconnect, (psycopg.Error,), what, self._on_outage)

    async def _commit(self, rows: Sequence[Element]) -> None:
        assert self._conn is not None
        async with self._conn.transaction(), self._conn.cursor() as cur, cur.copy(self._copy) as copy:
            for row in table_rows(rows, self.run, self.kind):
                await copy.write_row(row)
        self.committed = rows[-1][1]

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            with contextlib.suppress(psycopg.Error):
                await conn.close()

    async def close(self) -> None:
        await self._disconnect()


def read_table(
    config: PostgresSinkConfig, run: str, schema: plan.Schema, kind: plan.Kind
) -> list[dict[str, Any]]:
    """What the sink wrote for ``run``, in seq order, as the JSON Lines
    records a file sink writes (``semiactive verify`` compares either)."""
    _require_client()
    names = [c.name for c in schema.columns]
    selected = ["seq", "ts", *(["op"] if kind is plan.Kind.RELATION else []), *names]
    query = sql.SQL("SELECT {} FROM {} WHERE run = %s ORDER BY seq").format(
        sql.SQL(", ").join(sql.Identifier(n) for n in selected), sql.Identifier(config.table)
    )
    with psycopg.connect(config.dsn, connect_timeout=5) as conn:
        found = conn.execute(query, (run,)).fetchall()
    records = []
    for row in found:
        record: dict[str, Any] = {"seq": row[0], "ts": row[1]}
        values = list(row[2:])
        if kind is plan.Kind.RELATION:
            record["op"] = "+" if values.pop(0) > 0 else "-"
        # As a file sink writes them: a float that is not finite is null.
        record.update(
            (n, None if isinstance(v, float) and not math.isfinite(v) else v)
            for n, v in zip(names, values, strict=True)
        )
        records.append(record)
    return records
