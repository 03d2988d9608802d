"""A GROUP BY over a sliding range window, fused pane by pane, is the
unfused window and aggregate element for element (values, lineage, order),
holds state from the same lineage on, and survives a snapshot."""

from __future__ import annotations

import random
from typing import Any

import pytest

from semiactive.node.cql import compile_program
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine
from semiactive.node.engine.operators.aggregate import AggregateOp
from semiactive.node.engine.operators.pane_aggregate import PaneAggregateOp
from semiactive.node.engine.state import capture, restore

S = "REGISTER STREAM S (k integer, b integer, f float)\n"

FUSED = [
    "SELECT k, SUM(b) AS s, COUNT(*) AS n, COUNT(b) AS c, AVG(b) AS m FROM S [Range 30 Slide 10] GROUP BY k",
    "SELECT SUM(b) AS s FROM S [Range 7 Slide 3]",
    # 10 / b is NULL where b = 0: SUM and AVG skip it, COUNT(x) does not count it.
    "SELECT k, SUM(10 / b) AS s, AVG(10 / b) AS m, COUNT(10 / b) AS c FROM S [Range 20 Slide 5] GROUP BY k",
    "SELECT k, COUNT(*) AS n FROM S [Range 5 Slide 10] GROUP BY k",
    "SELECT k, b, COUNT(f) AS n FROM S [Range 1 minute Slide 20 ms] GROUP BY k, b HAVING COUNT(*) > 1",
    "SELECT k * 2 AS k2, SUM(b + k) AS s FROM S [Range 12 Slide 4] GROUP BY k * 2",
]

NOT_FUSED = [
    "SELECT k, MAX(b) AS hi FROM S [Range 30 Slide 10] GROUP BY k",
    "SELECT k, SUM(f) AS s FROM S [Range 30 Slide 10] GROUP BY k",
    "SELECT k, COUNT(*) AS n FROM S [Range 30] GROUP BY k",
    # A WHERE between the window and the GROUP BY keeps the two operators.
    "SELECT k, COUNT(*) AS n FROM S [Range 30 Slide 10] WHERE b > 0 GROUP BY k",
]


def _rows(seed: int, n: int = 1500) -> list[Element]:
    rnd = random.Random(seed)
    t = 0
    out: list[Element] = []
    for i in range(1, n + 1):
        t += rnd.choice([0, 0, 1, 2, 5, 13])
        b = rnd.choice([0, 1, 2, -7, 100, 3])
        out.append((t, i, 1, rnd.randrange(5), b, rnd.choice([None, 0.1, 2.5])))
    return out


def _engine(query: str, fuse: bool) -> Engine:
    return Engine(compile_program(S + "REGISTER QUERY q AS " + query), ["q"], fuse=fuse)


def _run(engine: Engine, rows: list[Element], pieces: int, rnd: random.Random) -> list[Element]:
    """Feed ``rows`` in ``pieces`` time-ordered parts, advancing to a random
    watermark inside each gap (timers fire between arrivals)."""
    out: list[Element] = []
    times = sorted({e[0] for e in rows})
    cuts = sorted(rnd.sample(times[1:], pieces - 1)) if pieces > 1 else []
    lower = None
    for cut in [*cuts, None]:
        engine.push(
            "S", [e for e in rows if (lower is None or e[0] >= lower) and (cut is None or e[0] < cut)]
        )
        out += engine.advance((cut - 1) if cut is not None else rows[-1][0] + 200)["q"]
        lower = cut
    return out


@pytest.mark.parametrize("query", FUSED)
def test_fused_output_is_the_unfused_element_for_element(query: str) -> None:
    for seed in range(4):
        rows = _rows(seed)
        fused = _engine(query, fuse=True)
        assert any(isinstance(op, PaneAggregateOp) for op in fused.operators)
        expected = _run(_engine(query, fuse=False), rows, 1, random.Random(seed))
        assert expected, "the query produced nothing: the comparison would prove nothing"
        assert _run(fused, rows, 1 + seed * 7, random.Random(seed)) == expected


def test_panes_off_keeps_the_other_rewrites_and_the_result() -> None:
    """``panes=False`` (a benchmark's baseline) drops only the pane aggregate."""
    query = FUSED[0]
    rows = _rows(5)
    engine = Engine(compile_program(S + "REGISTER QUERY q AS " + query), ["q"], panes=False)
    assert not any(isinstance(op, PaneAggregateOp) for op in engine.operators)
    assert _run(engine, rows, 3, random.Random(5)) == _run(
        _engine(query, fuse=True), rows, 1, random.Random(5)
    )


@pytest.mark.parametrize("query", NOT_FUSED)
def test_min_max_float_sums_and_unslid_windows_are_not_fused(query: str) -> None:
    engine = _engine(query, fuse=True)
    assert not any(isinstance(op, PaneAggregateOp) for op in engine.operators)
    assert any(isinstance(op, AggregateOp) for op in engine.operators)


def test_state_low_is_the_oldest_lineage_still_in_a_pane() -> None:
    """Range >= slide (every tuple becomes visible): the fused operator holds
    state from exactly the lineage the unfused window holds."""
    query = FUSED[0]
    rows = _rows(7)
    fused, unfused = _engine(query, fuse=True), _engine(query, fuse=False)
    seen: list[Any] = []
    for start in range(0, rows[-1][0] + 1, 40):
        part = [e for e in rows if start <= e[0] < start + 40]
        for engine in (fused, unfused):
            engine.push("S", part)
            engine.advance(start + 39)
        assert fused.state_low() == unfused.state_low()
        seen.append(fused.state_low())
    assert len(set(seen)) > 5, "the low never moved: the test would prove nothing"


def test_a_snapshot_taken_between_boundaries_resumes_exactly() -> None:
    query = FUSED[0]
    rows = _rows(3)
    half = len(rows) // 2
    cut = rows[half][0]
    first = [e for e in rows if e[0] < cut]
    rest = [e for e in rows if e[0] >= cut]
    reference = _engine(query, fuse=True)
    reference.push("S", first)
    reference.advance(cut - 1)
    data = capture(reference)
    reference.push("S", rest)
    expected = reference.advance(rows[-1][0] + 200)["q"]

    resumed = _engine(query, fuse=True)
    restore(resumed, data)
    resumed.push("S", rest)
    assert resumed.advance(rows[-1][0] + 200)["q"] == expected
    assert expected
