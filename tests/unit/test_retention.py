"""node/cql/retention.py: the parts of a program that keep rows for the
whole run (and so pin the stage's Level-1 cut) are named before a run."""

from __future__ import annotations

from pathlib import Path

from semiactive import config, topology
from semiactive.node.cql import compile_program
from semiactive.node.cql.retention import lasting_state

STREAMS = "REGISTER STREAM s (k integer, v integer)\nREGISTER RELATION r (k integer, w integer)\n"


def _lasting(queries: str, output: str) -> list[str]:
    return lasting_state(compile_program(STREAMS + queries), output)


def test_bounded_windows_keep_nothing_for_ever() -> None:
    queries = (
        "REGISTER QUERY a AS SELECT k, SUM(v) AS t FROM s [Range 10 Slide 5] GROUP BY k\n"
        "REGISTER QUERY b AS ISTREAM(SELECT k FROM s [Rows 3] UNION SELECT k FROM s [Now])\n"
        "REGISTER QUERY c AS ISTREAM(SELECT * FROM a, b [Now] WHERE a.k = b.k)\n"
    )
    assert _lasting(queries, "c") == []
    timed = "REGISTER QUERY d AS SELECT k, v FROM s [Partition By k Rows 2 Range 1 minute]\n"
    assert _lasting(timed, "d") == []


def test_unbounded_partition_windows_and_input_relations_are_named_once_with_their_query() -> None:
    queries = (
        "REGISTER QUERY total AS SELECT k, SUM(v) AS t FROM s [Range Unbounded] GROUP BY k\n"
        "REGISTER QUERY last AS SELECT k, v FROM s [Partition By k Rows 2]\n"
        "REGISTER QUERY joined AS ISTREAM(SELECT total.k, t, w FROM total, last, r "
        "WHERE total.k = last.k AND last.k = r.k)\n"
        "REGISTER QUERY unused AS SELECT k FROM s\n"
    )
    assert _lasting(queries, "joined") == [
        "the input relation r in query joined",
        "[Range Unbounded] in query total",
        "[Partition By k Rows 2] in query last",
    ]
    assert _lasting(queries, "unused") == []


def test_cluster_check_names_the_stage(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: t\nqueue_rows: 1000\n"
        "sources:\n  - {name: src, stream: s, schema: {k: integer, v: integer}}\n"
        "stages:\n"
        "  - {name: sums, node: n1, query: 'REGISTER QUERY t AS SELECT k, SUM(v) AS t "
        "FROM s [Range Unbounded] GROUP BY k'}\n"
        "  - {name: recent, node: n2, query: 'REGISTER QUERY u AS ISTREAM(SELECT k FROM s [Range 5])'}\n"
        "sinks:\n  - {name: o1, input: t}\n  - {name: o2, input: u}\n"
    )
    text = topology.describe(topology.resolve(config.load(path)))
    notes = [line.strip() for line in text.splitlines() if "note:" in line]
    assert len(notes) == 1, text
    assert notes[0].startswith("note: stage sums keeps rows for the whole run ([Range Unbounded] in query t)")
    assert "queue_rows (1000)" in notes[0]


def test_a_stream_read_as_a_relation_without_a_window_is_unbounded() -> None:
    # STREAM's default window: easy to write without meaning it.
    assert _lasting("REGISTER QUERY q AS SELECT COUNT(*) AS n FROM s", "q") == [
        "[Range Unbounded] in query q"
    ]
