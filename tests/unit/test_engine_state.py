"""State snapshots (node/engine/state.py, node/engine/state_codec.py): an
engine rebuilt from the bytes of another's state at any point goes on
exactly as the original does (same outputs, lineage included, same
state low, counters and next event, and in the end the same state bytes),
whatever the operators, the execution mode and the point; what the
operators do not declare as state never changes; and bytes that are not a
state of this program are refused with a :class:`StateFormatError`."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import math
import random
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semiactive.node.cql import compile_program, plan
from semiactive.node.engine import state
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine
from semiactive.node.engine.operators.aggregate import MinMaxAcc
from semiactive.node.engine.operators.base import LowBound
from semiactive.node.engine.operators.relational import Multiset
from semiactive.node.engine.state_codec import StateFormatError, decode_state, encode_state
from tests.unit.engine_harness import elements
from tests.unit.test_cql_assign import TRACK, TRACK_INPUTS
from tests.unit.test_dts_compiled import PROGRAMS

RELATIONAL = """
REGISTER STREAM s (k integer, v integer, f float)
REGISTER RELATION p (k integer, price integer)
REGISTER QUERY d AS ISTREAM(SELECT DISTINCT k FROM s [Rows 3])
REGISTER QUERY x AS RSTREAM(SELECT k FROM s [Range 4] EXCEPT SELECT k FROM s [Range 2 Slide 3])
REGISTER QUERY jn AS ISTREAM(SELECT s.k, v * price AS cost FROM s [Now], p WHERE s.k = p.k)
REGISTER QUERY un AS DSTREAM(SELECT k FROM s [Range Unbounded] WHERE v > 3 UNION SELECT k FROM p)
REGISTER QUERY pw AS ISTREAM(SELECT k, v FROM s [Partition By k Rows 2] WHERE f > 0)
REGISTER QUERY pr AS DSTREAM(SELECT k, v FROM s [Partition By k Rows 2 Range 3])
REGISTER QUERY mm AS RSTREAM(SELECT k, MIN(f) AS lo, MAX(v) AS hi FROM s [Range 5 Slide 2] GROUP BY k)
"""
"""The operators the other programs leave out: DISTINCT, EXCEPT, a join
with a relation input, UNION of relations, plain partition windows (one
with a Range), sliding range windows and MIN/MAX heaps."""


def _relational(rnd: random.Random) -> dict[str, list[Element]]:
    rows, t = [], 0
    for i in range(200):
        t += rnd.choice([0, 0, 1, 1, 2, 5])
        rows.append((t, i + 1, 1, rnd.randrange(4), rnd.randrange(-4, 9), rnd.randrange(-8, 8) / 4))
    prices: list[Element] = [(0, 1000 + k, 1, k, 10 + k) for k in range(3)]
    price = {k: 10 + k for k in range(3)}
    for ts in range(10, t, 25):
        k = rnd.randrange(3)
        prices.append((ts, 1000 + ts, -1, k, price[k]))
        price[k] = rnd.randrange(1, 30)
        prices.append((ts, 1001 + ts, 1, k, price[k]))
    return {"s": rows, "p": prices}


FLOAT_SUMS = """
REGISTER STREAM s (k integer, f float)
REGISTER QUERY w AS ISTREAM(SELECT SUM(f) AS t, AVG(f) AS m FROM s [Rows 3])
REGISTER QUERY p AS RSTREAM(SELECT k, SUM(f) AS t, COUNT(*) AS n FROM s [Partition By k Rows 3] GROUP BY k)
"""
"""Float sums that take infinities, overflow in pairs and fold (float_sums)."""


def _float_sums(rnd: random.Random) -> dict[str, list[Element]]:
    # No three values reach the float range's end, and no -inf: no NaN result.
    values = [math.inf, 5e307, -5e307, 1.5, -0.0, 0.1, 1e-300, 5e-324]
    return {"s": [(i // 2, i + 1, 1, rnd.randrange(3), rnd.choice(values)) for i in range(200)]}


def _track(rnd: random.Random) -> dict[str, list[Element]]:
    return {name: elements(rows) for name, rows in TRACK_INPUTS.items()}


CASES: dict[str, tuple[str, Any]] = {
    **PROGRAMS,
    "relational": (RELATIONAL, _relational),
    "assign": (TRACK, _track),
    "float-sums": (FLOAT_SUMS, _float_sums),
}

MODES: list[dict[str, Any]] = [
    {"lineage": True},
    {},
    {"fuse": False, "lineage": True},
    {"compiled": False, "max_slice_ms": 1},
]

BATCHES = 6


@functools.cache
def _compile(text: str) -> plan.Program:
    return compile_program(text)


def _engine(text: str, **options: Any) -> Engine:
    program = _compile(text)
    return Engine(program, list(program.queries), **options)


def _cuts(inputs: dict[str, list[Element]]) -> list[int]:
    last = max(rows[-1][0] for rows in inputs.values())
    return [last * k // BATCHES for k in range(1, BATCHES)] + [last + 12]


def _step(engine: Engine, inputs: dict[str, list[Element]], low: int, cut: int) -> dict[str, list[Element]]:
    for name, rows in inputs.items():
        engine.push(name, [e for e in rows if low < e[0] <= cut])
    return engine.advance(cut)


def _probe(engine: Engine) -> tuple[Any, ...]:
    return engine.next_event(), engine.state_low(), engine.counters()


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("mode", MODES, ids=str)
def test_an_engine_rebuilt_from_a_snapshot_goes_on_as_the_original(case: str, mode: dict[str, Any]) -> None:
    text, make = CASES[case]
    inputs = make(random.Random(7))
    cuts = _cuts(inputs)
    whole = _engine(text, **mode)
    outputs, probes, low = [], [], -1
    for cut in cuts:
        outputs.append(_step(whole, inputs, low, cut))
        probes.append(_probe(whole))
        low = cut
    assert sum(len(v) for out in outputs for v in out.values()) > 0
    final = state.capture(whole)
    for at in range(len(cuts) - 1):
        first = _engine(text, **mode)
        low = -1
        for cut in cuts[: at + 1]:
            _step(first, inputs, low, cut)
            _probe(first)  # as on the original: state_low moves its caches
            low = cut
        data = state.capture(first)
        rebuilt = _engine(text, **mode)
        state.restore(rebuilt, data)
        assert state.capture(rebuilt) == data
        assert _probe(rebuilt) == probes[at]
        for k in range(at + 1, len(cuts)):
            assert _step(rebuilt, inputs, cuts[k - 1], cuts[k]) == outputs[k], (at, k)
            assert _probe(rebuilt) == probes[k]
        assert state.capture(rebuilt) == final


def _config(op: Any) -> dict[str, Any]:
    skip = {"ctx", "children", *op.STATE}
    return {k: copy.deepcopy(v) for k, v in vars(op).items() if k not in skip and not callable(v)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_what_an_operator_does_not_declare_as_state_never_changes(case: str) -> None:
    """Else a snapshot would miss it, and a rebuilt replica would differ."""
    text, make = CASES[case]
    inputs = make(random.Random(3))
    for options in ({"lineage": True}, {"fuse": False}):
        engine = _engine(text, **options)
        before = [_config(op) for op in engine.operators]
        low = -1
        for cut in _cuts(inputs):
            _step(engine, inputs, low, cut)
            low = cut
        assert [_config(op) for op in engine.operators] == before


def _snapshot_of(text: str) -> bytes:
    engine = _engine(text, lineage=True)
    _step(engine, _relational(random.Random(1)), -1, 40)
    return state.capture(engine)


def test_a_snapshot_of_another_program_or_into_a_used_engine_is_refused() -> None:
    data = _snapshot_of(RELATIONAL)
    other = RELATIONAL.replace("[Rows 3]", "[Rows 4]")
    with pytest.raises(StateFormatError, match="another program"):
        state.restore(_engine(other, lineage=True), data)
    used = _engine(RELATIONAL, lineage=True)
    used.advance(5)
    with pytest.raises(ValueError, match="not run"):
        state.restore(used, data)


@pytest.mark.parametrize(
    "forge",
    [
        lambda s: s.update(format=2),
        lambda s: s.update(time="soon"),
        lambda s: s["state"].pop(),
        lambda s: s["state"][0].append(1),
        lambda s: s["state"][0].__setitem__(0, 5),  # the scan's queue as an integer
        lambda s: s["state"][1].__setitem__(0, {}),
    ],
)
def test_a_malformed_snapshot_is_refused_and_the_engine_left_as_it_was(forge: Any) -> None:
    snapshot = decode_state(_snapshot_of(RELATIONAL))
    forge(snapshot)
    engine = _engine(RELATIONAL, lineage=True)
    fresh = state.capture(engine)
    with pytest.raises(StateFormatError):
        state.restore(engine, encode_state(snapshot))
    assert state.capture(engine) == fresh


def _partition_range(snapshot: dict[str, Any]) -> list[Any]:
    """The state (parts, heads, serial, _low) of the ``[Partition By k Rows 2
    Range 3]`` window in a decoded snapshot of RELATIONAL."""
    kinds = [kind for kind, _ in snapshot["operators"]]
    return snapshot["state"][kinds.index("PartitionRangeWindowOp")]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "forge",
    [
        lambda w: w[1].append((1, 1, 99, (7,))),  # an expiry entry without its partition
        lambda w: w[1].pop(),  # a partition that never expires
        lambda w: w[1].__setitem__(0, (1, 1)),
        lambda w: w[1].__setitem__(0, (*w[1][0][:3], [w[1][0][3]])),  # an unhashable key
        lambda w: w[1].__setitem__(0, (*w[1][0][:3], ([1],))),  # a key holding a list
        lambda w: next(iter(w[0].values())).append((1, 2)),  # a row of another width
        lambda w: next(iter(w[0].values())).append(7),
        lambda w: next(iter(w[0].values())).clear(),
    ],
)
def test_a_partition_window_state_that_breaks_its_invariants_is_refused(forge: Any) -> None:
    """Types alone do not make a state: the partition Range window indexes a
    partition by its expiry entry's key and a row by its width."""
    snapshot = decode_state(_snapshot_of(RELATIONAL))
    window = _partition_range(snapshot)
    assert window[0] and len(window[1]) == len(window[0])
    forge(window)
    engine = _engine(RELATIONAL, lineage=True)
    fresh = state.capture(engine)
    with pytest.raises(StateFormatError, match=r"\[Partition Rows 2 Range 3\]: "):
        state.restore(engine, encode_state(snapshot))
    assert state.capture(engine) == fresh


def test_values_come_back_equal_with_types_order_and_sharing() -> None:
    shared: list[Any] = [1, 2]
    acc = MinMaxAcc(largest=True)
    for v in (3.5, -1.0, 7.25):
        acc.add(v, 1)
    multiset = Multiset()
    multiset.add(("a", None, 2.0), 1, 4)
    bound = LowBound()
    bound.arrived([(1, 9, 1)])
    value = {
        "floats": [0.1, -0.0, math.inf, -math.inf, 1e308, 2.0],
        "ints": (0, -(2**70), True, False),
        "text": ["", "ünï\x00", '["@", 0]'],
        (1, "k"): deque([(1, 2, 1, None)], maxlen=3),
        "order": {"z": 1, "a": 2, 3: "m"},
        "twice": (shared, shared),
        "objects": [acc, multiset, bound],
    }
    back = decode_state(encode_state(value))
    assert back == {**value, "objects": back["objects"]}
    assert [type(x) for x in back["ints"]] == [int, int, bool, bool]
    assert list(back["order"]) == ["z", "a", 3]
    assert back[(1, "k")].maxlen == 3
    assert back["twice"][0] is back["twice"][1]
    assert math.copysign(1, back["floats"][1]) == -1
    acc2, multiset2, bound2 = back["objects"]
    assert (acc2.largest, acc2.counts, acc2.result()) == (True, acc.counts, 7.25)
    assert multiset2.counts == multiset.counts
    assert (bound2.low, bound2.credit) == (9, -1)
    assert math.isnan(decode_state(encode_state(math.nan)))


def test_what_the_codec_does_not_know_is_refused_when_encoding() -> None:
    itself: list[Any] = []
    itself.append(itself)
    for value in (object(), {1, 2}, b"bytes", lambda: 0, [1, Exception()], itself):
        with pytest.raises(TypeError):
            encode_state(value)


FORGED = [
    b"",
    b"{",
    b"\xff\xfe",
    b"{}",
    b'{"a": 1}',
    b'{"l": [], "d": []}',
    b'{"l": 1}',
    b'{"@": 0}',
    b'{"@": "0"}',
    b'{"l": [{"@": 1}]}',
    b'{"o": ["os.system", "ls"]}',
    b'{"o": []}',
    b'{"o": ["Multiset"]}',
    b'{"o": ["LowBound", 1]}',
    b'{"d": [{"l": []}, 1]}',
    b'{"d": [[{"d": []}], 1]}',
    b'{"d": [1]}',
    b'{"q": []}',
    b'{"q": [-1]}',
    b'{"q": ["3"]}',
    b'{"f": ["nope", []]}',
    b'{"o": ["Multiset", {"d": []}]}',  # read only in its flat form
    b'{"f": ["multiset"]}',
    b'{"f": ["multiset", {"l": []}]}',
    b'{"f": ["multiset", [1, 2]]}',
    b'{"f": ["multiset", [[1], "x", 1]]}',
    b'{"f": ["multiset", [[{"l": []}], 1, 1]]}',
    b'{"f": ["join synopsis", [[1], 2, [3], 1, 1]]}',
    b'{"f": ["join synopsis", [[1], -1]]}',
    b'{"f": ["join synopsis", [[1]]]}',
    b'{"f": ["join synopsis", [7, 0]]}',
    b"[" * 200_000,
    b'{"l": [' * 5_000 + b"1" + b"]}" * 5_000,
    b'{"q": [9223372036854775808]}',  # a deque's length past ssize_t (found by the test below)
]


@pytest.mark.parametrize("data", FORGED, ids=lambda d: repr(d[:20]))
def test_forged_bytes_are_refused(data: bytes) -> None:
    with pytest.raises(StateFormatError):
        decode_state(data)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_bytes_decode_to_a_state_or_a_state_format_error(data: st.DataObject) -> None:
    """Cut or flipped snapshots, and JSON of any shape with the codec's tags:
    never another exception (a peer's bytes must not crash the node)."""
    valid = _snapshot_of(RELATIONAL)
    blob = data.draw(
        st.one_of(
            st.binary(max_size=200),
            st.integers(0, len(valid)).map(lambda n: valid[:n]),
            st.tuples(st.integers(0, len(valid) - 1), st.integers(0, 255)).map(
                lambda p: valid[: p[0]] + bytes([p[1]]) + valid[p[0] + 1 :]
            ),
            st.recursive(
                st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=3)),
                lambda kids: st.one_of(
                    st.lists(kids, max_size=4),
                    st.dictionaries(
                        st.sampled_from("lqdo@x"), st.one_of(kids, st.lists(kids, max_size=4)), max_size=2
                    ),
                ),
                max_leaves=12,
            ).map(lambda tree: json.dumps(tree).encode()),
        )
    )
    with contextlib.suppress(StateFormatError):
        decode_state(blob)
