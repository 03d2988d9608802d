"""Seed 004's ASSIGN (docs/cql.md, "ASSIGN: dynamic source selection"):
person tracking worked out by hand on every executor, eq. 1 written as
plain Python against the engine on random inputs and windows, the cases
that give no row, located compile errors, what `query check` shows, and
the SQLite oracle saying it does not cover ASSIGN."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.node.cql import CqlError, compile_program, plan
from semiactive.node.cql.explain import explain
from semiactive.oracle.sql_oracle import Feed, NotCovered, evaluate
from tests.unit.engine_harness import run

Rows = list[tuple[Any, ...]]

CAMERAS = """
REGISTER STREAM Interest(user char(8), camera char(8))
REGISTER STREAM Cam1(frame char(16), size integer)
REGISTER STREAM Cam2(frame char(16), size integer)
REGISTER STREAM Cam3(frame char(16), size char(8))
"""
# Each user's latest interest; every frame of the camera the user is near.
TRACK = (
    CAMERAS
    + """
REGISTER QUERY track AS
  ISTREAM(SELECT Interest.user, Cam.frame, Cam.size
          FROM ASSIGN(Interest [Partition By user Rows 1], camera,
                      'frame' AS frame char(16), 'size' AS size integer) [Now] AS Cam)
"""
)
TRACK_INPUTS: dict[str, Rows] = {
    "Interest": [
        (100, "alice", "Cam1"),
        (100, "bob", "Cam2"),
        (100, "carol", "Cam9"),  # no such camera
        (250, "alice", "Cam2"),  # alice moves to Cam2: two users on one camera
        (350, "carol", "Cam3"),  # Cam3's size is text: no integer, no row
    ],
    "Cam1": [(200, "c1-200", 1), (300, "c1-300", 2), (400, "c1-400", 3)],
    "Cam2": [(200, "c2-200", 5), (300, "c2-300", 6), (400, "c2-400", 7)],
    "Cam3": [(300, "c3-300", "big"), (400, "c3-400", "big")],
}
TRACKED = [
    (200, "alice", "c1-200", 1),
    (200, "bob", "c2-200", 5),
    (300, "bob", "c2-300", 6),  # bob's interest entered first
    (300, "alice", "c2-300", 6),
    (400, "bob", "c2-400", 7),
    (400, "alice", "c2-400", 7),
]
EXECUTORS = [
    {},
    {"compiled": False},
    {"fuse": False},
    {"max_slice_ms": 1},
    {"lineage": True},
    {"batches": 3},
    {"executor": "hb"},
    {"executor": "hb", "run_limit": 1},
]


@pytest.mark.parametrize("options", EXECUTORS, ids=str)
def test_users_follow_the_camera_they_are_near(options: dict[str, Any]) -> None:
    assert run(TRACK, TRACK_INPUTS, **options) == TRACKED


def test_attributes_named_per_row() -> None:
    text = """
    REGISTER STREAM Interest(user char(8), camera char(8), attr char(8))
    REGISTER STREAM Cam1(frame char(16), size integer)
    REGISTER STREAM Cam2(frame char(16), size integer, label char(8))
    SELECT Interest.user, Cam.v
    FROM ASSIGN(Interest [Partition By user Rows 1], camera, Interest.attr AS v integer) [Rows 1] AS Cam
    """
    inputs: dict[str, Rows] = {
        "Interest": [
            (100, "alice", "Cam1", "size"),
            (100, "bob", "Cam2", "label"),  # char, not integer: no row
            (100, "carol", "Cam1", "nope"),  # Cam1 has no attribute nope: no row
            (200, "carol", "Cam2", "size"),
        ],
        "Cam1": [(50, "f1", 10), (150, "f2", 11)],
        "Cam2": [(50, "g1", 20, "x")],
    }
    assert run(text, inputs) == [
        (100, "+", "alice", 10),
        (150, "+", "alice", 11),  # the [Rows 1] window's change: in, then out
        (150, "-", "alice", 10),
        (200, "+", "carol", 20),
    ]


def test_values_fit_their_declared_type_or_give_no_row() -> None:
    text = """
    REGISTER STREAM Want(src char(8))
    REGISTER STREAM Cam1(frame char(16), size integer)
    REGISTER RELATION Meta(frame char(16), size float)
    RSTREAM(SELECT * FROM ASSIGN(Want [Now], src, 'frame' AS f char(2), 'size' AS x float) AS A)
    """
    out = run(
        text,
        {
            "Want": [(10, "Cam1"), (10, "Meta"), (10, "Want")],  # R itself is no candidate
            "Cam1": [(1, "ab", 3), (2, "abc", 4)],  # "abc" is longer than char(2)
            "Meta": [(1, "+", "é", 1.5), (2, "+", "éé", 2.5)],  # "éé" is 4 bytes
        },
    )
    assert out == [(10, "Cam1", "ab", 3.0), (10, "Meta", "é", 1.5)]
    assert type(out[0][3]) is float  # an integer read as float is a float


def test_assign_over_a_query_joined_and_aggregated() -> None:
    text = (
        CAMERAS
        + """
    REGISTER RELATION Team(user char(8), team char(8))
    REGISTER QUERY near AS SELECT user, camera FROM Interest [Partition By user Rows 1]
    REGISTER QUERY per_team AS
      RSTREAM(SELECT Team.team, COUNT(*) AS frames
              FROM ASSIGN(near AS n, n.camera, 'frame' AS frame char(16)) [Range 100] AS Cam, Team
              WHERE Team.user = n.user AND Cam.frame != 'skip'
              GROUP BY Team.team)
    """
    )
    inputs = {
        **TRACK_INPUTS,
        "Team": [(0, "+", "alice", "red"), (0, "+", "bob", "red"), (0, "+", "carol", "blue")],
    }
    # R is the query near, so every input is a candidate, Interest too.
    assert "candidates: Interest, Cam1, Cam2, Cam3, Team\n" in explain(compile_program(text))
    assert run(text, inputs, end=300) == [
        (200, "red", 2),  # alice's c1-200 and bob's c2-200
        # 250: alice moves, losing c1-200 and gaining c2-200: still 2, no change
        (300, "red", 4),  # c2-200 and c2-300 for both
    ]


def test_dstream_of_assign() -> None:
    text = TRACK.replace("ISTREAM", "DSTREAM")
    out = run(text, TRACK_INPUTS, end=401)
    assert out == [(t + 1, *rest) for t, *rest in TRACKED]


# ---- eq. 1 as plain Python ---------------------------------------------------

SCHEMAS = {
    "Cam1": ("frame", "size"),
    "Cam2": ("frame", "size", "label"),
    "Cam3": ("frame", "size"),
    "Meta": ("frame", "size"),
}
PROPERTY = """
REGISTER STREAM Interest(user char(8), camera char(8), attr char(8))
REGISTER STREAM Cam1(frame char(4), size integer)
REGISTER STREAM Cam2(frame char(4), size integer, label char(8))
REGISTER STREAM Cam3(frame char(4), size char(4))
REGISTER RELATION Meta(frame char(4), size float)
SELECT * FROM ASSIGN(Interest {r_window}, camera, 'frame' AS f char(2), Interest.attr AS v {v_type})
              {c_window} AS A
"""
WINDOWS = ["[Now]", "[Range 3]", "[Rows 2]", "[Range Unbounded]", ""]


def window(spec: str, rows: Rows, t: int, partition: int | None = None) -> Rows:
    """The tuples of a stream ``(ts, values...)`` in ``spec`` at instant t."""
    seen = [r for r in rows if r[0] <= t]
    if spec == "[Now]":
        return [r for r in seen if r[0] == t]
    if spec == "[Range 3]":
        return [r for r in seen if r[0] >= t - 3]
    if spec == "[Rows 2]":
        return seen[-2:]
    if spec == "[Partition By user Rows 1]":
        assert partition is not None
        return list({r[partition]: r for r in seen}.values())
    return seen


def fits(value: Any, declared: str) -> Any:
    """The value as ``declared`` or None: integer takes ints, float ints and
    floats, char(2) text of at most 2 UTF-8 bytes."""
    if declared == "integer":
        return value if isinstance(value, int) else None
    if declared == "float":
        return float(value) if isinstance(value, int | float) else None
    return value if isinstance(value, str) and len(value.encode()) <= 2 else None


def eq1(
    interest: Rows, cams: dict[str, Rows], meta: Rows, r_window: str, c_window: str, v_type: str, t: int
) -> Counter[tuple[Any, ...]]:
    """ASSIGN's relation at instant t, straight from the placement paper's eq. 1."""
    relations: dict[str, Rows] = {
        name: [r[1:] for r in window(c_window, rows, t)] for name, rows in cams.items()
    }
    content: Counter[tuple[Any, ...]] = Counter()
    for _, op, *change in (m for m in meta if m[0] <= t):
        content[tuple(change)] += 1 if op == "+" else -1
    relations["Meta"] = list(content.elements())
    out: Counter[tuple[Any, ...]] = Counter()
    for r in window(r_window, interest, t, partition=1):
        _, user, camera, attr = r
        if camera not in relations or attr not in SCHEMAS[camera]:
            continue
        for s in relations[camera]:
            values = dict(zip(SCHEMAS[camera], s, strict=True))
            f, v = fits(values["frame"], "char"), fits(values[attr], v_type)
            if f is not None and v is not None:
                out[(user, camera, attr, f, v)] += 1
    return out


def replay(changes: Rows, t: int) -> Counter[tuple[Any, ...]]:
    content: Counter[tuple[Any, ...]] = Counter()
    for ts, op, *values in changes:
        if ts <= t:
            content[tuple(values)] += 1 if op == "+" else -1
    return +content


frames = st.sampled_from(["a", "bb", "é", "ccc", "éé"])
at = st.integers(0, 12)


@st.composite
def meta_changes(draw: st.DrawFn) -> Rows:
    """Insertions, and deletions of rows present at that time."""
    rows = sorted(draw(st.lists(st.tuples(at, frames, st.sampled_from([1.0, 2.5])), max_size=4)))
    changes: Rows = []
    for ts, frame, size in rows:
        changes.append((ts, "+", frame, size))
        if draw(st.booleans()):
            changes.append((ts + draw(st.integers(0, 4)), "-", frame, size))
    return sorted(changes, key=lambda c: c[0])


@settings(max_examples=200, deadline=None)
@given(
    interest=st.lists(
        st.tuples(
            at,
            st.sampled_from(["u", "w"]),
            st.sampled_from(["Cam1", "Cam2", "Cam1", "Cam2", "Cam3", "Meta", "Interest", "Nope"]),
            st.sampled_from(["size", "size", "size", "label", "frame", "nope"]),
        ),
        max_size=12,
    ),
    cam1=st.lists(st.tuples(at, frames, st.integers(0, 3)), max_size=8),
    cam2=st.lists(st.tuples(at, frames, st.integers(0, 3), st.sampled_from(["x", "yy"])), max_size=8),
    cam3=st.lists(st.tuples(at, frames, st.sampled_from(["1", "22"])), max_size=4),
    meta=meta_changes(),
    r_window=st.sampled_from([*WINDOWS, "[Partition By user Rows 1]"]),
    c_window=st.sampled_from(WINDOWS),
    v_type=st.sampled_from(["integer", "float", "char(2)"]),
    options=st.sampled_from(EXECUTORS),
)
def test_the_engine_computes_eq_1(
    interest: Rows,
    cam1: Rows,
    cam2: Rows,
    cam3: Rows,
    meta: Rows,
    r_window: str,
    c_window: str,
    v_type: str,
    options: dict[str, Any],
) -> None:
    text = PROPERTY.format(r_window=r_window, c_window=c_window, v_type=v_type)
    cams = {"Cam1": sorted(cam1), "Cam2": sorted(cam2), "Cam3": sorted(cam3)}
    inputs = {"Interest": sorted(interest), **cams, "Meta": meta}
    end = 20
    changes = run(text, inputs, end=end, **options)
    for t in range(end + 1):
        expected = eq1(inputs["Interest"], cams, meta, r_window, c_window, v_type.split("(")[0], t)
        assert replay(changes, t) == expected, t


# ---- errors, explain, the oracle -----------------------------------------------

ERRORS = """REGISTER STREAM Interest(user char(8), camera char(8), n integer)
REGISTER STREAM Cam1(frame char(16), size integer)
REGISTER RELATION Meta(frame char(16))
"""
PREFIX = "REGISTER QUERY q AS ISTREAM(SELECT * FROM "


@pytest.mark.parametrize(
    ("item", "message", "at"),
    [
        ("ASSIGN(Interest, cam, 'frame' AS f char(16)) AS A", "Interest has no column 'cam'", "cam,"),
        ("ASSIGN(Interest, n, 'frame' AS f char(16)) AS A", "selector 'n' is integer", "n,"),
        ("ASSIGN(Interest, camera, size AS f integer) AS A", "Interest has no column 'size'", "size AS"),
        ("ASSIGN(Interest, camera, n AS f integer) AS A", "attribute column 'n' is integer", "n AS"),
        ("ASSIGN(Interest, Cam1.camera, 'frame' AS f integer) AS A", "not of 'Cam1'", "Cam1.camera"),
        (
            "ASSIGN(Interest, camera, 'frame' AS f char(16), 'size' AS f integer) AS A",
            "duplicate output column name 'f' in ASSIGN (also a column of A)",
            "f integer",
        ),
        (
            "ASSIGN(Interest AS i, camera, 'frame' AS user char(16)) AS A",
            "duplicate output column name 'user' in ASSIGN (also a column of i)",
            "user char",
        ),
        (
            "ASSIGN(Interest, camera, 'frame' AS ts integer) AS A",
            "column name 'ts' is reserved",
            "ts integer",
        ),
        (
            "ASSIGN(Nope, camera, 'frame' AS f char(16)) AS A",
            "unknown stream, relation or query 'Nope'",
            "Nope",
        ),
        ("ASSIGN(Meta [Now], frame, 'frame' AS f char(16)) AS A", "windows apply only to streams", "[Now]"),
        (
            "ASSIGN(Interest, camera, 'frame' AS f char(16)) [Partition By frame Rows 1] AS A",
            "cannot be Partition By",
            "[Partition",
        ),
        ("ASSIGN(Interest, camera, 'frame' AS f char) AS A", "type char needs a length", "char)"),
        ("ASSIGN(Interest, camera, 'frame' AS f char(16)) AS Interest", "'Interest' appears twice", "ASSIGN"),
    ],
)
def test_compile_errors_are_located(item: str, message: str, at: str) -> None:
    text = ERRORS + PREFIX + item + ")\n"
    with pytest.raises(CqlError) as info:
        compile_program(text, file="q.cql")
    assert message in str(info.value)
    assert (info.value.line, info.value.column) == (4, len(PREFIX) + item.index(at) + 1), str(info.value)
    assert str(info.value).startswith(f"q.cql:4:{len(PREFIX) + item.index(at) + 1}: ")


def test_r_columns_are_qualified_by_r_and_the_declared_by_the_assign() -> None:
    base = CAMERAS + "SELECT {} FROM ASSIGN(Interest [Now] AS i, camera, 'frame' AS frame char(16)) AS Cam\n"
    program = compile_program(base.format("*"))
    columns = program.query(program.last_query).schema.columns
    assert [(c.name, c.type) for c in columns] == [
        ("user", plan.char(8)),
        ("camera", plan.char(8)),
        ("frame", plan.char(16)),
    ]
    assert program.query(program.last_query).kind is plan.Kind.RELATION
    compile_program(base.format("i.user, Cam.frame"))
    with pytest.raises(CqlError, match=r"unknown column 'Cam\.user'"):
        compile_program(base.format("Cam.user"))
    with pytest.raises(CqlError, match=r"unknown column 'i\.frame'"):
        compile_program(base.format("i.frame"))


def test_query_check_shows_assign_with_its_arguments() -> None:
    text = TRACK.replace("'size' AS size integer", "Interest.camera AS size integer")
    shown = explain(compile_program(text))
    assert (
        "      Assign(Interest.camera, 'frame' AS frame char(16), Interest.camera AS size integer) "
        "[Now] AS Cam; candidates: Cam1, Cam2, Cam3\n"
        "        Window [Partition By user Rows 1]  [non-monotone]\n"
        "          Scan Interest\n"
        "        Window [Now]\n"
        "          Scan Cam1\n"
        "        Window [Now]\n"
        "          Scan Cam2\n"
        "        Window [Now]\n"
        "          Scan Cam3\n"
    ) in shown


def test_the_sql_oracle_does_not_cover_assign() -> None:
    feeds = {name: Feed(rows) for name, rows in TRACK_INPUTS.items()}
    with pytest.raises(NotCovered, match="ASSIGN"):
        evaluate(TRACK, feeds, 400)
