"""An MQO stage in a configuration: what it compiles to, and errors that
name the file, line and field (semiactive/config.py, semiactive/topology.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from semiactive import config, topology
from semiactive.config import ConfigError
from semiactive.node.cql import plan

BASE = """\
name: m
sources:
  - {name: quotes, stream: Quote, schema: {name: integer, price: integer}}
  - {name: news, stream: News, schema: {company: integer, title: char(8)}}
  - {name: registry, stream: registrations, kind: registry}
stages:
  - name: shared
    node: node-1
    output: results
    mqo:
      queries: |
        CREATE a MASTER C1 WINDOW SIZE 3 SELECT * FROM Quote, News WHERE Quote.name = News.company
        CREATE b MASTER Clock_12 SELECT * FROM Quote, News WHERE Quote.name = News.company
      clocks: [C1=1000+500]
      registry: registrations
sinks:
  - {name: sink, input: results, split_by: query}
"""


def _load(tmp_path: Path, text: str) -> topology.Topology:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return topology.resolve(config.load(path))


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    message = str(info.value)
    assert message.startswith(str(tmp_path / "c.yaml")), message
    assert "\n" not in message
    return message


def test_an_mqo_stage_compiles(tmp_path: Path) -> None:
    topo = _load(tmp_path, BASE)
    stage = topo.stages["shared"]
    assert stage.mqo is not None and stage.program is None
    assert [q.name for q in stage.mqo.queries] == ["a", "b"]
    assert set(stage.mqo.clocks) == {"C1", "Clock_12"}
    assert stage.mqo.inputs == ["News", "Quote", "registrations"]
    assert [e.stream for e in stage.inputs] == ["News", "Quote", "registrations"]
    assert stage.schema is not None
    names = stage.schema.names  # synthetic sources also have their pad column
    assert names[:4] == ("query", "Quote.ts", "Quote.name", "Quote.price")
    assert names[names.index("News.ts") :][:3] == ("News.ts", "News.company", "News.title")
    assert stage.schema.columns[0].type == plan.char(64)
    assert stage.schema.columns[names.index("News.title")].type == plan.char(8)
    assert topo.stages["registry"].schema is not None
    assert topo.stages["registry"].schema.names == ("action", "name", "text")


CHANGES = [
    (
        ("WHERE Quote.name = News.company\n      clocks", "WHERE Quote.nam = News.company\n      clocks"),
        "nam",
    ),
    (
        (
            "Quote, News WHERE Quote.name = News.company\n        CREATE b",
            "Quote, Nope WHERE Quote.name = 1\n        CREATE b",
        ),
        "Nope",
    ),
    (("MASTER C1 WINDOW", "MASTER C2 WINDOW"), "C2"),
    (("MASTER Clock_12 SELECT *", "MASTER Clock_12 SELECT Quote.name"), "select different columns"),
    (("[C1=1000+500]", "[C1=1000+1500]"), "PHASE"),
    (("registry: registrations", "registry: Quote"), "no stream of a registry source"),
    (("    output: results\n", ""), "needs output"),
    (("CREATE a MASTER", "CREATE a MASTR"), "expected 'MASTER'"),
    (("split_by: query", "split_by: nope"), "no text column 'nope'"),
    (("kind: registry}", "kind: registry, schema: {x: integer}}"), "fixed schema"),
]


@pytest.mark.parametrize(("change", "needle"), CHANGES)
def test_located_errors(tmp_path: Path, change: tuple[str, str], needle: str) -> None:
    old, new = change
    assert old in BASE, old
    message = _error(tmp_path, BASE.replace(old, new))
    assert needle in message, message


DECLARED = """\
REGISTER STREAM Quote (name integer);
REGISTER STREAM News (company integer, title char(8));
REGISTER CLOCK C2 PERIOD 2 * second PHASE 1 * second;
CREATE a MASTER C2 WINDOW SIZE 3 SELECT * FROM Quote, News WHERE Quote.name = News.company
"""


def _with_file(tmp_path: Path, queries: str, clocks: str = "[C1=1000+500]") -> str:
    (tmp_path / "q.cql").write_text(queries)
    start = BASE.index("      queries: |")
    end = BASE.index("      registry:")
    return BASE[:start] + f"      queries_file: q.cql\n      clocks: {clocks}\n" + BASE[end:]


def test_a_queries_file_declares_streams_and_clocks(tmp_path: Path) -> None:
    """Declared columns are the cluster's streams' (a subset, same types);
    declared clocks join the stage's clocks."""
    topo = _load(tmp_path, _with_file(tmp_path, DECLARED))
    mqo = topo.stages["shared"].mqo
    assert mqo is not None and set(mqo.clocks) == {"C1", "C2"} and mqo.clocks["C2"].phase == 1000
    assert _load(tmp_path, _with_file(tmp_path, DECLARED, "[C2=2000+1000]")).stages["shared"].mqo is not None
    path = tmp_path / "q.cql"
    for old, new, needle in (
        (
            "title char(8)",
            "title char(9)",
            f"{path}:2:17: News.title is declared char(9); the stream's is char(8)",
        ),
        (
            "title char(8)",
            "headline char(8)",
            f"{path}:2:17: News.headline: the stream News has no column 'headline'",
        ),
        ("STREAM Quote", "STREAM Quotes", f"{path}:1:17: Quotes: no such stream in this cluster"),
    ):
        with pytest.raises(ConfigError) as info:
            _load(tmp_path, _with_file(tmp_path, DECLARED.replace(old, new)))
        assert str(info.value).startswith(needle), str(info.value)
    message = _error(tmp_path, _with_file(tmp_path, DECLARED, "[C2=2000]"))
    assert "stages[0].mqo.clocks: clock C2 is declared in the queries (REGISTER CLOCK)" in message, message


def test_a_query_error_points_into_the_yaml(tmp_path: Path) -> None:
    text = BASE.replace("CREATE b MASTER Clock_12 SELECT", "CREATE b MASTER Clock_12 SELEC")
    message = _error(tmp_path, text)
    line = next(n for n, s in enumerate(text.splitlines(), 1) if "SELEC *" in s)
    assert f"c.yaml:{line}:" in message or "queries line 2" in message, message
