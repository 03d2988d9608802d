"""Connection management's decisions without sockets (node/sections/connections.py):
which candidates an ASSIGN plan lets the stage manage, when a candidate
connects and disconnects as interests come and go, which elided rows must
come again whole, and that eliding what the table says is idle never
changes the result (the engine run with and without elision)."""

from __future__ import annotations

import random

import pytest

from semiactive.node.cql import compile_program
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine
from semiactive.node.engine.operators.assign import AssignOp
from semiactive.node.engine.operators.relational import SelectOp
from semiactive.node.sections.codec import RowCodec
from semiactive.node.sections.connections import (
    ELIDED,
    ConnectionTable,
    elided_rows,
    elided_stamps,
    is_elided,
    managed_inputs,
)
from semiactive.node.sections.input import EdgeInput

CAMS = "".join(f"REGISTER STREAM cam{c} (frame integer, size integer)\n" for c in (1, 2, 3))
FOLLOW = (
    "REGISTER STREAM interest (person char(8), camera char(8))\n"
    + CAMS
    + "REGISTER QUERY follow AS ISTREAM(SELECT Interest.person, Cam.frame FROM "
    "ASSIGN(interest [Range 150] AS Interest, camera, 'frame' AS frame integer) [Now] AS Cam)\n"
)
EDGES = {"interest": "i->s", "cam1": "c1->s", "cam2": "c2->s", "cam3": "c3->s"}


def _engine(text: str = FOLLOW) -> Engine:
    program = compile_program(text)
    return Engine(program, [program.last_query])


def test_only_candidates_read_through_now_by_assigns_alone_are_managed() -> None:
    selectors, uses = managed_inputs(_engine().operators)
    assert [(s.column, s.keep) for s in selectors["interest"]] == [(1, None)]
    assert sorted(uses) == ["cam1", "cam2", "cam3"]
    # A window that keeps rows, or a candidate also read by a join, stays connected.
    ranged = FOLLOW.replace("[Now] AS Cam", "[Range 10] AS Cam")
    assert managed_inputs(_engine(ranged).operators)[1] == {}
    shared = FOLLOW + "REGISTER QUERY also AS ISTREAM(SELECT frame FROM cam2 [Now])\n"
    program = compile_program(shared)
    engine = Engine(program, ["follow", "also"])
    assert sorted(managed_inputs(engine.operators)[1]) == ["cam1", "cam3"]


def _interest(ts: int, camera: str, seq: int = 1) -> Element:
    return (ts, seq, 1, "alice", camera)


def test_a_candidate_connects_when_named_and_goes_idle_when_no_row_names_it() -> None:
    engine = _engine()
    table = ConnectionTable(engine.operators, EDGES)
    assert all(c.connected for c in table.candidates.values())
    # Nothing names anything yet: every camera idle from the next instant.
    assert {c.stream for c in table.idle(-1)} == {"cam1", "cam2", "cam3"}
    assert table.idle_from("c2->s") == 0
    assert table.idle(-1) == []  # said once
    # alice seen by cam2 at 100: cam2 wanted whole from 100.
    [wanted] = table.named("i->s", [_interest(100, "cam2")])
    assert wanted.stream == "cam2" and wanted.connected and wanted.idle_periods == [(0, 100)]
    assert table.named("i->s", [_interest(150, "cam2", 2)]) == []  # already connected
    # The engine has not reached the rows naming cam2: it stays.
    assert table.idle(120) == []
    engine.push("interest", [_interest(100, "cam2"), _interest(150, "cam2", 2)])
    engine.advance(200)
    assert table.idle(200) == []  # rows naming cam2 are in the window
    engine.advance(301)  # the row at 150 lived until 150 + 150
    [idle] = table.idle(301)
    assert idle.stream == "cam2" and table.idle_from("c2->s") == 302
    assert idle.connects == 1 and idle.disconnects == 2


def test_a_row_naming_no_candidate_or_a_deletion_connects_nothing() -> None:
    table = ConnectionTable(_engine().operators, EDGES)
    table.idle(-1)
    assert table.named("i->s", [_interest(5, "cam9")]) == []
    assert table.named("i->s", [(6, 2, -1, "alice", "cam1")]) == []
    assert table.named("c1->s", [(7, 3, 1, 1, 2)]) == []  # not R's edge


def test_elided_rows_outside_idle_periods_must_come_again() -> None:
    table = ConnectionTable(_engine().operators, EDGES)
    table.idle(99)  # idle from 100
    elided = elided_rows(1, elided_stamps([(100, 0, 1), (150, 0, 1), (250, 0, 1)]), 2)
    assert [r[0] for r in elided] == [100, 150, 250] and all(is_elided(r) for r in elided)
    assert table.unwanted_elision("c1->s", elided) is None  # idle: fine
    table.named("i->s", [_interest(200, "cam1")])  # wanted again from 200
    assert table.unwanted_elision("c1->s", elided) == elided[2]  # the row at 250
    assert table.unwanted_elision("c1->s", [(300, 9, 1, 1, 2)]) is None  # whole rows are fine
    # An edge that is not managed takes no elided row at all.
    assert table.unwanted_elision("i->s", elided[:1]) == elided[0]


def test_a_refilled_edge_forgets_the_elided_rows_and_goes_back_in_time() -> None:
    engine = _engine()
    program = engine.program
    edge = EdgeInput("c1->s", "cam1", 1, RowCodec(program.inputs["cam1"].schema, program.inputs["cam1"].kind))
    edge.accept_rows(1, [(10, 1, 1, 5, 6), (20, 2, 1, 7, 8)], 20, False)
    edge.accept_rows(3, elided_rows(3, [30, 0, 10], 2), 45, False)
    assert edge.next_seq == 6 and edge.watermark == 45
    edge.truncate(4)
    assert edge.next_seq == 4 and edge.watermark == 29 and [r[1] for r in edge.pending] == [1, 2, 3]
    edge.accept_rows(4, [(30, 4, 1, 1, 1), (40, 5, 1, 2, 2)], 45, False)  # again, whole
    assert [r[3] for r in edge.pending] == [5, 7, ELIDED, 1, 2]


def _run(inputs: dict[str, list[Element]], end: int) -> list[Element]:
    engine = _engine()
    for name, rows in inputs.items():
        engine.push(name, rows)
    return engine.advance(end)["follow"]


@pytest.mark.parametrize("seed", range(20))
def test_eliding_what_the_table_lets_go_never_changes_the_result(seed: int) -> None:
    """Random interests and camera rows, fed instant by instant as a stage
    would: rows of a camera at instants where it is idle are elided; the
    output must equal the run with every row whole."""
    rng = random.Random(seed)
    interest = sorted(
        (rng.randrange(0, 400), rng.choice(["cam1", "cam2", "cam3", "cam7"]))
        for _ in range(rng.randrange(0, 12))
    )
    rows: dict[str, list[Element]] = {
        "interest": [(t, i + 1, 1, "alice", c) for i, (t, c) in enumerate(interest)]
    }
    for c in (1, 2, 3):
        stamps = sorted(rng.randrange(0, 400) for _ in range(rng.randrange(0, 40)))
        rows[f"cam{c}"] = [(t, i + 1, 1, i, c) for i, t in enumerate(stamps)]
    whole = _run(rows, 600)

    engine = _engine()
    table = ConnectionTable(engine.operators, EDGES)
    out: list[Element] = []
    table.idle(engine.time if engine.time > -(2**61) else -1)
    for t in range(0, 601):
        # What arrives for instant t: R's rows first tell the table.
        arrived = [r for r in rows["interest"] if r[0] == t]
        table.named("i->s", arrived)
        engine.push("interest", arrived)
        for c in (1, 2, 3):
            now = [r for r in rows[f"cam{c}"] if r[0] == t]
            idle = table.idle_from(EDGES[f"cam{c}"])
            if idle is not None and t >= idle:
                now = elided_rows(now[0][1], elided_stamps(now), 2) if now else []
            engine.push(f"cam{c}", now)
        out += engine.advance(t)["follow"]
        table.idle(t)
    assert out == whole
    assert not any(ELIDED in r for r in out)


TWO_USERS = (
    "REGISTER STREAM alice (camera char(8))\nREGISTER STREAM bob (camera char(8))\n"
    + CAMS
    + "REGISTER QUERY both AS ISTREAM("
    "SELECT 'alice' AS who, A.frame "
    "FROM ASSIGN(alice [Range 10], camera, 'frame' AS frame integer) [Now] AS A "
    "UNION ALL "
    "SELECT 'bob' AS who, B.frame FROM ASSIGN(bob [Range 10], camera, 'frame' AS frame integer) [Now] AS B)\n"
)


def test_two_queries_wanting_one_source_share_its_one_connection() -> None:
    engine = _engine(TWO_USERS)
    edges = {"alice": "a->s", "bob": "b->s", "cam1": "c1->s", "cam2": "c2->s", "cam3": "c3->s"}
    table = ConnectionTable(engine.operators, edges)
    assert set(table.candidates) == {"c1->s", "c2->s", "c3->s"}  # one edge, one connection each
    table.idle(-1)
    assert [c.stream for c in table.named("a->s", [(0, 1, 1, "cam1")])] == ["cam1"]
    assert table.named("b->s", [(5, 1, 1, "cam1")]) == []  # bob shares alice's connection
    engine.push("alice", [(0, 1, 1, "cam1")])
    engine.push("bob", [(5, 1, 1, "cam1")])
    engine.advance(11)  # alice's row has left her window; bob's has not
    assert table.idle(11) == []
    engine.advance(16)
    assert [c.stream for c in table.idle(16)] == ["cam1"]


TRACKER = (
    "REGISTER STREAM interest (person char(8), camera char(8))\n"
    + CAMS
    + "REGISTER QUERY follow AS ISTREAM(SELECT Seen.person, Cam.frame FROM "
    "ASSIGN(interest [Range 150] AS Seen, camera, 'frame' AS frame integer, 'size' AS size integer) [Now] "
    "AS Cam WHERE Seen.person = 'alice' AND Cam.size > 1 AND (Seen.camera = 'cam1' OR Cam.size > 2))\n"
)


def test_the_query_analyser_filters_r_before_the_assign_and_connects_nothing_for_dropped_rows() -> None:
    engine = _engine(TRACKER)
    [assign] = [op for op in engine.operators if isinstance(op, AssignOp)]
    pushed = assign.children[0]
    assert isinstance(pushed, SelectOp) and "alice" in pushed.condition  # R filtered first
    others = [op.condition for op in engine.operators if isinstance(op, SelectOp) and op is not pushed]
    assert not any("alice" in c for c in others)
    table = ConnectionTable(engine.operators, EDGES)
    table.idle(-1)
    assert table.named("i->s", [(5, 1, 1, "bob", "cam2")]) == []  # the query drops bob's rows
    assert [c.stream for c in table.named("i->s", [(6, 2, 1, "alice", "cam2")])] == ["cam2"]


@pytest.mark.parametrize("seed", range(10))
def test_the_query_analyser_changes_no_result(seed: int) -> None:
    """The WHERE over the ASSIGN against the same filter applied to R by a
    query of its own (which nothing pushes): the same rows at the same
    instants."""
    rng = random.Random(seed)
    stamps = sorted(rng.randrange(0, 300) for _ in range(rng.randrange(0, 15)))
    people, cameras = ["alice", "bob"], ["cam1", "cam2", "cam9"]
    interest = [(t, i + 1, 1, rng.choice(people), rng.choice(cameras)) for i, t in enumerate(stamps)]
    cams = {}
    for c in (1, 2, 3):
        frames = sorted(rng.randrange(0, 300) for _ in range(20))
        cams[f"cam{c}"] = [(t, i + 1, 1, i, rng.randrange(0, 4)) for i, t in enumerate(frames)]
    alice_only = "REGISTER QUERY alice_only AS ISTREAM(SELECT * FROM interest [Now] WHERE person = 'alice')\n"
    by_hand = (
        TRACKER.replace("ASSIGN(interest [Range", "ASSIGN(alice_only [Range")
        .replace("REGISTER QUERY follow AS", alice_only + "REGISTER QUERY follow AS")
        .replace("WHERE Seen.person = 'alice' AND", "WHERE")
    )
    outputs = []
    for text in (TRACKER, by_hand):
        engine = _engine(text)
        engine.push("interest", interest)
        for name, rows in cams.items():
            engine.push(name, rows)
        outputs.append([(e[0], *e[3:]) for e in engine.advance(400)["follow"]])
    assert outputs[0] == outputs[1]
