"""Every example in examples/ works as documented.

A CQL example ``examples/<name>.cql`` with a data set ``examples/data/<name>/``
(one ``<input>.csv`` or ``<input>.jsonl`` per registered input) is run like
``semiactive query run`` does, and its output must equal
``expected.jsonl`` (the last query) and ``expected.<query>.jsonl`` (that
query), which were worked out by hand. Cluster configurations must load.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from semiactive import config, topology
from semiactive.embedded import query as embedded
from semiactive.node.cql import compile_program
from tests.processes import ROOT

EXAMPLES = ROOT / "examples"
DATA = EXAMPLES / "data"
WITH_DATA = sorted(p for p in EXAMPLES.glob("*.cql") if (DATA / p.stem).is_dir())


def _inputs(name: str) -> dict[str, Path]:
    return {
        p.stem: p
        for p in sorted((DATA / name).iterdir())
        if p.suffix in (".csv", ".jsonl") and not p.name.startswith("expected")
    }


def _expected(name: str) -> dict[str | None, Path]:
    """Query name (None: the default, last query) -> expected output."""
    out: dict[str | None, Path] = {}
    for p in sorted((DATA / name).glob("expected*.jsonl")):
        parts = p.name.split(".")
        out[None if len(parts) == 2 else ".".join(parts[1:-1])] = p
    return out


def test_the_documented_examples_are_there() -> None:
    names = {p.stem for p in WITH_DATA}
    assert {"sensor_average", "order_prices", "stream_operators", "unit_prices"} <= names


@pytest.mark.parametrize("example", WITH_DATA, ids=lambda p: p.stem)
def test_example_output_is_the_expected_one(example: Path) -> None:
    name = example.stem
    program = embedded.load_program(str(example))
    inputs = _inputs(name)
    assert set(inputs) == set(program.inputs), f"data/{name} must have one file per input"
    expected = _expected(name)
    assert None in expected, f"examples/data/{name}/expected.jsonl is missing"
    text = example.read_text()
    for path in inputs.values():
        # The header comment shows the command line with this data set.
        assert str(path.relative_to(ROOT)) in text, f"{example.name} does not mention {path.name}"
    streams = [f"{stream}={path}" for stream, path in inputs.items()]
    for query, path in expected.items():
        out = io.StringIO()
        assert embedded.run(str(example), streams, output=query, executor="dts", run_limit=100, out=out) == 0
        assert out.getvalue() == path.read_text(), f"{example.name} --output {query or program.last_query}"
        # The heartbeat executor agrees.
        hb = io.StringIO()
        embedded.run(str(example), streams, output=query, executor="hb", run_limit=3, out=hb)
        assert hb.getvalue() == out.getvalue()


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_cluster_configs_load(path: Path) -> None:
    topo = topology.resolve(config.load(path))
    assert any(s.role == "sink" for s in topo.stages.values())


def test_the_programs_in_the_cql_reference_compile() -> None:
    doc = (ROOT / "docs" / "cql.md").read_text()
    blocks = [b.split("```", 1)[0] for b in doc.split("```sql\n")[1:]]
    assert len(blocks) >= 2
    programs = [compile_program(block, file="docs/cql.md") for block in blocks]
    countdown = next(p for p in programs if "countdown" in p.queries)
    start = [(0, 1, 1, 3)]
    rows = embedded.execute(countdown, {"start": start}, "countdown")
    assert [(r[0], r[3]) for r in rows] == [(1000, 3), (2000, 2), (3000, 1), (4000, 0)]
