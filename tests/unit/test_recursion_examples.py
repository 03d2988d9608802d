"""The seed 001 example files, ``semiactive query`` on them, and recursion in
the distributed runtime (a loop inside one stage; none across stages)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from node.cql import compile_program, explain
from node.cql.examples import FILES, fig7
from node.engine.engine import Engine
from node.sections.operator import OperatorSection
from semiactive import config, embedded, topology
from semiactive.cli import main
from semiactive.config import ConfigError
from tests.processes import ROOT, chain_config, write_config

EXAMPLES = ROOT / "examples"
TRADING_SETS = ["trading-distinct", "trading-tie"]


@pytest.mark.parametrize("name", sorted(FILES))
def test_example_files_are_the_generated_texts(name: str) -> None:
    # Rewrite them with: python -m node.cql.examples examples
    assert (EXAMPLES / name).read_text() == FILES[name]
    compile_program(FILES[name])


@pytest.mark.parametrize("data", TRADING_SETS)
def test_trading_example_gives_the_expected_orders_and_money(data: str) -> None:
    folder = EXAMPLES / "data" / data
    streams = [f"{p.stem}={p}" for p in sorted(folder.glob("*.csv"))]
    assert len(streams) == 3
    for query in ("buy_event", "resource_stream"):
        out = io.StringIO()
        assert embedded.run(str(EXAMPLES / "trading.cql"), streams, query, "dts", 100, out=out) == 0
        # Worked out by hand in tests/unit/test_recursion.py.
        assert out.getvalue() == (folder / f"expected.{query}.jsonl").read_text()


def test_query_check_reports_the_loop_and_monotonicity(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "check", str(EXAMPLES / "trading.cql")]) == 0
    out = capsys.readouterr().out
    assert "query resource: relation (val integer)\n  monotone: no (Window [Rows 1])" in out
    assert "query buy_event: stream (id integer, num integer, price integer)\n  monotone: yes" in out
    assert (
        "cycle buy_event -> resource_stream -> resource -> buy_event: delays: <Now> in resource_stream; "
        "non-monotone operators: Window [Rows 1] in resource" in out
    )


def _csv(path: Path, header: str, rows: list[tuple[Any, ...]]) -> str:
    path.write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return str(path)


def _jsonl_rows(text: str) -> list[tuple[Any, ...]]:
    import json

    return [(r["ts"], r["id"], r["val"]) for r in map(json.loads, text.splitlines())]


@pytest.mark.parametrize("n", [1, 2])
def test_fig7_files_run_from_the_command_line(
    n: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _csv(tmp_path / "input.csv", "ts,id,val", [(i // 4, i % 4, i // 4 + 1) for i in range(24)])
    series: dict[str, list[tuple[Any, ...]]] = {}
    for name in ["all_avg_delay", *(f"avg_delay_{i}" for i in range(n))]:
        assert (
            main(
                [
                    "query",
                    "run",
                    str(EXAMPLES / f"fig7-{n}.cql"),
                    "--stream",
                    f"input={data}",
                    "--output",
                    name,
                ]
            )
            == 0
        )
        series[name] = _jsonl_rows(capsys.readouterr().out)
    # The opened form fed the fed-back series computes the same, on DTS and HB.
    streams = ["--stream", f"input={data}"]
    streams += ["--stream", f"dummy_all={_csv(tmp_path / 'all.csv', 'ts,id,val', series['all_avg_delay'])}"]
    for i in range(n):
        path = _csv(tmp_path / f"avg{i}.csv", "ts,id,val", series[f"avg_delay_{i}"])
        streams += ["--stream", f"dummy_{i}={path}"]
    for executor in ("dts", "hb"):
        args = ["query", "run", str(EXAMPLES / f"fig7-{n}-open.cql"), *streams, "--executor", executor]
        assert main(args) == 0
        opened = _jsonl_rows(capsys.readouterr().out)
        assert opened == series["all_avg_delay"]


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
    got = []
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
