"""The window-bound setting (node/cql/bounds.py, issue 16): ``[Range T]``
closed (CQL's, the default: a tuple at ts stays until ts + T + 1) or
half-open (Stanford STREAM's: until ts + T), on both sides of the
boundary, with and without a slide, on every executor; what ``query check``
shows; the cluster setting with its errors; the SQLite oracle agrees."""

from __future__ import annotations

from pathlib import Path

import pytest

from semiactive import config, topology
from semiactive.embedded import query as embedded
from semiactive.node.cql import compile_program, explain
from semiactive.node.cql.bounds import WindowBounds
from semiactive.node.engine.engine import Engine
from semiactive.oracle.diff import compare, element_timeline
from semiactive.oracle.sql_oracle import Feed, evaluate

PROGRAM = "REGISTER STREAM S (v integer)\nREGISTER QUERY q AS DSTREAM(SELECT * FROM S {window})\n"
ROW = [(0, 1, 1, 7)]  # one tuple at ts 0


def _leaves(window: str, bounds: WindowBounds, executor: str) -> int:
    """The instant the tuple leaves the window (DSTREAM's row)."""
    program = compile_program(PROGRAM.format(window=window), window_bounds=bounds)
    if executor == "interpreted":
        engine = Engine(program, ["q"], compiled=False)
        engine.push("S", ROW)
        [row] = engine.advance(100_000)["q"]
    else:
        [row] = embedded.execute(program, {"S": ROW}, executor=executor, end_watermark=100_000)
    return int(row[0])


@pytest.mark.parametrize("executor", ["dts", "interpreted", "hb"])
def test_a_tuple_leaves_a_range_window_at_t_plus_1_closed_and_at_t_half_open(executor: str) -> None:
    # Present at 29,999 under both; at 30,000 only when closed; at 30,001 under neither.
    assert _leaves("[Range 30 seconds]", "closed", executor) == 30_001
    assert _leaves("[Range 30 seconds]", "half-open", executor) == 30_000


@pytest.mark.parametrize("executor", ["dts", "interpreted", "hb"])
def test_a_sliding_window_takes_the_same_bound(executor: str) -> None:
    # At a slide boundary b the window holds b - 10 <= ts (closed) or b - 10 < ts:
    # the tuple at 0 is still in at b = 10 only when closed.
    assert _leaves("[Range 10 Slide 5]", "closed", executor) == 15
    assert _leaves("[Range 10 Slide 5]", "half-open", executor) == 10


@pytest.mark.parametrize("executor", ["dts", "interpreted", "hb"])
def test_a_partition_window_with_a_range_takes_the_same_bound(executor: str) -> None:
    window = "[Partition By v Rows 2 Range 30 seconds]"
    assert _leaves(window, "closed", executor) == 30_001
    assert _leaves(window, "half-open", executor) == 30_000


def test_now_and_unbounded_windows_do_not_change() -> None:
    for bounds in ("closed", "half-open"):
        assert _leaves("[Now]", bounds, "dts") == 1  # type: ignore[arg-type]


def test_query_check_says_which_bounds() -> None:
    text = PROGRAM.format(window="[Range 30 seconds]")
    assert "[Range 30 seconds]" in explain(compile_program(text))
    assert "[Range 30 seconds, half-open]" in explain(compile_program(text, window_bounds="half-open"))
    text = PROGRAM.format(window="[Partition By v Rows 2 Range 30 seconds]")
    assert "[Partition By v Rows 2 Range 30 seconds]" in explain(compile_program(text))
    half_open = explain(compile_program(text, window_bounds="half-open"))
    assert "[Partition By v Rows 2 Range 30 seconds, half-open]" in half_open


def test_the_cluster_setting_compiles_every_stage_and_refuses_other_values(tmp_path: Path) -> None:
    base = (
        "sources:\n  - {name: src, stream: S, schema: {v: integer}}\n"
        "stages:\n  - name: st\n    node: n1\n    query: |\n"
        "      REGISTER QUERY q AS DSTREAM(SELECT v FROM S [Range 5 seconds])\n"
        "sinks:\n  - {name: sink, input: q}\n"
    )
    path = tmp_path / "c.yaml"
    path.write_text("window_bounds: half-open\n" + base)
    topo = topology.resolve(config.load(path))
    program = topo.stages["st"].program
    assert program is not None and "half-open" in explain(program)
    path.write_text("window_bounds: open\n" + base)
    with pytest.raises(config.ConfigError) as caught:
        config.load(path)
    assert "c.yaml:1" in str(caught.value) and "window_bounds" in str(caught.value)


@pytest.mark.parametrize(
    "window", ["[Range 3]", "[Range 4 Slide 3]", "[Range 1]", "[Partition By k Rows 2 Range 3]"]
)
def test_the_oracle_agrees_under_half_open_bounds(window: str) -> None:
    text = (
        "REGISTER STREAM S (k integer, v integer)\n"
        f"REGISTER QUERY q AS RSTREAM(SELECT k, SUM(v) AS t FROM S {window} GROUP BY k)\n"
    )
    rows = [(t, t % 2, t) for t in (0, 1, 1, 2, 3, 4, 6, 7, 7, 9, 12)]
    program = compile_program(text, window_bounds="half-open")
    engine = Engine(program, ["q"])
    engine.push("S", [(t, i + 1, 1, k, v) for i, (t, k, v) in enumerate(rows)])
    out = engine.advance(20)["q"]
    oracle = evaluate(text, {"S": Feed(rows)}, 20, window_bounds="half-open")
    result = compare(oracle.changes, element_timeline(out))
    assert result.identical, result.describe()
    closed = Engine(compile_program(text), ["q"])
    closed.push("S", [(t, i + 1, 1, k, v) for i, (t, k, v) in enumerate(rows)])
    assert closed.advance(20)["q"] != out  # the setting changes this result
