"""Partitioned stages (node/cql/partitioning.py, embedded.execute_partitioned).

The property: when check_partitioning accepts a program and its partition
keys, the merged output of the partitions has, at every instant, the same
rows as the unpartitioned run, for any input. The random programs are the
oracle test's grammar (tests/unit/test_cql_oracle.py). Each refusal has an
input on which running partitioned really gives a different result. Some
accepted shapes are written by hand too.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st

from semiactive.embedded.query import execute, execute_partitioned
from semiactive.node.cql import CqlError, compile_program, plan
from semiactive.node.cql.partitioning import PartitioningError, check_partitioning
from semiactive.node.engine.elements import Element
from semiactive.node.sections.partitions import InputRouting, key_positions, value_hash
from semiactive.oracle.diff import compare, element_timeline
from tests.unit.test_cql_oracle import COLUMNS, FAMILIES, SCHEMA, relations, streams, wrap

Keys = dict[str, tuple[str, ...] | None]
Rows = Sequence[tuple[Any, ...]]


def _elements(rows: Rows, relation: bool) -> list[Element]:
    """Stream rows ``(ts, v...)`` or relation rows ``(ts, sign, v...)`` as
    elements with seq 1..n (round-robin routes by seq)."""
    if relation:
        return [(r[0], i, r[1], *r[2:]) for i, r in enumerate(rows, start=1)]
    return [(r[0], i, 1, *r[1:]) for i, r in enumerate(rows, start=1)]


def _routing(program: plan.Program, keys: Mapping[str, tuple[str, ...] | None]) -> dict[str, InputRouting]:
    return {
        name: InputRouting(key_positions(columns, program.inputs[name].schema.names))
        for name, columns in keys.items()
        if columns is not None
    }


def _runs(
    text: str, keys: Keys, inputs: Mapping[str, Rows], count: int = 2, end: int | None = None
) -> tuple[list[Element], list[Element]]:
    """The unpartitioned and the partitioned output of the last query."""
    program = compile_program(text)
    feeds = {n: _elements(rows, program.inputs[n].kind is plan.Kind.RELATION) for n, rows in inputs.items()}
    if end is None:
        end = max((e[0] for rows in feeds.values() for e in rows), default=0) + 5
    output = program.last_query
    whole = execute(program, feeds, output, end_watermark=end)
    parts = execute_partitioned(program, feeds, output, _routing(program, keys), count, end)
    return whole, parts


def _same(whole: list[Element], parts: list[Element]) -> bool:
    return compare(element_timeline(whole), element_timeline(parts)).identical


def _check(text: str, keys: Keys) -> None:
    program = compile_program(text)
    check_partitioning(program, program.last_query, keys)


def _apart(values: Sequence[Any], count: int = 2) -> tuple[Any, Any]:
    """Two of ``values`` that a one-column key sends to different partitions."""
    first = values[0]
    other = next(v for v in values[1:] if value_hash(v) % count != value_hash(first) % count)
    return first, other


A, B = _apart(range(20))

# ---- the property ----------------------------------------------------------------------


def _key_choices(name: str) -> st.SearchStrategy[tuple[str, ...] | None]:
    names = [c for c, _ in COLUMNS[name]]
    common: list[tuple[str, ...] | None] = [None, ("k",), ("k",)]
    if name != "R":
        common.append(())  # round-robin; a relation cannot be
    subsets = st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True).map(tuple)
    return st.one_of(st.sampled_from(common), subsets)


# Half the time S and T by k (the column the grammar joins and groups on),
# so that many programs are accepted.
KEYS = st.one_of(
    st.fixed_dictionaries({"S": st.just(("k",)), "T": st.just(("k",)), "R": st.sampled_from([None, ("k",)])}),
    st.fixed_dictionaries({name: _key_choices(name) for name in COLUMNS}),
)


def test_an_accepted_partitioning_keeps_the_result() -> None:
    tally: Counter[str] = Counter()

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(
        data=st.data(),
        s=streams("S"),
        t=streams("T"),
        r=relations(),
        keys=KEYS,
        count=st.integers(2, 4),
        extra=st.integers(0, 5),
    )
    def one(data: st.DataObject, s: Rows, t: Rows, r: Rows, keys: Keys, count: int, extra: int) -> None:
        # Up to four programs per example: most random programs are refused
        # (row windows, RSTREAM, ...), and only accepted ones are compared.
        for _ in range(4):
            family = data.draw(st.sampled_from(sorted(FAMILIES)), label="family")
            prelude, op, body = data.draw(FAMILIES[family], label="query")
            text = SCHEMA + prelude + wrap(op, body)
            try:
                program = compile_program(text)
            except CqlError:
                continue  # a program the engine refuses (a window on a relation, say)
            try:
                check_partitioning(program, program.last_query, keys)
                break
            except PartitioningError as exc:
                tally["refused"] += 1
                event(f"refused: {str(exc).partition(': ')[2][:40]}")
        else:
            reject()
        tally["accepted"] += 1
        event(f"accepted: {family}")
        end = max([row[0] for row in [*s, *t, *r]], default=0) + extra
        whole, parts = _runs(text, keys, {"S": s, "T": t, "R": r}, count, end)
        tally["with rows"] += bool(whole)
        result = compare(element_timeline(whole), element_timeline(parts))
        assert result.identical, f"{text}\nkeys={keys} count={count} end={end}\n{result.describe()}"

    one()
    # The property says something only if many programs are accepted, with rows.
    assert tally["accepted"] >= 75, tally
    assert tally["accepted"] >= 0.1 * (tally["accepted"] + tally["refused"]), tally
    assert tally["with rows"] >= 0.3 * tally["accepted"], tally


# ---- refusals, each with an input on which partitioning changes the result -------------

S = "REGISTER STREAM S (k integer, v integer);\n"
ST = S + "REGISTER STREAM T (k integer, w integer);\n"
RECURSIVE = """
REGISTER STREAM S (k integer, n integer)
REGISTER QUERY loop AS
  ISTREAM(SELECT n FROM S [Now] UNION ALL SELECT COUNT(*) AS n FROM loop [Now] WHERE n > 1)<1>
"""
CAMERAS = """
REGISTER STREAM Interest(user char(8), camera char(8))
REGISTER STREAM Cam1(frame char(16), size integer)
ISTREAM(SELECT Interest.user, Cam.frame
        FROM ASSIGN(Interest [Partition By user Rows 1], camera, 'frame' AS frame char(16)) [Now] AS Cam)
"""
USER, FRAME = _apart(["alice", "bob", "carol", "dave", "erin", "frank"])

REFUSED: list[tuple[str, str, Keys, dict[str, Rows], str]] = [
    (
        "global aggregate",
        S + "ISTREAM(SELECT COUNT(*) AS n FROM S [Range 10])",
        {"S": ("k",)},
        {"S": [(1, A, 0), (1, B, 0)]},
        "a global aggregate (no GROUP BY) over a partitioned input",
    ),
    (
        "group by without the key",
        S + "ISTREAM(SELECT v, COUNT(*) AS n FROM S [Range 10] GROUP BY v)",
        {"S": ("k",)},
        {"S": [(1, A, 7), (1, B, 7)]},
        "GROUP BY does not contain the partition key column(s) k",
    ),
    (
        "rows window",
        S + "DSTREAM(SELECT k FROM S [Rows 1])",
        {"S": ("k",)},
        {"S": [(1, A, 0), (2, B, 0)]},
        "a [Rows 1] window over a partitioned stream",
    ),
    (
        "istream over round-robin",
        S + "ISTREAM(SELECT v FROM S [Now])",
        {"S": ()},
        {"S": [(1, 0, 5), (2, 0, 5)]},
        "ISTREAM over a partitioned input with no known key",
    ),
    (
        "join on columns that are not the keys",
        ST + "ISTREAM(SELECT S.k, v, w FROM S [Range 10], T [Range 10] WHERE S.k = T.k)",
        {"S": ("v",), "T": ("w",)},
        {"S": [(1, 1, A)], "T": [(1, 1, B)]},
        "must equate their partition keys (partitioned by S.v and T.w: needs S.v = T.w",
    ),
    (
        "union of a broadcast and a partitioned input",
        ST + "SELECT k FROM S UNION ALL SELECT k FROM T",
        {"S": ("k",)},
        {"S": [(1, A, 0)], "T": [(1, 0, 0)]},
        "UNION ALL of a partitioned and a broadcast input",
    ),
    (
        "rstream",
        S + "RSTREAM(SELECT k FROM S [Range 10])",
        {"S": ("k",)},
        {"S": [(1, A, 0), (2, B, 0)]},
        "RSTREAM over a partitioned relation",
    ),
    (
        "recursion",
        RECURSIVE,
        {"S": ("k",)},
        {"S": [(10, A, 2), (10, B, 3)]},
        "recursive programs are not partitioned",
    ),
    (
        "partition window with a range by another column",
        "REGISTER STREAM P (id integer, val integer);\n"
        "DSTREAM(SELECT id, val FROM P [Partition By val Rows 1 Range 5])",
        {"P": ("id",)},
        {"P": [(1, A, 1), (2, B, 1)]},
        "[Partition By val Rows 1 Range 5 ms] over a stream partitioned with key id",
    ),
    (
        "assign",
        CAMERAS,
        {"Interest": ("user",), "Cam1": ("frame",)},
        {"Interest": [(100, USER, "Cam1")], "Cam1": [(200, FRAME, 1)]},
        "ASSIGN is not partitioned",
    ),
]


@pytest.mark.parametrize(
    ("text", "keys", "inputs", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_a_refused_partitioning_would_change_the_result(
    text: str, keys: Keys, inputs: dict[str, Rows], message: str
) -> None:
    with pytest.raises(PartitioningError, match=r"^query ") as caught:
        _check(text, keys)
    assert message in str(caught.value)
    whole, parts = _runs(text, keys, inputs)
    assert whole and not _same(whole, parts)


# ---- accepted shapes, on inputs with many keys -----------------------------------------


def _stream(n: int, columns: int, seed: int) -> list[tuple[Any, ...]]:
    """``n`` rows, three per instant, of values 0..5 (seeded)."""
    draw = random.Random(seed).randrange
    return [(i // 3, *(draw(6) for _ in range(columns))) for i in range(n)]


RELATION_R = "REGISTER RELATION R (k integer, p integer);\n"
R_ROWS = [(0, 1, k, 10 + k) for k in range(6)] + [(5, -1, 2, 12), (6, 1, 2, 20)]

ACCEPTED: list[tuple[str, str, Keys, dict[str, Rows]]] = [
    (
        "group by the key",
        S + "SELECT k, COUNT(*) AS n, SUM(v) AS s FROM S [Range 3] GROUP BY k HAVING COUNT(*) > 1",
        {"S": ("k",)},
        {"S": _stream(40, 2, 1)},
    ),
    (
        "join on the key with a broadcast relation",
        S + RELATION_R + "ISTREAM(SELECT S.k, v * p AS c FROM S [Now], R WHERE S.k = R.k)",
        {"S": ("k",)},
        {"S": _stream(40, 2, 2), "R": R_ROWS},
    ),
    (
        "join of a round-robin stream with a broadcast relation",
        S + RELATION_R + "SELECT S.k, v, p FROM S [Range 2], R WHERE S.k = R.k",
        {"S": ()},
        {"S": _stream(40, 2, 3), "R": R_ROWS},
    ),
    (
        "partition window by the key",
        "REGISTER STREAM P (id integer, val integer);\n"
        "ISTREAM(SELECT id, AVG(val) AS m FROM P [Partition By id Rows 2] GROUP BY id)",
        {"P": ("id",)},
        {"P": _stream(40, 2, 4)},
    ),
    (
        "partition window with a range by the key",
        "REGISTER STREAM P (id integer, val integer);\n"
        "DSTREAM(SELECT id, val FROM P [Partition By id Rows 2 Range 3])",
        {"P": ("id",)},
        {"P": _stream(40, 2, 12)},
    ),
    (
        "partition window by the key over a derived stream",
        ST + "REGISTER QUERY D AS ISTREAM(SELECT S.k, v, w FROM S [Range 2], T [Now] WHERE S.k = T.k);\n"
        "ISTREAM(SELECT k, SUM(v) AS a, SUM(w) AS b FROM D [Partition By k Rows 2] GROUP BY k)",
        {"S": ("k",), "T": ("k",)},
        {"S": _stream(60, 2, 10), "T": _stream(40, 2, 11)},
    ),
    (
        "istream over a range window keeping the key",
        S + "ISTREAM(SELECT k, v FROM S [Range 2])",
        {"S": ("k",)},
        {"S": _stream(40, 2, 5)},
    ),
    (
        "join of two inputs partitioned by the joined columns",
        ST + "ISTREAM(SELECT S.k, v, w FROM S [Range 1], T [Now] WHERE S.k = T.k AND v > w)",
        {"S": ("k",), "T": ("k",)},
        {"S": _stream(40, 2, 6), "T": _stream(30, 2, 7)},
    ),
    (
        "except of a broadcast relation from a partitioned one",
        ST + "ISTREAM(SELECT k FROM S [Range 3] EXCEPT SELECT k FROM T [Range 1])",
        {"S": ("k",)},
        {"S": _stream(40, 2, 8), "T": _stream(20, 2, 9)},
    ),
]


@pytest.mark.parametrize(("text", "keys", "inputs"), [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
@pytest.mark.parametrize("count", [2, 3])
def test_an_accepted_shape_keeps_the_result(
    text: str, keys: Keys, inputs: dict[str, Rows], count: int
) -> None:
    _check(text, keys)
    whole, parts = _runs(text, keys, inputs, count)
    assert len(whole) >= 10
    assert _same(whole, parts)


def test_partitions_are_merged_by_time_then_partition_and_renumbered() -> None:
    text = S + "SELECT k, v FROM S"
    program = compile_program(text)
    rows = _elements(_stream(30, 2, 10), relation=False)
    out = execute_partitioned(program, {"S": rows}, program.last_query, {"S": InputRouting((3,))}, 3, 0)
    assert [e[1] for e in out] == list(range(1, len(rows) + 1))
    partition = [value_hash(e[3]) % 3 for e in out]
    assert [(e[0], p) for e, p in zip(out, partition, strict=True)] == sorted(
        (e[0], p) for e, p in zip(out, partition, strict=True)
    )
    assert sorted(e[3:] for e in out) == sorted(e[3:] for e in rows)
    # One partition is the unpartitioned run (seq renumbered).
    whole = execute(program, {"S": rows}, program.last_query, end_watermark=0)
    one = execute_partitioned(program, {"S": rows}, program.last_query, {"S": InputRouting((3,))}, 1, 0)
    assert one == [(e[0], i, *e[2:]) for i, e in enumerate(whole, start=1)]


# ---- the keys themselves ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"X": ("k",)}, "unknown input stream 'X'"),
        ({"S": ("z",)}, "partition key of S: no column 'z'"),
        ({"S": ("k", "k")}, "a column is named twice"),
        ({"R": ()}, "relation R cannot be partitioned round-robin"),
        ({"big": ("k",)}, "big is a query of the program, not one of its inputs"),
    ],
)
def test_bad_keys_are_named(keys: Keys, message: str) -> None:
    text = S + RELATION_R + "REGISTER QUERY big AS SELECT k, v FROM S WHERE v > 2\nSELECT k FROM big"
    with pytest.raises(PartitioningError) as caught:
        _check(text, keys)
    assert message in str(caught.value)


def test_an_output_of_broadcast_inputs_only_is_refused() -> None:
    text = ST + "SELECT k FROM T"
    with pytest.raises(PartitioningError, match="no input is partitioned"):
        _check(text, {})
    with pytest.raises(PartitioningError, match=r"derives only from broadcast inputs \(partitioned: S\)"):
        _check(text, {"S": ("k",)})
