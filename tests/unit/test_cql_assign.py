"""Seed 004's ASSIGN (node/cql/assign.py): the person-tracking shape by
hand, eq. 1 as plain Python against the engine (DTS and HB) on random
inputs, unknown relations and attributes giving no result, located
compile errors, and what `query check` shows."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.cql import CqlError, compile_program
from node.cql.explain import explain
from tests.unit.engine_harness import run

DECLARE = """
REGISTER STREAM Interest(user char(8), camera char(8), attr char(8))
REGISTER STREAM Cam1(frame char(16), size integer)
REGISTER STREAM Cam2(frame char(16), size integer, label char(8))
"""
FOLLOW = (
    DECLARE
    + """
REGISTER QUERY follow AS
  ISTREAM(SELECT Cam.user, Cam.camera, Cam.frame, Cam.v
          FROM ASSIGN(Interest [Now], camera, 'frame' AS frame char(16), attr AS v integer) [Rows 1] AS Cam)
"""
)


def test_users_follow_their_cameras() -> None:
    out = run(
        FOLLOW,
        {
            "Interest": [
                (1000, "alice", "Cam1", "size"),
                (2000, "alice", "Cam2", "size"),  # the interest moves to Cam2
                (2000, "bob", "Cam2", "size"),  # two users on one camera
                (2500, "bob", "Cam2", "label"),  # a char attribute is no integer: nothing
                (3000, "bob", "Cam9", "size"),  # no such camera: nothing
                (3000, "carol", "Cam1", "nope"),  # no such attribute: nothing
            ],
            "Cam1": [(500, "c1-a", 10), (1500, "c1-b", 11), (2500, "c1-c", 12)],
            "Cam2": [(800, "c2-a", 20, "x"), (1800, "c2-b", 21, "y")],
        },
    )
    assert out == [
        (1000, "alice", "Cam1", "c1-a", 10),
        (2000, "alice", "Cam2", "c2-b", 21),
        (2000, "bob", "Cam2", "c2-b", 21),
    ]


def reference(
    interest: list[tuple[Any, ...]], cams: dict[str, list[tuple[Any, ...]]], rows: int
) -> list[tuple[Any, ...]]:
    """Eq. 1 at every instant with R = Interest [Now] and each camera under
    [Rows rows], then ISTREAM; ``attr`` names the integer attribute taken."""
    # [Now] empties R one tick after each arrival: that is an instant too.
    arrivals = {r[0] for r in interest} | {r[0] for c in cams.values() for r in c}
    instants = sorted(arrivals | {t + 1 for t in arrivals})
    out: list[tuple[Any, ...]] = []
    before: list[tuple[Any, ...]] = []
    columns = {"Cam1": ["frame", "size"], "Cam2": ["frame", "size", "label"]}
    kinds = {"frame": str, "size": int, "label": str}
    for t in instants:
        now = []
        for _, user, camera, attr in (r for r in interest if r[0] == t):  # R = Interest [Now]
            if camera not in cams or attr not in columns[camera] or kinds[attr] is not int:
                continue
            seen = [r for r in cams[camera] if r[0] <= t][-rows:]
            for row in seen:
                values = dict(zip(columns[camera], row[1:], strict=True))
                now.append((user, camera, values["frame"], values[attr]))
        pending = list(before)
        for row in sorted(now):
            if row in pending:
                pending.remove(row)
            else:
                out.append((t, *row))
        before = now
    return out


names = st.sampled_from(["alice", "bob"])
cameras = st.sampled_from(["Cam1", "Cam2", "Cam3"])
attrs = st.sampled_from(["size", "label", "frame"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 20), names, cameras, attrs), max_size=12),
    st.lists(st.tuples(st.integers(0, 20), st.integers(0, 9)), max_size=10),
    st.lists(st.tuples(st.integers(0, 20), st.integers(0, 9)), max_size=10),
    st.integers(1, 3),
    st.sampled_from(["dts", "hb"]),
)
def test_the_engine_computes_eq_1(
    interest: list[tuple[int, str, str, str]],
    cam1: list[tuple[int, int]],
    cam2: list[tuple[int, int]],
    rows: int,
    executor: str,
) -> None:
    text = FOLLOW.replace("[Rows 1]", f"[Rows {rows}]")
    interest_rows = sorted((t * 100, u, c, a) for t, u, c, a in interest)
    cam1_rows = [(t * 100, f"a{k}", v) for k, (t, v) in enumerate(sorted(cam1))]
    cam2_rows = [(t * 100, f"b{k}", v, "x") for k, (t, v) in enumerate(sorted(cam2))]
    out = run(text, {"Interest": interest_rows, "Cam1": cam1_rows, "Cam2": cam2_rows}, executor=executor)
    expected = reference(interest_rows, {"Cam1": cam1_rows, "Cam2": cam2_rows}, rows)
    key = lambda r: (r[0], r[1:])  # noqa: E731  (within an instant the order is the engine's)
    assert sorted(out, key=key) == sorted(expected, key=key)


def test_over_restricts_the_candidates_and_a_relation_is_taken_as_is() -> None:
    text = (
        DECLARE
        + """
    REGISTER RELATION Meta(frame char(16), size integer)
    REGISTER QUERY q AS
      RSTREAM(SELECT Cam.user, Cam.frame FROM ASSIGN(Interest [Now], camera, 'frame' AS frame char(16))
              OVER (Cam1, Meta) [Rows 1] AS Cam)
    """
    )
    out = run(
        text,
        {
            "Interest": [(100, "u", "Cam1", ""), (100, "v", "Cam2", ""), (100, "w", "Meta", "")],
            "Cam1": [(50, "one", 1)],
            "Cam2": [(50, "two", 2, "x")],
            "Meta": [(10, "+", "m", 3)],
        },
    )
    assert sorted(out) == [(100, "u", "one"), (100, "w", "m")]  # Cam2 is not OVER


def test_no_candidate_fits_gives_an_empty_relation() -> None:
    text = (
        DECLARE
        + """
    REGISTER QUERY q AS ISTREAM(SELECT * FROM ASSIGN(Interest, camera, 'nothing' AS x integer) AS A)
    """
    )
    program = compile_program(text)
    assert [c.name for c in program.query("q").schema.columns] == ["user", "camera", "attr", "x"]
    assert run(text, {"Interest": [(1, "u", "Cam1", "")], "Cam1": [(0, "f", 1)], "Cam2": []}) == []


@pytest.mark.parametrize(
    ("query", "message", "at"),
    [
        ("ASSIGN(Interest, cam, 'frame' AS f char(16)) AS A", "Interest has no column 'cam'", "cam,"),
        ("ASSIGN(Interest, camera, size AS f integer) AS A", "Interest has no column 'size'", "size AS"),
        ("ASSIGN(Interest, user, 'frame' AS f char(16)) AS A", "", "user,"),
        (
            "ASSIGN(Interest, camera, 'frame' AS user char(16)) AS A",
            "output column 'user' is taken",
            "'frame' AS user",
        ),
        (
            "ASSIGN(Nope, camera, 'frame' AS f char(16)) AS A",
            "unknown stream, relation or query 'Nope'",
            "Nope",
        ),
        ("ASSIGN(Interest, camera, 'frame' AS f char(16)) OVER (Cam1, Zed) AS A", "'Zed' is none", "Zed"),
        ("ASSIGN(Interest, camera, 'frame' AS f char) AS A", "type char needs a length", "char)"),
    ],
)
def test_compile_errors_are_located(query: str, message: str, at: str) -> None:
    prefix = "REGISTER QUERY q AS ISTREAM(SELECT * FROM "
    text = DECLARE + f"{prefix}{query})\n"
    if not message:  # the selector names a column, but of no char type: fine here (user is char)
        compile_program(text)
        return
    with pytest.raises(CqlError) as info:
        compile_program(text)
    assert message in str(info.value)
    assert (info.value.line, info.value.column) == (5, len(prefix) + query.index(at) + 1), str(info.value)


def test_the_selector_must_name_something() -> None:
    text = DECLARE.replace("camera char(8)", "camera integer") + (
        "REGISTER QUERY q AS ISTREAM(SELECT * FROM ASSIGN(Interest, camera, 'frame' AS f char(16)) AS A)\n"
    )
    with pytest.raises(CqlError, match="selector 'camera' must be a char column"):
        compile_program(text)


def test_query_check_shows_the_branches() -> None:
    shown = explain(compile_program(FOLLOW))
    assert "Select Interest.camera = 'Cam1' AND Interest.attr = 'size'" in shown
    assert "Select Interest.camera = 'Cam2' AND Interest.attr = 'size'" in shown
    assert "Union ALL" in shown and "'label'" not in shown  # label is char: no branch
