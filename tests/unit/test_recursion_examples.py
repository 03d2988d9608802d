"""The recursive CQL paper's example files, ``semiactive query`` on them, and recursion in
the distributed runtime (a loop inside one stage; none across stages)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from semiactive import config, topology
from semiactive.cli import main
from semiactive.config import ConfigError
from semiactive.embedded import query as embedded
from semiactive.node.cql import compile_program, explain
from semiactive.node.cql.examples import FILES, fig7
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine
from semiactive.node.sections.operator import OperatorSection
from tests.processes import ROOT, chain_config, write_config

EXAMPLES = ROOT / "examples"
TRADING_SETS = ["trading-distinct", "trading-tie"]


@pytest.mark.parametrize("name", sorted(FILES))
def test_example_files_are_the_generated_texts(name: str) -> None:
    # Rewrite them with: python -m semiactive.node.cql.examples examples
    assert (EXAMPLES / name).read_text() == FILES[name]
    compile_program(FILES[name])


@pytest.mark.parametrize("data", TRADING_SETS)
def test_trading_example_gives_the_expected_orders_and_money(data: str) -> None:
    folder = EXAMPLES / "data" / data
    streams = [f"{p.stem}={p}" for p in sorted(folder.glob("*.csv"))]
    assert len(streams) == 3
    for query in ("buy_event", "resource_stream"):
        out = io.StringIO()
        assert (
            embedded.run(
                str(EXAMPLES / "trading.cql"), streams, output=query, executor="dts", run_limit=100, out=out
            )
            == 0
        )
        # Worked out by hand in tests/unit/test_recursion.py.
        assert out.getvalue() == (folder / f"expected.{query}.jsonl").read_text()


def test_the_heartbeat_executor_refuses_the_loop_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    folder = EXAMPLES / "data" / "trading-distinct"
    streams = [arg for p in sorted(folder.glob("*.csv")) for arg in ("--stream", f"{p.stem}={p}")]
    assert main(["query", "run", str(EXAMPLES / "trading.cql"), *streams, "--executor", "hb"]) == 2
    assert capsys.readouterr().err == (
        "semiactive: --executor hb: the heartbeat executor runs non-recursive programs only "
        "(cycles stall it); use DTS\n"
    )


def test_query_check_reports_the_loop_and_monotonicity(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "check", str(EXAMPLES / "trading.cql")]) == 0
    out = capsys.readouterr().out
    assert "query resource: relation (val integer)\n  monotone: no (Window [Rows 1])" in out
    assert "query buy_event: stream (id integer, num integer, price integer)\n  monotone: yes" in out
    assert (
        "cycle buy_event -> resource_stream -> resource -> buy_event: delays: <Now> in resource_stream; "
        "non-monotone operators: Window [Rows 1] in resource" in out
    )


@pytest.mark.parametrize("n", [1, 2])
def test_fig7_files_run_as_their_header_says(
    n: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "input.csv"
    data.write_text("ts,id,val\n" + "".join(f"{i // 4},{i % 4},{i // 4 + 1}\n" for i in range(24)))
    recursive = str(EXAMPLES / f"fig7-{n}.cql")
    # Record the fed-back series (all_avg_delay is the last query) ...
    series = {}
    for name, output in [("all", "all_avg_delay"), *((f"avg{i}", f"avg_delay_{i}") for i in range(n))]:
        assert main(["query", "run", recursive, "--stream", f"input={data}", "--output", output]) == 0
        series[name] = tmp_path / f"{name}.jsonl"
        series[name].write_text(capsys.readouterr().out)
    assert len(series["all"].read_text().splitlines()) == 48  # 2 per input tuple
    # ... and replay them into the opened form, on DTS and on HB.
    streams = ["--stream", f"input={data}", "--stream", f"dummy_all={series['all']}"]
    for i in range(n):
        streams += ["--stream", f"dummy_{i}={series[f'avg{i}']}"]
    for executor in ("dts", "hb"):
        opened = str(EXAMPLES / f"fig7-{n}-open.cql")
        assert main(["query", "run", opened, *streams, "--executor", executor]) == 0
        assert capsys.readouterr().out == series["all"].read_text()


# -- the distributed runtime ---------------------------------------------------------------

LOOP_STAGE = (
    fig7(1)
    .replace("REGISTER STREAM input (id integer, val integer)\n", "")
    .replace("SELECT * FROM input[Now]", "SELECT id, val FROM s0[Now]")
)


def test_a_loop_inside_one_stage_is_accepted_and_runs_as_in_process(tmp_path: Path) -> None:
    cfg = chain_config([LOOP_STAGE.replace("all_avg_delay", "s1")])
    topo = topology.resolve(config.load(write_config(tmp_path / "c.yaml", cfg)))
    stage = topo.stages["stage-1"]
    assert stage.program is not None and stage.output == "s1"
    rows = [(i // 4, i + 1, 1, i % 4, i // 4 + 1, "pad") for i in range(80)]  # s0 has a pad column
    whole = Engine(stage.program, ["s1"])
    whole.push("s0", rows)
    expected = whole.advance(30)["s1"]
    # A stage's operator section gets its input in pieces, with lineage
    # tracked (as an HA primary does); the loop's output is the same.
    section = OperatorSection(stage.program, "s1", lineage=True)
    got: list[Element] = []
    for lo in range(0, 80, 12):
        piece = rows[lo : lo + 12]
        got += section.run({"s0": piece}, piece[-1][0])
    got += section.run({}, 30)
    assert [(e[0], *e[3:]) for e in got] == [(e[0], *e[3:]) for e in expected]
    assert section.engine.state_low() is not None


def test_a_loop_across_stages_is_rejected_naming_the_stages(tmp_path: Path) -> None:
    cfg = chain_config(
        [
            "REGISTER QUERY s1 AS SELECT id, val FROM s0 UNION ALL SELECT id, val FROM s2",
            "REGISTER QUERY s2 AS ISTREAM(SELECT id, val FROM s1 [Now])<Now>",
        ]
    )
    with pytest.raises(ConfigError) as info:
        topology.resolve(config.load(write_config(tmp_path / "c.yaml", cfg)))
    message = str(info.value)
    assert "stages stage-1, stage-2 read each other's output in a cycle" in message
    assert "a cycle must stay inside one stage" in message
    # The same queries in one stage are a valid recursive program.
    compile_program("REGISTER STREAM s0 (id integer, val integer)\n" + "\n".join(cfg_queries(cfg)))


def cfg_queries(cfg: dict[str, Any]) -> list[str]:
    return [stage["query"] for stage in cfg["stages"]]


def test_explain_of_the_loop_stage_lists_both_loops() -> None:
    text = explain(compile_program("REGISTER STREAM s0 (id integer, val integer)\n" + LOOP_STAGE))
    assert text.count("\ncycle ") == 2
