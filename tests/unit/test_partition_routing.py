"""Routing rows to partitions: the hash every process agrees on, the
``Batch.owned`` encoding, the partition's input (elided rows take positions
but feed nothing, merged sinks), the data plane's checks (a misrouted or
malformed partition frame is refused), and the configuration's."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from semiactive import config
from semiactive.config import ConfigError
from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.node.sections.codec import RowCodec
from semiactive.node.sections.connections import ELIDED, elided_stamps
from semiactive.node.sections.input import EdgeInput, InputSection
from semiactive.node.sections.partitions import (
    InputRouting,
    PartitionSpec,
    owned_bitmap,
    owned_flags,
    value_hash,
)
from semiactive.node.service.metrics import NodeMetrics
from semiactive.node.service.roles.sink import SinkRole
from semiactive.topology import Edge, resolve
from semiactive.wire import dataplane_pb2 as pb
from semiactive.wire import dataplane_pb2_grpc as pb_grpc
from tests.processes import ROOT, write_config
from tests.unit.sink_server import served_sink, until_next_seq

SCHEMA = plan.Schema((plan.Column("k", plan.INTEGER), plan.Column("v", plan.INTEGER)))
CODEC = RowCodec(SCHEMA, plan.Kind.STREAM)
BY_K = InputRouting((3,))


def test_equal_numbers_hash_equal_and_texts_hash_the_same_in_every_process() -> None:
    assert value_hash(3) == value_hash(3.0) and value_hash(-7) == value_hash(-7.0)
    assert value_hash(3) != value_hash(3.5)
    words = ["alice", "bob", "", "ünïcode", "x" * 40]
    here = [value_hash(w) % 7 for w in words]
    code = (
        "from semiactive.node.sections.partitions import value_hash; "
        f"print([value_hash(w) % 7 for w in {words!r}])"
    )
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, PYTHONHASHSEED=seed),
            check=True,
        )
        assert out.stdout.strip() == str(here)


def test_modulo_routing_puts_dense_integer_keys_one_per_partition() -> None:
    """Expressways 0..N-1 by hash: some partitions get two, some none; by
    modulo: one each. ``owned`` and ``partition`` agree, and a NULL key
    still has a partition."""
    rows = [(t, t + 1, 1, t % 4, t) for t in range(400)]
    for routing, expected in ((BY_K, None), (InputRouting((3,), modulo=True), [100] * 4)):
        shares = [sum(PartitionSpec(i, 4, {"s": routing}).owned("s", rows)) for i in range(4)]
        if expected is None:
            assert sorted(shares) != [100] * 4  # the hash of 0..3 modulo 4: uneven
        else:
            assert shares == expected
        for i in range(4):
            owned = PartitionSpec(i, 4, {"s": routing}).owned("s", rows)
            assert owned == [routing.partition(r, 4) == i for r in rows]
    assert InputRouting((3,), modulo=True).partition((1, 1, 1, None, 0), 4) == value_hash(None) % 4


def test_modulo_routing_needs_an_integer_key(tmp_path: Path) -> None:
    cluster = _cluster(
        {"partitions": 2, "nodes": ["n1", "n2"], "partition_by": ["f"], "partition_routing": "modulo"}
    )
    cluster["sources"][0]["schema"]["f"] = "float"
    with pytest.raises(ConfigError) as caught:
        resolve(config.load(write_config(tmp_path / "c.yaml", cluster)))
    assert "stages[0].partition_routing" in str(caught.value) and "s0.f is float" in str(caught.value)


def test_keys_spread_over_every_partition() -> None:
    rows = [(t, t + 1, 1, t % 50, t) for t in range(1000)]
    for count in (2, 3, 4):
        shares = [sum(PartitionSpec(i, count, {"s": BY_K}).owned("s", rows)) for i in range(count)]
        assert sum(shares) == 1000 and min(shares) > 1000 / count / 2, shares
    round_robin = InputRouting(())
    assert [round_robin.partition(r, 3) for r in rows[:6]] == [0, 1, 2, 0, 1, 2]


@given(st.lists(st.booleans(), max_size=300))
def test_the_owned_bitmap_round_trips(owned: list[bool]) -> None:
    assert owned_flags(owned_bitmap(owned), len(owned)) == owned


@pytest.mark.parametrize(("bitmap", "count"), [(b"\x01", 9), (b"\x00\x01", 8), (b"\xff", 7)])
def test_a_bitmap_that_does_not_fit_the_batch_is_refused(bitmap: bytes, count: int) -> None:
    with pytest.raises(ValueError, match="owned"):
        owned_flags(bitmap, count)


def test_elided_rows_take_positions_but_feed_nothing() -> None:
    edge = EdgeInput("a->b", "s", 0, CODEC, drops_elided=True)
    section = InputSection([edge], exact=True)
    rows: list[Element] = [
        (1, 1, 1, 4, 10),
        (2, 2, 1, ELIDED, ELIDED),
        (3, 3, 1, 6, 30),
        (4, 4, 1, ELIDED, ELIDED),
    ]
    edge.accept_rows(1, rows, 4, False)
    taken, watermark = section.take()
    assert taken == {"s": [rows[0], rows[2]]} and watermark == 4
    assert section.position == 4  # the cut may pass the elided rows: the producer frees them


def test_a_sink_merges_its_edges_by_time_then_edge() -> None:
    edges = [EdgeInput(f"p{i}->sink", "s", i, CODEC) for i in range(2)]
    sink = SinkRole("sink", InputSection(edges), NodeMetrics("sink", "sink", "sink"), None)
    sink.receive("p1->sink", 1, [(1, 1, 1, 1, 1), (3, 2, 1, 1, 3)], 3, False, 2)
    asyncio.run(sink.received())
    assert sink.delivered == 0  # p0 has said nothing yet
    sink.receive("p0->sink", 1, [(1, 1, 1, 0, 1), (2, 2, 1, 0, 2)], 2, False, 2)
    asyncio.run(sink.received())
    assert sink.delivered == 3 and sink.inputs.position == 3
    assert sink.level1().edge_cut == {"p0->sink": 3, "p1->sink": 3}


# ---- the data plane ---------------------------------------------------------------------


def _partition_edge(index: int = 0) -> Edge:
    return Edge("up", "down.p0", "s", SCHEMA, plan.Kind.STREAM, 0, PartitionSpec(index, 2, {"s": BY_K}))


@pytest.fixture
async def served() -> AsyncIterator[tuple[pb_grpc.DataPlaneStub, SinkRole, NodeMetrics]]:
    async with served_sink(_partition_edge(), CODEC) as (stub, _, sink, metrics):
        yield stub, sink, metrics


def _hello() -> pb.Frame:
    return pb.Frame(
        hello=pb.Hello(edge="up->down.p0", sender="up", channel=pb.DATA, layout=CODEC.fingerprint())
    )


def _rows(keys: list[int]) -> list[Element]:
    return [(ts, ts, 1, k, 100 + ts) for ts, k in enumerate(keys, start=1)]


def _routed(rows: list[Element], owned: list[bool]) -> pb.Frame:
    mine = [r for r, m in zip(rows, owned, strict=True) if m]
    others = [r for r, m in zip(rows, owned, strict=True) if not m]
    batch = pb.Batch(
        first_seq=rows[0][1],
        count=len(rows),
        rows=CODEC.encode(mine),
        elided_ts=elided_stamps(others),
        owned=owned_bitmap(owned),
        watermark=rows[-1][0],
    )
    return pb.Frame(batch=batch)


async def _refusal(stub: pb_grpc.DataPlaneStub, frame: pb.Frame) -> str:
    call = stub.Push()
    await call.write(_hello())
    await asyncio.wait_for(call.read(), 10)
    await call.write(frame)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await asyncio.wait_for(call.read(), 10)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    return caught.value.details() or ""


async def test_a_partition_takes_its_rows_whole_and_the_others_as_timestamps(
    served: tuple[pb_grpc.DataPlaneStub, SinkRole, NodeMetrics],
) -> None:
    stub, sink, _ = served
    rows = _rows(list(range(12)))
    owned = _partition_edge().owned(rows)
    assert owned is not None and 0 < sum(owned) < len(rows)
    call = stub.Push()
    await call.write(_hello())
    await asyncio.wait_for(call.read(), 10)
    await call.write(_routed(rows, owned))
    await until_next_seq(sink, 13)
    await call.done_writing()


async def test_a_row_of_another_partition_sent_whole_is_refused(
    served: tuple[pb_grpc.DataPlaneStub, SinkRole, NodeMetrics],
) -> None:
    stub, sink, metrics = served
    rows = _rows(list(range(12)))
    owned = _partition_edge().owned(rows)
    assert owned is not None
    plain = pb.Frame(batch=pb.Batch(first_seq=1, count=12, rows=CODEC.encode(rows), watermark=12))
    assert "is not partition down.p0's" in await _refusal(stub, plain)
    lying = _routed(rows, [True] * 12)
    assert "frame refused (partition)" in await _refusal(stub, lying)
    labels = {"edge": "up->down.p0", "reason": "partition"}
    assert metrics.registry.get_sample_value("semiactive_frames_refused_total", labels) == 2
    assert sink.inputs.edges[0].next_seq == 1


async def test_a_malformed_partition_frame_is_refused(
    served: tuple[pb_grpc.DataPlaneStub, SinkRole, NodeMetrics],
) -> None:
    stub, _, _ = served
    rows = _rows(list(range(12)))
    owned = _partition_edge().owned(rows)
    assert owned is not None
    frame = _routed(rows, owned)
    frame.batch.owned = frame.batch.owned + b"\x00"
    assert "owned bitmap" in await _refusal(stub, frame)
    frame = _routed(rows, owned)
    del frame.batch.elided_ts[-1]
    assert "timestamps for" in await _refusal(stub, frame)


# ---- the configuration --------------------------------------------------------------------


def _cluster(stage: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "sources": [{"name": "src", "stream": "s0", "schema": {"k": "integer", "v": "integer"}}],
        "stages": [{"name": "part", "query": "REGISTER QUERY s1 AS SELECT * FROM s0", **stage}],
        "sinks": [{"name": "sink", "input": "s1"}],
        **extra,
    }


@pytest.mark.parametrize(
    ("stage", "field", "message"),
    [
        ({"partitions": 2, "node": "n1"}, "stages[0]", "runs on nodes"),
        ({"partitions": 2, "nodes": ["n1"]}, "stages[0]", "nodes: a list of 2"),
        ({"partitions": 2, "nodes": ["n1", "n2"], "ha": {"mode": "sas", "secondary": "n3"}}, "stages[0]",
         "ha.secondaries: a list of 2"),
        ({"node": "n1", "partition_by": ["k"]}, "stages[0]", "only apply to a partitioned stage"),
        ({"partitions": 2, "nodes": ["n1", "n2"], "partition_by": ["nope"]},
         "stages[0].partition_by", "nope"),
        ({"partitions": 2, "nodes": ["n1", "n2"], "partition_by": {"s9": ["k"]}},
         "stages[0].partition_by", "s9"),
        ({"partitions": 2, "nodes": ["n1", "n1"]}, "stages[0].nodes[1]", "used twice"),
        ({"partitions": 99, "nodes": ["n1"]}, "stages[0].partitions", "less than or equal to 64"),
        ({"node": "n1", "partition_routing": "modulo"}, "stages[0]", "only apply to a partitioned stage"),
        ({"partitions": 2, "nodes": ["n1", "n2"], "partition_routing": "modulo"}, "stages[0]",
         "one integer column per input"),
        ({"partitions": 2, "nodes": ["n1", "n2"], "partition_routing": "modulo", "partition_by": ["k", "v"]},
         "stages[0]", "one integer column per input"),
        ({"partitions": 2, "nodes": ["n1", "n2"], "partition_routing": "hashed"},
         "stages[0].partition_routing", "'hash' or 'modulo'"),
    ],
)  # fmt: skip
def test_configuration_errors_name_the_field(
    tmp_path: Path, stage: dict[str, Any], field: str, message: str
) -> None:
    path = write_config(tmp_path / "c.yaml", _cluster(stage))
    with pytest.raises(ConfigError) as caught:
        resolve(config.load(path))
    assert field in str(caught.value) and message in str(caught.value), str(caught.value)


def test_partitions_become_stages_and_consumers_merge_them_in_order(tmp_path: Path) -> None:
    stage = {"partitions": 3, "nodes": ["n1", "n2", "n3"], "partition_by": ["k"],
             "ha": {"mode": "sas", "secondaries": ["m1", "m2", "m3"]}}  # fmt: skip
    topology = resolve(config.load(write_config(tmp_path / "c.yaml", _cluster(stage))))
    parts = [topology.stages[f"part.p{i}"] for i in range(3)]
    assert [(p.primary, p.secondary) for p in parts] == [("n1", "m1"), ("n2", "m2"), ("n3", "m3")]
    assert [(e.producer, e.index) for e in topology.stages["sink"].inputs] == [
        ("part.p0", 0),
        ("part.p1", 1),
        ("part.p2", 2),
    ]
    into = [e for e in topology.edges if e.producer == "src"]
    assert [e.routing for e in into] == [InputRouting((3,))] * 3  # k: the first value of (ts, seq, sign, ...)
