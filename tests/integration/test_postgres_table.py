"""The PostgreSQL sink's table against a real server: the rows committed
are the progress a restarted sink goes on from; a row is never written
twice; a database that goes away is waited for."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from semiactive.config import PostgresSinkConfig
from semiactive.errors import UserError
from semiactive.node.connectors.postgres import PostgresTable, PostgresUnavailable, read_table
from semiactive.node.cql import plan
from semiactive.node.sections.codec import RowCodec
from semiactive.node.sections.input import EdgeInput, InputSection
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.roles.sink import SinkRole
from tests.postgres_server import PostgresServer, postgres_server
from tests.waiting import wait_until_async

SCHEMA = plan.Schema(
    (plan.Column("id", plan.INTEGER), plan.Column("v", plan.FLOAT), plan.Column("s", plan.char(8)))
)


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    with postgres_server(tmp_path_factory.mktemp("pg")) as server:
        yield server


def _rows(first: int, last: int) -> list[tuple[object, ...]]:
    return [(seq * 10, seq, 1, seq, seq / 2, f"r{seq}") for seq in range(first, last + 1)]


def _write(cfg: PostgresSinkConfig, rows: list[tuple[object, ...]], kind: plan.Kind) -> None:
    """One sink's life: open the table for run ``run``, write, close."""

    async def scenario() -> None:
        table = PostgresTable(cfg, "run", SCHEMA, kind)
        await table.open()
        await table.write(rows)
        await table.close()

    asyncio.run(scenario())


def test_a_table_sink_started_again_goes_on_after_what_is_committed(postgres: PostgresServer) -> None:
    cfg = PostgresSinkConfig(dsn=postgres.dsn, table="goes_on")

    async def scenario() -> None:
        first = PostgresTable(cfg, "run-a", SCHEMA, plan.Kind.STREAM)
        assert await first.open() == 0
        await first.write(_rows(1, 5))
        await first.close()
        again = PostgresTable(cfg, "run-a", SCHEMA, plan.Kind.STREAM)
        assert await again.open() == 5
        await again.write(_rows(3, 8))  # 3..5 are there already: skipped
        await again.close()
        other_run = PostgresTable(cfg, "run-b", SCHEMA, plan.Kind.STREAM)
        assert await other_run.open() == 0
        await other_run.close()

    asyncio.run(scenario())
    records = read_table(cfg, "run-a", SCHEMA, plan.Kind.STREAM)
    assert [r["seq"] for r in records] == list(range(1, 9))
    assert records[0] == {"seq": 1, "ts": 10, "id": 1, "v": 0.5, "s": "r1"}


def test_a_row_written_twice_is_refused_by_the_table_and_skipped(postgres: PostgresServer) -> None:
    cfg = PostgresSinkConfig(dsn=postgres.dsn, table="twice")

    async def scenario() -> None:
        one, two = (PostgresTable(cfg, "run", SCHEMA, plan.Kind.STREAM) for _ in range(2))
        await one.open()
        await two.open()  # both saw nothing committed
        await one.write(_rows(1, 4))
        await two.write(_rows(1, 6))  # the key refuses 1..4; read again, it writes 5..6
        assert two.committed == 6
        await one.close()
        await two.close()

    asyncio.run(scenario())
    assert [r["seq"] for r in read_table(cfg, "run", SCHEMA, plan.Kind.STREAM)] == [1, 2, 3, 4, 5, 6]


def test_a_relation_keeps_the_sign_of_each_change(postgres: PostgresServer) -> None:
    cfg = PostgresSinkConfig(dsn=postgres.dsn, table="changes")
    _write(cfg, [(10, 1, 1, 7, 1.5, "a"), (20, 2, -1, 7, 1.5, "a")], plan.Kind.RELATION)
    assert [r["op"] for r in read_table(cfg, "run", SCHEMA, plan.Kind.RELATION)] == ["+", "-"]


def test_a_write_waits_for_a_database_that_went_away(postgres: PostgresServer) -> None:
    cfg = PostgresSinkConfig(dsn=postgres.dsn, table="waits")
    outages: list[str | None] = []

    async def scenario() -> None:
        table = PostgresTable(cfg, "run", SCHEMA, plan.Kind.STREAM, on_outage=outages.append)
        await table.open()
        await table.write(_rows(1, 2))
        postgres.kill()
        loop = asyncio.get_running_loop()
        loop.call_later(1.0, postgres.start)
        await asyncio.wait_for(table.write(_rows(3, 4)), timeout=30)
        await table.close()

    asyncio.run(scenario())
    assert len(outages) == 2 and outages[0] and outages[1] is None
    assert [r["seq"] for r in read_table(cfg, "run", SCHEMA, plan.Kind.STREAM)] == [1, 2, 3, 4]


def test_an_unreachable_database_at_start_up_names_the_table(tmp_path: Path) -> None:
    cfg = PostgresSinkConfig(
        dsn="postgresql://semiactive@127.0.0.1:9/x", table="nowhere", connect_timeout_s=0.3
    )
    table = PostgresTable(cfg, "run", SCHEMA, plan.Kind.STREAM)
    with pytest.raises(PostgresUnavailable, match=r"cannot reach PostgreSQL table nowhere after 0\.3 s"):
        asyncio.run(table.open())


def test_the_table_refuses_nothing_a_stream_can_hold(postgres: PostgresServer) -> None:
    cfg = PostgresSinkConfig(dsn=postgres.dsn, table="odd_values")
    _write(cfg, [(1, 1, 1, -(2**62), float("nan"), "quote'\"\\\n\t")], plan.Kind.STREAM)
    (record,) = read_table(cfg, "run", SCHEMA, plan.Kind.STREAM)
    assert record == {"seq": 1, "ts": 1, "id": -(2**62), "v": None, "s": "quote'\"\\\n\t"}


def test_rows_taken_by_a_call_cancelled_mid_commit_are_still_committed(postgres: PostgresServer) -> None:
    """The inbound stream that hands rows to the sink is cancelled when its
    producer dies; rows it had taken from the input section must still be
    committed (a kill -9 of a stage primary once lost one so)."""
    cfg = PostgresSinkConfig(dsn=postgres.dsn, table="cancelled")
    edge = EdgeInput("a->sink", "s", 0, RowCodec(SCHEMA, plan.Kind.STREAM))

    async def scenario() -> None:
        table = PostgresTable(cfg, "run", SCHEMA, plan.Kind.STREAM)
        sink = SinkRole("sink", InputSection([edge]), NodeMetrics("sink", "sink", "sink"), None, output=table)
        await sink.open()
        postgres.kill()
        sink.receive("a->sink", 1, _rows(1, 3), 30, False, 3)
        call = asyncio.create_task(sink.received())
        await asyncio.sleep(0.3)  # its commit waits for the database
        call.cancel()
        postgres.start()

        async def committed() -> bool | None:
            return table.committed == 3 or None

        await wait_until_async(committed, what="the taken rows committed", timeout=30)
        assert sink.level1().edge_cut == {"a->sink": 4}
        await sink.aclose()

    asyncio.run(scenario())
    assert [r["seq"] for r in read_table(cfg, "run", SCHEMA, plan.Kind.STREAM)] == [1, 2, 3]


def test_the_first_start_of_a_run_refuses_a_table_that_holds_rows_of_its_name(
    postgres: PostgresServer,
) -> None:
    """Two run directories of the same name (runs/a/run, runs/b/run) would
    share a run name: the second's sink, started afresh, would skip what
    the first wrote. A restarted sink (``fresh`` false) goes on."""
    cfg = PostgresSinkConfig(dsn=postgres.dsn, table="same_name")
    _write(cfg, _rows(1, 4), plan.Kind.STREAM)
    edge = EdgeInput("a->sink", "s1", 0, RowCodec(SCHEMA, plan.Kind.STREAM))

    async def scenario(fresh: bool) -> None:
        table = PostgresTable(cfg, "run", SCHEMA, plan.Kind.STREAM)
        sink = SinkRole("sink", InputSection([edge]), NodeMetrics("sink", "sink", "sink"), None, output=table)
        await sink.open(fresh=fresh)
        await sink.aclose()

    with pytest.raises(UserError, match=r"PostgreSQL table same_name \(run 'run'\) already holds rows 1..4"):
        asyncio.run(scenario(fresh=True))
    asyncio.run(scenario(fresh=False))
