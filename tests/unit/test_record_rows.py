"""A columnar stage keeps rows as record blocks (node/sections/record_rows.py):
its input edge, its operator section and its output log must hand on
exactly what the row path hands on, whatever the batches, cuts and runs."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.ha.output_log import OutputLog
from semiactive.ha.replica import Mode, StageReplica, columnar_stage_reason
from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.node.sections import operator as operator_section
from semiactive.node.sections.codec import INT_MAX, CodecError, RowCodec
from semiactive.node.sections.connections import ELIDED
from semiactive.node.sections.input import EdgeInput, InputSection, RowOrderError
from semiactive.node.sections.operator import ColumnarSection, ColumnarWindowSection
from semiactive.node.sections.record_rows import RecordLayout, RecordRows
from tests.unit.ha_harness import build_topology

SCHEMA = plan.Schema((plan.Column("v", plan.INTEGER), plan.Column("t", plan.char(3))))
CODEC = RowCodec(SCHEMA, plan.Kind.STREAM)
LAYOUT = RecordLayout(CODEC)


def _elements(first_seq: int, stamps: list[int]) -> list[Element]:
    return [(ts, first_seq + i, 1, ts * 7 - i, "é"[: i % 2]) for i, ts in enumerate(stamps)]


# An edge's life: batches (possibly resent from an earlier seq), takes and
# truncations, as a producer and the operator loop make them.
Op = tuple[str, int, int, int]
ops = st.lists(
    st.tuples(
        st.sampled_from(["send", "send", "send", "take", "take", "truncate"]),
        st.integers(0, 30),  # rows / max_rows / rows back
        st.integers(0, 3),  # ts step / max_position offset
        st.integers(-2, 4),  # watermark lead / resend back
    ),
    max_size=30,
)


def _run_edge(exact: bool, records: bool, script: list[Op]) -> list[Any]:
    edge = EdgeInput("a->b", "s", 0, CODEC, layout=LAYOUT if records else None)
    section = InputSection([edge], exact=exact)
    seen: list[Any] = []
    ts = 0
    sent: list[Element] = []
    for op, n, step, lead in script:
        if op == "send":
            back = min(max(lead, 0), len(sent))
            first = len(sent) + 1 - back
            stamps = []
            for _ in range(n):
                ts += step
                stamps.append(ts)
            new = _elements(len(sent) + 1, stamps)
            batch = sent[len(sent) - back :] + new
            try:
                got = edge.accept(first, len(batch), CODEC.encode(batch), ts + lead, False)
            except RowOrderError as exc:
                seen.append(("refused", str(exc)))
                continue
            sent += new
            seen.append(("accepted", got))
        elif op == "take":
            limit = section.position + n + step if step else None
            taken, watermark = section.take(limit, n or None)
            seen.append(({k: list(v) for k, v in taken.items()}, watermark, section.more, section.position))
        elif edge.next_seq - 1 > edge.handed:
            seq = max(edge.handed + 1, edge.next_seq - n)
            edge.truncate(seq)
            sent = sent[: seq - 1]
            ts = sent[-1][0] if sent else 0
        seen.append((section.backlog, edge.received, edge.watermark, edge.last_ts, edge.next_seq))
    return seen


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.booleans(), ops)
def test_an_edge_on_records_hands_on_what_an_edge_on_rows_does(exact: bool, script: list[Op]) -> None:
    assert _run_edge(exact, True, script) == _run_edge(exact, False, script)


def test_records_out_of_order_are_refused_as_rows_are() -> None:
    edge = EdgeInput("a->b", "s", 0, CODEC, layout=LAYOUT)
    edge.accept(1, 2, CODEC.encode(_elements(1, [1, 5])), 3, False)
    for stamps, message in (([5, 4], "row at ts 4 comes after one at ts 5"), ([2], "ts 2 is at or below")):
        with pytest.raises(RowOrderError, match=message):
            edge.accept(3, len(stamps), CODEC.encode(_elements(3, stamps)), 9, False)
    with pytest.raises(RowOrderError, match="row at ts 4 comes after one at ts 5"):
        edge.accept(3, 1, CODEC.encode(_elements(3, [4])), 9, False)
    assert edge.next_seq == 3 and len(edge.records) == 2


# -- the output log -------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(st.sampled_from(["rows", "records", "get", "cut", "backup"]), st.integers(0, 40)),
        max_size=40,
    )
)
def test_a_log_of_records_gives_what_a_log_of_rows_gives(script: list[tuple[str, int]]) -> None:
    logs = [OutputLog(), OutputLog()]
    for log in logs:
        log.add_edge("e", batch_size=7)
    seen: list[list[Any]] = [[], []]
    ts = 0
    for op, n in script:
        if op in ("rows", "records"):
            rows = _elements(0, list(range(ts, ts + n)))
            ts += n
            logs[0].append(rows)
            # The second log gets blocks and, between them, rows too.
            logs[1].append(LAYOUT.of(rows) if op == "records" else rows)
            continue
        for log, out in zip(logs, seen, strict=True):
            # Blocks below the cut are freed at once, rows in chunks: rows
            # past the cut are what both must still give.
            cut = log.edges["e"].cut
            if op == "get":
                got = log.get(cut + n // 3, cut + n)
                out.append([(r[0], r[3], r[4]) for r in got])
                out.append(CODEC.encode(got))
            elif op == "cut":
                log.release("e", cut + n)
                out.append((log.edges["e"].cut, log.head, log.first <= log.edges["e"].cut))
            else:
                first, shipped = log.take_backup("e", force=n % 2 == 0)
                out.append((first, [(r[0], r[3]) for r in shipped]))
    assert seen[0] == seen[1]


def test_records_go_on_the_wire_as_they_are() -> None:
    rows = LAYOUT.of(_elements(1, [1, 2, 3]))
    assert isinstance(rows, RecordRows)
    assert CODEC.encode(rows) == CODEC.encode(rows.rows()) == rows.tobytes()
    # Another layout (a column named otherwise) encodes the rows themselves.
    other = RowCodec(plan.Schema((plan.Column("w", plan.INTEGER), SCHEMA.columns[1])), plan.Kind.STREAM)
    assert other.encode(rows) == rows.tobytes()


# -- a stage ----------------------------------------------------------------------------------------

QUERIES = {
    "select": "SELECT * FROM s0 WHERE val >= 500",
    "project": "SELECT id, val * 3 - id AS w, pad FROM s0 WHERE val < 900 AND id >= 2",
    "overflow": f"SELECT id, val * {INT_MAX // 500} AS big FROM s0",
    # Text compared as the wire's bytes on records, as strings on rows.
    "text filter": "SELECT * FROM s0 WHERE (pad >= 'p\u20ac' OR pad = '') AND pad <> 'pad '",
    "text window": (
        "ISTREAM(SELECT pad, COUNT(*) AS n "
        "FROM (SELECT * FROM s0 WHERE pad < 'pad') [Range 6] AS x GROUP BY pad)"
    ),
    # ColumnarWindowSection's: the window's state on the columnar engine.
    "sliding range": (
        "ISTREAM(SELECT SUM(val) AS s, COUNT(*) AS n "
        "FROM (SELECT * FROM s0 WHERE val >= 100) [Range 5 Slide 2] AS x)"
    ),
    "rows": "DSTREAM(SELECT MIN(val) AS lo, AVG(val) AS a FROM s0 [Rows 7])",
    "now": "RSTREAM(SELECT MAX(id) AS m FROM s0 [Now])",
    "rows slide": "ISTREAM(SELECT SUM(val) AS s, COUNT(*) AS n FROM s0 [Rows 10 Slide 3])",
    "window overflow": f"ISTREAM(SELECT SUM(val * {INT_MAX // 2000}) AS s FROM s0 [Range 3])",
    # GROUP BY: ids recur (_feed's id is seq % 5)
    "group by range": (
        "ISTREAM(SELECT id, SUM(val) AS s, MAX(val) AS hi FROM s0 [Range 4 Slide 2] GROUP BY id)"
    ),
    "group by rows slide": (
        "DSTREAM(SELECT id, COUNT(*) AS n, AVG(val) AS a FROM s0 [Rows 12 Slide 5] GROUP BY id)"
    ),
    # Text keys: bytes on record blocks, str on rows, one group whichever way
    # a row came (_feed's pads, one of them not UTF-8 where poisoned).
    "group by text": (
        "ISTREAM(SELECT pad, SUM(val) AS s, COUNT(*) AS n FROM s0 [Range 4 Slide 2] GROUP BY pad)"
    ),
    "group by id and text": (
        "DSTREAM(SELECT id, pad, MIN(val) AS lo, COUNT(*) AS n FROM s0 [Range 6] GROUP BY id, pad)"
    ),
    "group by text rows slide": (
        "DSTREAM(SELECT pad, MAX(val) AS hi FROM s0 [Rows 12 Slide 5] GROUP BY pad)"
    ),
    "partition": (
        "ISTREAM(SELECT id, MIN(val) AS lo, SUM(val) AS s FROM s0 [Partition By id Rows 2] AS x GROUP BY id)"
    ),
    "partition by text": (
        "DSTREAM(SELECT pad, COUNT(*) AS n, MAX(val) AS hi "
        "FROM s0 [Partition By pad Rows 5] AS x GROUP BY pad)"
    ),
}
PADS = ("pad", "p\u20ac", "", "pad ")  # the same pad each fourth row, so ids and pads make 20 groups
WINDOWED = (
    "sliding range",
    "rows",
    "now",
    "rows slide",
    "window overflow",
    "group by range",
    "group by rows slide",
    "group by text",
    "group by id and text",
    "group by text rows slide",
    "partition",
    "partition by text",
    "text window",
)


def _stage(tmp_path: Path, kind: str) -> Any:
    return build_topology(tmp_path, [f"REGISTER QUERY s1 AS {QUERIES[kind]}"]).stages["stage-1"]


def _wire(codec: RowCodec, rows: list[Element], poison: str | None) -> bytes:
    """Rows as the wire carries them, with a NULL or a pad that is not UTF-8."""
    blob = bytearray(codec.encode(rows))
    if poison == "null":
        struct.pack_into("<q", blob, 8, -(2**63))  # the first row's id
    elif poison == "latin-1":
        blob[codec.row_size - 1] = 0xE9  # the end of the first row's pad
    return bytes(blob)


@pytest.mark.parametrize("kind", list(QUERIES))
@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    batches=st.lists(
        st.tuples(st.integers(0, 60), st.sampled_from([None, None, "null", "latin-1"]), st.booleans()),
        min_size=1,
        max_size=8,
    ),
    run_rows=st.sampled_from([None, 1, 7, 50]),
)
def test_a_columnar_stage_logs_what_a_row_stage_logs(
    tmp_path_factory: pytest.TempPathFactory,
    kind: str,
    batches: list[tuple[int, str | None, bool]],
    run_rows: int | None,
) -> None:
    stage = _stage(tmp_path_factory.mktemp("t"), kind)
    assert columnar_stage_reason(stage) is None
    replicas = [
        StageReplica("r", stage, Mode.PRIMARY, {}, run_rows=run_rows, columnar=columnar)
        for columnar in (False, True)
    ]
    with mock.patch.object(operator_section, "MIN_COLUMN_ROWS", 1):  # every block on columns
        _feed(replicas, stage, batches)
    section = ColumnarWindowSection if kind in WINDOWED else ColumnarSection
    assert isinstance(replicas[1].operator, section)
    logs = [rep.log.get(1, rep.log.head) for rep in replicas]
    # Slot 1 of a logged row is its lineage on rows, its seq on records:
    # nothing reads it (senders number rows by their place in the log).
    assert [(r[0], *r[2:]) for r in logs[1]] == [(r[0], *r[2:]) for r in logs[0]]
    out = RowCodec(stage.outputs[0].schema, plan.Kind.STREAM)
    try:
        expected: bytes | None = out.encode(logs[0])
    except ValueError:
        expected = None  # an integer beyond int64: refused by both, at sending
    if expected is not None:
        assert out.encode(logs[1]) == expected
    else:
        with pytest.raises(ValueError, match="outside the 64-bit"):
            out.encode(logs[1])
    clean = [n for n, poison, as_rows in batches if n and poison is None and not as_rows]
    assert replicas[1].operator.blocks >= (1 if clean else 0)  # type: ignore[union-attr]


def _feed(replicas: list[StageReplica], stage: Any, batches: list[tuple[int, str | None, bool]]) -> None:
    edge = stage.inputs[0]
    codec = RowCodec(edge.schema, edge.kind)
    seq, ts = 1, 0
    for n, poison, as_rows in batches:
        rows = [
            (ts + i // 3, seq + i, 1, (seq + i) % 5, (seq + i) * 37 % 1000, PADS[(seq + i) % 4])
            for i in range(n)
        ]
        blob = _wire(codec, rows, poison if n else None)
        for rep in replicas:
            inputs = rep.inputs.edges[0]
            if poison == "null" and n:
                # A NULL in a column the plan says cannot hold one (a source's
                # id): the batch is refused on both paths, then comes clean.
                with pytest.raises(CodecError, match="column id cannot be NULL"):
                    inputs.accept(seq, n, blob, ts + n, False)
                assert inputs.next_seq == seq
                inputs.accept(seq, n, _wire(codec, rows, None), ts + n, False)
            elif as_rows and poison is None:
                inputs.accept_rows(seq, rows, ts + n, False)
            else:
                inputs.accept(seq, n, blob, ts + n, False)
            while rep.run() and rep.more:
                pass
        seq, ts = seq + n, ts + n + 1


def test_a_small_block_takes_the_row_engine(tmp_path: Path) -> None:
    """The columnar engine costs about 0.1 ms a call: below MIN_COLUMN_ROWS
    rows a block is cheaper as rows."""
    stage = _stage(tmp_path, "select")
    rep = StageReplica("r", stage, Mode.PRIMARY, {}, columnar=True)
    edge = stage.inputs[0]
    codec = RowCodec(edge.schema, edge.kind)
    for first, n in ((1, operator_section.MIN_COLUMN_ROWS - 1), (operator_section.MIN_COLUMN_ROWS, 200)):
        rows = [(first + i, first + i, 1, i, 700, "pad") for i in range(n)]
        rep.inputs.edges[0].accept(first, n, codec.encode(rows), first + n - 1, False)
        rep.run()
        assert rep.operator.blocks == (first > 1)  # type: ignore[union-attr]
    assert rep.log.head == operator_section.MIN_COLUMN_ROWS - 1 + 200


def test_what_keeps_a_stage_on_rows(tmp_path: Path) -> None:
    reasons = {
        "window": "SELECT SUM(val) AS s FROM s0 [Range 10]",
        "unbounded": "ISTREAM(SELECT SUM(val) AS s FROM s0 [Range Unbounded])",
    }
    for name, query in reasons.items():
        (tmp_path / name).mkdir()
        stage = build_topology(tmp_path / name, [f"REGISTER QUERY s1 AS {query}"]).stages["stage-1"]
        assert columnar_stage_reason(stage) is not None, name
        assert not StageReplica("r", stage, Mode.PRIMARY, {}, columnar=True).columnar


def test_an_edge_given_rows_with_no_record_form_turns_back_to_rows() -> None:
    """A partition's elided rows have no record form: the edge keeps rows
    from then on, the records it had queued included, in order."""
    edge = EdgeInput("a->b", "s", 0, CODEC, layout=LAYOUT)
    edge.accept(1, 2, CODEC.encode(_elements(1, [1, 2])), 2, False)
    edge.accept_rows(3, [(3, 3, 1, ELIDED, ELIDED)], 3, False)
    edge.accept(4, 1, CODEC.encode(_elements(4, [4])), 4, False)
    assert edge.layout is None and not edge.records
    taken, _ = InputSection([edge], exact=True).take()
    assert [r[:2] for r in taken["s"]] == [(1, 1), (2, 2), (3, 3), (4, 4)]
    assert taken["s"][2][3] is ELIDED
