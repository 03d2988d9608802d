"""Configuration errors name file, line and field; the topology derived from
a valid configuration (semiactive/config.py, semiactive/topology.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from semiactive import config, topology
from semiactive.config import ConfigError
from semiactive.node.cql import plan
from semiactive.node.engine.engine import Engine
from semiactive.node.sections.codec import wire_size

BASE = """\
name: t
sources:
  - name: node-0
    stream: s0
stages:
  - name: stage-1
    node: node-1
    query: |
      REGISTER QUERY s1 AS
        SELECT * FROM s0 WHERE val >= 0
sinks:
  - name: sink
    input: s1
"""


def _load(tmp_path: Path, text: str, name: str = "c.yaml") -> topology.Topology:
    path = tmp_path / name
    path.write_text(text)
    return topology.resolve(config.load(path))


def _error(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    return info.value


def _line(text: str, needle: str) -> int:
    """1-based number of the only line containing ``needle``."""
    found = [n for n, line in enumerate(text.splitlines(), start=1) if needle in line]
    assert len(found) == 1, (needle, found)
    return found[0]


def _check(tmp_path: Path, text: str, needle: str, field: str, message: str) -> None:
    err = _error(tmp_path, text)
    path = str(tmp_path / "c.yaml")
    line = _line(text, needle)
    assert (err.file, err.line, err.field) == (path, line, field), str(err)
    assert message in err.message, str(err)
    assert str(err).startswith(f"{path}:{line}: {field}: " if field else f"{path}:{line}: ")


def test_the_base_config_is_valid(tmp_path: Path) -> None:
    topo = _load(tmp_path, BASE)
    assert list(topo.stages) == ["node-0", "stage-1", "sink"]


# -- errors ---------------------------------------------------------------------------------------


def test_malformed_yaml(tmp_path: Path) -> None:
    text = "name: t\nsources:\n  - name: node-0\n    stream: [s0\n  - name: x\n"
    err = _error(tmp_path, text)
    assert err.file == str(tmp_path / "c.yaml") and err.line == 5
    assert str(err).startswith(f"{tmp_path / 'c.yaml'}:5: malformed YAML: ")
    err = _error(tmp_path, "- just\n- a list\n")
    assert (err.line, err.message) == (1, "the config must be a mapping at the top level")


def test_unknown_field_nested(tmp_path: Path) -> None:
    text = BASE.replace(
        "    stream: s0\n", "    stream: s0\n    rate:\n      - {at_s: 0, tuples_per_s: 5, burst: 3}\n"
    )
    _check(tmp_path, text, "burst", "sources[0].rate[0].burst", "unknown field 'burst'")
    text = BASE.replace(
        "    node: node-1\n", "    node: node-1\n    ha:\n      mode: sas\n      secondry: n2\n"
    )
    _check(tmp_path, text, "secondry", "stages[0].ha.secondry", "unknown field 'secondry'")
    _check(tmp_path, BASE + "hearbeat_ms: 5\n", "hearbeat", "hearbeat_ms", "unknown field 'hearbeat_ms'")


def test_a_misspelt_field_is_unknown_not_the_one_meant_missing(tmp_path: Path) -> None:
    """``streem`` also leaves ``stream`` missing: the typo is the mistake."""
    text = BASE.replace("    stream: s0\n", "    streem: s0\n")
    _check(tmp_path, text, "streem", "sources[0].streem", "unknown field 'streem' (did you mean 'stream'?)")
    text = BASE.replace("    node: node-1\n", "    node: node-1\n    ha: {mode: sas, secondry: n2}\n")
    _check(tmp_path, text, "secondry", "stages[0].ha.secondry", "(did you mean 'secondary'?)")
    text = BASE + "endpoints:\n  node-1: {port: 5000, hots: x}\n"
    _check(tmp_path, text, "hots", "endpoints.node-1.hots", "unknown field 'hots' (did you mean 'host'?)")
    text = BASE.replace("    stream: s0\n", "    stream: s0\n    shema: {v: integer}\n")
    _check(tmp_path, text, "shema", "sources[0].shema", "(did you mean 'schema'?)")
    err = _error(tmp_path, BASE + "zzz: 1\n")
    assert err.message == "unknown field 'zzz'", str(err)


def test_wrong_type(tmp_path: Path) -> None:
    text = BASE.replace("    stream: s0\n", "    stream: s0\n    seed: abc\n")
    _check(tmp_path, text, "seed", "sources[0].seed", "Input should be a valid integer")
    text = BASE.replace("name: t\n", "name: t\nbatch_rows: 0\n")
    _check(tmp_path, text, "batch_rows", "batch_rows", "greater than or equal to 1")


def test_bad_enum(tmp_path: Path) -> None:
    text = BASE.replace(
        "    node: node-1\n", "    node: node-1\n    ha:\n      mode: fast\n      secondary: n2\n"
    )
    _check(
        tmp_path,
        text,
        "mode: fast",
        "stages[0].ha.mode",
        "Input should be 'none', 'as', 'ub', 'sas' or 'asas'",
    )
    text = BASE.replace("    node: node-1\n", "    node: node-1\n    ha:\n      mode: sas\n")
    _check(tmp_path, text, "ha:", "stages[0].ha", "ha mode sas needs a secondary node")


def test_rate_phases_out_of_order(tmp_path: Path) -> None:
    phases = "    rate:\n      - {at_s: 0, tuples_per_s: 100}\n      - {at_s: 10, tuples_per_s: 1000}\n"
    _load(tmp_path, BASE.replace("    stream: s0\n", "    stream: s0\n" + phases))  # in order: fine
    text = BASE.replace(
        "    stream: s0\n", "    stream: s0\n" + phases + "      - {at_s: 5, tuples_per_s: 10}\n"
    )
    _check(tmp_path, text, "rate:", "sources[0].rate", "increasing at_s order")
    text = BASE.replace("    stream: s0\n", "    stream: s0\n    rate: [{at_s: 2, tuples_per_s: 10}]\n")
    _check(tmp_path, text, "rate:", "sources[0].rate", "must start at at_s 0")


def test_missing_or_double_query(tmp_path: Path) -> None:
    no_query = BASE.replace(
        "    query: |\n      REGISTER QUERY s1 AS\n        SELECT * FROM s0 WHERE val >= 0\n", ""
    )
    _check(tmp_path, no_query, "- name: stage-1", "stages[0]", "exactly one of query, query_file and mqo")
    both = BASE.replace("    node: node-1\n", "    node: node-1\n    query_file: q.cql\n")
    _check(tmp_path, both, "- name: stage-1", "stages[0]", "exactly one of query, query_file and mqo")


def test_duplicate_node_names(tmp_path: Path) -> None:
    _check(
        tmp_path,
        BASE.replace("node: node-1", "node: node-0"),
        "node: node-0",
        "stages[0].node",
        "'node-0' is used twice",
    )
    _check(tmp_path, BASE + "spares: [sink]\n", "spares", "spares[0]", "node name 'sink' is used twice")


def test_duplicate_stream_producers(tmp_path: Path) -> None:
    twin = "  - name: stage-2\n    node: node-2\n    query: REGISTER QUERY s1 AS SELECT * FROM s0\n"
    text = BASE.replace("sinks:\n", twin + "sinks:\n")
    _check(
        tmp_path,
        text,
        "REGISTER QUERY s1 AS SELECT",
        "stages[1].query",
        "stream 's1' is produced by both stage-1 and stage-2",
    )
    # A stage whose output has a source's stream name.
    two_sources = BASE.replace("stages:\n", "  - {name: node-b, stream: other}\nstages:\n")
    text = two_sources.replace(
        "sinks:\n",
        "  - name: stage-2\n    node: node-2\n    query: REGISTER QUERY s0 AS SELECT * FROM other\nsinks:\n",
    )
    _check(
        tmp_path,
        text,
        "REGISTER QUERY s0 AS",
        "stages[1].query",
        "stream 's0' is produced by both node-0 and stage-2",
    )


def test_unknown_sink_input(tmp_path: Path) -> None:
    _check(
        tmp_path,
        BASE.replace("input: s1", "input: s9"),
        "input: s9",
        "sinks[0].input",
        "unknown stream 's9'; known: s0, s1",
    )


def test_unknown_endpoint_node(tmp_path: Path) -> None:
    text = BASE + "endpoints:\n  node-1: {port: 5001}\n  ghost: {port: 5000}\n"
    _check(tmp_path, text, "ghost", "endpoints.ghost", "endpoint for unknown node 'ghost'")
    text = BASE + "endpoints:\n  node-1: {port: 70000}\n"
    _check(tmp_path, text, "70000", "endpoints.node-1.port", "less than or equal to 65535")


def test_tuple_bytes_too_small(tmp_path: Path) -> None:
    # id and val are 8 bytes each, plus the 8-byte ts: 24.
    text = BASE.replace("    stream: s0\n", "    stream: s0\n    tuple_bytes: 23\n")
    _check(
        tmp_path,
        text,
        "tuple_bytes",
        "sources[0].tuple_bytes",
        "tuple_bytes 23 is smaller than the schema's 24 bytes",
    )
    _load(tmp_path, text.replace("tuple_bytes: 23", "tuple_bytes: 24"))


def test_cql_error_in_an_inline_block_query(tmp_path: Path) -> None:
    text = BASE.replace(
        "      REGISTER QUERY s1 AS\n        SELECT * FROM s0 WHERE val >= 0\n",
        "      -- the stage's program\n"
        "      REGISTER QUERY s1 AS\n"
        "        SELECT *\n"
        "        FROM s0 WHERE nope >= 0\n",
    )
    # The block's text starts on the line after "query: |"; the error is on
    # query line 4, column 17 ("nope" after the block's indentation is removed).
    first = _line(text, "-- the stage's program")
    assert _line(text, "nope") == first + 4 - 1
    _check(
        tmp_path,
        text,
        "nope",
        "stages[0].query",
        "unknown column 'nope'; known columns: id, val, pad (query line 4, column 17)",
    )
    syntax = BASE.replace("SELECT * FROM s0", "SELECT * FORM s0")
    _check(tmp_path, syntax, "FORM", "stages[0].query", "syntax error: unexpected 'FORM'")


def test_cql_error_in_an_inline_plain_query(tmp_path: Path) -> None:
    text = BASE.replace(
        "    query: |\n      REGISTER QUERY s1 AS\n        SELECT * FROM s0 WHERE val >= 0\n",
        '    query: "REGISTER QUERY s1 AS SELECT * FROM s0 WHERE nope >= 0"\n',
    )
    _check(
        tmp_path,
        text,
        "nope",
        "stages[0].query",
        "unknown column 'nope'; known columns: id, val, pad (query line 1, column 45)",
    )


def test_cql_error_in_a_query_file(tmp_path: Path) -> None:
    (tmp_path / "q.cql").write_text("REGISTER QUERY s1 AS\n  SELECT *\n  FROM s0 WHERE nope > 1\n")
    text = BASE.replace(
        "    query: |\n      REGISTER QUERY s1 AS\n        SELECT * FROM s0 WHERE val >= 0\n",
        "    query_file: q.cql\n",
    )
    err = _error(tmp_path, text)
    assert str(err) == f"{tmp_path / 'q.cql'}:3:17: unknown column 'nope'; known columns: id, val, pad"
    (tmp_path / "q.cql").unlink()
    _check(tmp_path, text, "query_file", "stages[0].query_file", "cannot read q.cql")


def test_a_stage_without_a_registered_query(tmp_path: Path) -> None:
    text = BASE.replace(
        "      REGISTER QUERY s1 AS\n        SELECT * FROM s0 WHERE val >= 0\n",
        "      REGISTER STREAM x (a integer)\n",
    )
    _check(tmp_path, text, "query: |", "stages[0].query", "registers no query")
    text = BASE.replace("    node: node-1\n", "    node: node-1\n    output: s7\n")
    _check(
        tmp_path,
        text,
        "output: s7",
        "stages[0].output",
        "output 's7' is not a registered query of this stage",
    )


# -- topology -------------------------------------------------------------------------------------

JOIN = """\
sources:
  - name: prices-src
    stream: prices
    schema: {sym: char(4), price: integer}
    tuple_bytes: 20
  - name: orders-src
    stream: orders
    schema: {sym: char(4), qty: integer}
stages:
  - name: report
    node: n3
    query: |
      REGISTER QUERY total AS
        ISTREAM(SELECT SUM(cost) AS spent FROM costs)
  - name: join
    node: n2
    query: |
      REGISTER QUERY costs AS
        ISTREAM(SELECT orders.sym, qty * price AS cost
                FROM orders [Now], prices [Range 1 second]
                WHERE orders.sym = prices.sym)
sinks:
  - {name: out, input: total}
  - {name: tap, input: costs}
"""


def test_edges_and_stage_order(tmp_path: Path) -> None:
    topo = _load(tmp_path, JOIN)
    # Stages compile in dependency order whatever the file's order.
    assert list(topo.stages) == ["prices-src", "orders-src", "join", "report", "out", "tap"]
    assert [(e.producer, e.consumer, e.stream, e.index) for e in topo.edges] == [
        ("orders-src", "join", "orders", 0),  # inputs in order of first use in FROM
        ("prices-src", "join", "prices", 1),
        ("join", "report", "costs", 0),
        ("report", "out", "total", 0),
        ("join", "tap", "costs", 0),
    ]
    join = topo.stages["join"]
    assert [e.id for e in join.inputs] == ["orders-src->join", "prices-src->join"]
    assert [e.id for e in join.outputs] == ["join->report", "join->tap"]
    assert join.schema is not None and join.schema.names == ("sym", "cost")
    assert topo.stages["report"].kind is plan.Kind.STREAM
    assert topo.streams == {
        "prices": "prices-src",
        "orders": "orders-src",
        "costs": "join",
        "total": "report",
    }
    assert {n: (i.role, i.stage) for n, i in topo.nodes.items()} == {
        "prices-src": ("source", "prices-src"),
        "orders-src": ("source", "orders-src"),
        "n2": ("primary", "join"),
        "n3": ("primary", "report"),
        "out": ("sink", "out"),
        "tap": ("sink", "tap"),
    }


def test_pad_column_makes_up_tuple_bytes(tmp_path: Path) -> None:
    topo = _load(tmp_path, BASE)
    schema = topo.stages["node-0"].schema
    assert schema is not None
    # Default schema id, val (integer) and tuple_bytes 44: ts 8 + 8 + 8 + pad char(20).
    assert [(c.name, str(c.type)) for c in schema.columns] == [
        ("id", "integer"),
        ("val", "integer"),
        ("pad", "char(20)"),
    ]
    assert wire_size(schema) == 44
    # The stage's SELECT * carries the pad on.
    stage_schema = topo.stages["stage-1"].schema
    assert stage_schema is not None and stage_schema.names == ("id", "val", "pad")
    # Exactly the schema's size: no pad; file sources never get one.
    join = _load(tmp_path, JOIN)
    prices = join.stages["prices-src"].schema
    assert prices is not None and prices.names == ("sym", "price")  # 8 + 4 + 8 = 20
    orders = join.stages["orders-src"].schema
    assert orders is not None and [str(c.type) for c in orders.columns] == ["char(4)", "integer", "char(24)"]
    file_source = BASE.replace("    stream: s0\n", "    stream: s0\n    kind: file\n    path: in.csv\n")
    schema = _load(tmp_path, file_source).stages["node-0"].schema
    assert schema is not None and schema.names == ("id", "val")


def test_a_file_source_path_is_relative_to_the_config(tmp_path: Path) -> None:
    file_source = BASE.replace("    stream: s0\n", "    stream: s0\n    kind: file\n    path: data/in.csv\n")
    source = _load(tmp_path, file_source).stages["node-0"].source
    assert source is not None and source.path == str(tmp_path / "data" / "in.csv")
    absolute = file_source.replace("data/in.csv", "/srv/in.csv")
    source = _load(tmp_path, absolute).stages["node-0"].source
    assert source is not None and source.path == "/srv/in.csv"
    _check(
        tmp_path,
        file_source.replace("    path: data/in.csv\n", ""),
        "- name: node-0",
        "sources[0]",
        "needs a path",
    )


def test_a_file_source_speed_may_change_at_increasing_data_offsets(tmp_path: Path) -> None:
    file_source = BASE.replace("    stream: s0\n", "    stream: s0\n    kind: file\n    path: in.csv\n")
    stepped = file_source.replace(
        "    path: in.csv\n",
        "    path: in.csv\n    speed: 2.5\n    speed_steps: [{from_s: 1200, speed: 1}]\n",
    )
    source = _load(tmp_path, stepped).stages["node-0"].source
    assert source is not None and source.speed == 2.5
    assert [(s.from_s, s.speed) for s in source.speed_steps] == [(1200.0, 1.0)]
    backwards = stepped.replace(
        "[{from_s: 1200, speed: 1}]", "[{from_s: 1200, speed: 1}, {from_s: 600, speed: 2}]"
    )
    _check(tmp_path, backwards, "speed_steps", "sources[0].speed_steps", "increasing from_s")
    _check(
        tmp_path,
        stepped.replace("from_s: 1200, speed: 1", "from_s: 1200, speed: 0"),
        "speed_steps",
        "sources[0].speed_steps[0].speed",
        "greater than 0",
    )


def test_a_cycle_across_stages_is_rejected_naming_the_stages(tmp_path: Path) -> None:
    text = """\
sources:
  - {name: node-0, stream: s0}
stages:
  - name: mix
    node: node-1
    query: |
      REGISTER QUERY x AS SELECT * FROM s0 UNION ALL SELECT * FROM y
  - name: back
    node: node-2
    query: REGISTER QUERY y AS SELECT * FROM x
sinks:
  - {name: sink, input: y}
"""
    _check(
        tmp_path, text, "query: |", "stages[0].query", "stages mix, back read each other's output in a cycle"
    )


def test_a_stage_input_that_can_be_null_is_guarded(tmp_path: Path) -> None:
    text = BASE.replace(
        "sinks:\n",
        "  - name: stage-2\n"
        "    node: node-2\n"
        "    query: REGISTER QUERY s2 AS SELECT q * 2 AS r FROM s1 WHERE q < 100\n"
        "sinks:\n",
    ).replace("SELECT * FROM s0 WHERE val >= 0", "SELECT id, val / (id % 2) AS q FROM s0")
    topo = _load(tmp_path, text)
    first = topo.stages["stage-1"].schema
    assert first is not None and [(c.name, c.nullable) for c in first.columns] == [("id", False), ("q", True)]
    program = topo.stages["stage-2"].program
    assert program is not None and program.inputs["s1"].schema.columns[1].nullable
    # The upstream stage's NULL arrives as a value: the downstream program
    # must not fail on it (q * 2 is NULL; q < 100 is false).
    engine = Engine(program, ["s2"])
    engine.push("s1", [(1, 1, 1, 0, None), (2, 2, 1, 1, 7)])
    assert engine.advance(2)["s2"] == [(2, 2, 1, 14)]


def test_defaults(tmp_path: Path) -> None:
    cfg = config.load(_write(tmp_path, BASE)).model
    assert (cfg.heartbeat_ms, cfg.timeout_ms, cfg.batch_rows, cfg.queue_rows) == (250, 500, 8192, 50_000)
    src = cfg.sources[0]
    assert (src.kind, src.tuple_bytes, src.seed, src.log, src.speed) == ("synthetic", 44, 1, True, 1.0)
    assert src.schema_ == {"id": "integer", "val": "integer"}
    assert [(p.at_s, p.tuples_per_s) for p in src.rate] == [(0.0, 1000)]
    stage = cfg.stages[0]
    assert (stage.cost_ms, stage.ha.mode, stage.ha.batch_size, stage.output) == (0.0, "none", 100, None)
    timed = config.load(_write(tmp_path, BASE + "failure_timeout_ms: 900\n")).model
    assert timed.timeout_ms == 900


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_the_example_of_the_configuration_reference_loads(tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    start = doc.index("```yaml\n") + len("```yaml\n")
    example = doc[start : doc.index("```", start)]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "prices.csv").write_text("ts,item,price\n0,apple,1.25\n")
    (tmp_path / "report.cql").write_text(
        "REGISTER QUERY totals AS\n"
        "  ISTREAM(SELECT item, SUM(qty) AS n FROM priced [Now], prices [Partition By item Rows 1]\n"
        "          WHERE id % 10 = 0 GROUP BY item)\n"
    )
    topo = _load(tmp_path, example)
    assert [e.id for e in topo.edges] == [
        "orders-src->pricing",
        "pricing->report",
        "prices-src->report",
        "report->out",
    ]
    orders = topo.stages["orders-src"].schema
    assert orders is not None and [str(c.type) for c in orders.columns] == ["integer", "integer", "char(20)"]
    prices = topo.stages["prices-src"].source
    assert prices is not None and prices.path == str(tmp_path / "data" / "prices.csv")
    assert {n: i.role for n, i in topo.nodes.items() if i.role in ("secondary", "spare")} == {
        "node-2b": "secondary",
        "node-9": "spare",
    }


ASAS = BASE.replace(
    "    node: node-1\n",
    "    node: node-1\n    ha: {mode: asas, secondary: node-9, HA}\n",
)


def test_asas_settings_with_the_papers_defaults(tmp_path: Path) -> None:
    ha = _load(tmp_path, ASAS.replace("HA", "bw_max: 30KB/s, recovery_max_ms: 80")).stages["stage-1"].config
    assert ha is not None
    settings = ha.ha
    assert (settings.bw_max, settings.recovery_max_ms, settings.priority) == (30_000, 80, "recovery")
    assert (settings.step, settings.interval_ms, settings.initial_batch_size) == (5, 10, 1)
    assert settings.tuner == "model"


@pytest.mark.parametrize(
    ("text", "bytes_per_s"),
    [("30KB/s", 30_000), ("1.5 MB/s", 1_500_000), ("1KiB/s", 1024), ("250B/s", 250), (4096, 4096)],
)
def test_bandwidths_are_read_with_their_units(text: object, bytes_per_s: float) -> None:
    assert config.parse_bytes_per_s(text) == bytes_per_s


@pytest.mark.parametrize(
    ("ha", "message"),
    [
        ("recovery_max_ms: 80", "asas needs bw_max"),
        ("bw_max: 30KB, recovery_max_ms: 80", "not a bandwidth: '30KB'"),
        ("bw_max: 0, recovery_max_ms: 80", "must be > 0"),
        ("bw_max: 30KB/s, recovery_max_ms: 0", "greater than 0"),
        ("bw_max: 30KB/s, recovery_max_ms: 80, tuner: fast", "'algorithm3' or 'model'"),
        ("bw_max: 30KB/s, recovery_max_ms: 80, interval_ms: 1", "greater than or equal to 5"),
        ("bw_max: 30KB/s, recovery_max_ms: 80, initial_batch_size: 9, max_batch_size: 8", "max_batch_size"),
    ],
)
def test_bad_asas_settings_are_located(tmp_path: Path, ha: str, message: str) -> None:
    text = ASAS.replace("HA", ha)
    error = _error(tmp_path, text)
    assert message in str(error)
    assert error.line == _line(text, "mode: asas")
    assert error.field.startswith("stages[0].ha")


def test_asas_settings_under_another_mode_are_refused(tmp_path: Path) -> None:
    text = ASAS.replace("mode: asas", "mode: sas").replace("HA", "bw_max: 30KB/s, batch_size: 50")
    assert "bw_max only apply to ha mode asas (mode is sas)" in str(_error(tmp_path, text))


def test_a_cost_schedule_must_be_in_time_order(tmp_path: Path) -> None:
    text = BASE.replace(
        "    node: node-1\n",
        "    node: node-1\n    cost_schedule: [{at_s: 10, cost_ms: 1}, {at_s: 5, cost_ms: 0.5}]\n",
    )
    assert "increasing at_s order" in str(_error(tmp_path, text))


def test_a_stage_may_declare_its_inputs_as_they_are(tmp_path: Path) -> None:
    """A stage's program may declare its inputs (so that the same file runs
    embedded); the declaration must say what the producer sends, and name a
    stream someone produces."""
    declared = BASE.replace(
        "      REGISTER QUERY s1 AS",
        "      REGISTER STREAM s0 (id integer, val integer, pad char(20))\n      REGISTER QUERY s1 AS",
    )
    assert [e.stream for e in _load(tmp_path, declared).stages["stage-1"].inputs] == ["s0"]
    wrong = declared.replace("pad char(20)", "pad char(28)")
    assert (
        "'s0' is declared as a stream (id integer, val integer, pad char(28)), but the stage input is"
        in str(_error(tmp_path, wrong))
    )
    orphan = declared.replace("REGISTER STREAM s0", "REGISTER STREAM zz").replace(
        "FROM s0 WHERE", "FROM zz WHERE"
    )
    message = str(_error(tmp_path, orphan))
    assert (
        "stages[0].query" in message
        and "declares the input 'zz'" in message
        and "no source or stage" in message
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ("snapshot_rows: -1\n", "greater than or equal to 0"),
        ("queue_rows: 1000\nsnapshot_rows: 1000\n", "snapshot_rows (1000) must be below queue_rows (1000)"),
    ],
)
def test_bad_snapshot_rows_are_refused(tmp_path: Path, settings: str, message: str) -> None:
    assert message in str(_error(tmp_path, BASE + settings))
    assert config.load(_write(tmp_path, BASE + "snapshot_rows: 999\n")).model.snapshot_rows == 999


# -- cluster check: what cluster up refuses --------------------------------------------------------

FILE_SOURCE = """\
name: replay
sources:
  - name: replay
    stream: s0
    kind: file
    path: data.csv
    schema: {val: integer}
stages:
  - name: stage-1
    node: node-1
    query: |
      REGISTER QUERY s1 AS
        SELECT * FROM s0 WHERE val >= 0
sinks:
  - name: sink
    input: s1
"""


def test_cluster_check_reads_file_sources_as_cluster_up_does(tmp_path: Path) -> None:
    """A missing ``path`` and a bad row (qty=lots) are refused by ``cluster
    up``; :func:`check_config` (``cluster check``) refuses them the same way."""
    from semiactive.launcher.check import check_config

    path = tmp_path / "c.yaml"
    path.write_text(FILE_SOURCE)
    data = tmp_path / "data.csv"
    with pytest.raises(ConfigError) as info:
        check_config(path)
    assert str(info.value) == f"{path}:6: sources[0].path: {data}: cannot open: No such file or directory"
    data.write_text("ts,val\n0,1\n5,lots\n")
    with pytest.raises(ConfigError) as info:
        check_config(path)
    assert str(info.value) == f"{path}:6: sources[0].path: {data}:3: column val: 'lots' is not integer"
    data.write_text("ts, val\n0, 1\n5, 2\n")
    assert check_config(path).startswith(f"replay: {path} is valid")


def test_a_postgres_sink_needs_its_table_and_writes_no_files(tmp_path: Path) -> None:
    pg = "    kind: postgres\n    postgres: {dsn: 'postgresql://u@127.0.0.1:5432/db', table: out}\n"
    sink = _load(tmp_path, BASE + pg).stages["sink"].sink
    assert sink is not None and sink.durable and sink.postgres is not None and sink.postgres.table == "out"
    assert not _load(tmp_path, BASE).stages["sink"].sink.durable  # type: ignore[union-attr]
    err = _error(tmp_path, BASE + "    kind: postgres\n")
    assert err.field == "sinks[0]" and "a postgres sink needs postgres: {dsn: ..., table: ...}" in err.message
    err = _error(tmp_path, BASE + "    postgres: {dsn: x, table: out}\n")
    assert "postgres: given for a sink of kind file (write kind: postgres)" in err.message
    err = _error(tmp_path, BASE + pg + "    split_by: query\n")
    assert "split_by writes files: only a file sink has it" in err.message
    err = _error(tmp_path, BASE + pg.replace("table: out", "table: 'out; drop'"))
    assert err.field == "sinks[0].postgres.table", str(err)


def test_a_nats_sink_needs_its_stream_and_subject(tmp_path: Path) -> None:
    nats = "    kind: nats\n    nats: {url: 'nats://127.0.0.1:4222', stream: OUT, subject: results.out}\n"
    sink = _load(tmp_path, BASE + nats).stages["sink"].sink
    assert sink is not None and sink.durable and sink.nats is not None and sink.nats.subject == "results.out"
    err = _error(tmp_path, BASE + "    kind: nats\n")
    assert (
        err.field == "sinks[0]"
        and "a nats sink needs nats: {url: ..., stream: ..., subject: ...}" in err.message
    )
    err = _error(tmp_path, BASE + "    nats: {url: 'nats://h:1', stream: S, subject: s}\n")
    assert "nats: given for a sink of kind file (write kind: nats)" in err.message
    err = _error(tmp_path, BASE + nats.replace("subject: results.out", "subject: 'results.>'"))
    assert err.field == "sinks[0].nats.subject", str(err)  # a wildcard is no place to publish
    err = _error(tmp_path, BASE + nats.replace("url: 'nats://127.0.0.1:4222'", "url: '127.0.0.1:4222'"))
    assert err.field == "sinks[0].nats.url", str(err)


def test_a_postgres_sink_refuses_the_partitions_of_a_stage(tmp_path: Path) -> None:
    partitioned = BASE.replace(
        "    node: node-1\n", "    partitions: 2\n    nodes: [node-1, node-2]\n    partition_by: [id]\n"
    )
    _load(tmp_path, partitioned)  # a file sink merges them
    pg = "    kind: postgres\n    postgres: {dsn: 'postgresql://u@127.0.0.1:5432/db', table: out}\n"
    _check(
        tmp_path,
        partitioned + pg,
        "input: s1",
        "sinks[0].input",
        "a postgres sink reads a stream of one producer; s1 comes from a partitioned stage",
    )


def test_a_kafka_source_needs_its_topic_and_group(tmp_path: Path) -> None:
    kafka = "    kind: kafka\n    kafka: {bootstrap: '127.0.0.1:9092', topic: readings, group: g}\n"
    base = BASE.replace("    stream: s0\n", "    stream: s0\n" + kafka)
    source = _load(tmp_path, base).config.sources[0]
    assert source.restartable and source.kafka is not None and source.kafka.dead_letters == "readings.dead"
    assert source.format == "json" and source.max_delay_ms == 0
    err = _error(tmp_path, BASE.replace("    stream: s0\n", "    stream: s0\n    kind: kafka\n"))
    assert err.field == "sources[0]" and "a kafka source needs kafka: {bootstrap: ..." in err.message
    err = _error(tmp_path, BASE.replace("    stream: s0\n", "    stream: s0\n    max_delay_ms: 10\n"))
    assert "max_delay_ms: only a broker source (kind: kafka or nats) has it" in err.message
    err = _error(tmp_path, base.replace("bootstrap: '127.0.0.1:9092'", "bootstrap: 'kafka'"))
    assert err.field == "sources[0].kafka.bootstrap", str(err)
    err = _error(tmp_path, base.replace("topic: readings", "topic: 'a b'"))
    assert err.field == "sources[0].kafka.topic", str(err)
    err = _error(tmp_path, base.replace("    kind: kafka\n", "    kind: kafka\n    max_delay_ms: -1\n"))
    assert err.field == "sources[0].max_delay_ms", str(err)
    err = _error(tmp_path, base.replace("    kind: kafka\n", "    kind: kafka\n    format: avro\n"))
    assert err.field == "sources[0].format", str(err)


def test_a_nats_source_needs_its_stream_subject_and_durable(tmp_path: Path) -> None:
    nats = "    kind: nats\n    nats: {url: 'nats://h:4222', stream: IN, subject: 'readings.>', durable: d}\n"
    base = BASE.replace("    stream: s0\n", "    stream: s0\n" + nats)
    source = _load(tmp_path, base).config.sources[0]
    assert source.restartable and source.nats is not None and source.nats.dead_letters == "d.dead"
    err = _error(tmp_path, BASE.replace("    stream: s0\n", "    stream: s0\n    kind: nats\n"))
    assert "a nats source needs nats: {url: ..., stream: ..., subject: ..., durable: ...}" in err.message
    err = _error(tmp_path, base.replace("subject: 'readings.>'", "subject: 'readings.>.x'"))
    assert err.field == "sources[0].nats.subject", str(err)  # > only at the end
    err = _error(tmp_path, base.replace("durable: d", "durable: 'a.b'"))
    assert err.field == "sources[0].nats.durable", str(err)
    assert _load(tmp_path, base.replace("'readings.>'", "'readings.*.t'")).config.sources[0].nats is not None


def test_a_kafka_sink_needs_its_topic(tmp_path: Path) -> None:
    kafka = "    kind: kafka\n    kafka: {bootstrap: '127.0.0.1:9092', topic: results}\n"
    sink = _load(tmp_path, BASE + kafka).stages["sink"].sink
    assert sink is not None and sink.durable and sink.kafka is not None and sink.kafka.topic == "results"
    err = _error(tmp_path, BASE + "    kind: kafka\n")
    assert err.field == "sinks[0]" and "a kafka sink needs kafka: {bootstrap: ..., topic: ...}" in err.message
    err = _error(tmp_path, BASE + "    kafka: {bootstrap: 'h:1', topic: t}\n")
    assert "kafka: given for a sink of kind file (write kind: kafka)" in err.message


def test_a_source_or_a_durable_sink_may_have_a_standby(tmp_path: Path) -> None:
    table = "    kind: postgres\n    postgres: {dsn: 'postgresql://u@127.0.0.1:5432/d', table: t}\n"
    text = BASE.replace("    stream: s0\n", "    stream: s0\n    ha: {secondary: node-0b}\n")
    topo = _load(tmp_path, text + table + "    ha: {secondary: sink-b}\n")
    assert topo.stages["node-0"].replicas == ["node-0", "node-0b"]
    assert topo.stages["sink"].replicas == ["sink", "sink-b"]
    # Both members are the source (the sink): the serving lock decides which serves.
    assert (topo.nodes["node-0b"].role, topo.nodes["node-0b"].stage) == (topology.NodeRole.SOURCE, "node-0")
    assert (topo.nodes["sink-b"].role, topo.nodes["sink-b"].stage) == (topology.NodeRole.SINK, "sink")
    ingest = BASE.replace("    stream: s0\n", "    stream: s0\n    kind: ingest\n    ha: {secondary: b}\n")
    err = _error(tmp_path, ingest)
    assert err.field == "sources[0]", str(err)
    assert "a source of kind ingest cannot have a standby" in err.message, str(err)
    err = _error(tmp_path, BASE + "    ha: {secondary: sink-b}\n")
    assert err.field == "sinks[0]" and "a file sink cannot have a standby" in err.message, str(err)
    err = _error(tmp_path, BASE.replace("    stream: s0\n", "    stream: s0\n    ha: {secondary: node-0}\n"))
    assert "ha.secondary names the source itself" in err.message, str(err)
    err = _error(tmp_path, BASE.replace("    stream: s0\n", "    stream: s0\n    ha: {secondary: node-1}\n"))
    assert err.field == "stages[0].node" and "node name 'node-1' is used twice" in err.message, str(err)
    err = _error(tmp_path, BASE.replace("    stream: s0\n", "    stream: s0\n    ha: {mode: sas}\n"))
    assert err.field == "sources[0].ha.mode" and "unknown field 'mode'" in err.message, str(err)
