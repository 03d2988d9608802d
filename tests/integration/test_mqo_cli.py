"""`semiactive mqo run` and `semiactive experiment mqo` as a user runs them:
the output files, results equal to the reference, registrations on the
command line, and one-line errors with exit status 2."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from semiactive.embedded.mqo import read_stream
from semiactive.mqo.clocks import Clock
from semiactive.mqo.query import Column, parse_queries
from semiactive.oracle.mqo_reference import reference_results
from tests.processes import ROOT, read_jsonl, semiactive

QUERIES = """\
CREATE near MASTER M WINDOW SIZE 3 SELECT * FROM Quote, News WHERE Quote.name = News.company
CREATE far MASTER M WINDOW SIZE 9 SELECT Quote.price, News.title FROM Quote, News
  WHERE Quote.name = News.company AND Quote.price > 2
CREATE ticking MASTER Tick SELECT * FROM Quote WHERE Quote.price < 4
"""
LATE = "CREATE late MASTER M WINDOW SIZE 5 SELECT * FROM Quote, News WHERE Quote.name = News.company\n"


def _files(tmp_path: Path) -> list[str]:
    (tmp_path / "q.cql").write_text(QUERIES)
    (tmp_path / "late.cql").write_text(LATE)
    quote = ["ts,name,price"] + [f"{t},{'abc'[t % 3]},{t % 7}" for t in range(0, 40)]
    news = [{"ts": t, "company": "abd"[t % 3], "title": f"n{t}"} for t in range(1, 40, 2)]
    (tmp_path / "quote.csv").write_text("\n".join(quote) + "\n")
    (tmp_path / "news.jsonl").write_text("".join(json.dumps(r) + "\n" for r in news))
    (tmp_path / "m.csv").write_text("ts\n" + "".join(f"{t}\n" for t in (5, 12, 13, 25, 38)))
    return [
        "--stream", f"Quote={tmp_path / 'quote.csv'}", "--stream", f"News={tmp_path / 'news.jsonl'}",
        "--stream", f"M={tmp_path / 'm.csv'}", "--clock", "Tick=10+4",
    ]  # fmt: skip


@pytest.mark.parametrize("method", ["dynamic", "none"])
def test_results_are_the_reference(tmp_path: Path, method: str) -> None:
    streams = _files(tmp_path)
    out = tmp_path / "out"
    done = semiactive(
        "mqo", "run", str(tmp_path / "q.cql"), *streams, "--method", method, "--unit", "10",
        "--log-period", "10", "--recluster-every", "10", "--recluster-at", "20",
        "--add", f"15:{tmp_path / 'late.cql'}", "--remove", "30:near", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "3 queries" in done.stdout and "100%" in done.stderr  # near removed, late added
    rows = {
        name: read_stream(name, tmp_path / file).rows
        for name, file in (("Quote", "quote.csv"), ("News", "news.jsonl"), ("M", "m.csv"))
    }
    schemas = {
        "Quote": {"ts": 0, "name": 2, "price": 3},
        "News": {"ts": 0, "company": 2, "title": 3},
        "M": {"ts": 0},
    }
    clocks = {"Tick": Clock("Tick", 10, 4)}
    registered = {"late": 14}  # added before instant 15: after instant 14
    removed = {"near": 29}
    for q in parse_queries(QUERIES + LATE):
        got = read_jsonl(out / f"{q.name}.jsonl")
        want = []
        for s, combos in reference_results(
            q, rows, schemas, clocks, 39, registered.get(q.name), removed.get(q.name)
        ):
            srcs = sorted(q.sources)
            for combo in combos:
                by = dict(zip(srcs, combo, strict=True))
                cols = q.select or [c for s_ in q.sources for c in _all(s_, schemas)]
                want.append({"ts": s, **{str(c): by[c.source][schemas[c.source][c.name]] for c in cols}})
        key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
        assert sorted(got, key=key) == sorted(want, key=key), q.name
        assert want, f"{q.name}: the data should give it results"
    clusters = read_jsonl(out / "clusters.jsonl")
    assert clusters[0]["reason"] == "start" and clusters[0]["at"] is None  # before the first instant
    assert all(c["at"] >= 0 for c in clusters[1:])
    assert any(c["reason"].startswith("add late") for c in clusters)
    stats = json.loads((out / "stats.json").read_text())
    assert len(stats["per_unit"]) == 4 and stats["results"] == sum(u["results"] for u in stats["per_unit"])


def _all(source: str, schemas: dict[str, dict[str, int]]) -> list[Column]:
    return [Column(source, c) for c in schemas[source]]


def test_stream_files_with_spaces_after_commas(tmp_path: Path) -> None:
    path = tmp_path / "quote.csv"
    path.write_text("ts, name, price\n1, abc, 3\n2, d, 4.5\n")
    stream = read_stream("Quote", path)
    assert stream.columns == ["name", "price"]
    assert stream.rows == [(1, 1, "abc", 3), (2, 2, "d", 4.5)]


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"q.cql": "CREATE x MASTER M SELECT * FROM Nope"}, "no stream 'Nope'"),
        ({"q.cql": "CREATE clusters MASTER M SELECT * FROM Quote"}, "reserved"),
        ({"q.cql": "CREATE x MASTER Zzz SELECT * FROM Quote"}, "Zzz"),
        ({"q.cql": "CREATE x MASTER M SELECT * FROM Quote WHERE Quote.nope = 1"}, "no column 'nope'"),
        ({"q.cql": "CREATE x MASTER\n"}, "q.cql:2:"),
        ({"quote.csv": "name,price\nx,1\n"}, "no ts column"),
        ({"quote.csv": "ts,name,price\n1,x,1\n2,y\n"}, "quote.csv:3: fewer fields"),
        ({"quote.csv": "ts,name,price\n1,x,1,9\n"}, "quote.csv:2: more fields"),
        ({"quote.csv": "ts,name,price\n5,x,1\n3,y,2\n"}, "quote.csv:3: ts 3 is before"),
        ({"news.jsonl": '{"ts": 1, "company": "a", "title": "t"}\nnot json\n'}, "news.jsonl:2: not JSON"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, change: dict[str, str], needle: str) -> None:
    streams = _files(tmp_path)
    for name, text in change.items():
        (tmp_path / name).write_text(text)
    done = semiactive("mqo", "run", str(tmp_path / "q.cql"), *streams, "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert needle in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_bad_options(tmp_path: Path) -> None:
    streams = _files(tmp_path)
    for extra, needle in (
        (["--clock", "Tick"], "--clock"),
        (["--add", "x:y"], "--add"),
        (["--unit", "0"], "positive"),
    ):
        done = semiactive(
            "mqo", "run", str(tmp_path / "q.cql"), *streams, *extra, "--out", str(tmp_path / "o")
        )
        assert done.returncode == 2 and needle in done.stderr, done.stderr


def _quickstart() -> list[str]:
    """The quick-start command, the same in README.md, docs/mqo.md and the
    example's header."""
    commands = set()
    for doc in ("README.md", "docs/mqo.md", "examples/mqo-queries.cql"):
        for line in (ROOT / doc).read_text().splitlines():
            if "semiactive mqo run examples/" in line:
                commands.add(line.strip().removeprefix("--").strip().removeprefix(".venv/bin/"))
    assert len(commands) == 1, commands
    return shlex.split(commands.pop())


def test_the_quickstart_command_works_as_written(tmp_path: Path) -> None:
    """One copy-pasteable command: the example's streams and clocks are
    declared in the queries file, the data is shipped."""
    command = _quickstart()
    assert command[:3] == ["semiactive", "mqo", "run"] and "--clock" not in command
    out = tmp_path / "mqo"
    command[command.index("--out") + 1] = str(out)
    done = semiactive(*command[1:])
    assert done.returncode == 0, done.stderr
    assert "300 queries, 60 units" in done.stdout, done.stdout
    clusters = read_jsonl(out / "clusters.jsonl")
    assert clusters[0]["at"] is None and clusters[0]["reason"] == "start"
    results = [read_jsonl(out / f"Q{i}.jsonl") for i in range(300)]
    assert all(results), "every query should have results over the sample data"
    first = results[0][0]
    assert set(first) == {"ts", "Quote.ts", "Quote.name", "Quote.price", "News.ts", "News.company", "News.id"}
    assert first["Quote.name"] == first["News.company"] and first["ts"] % 10_000 == 1000  # Q0 runs on C1


def test_declared_streams_and_clocks(tmp_path: Path) -> None:
    """REGISTER STREAM types the data (and checks it), REGISTER CLOCK needs no
    --clock; --clock replaces a declared clock."""
    streams = _files(tmp_path)
    declared = "REGISTER STREAM Quote (name char(1), price float)\nREGISTER CLOCK Tick PERIOD 10 PHASE 4\n"
    (tmp_path / "q.cql").write_text(declared + QUERIES)
    without_tick = streams[: streams.index("--clock")]
    out = tmp_path / "out"
    done = semiactive("mqo", "run", str(tmp_path / "q.cql"), *without_tick, "--out", str(out))
    assert done.returncode == 0, done.stderr
    ticking = read_jsonl(out / "ticking.jsonl")
    assert ticking and {r["ts"] % 10 for r in ticking} == {4}
    assert all(isinstance(r["Quote.price"], float) for r in ticking)
    done = semiactive(
        "mqo", "run", str(tmp_path / "q.cql"), *without_tick, "--clock", "Tick=10+6", "--out", str(out)
    )
    assert done.returncode == 0 and {r["ts"] % 10 for r in read_jsonl(out / "ticking.jsonl")} == {6}
    for change, needle in (
        ({"quote.csv": "ts,name,price\n1,a,1\n2,b,lots\n"}, "quote.csv:3: column price: 'lots' is not float"),
        ({"quote.csv": "ts,name\n1,a\n"}, "quote.csv:1: missing column(s) price in the header"),
        ({"quote.csv": "ts,name,price\n1,ab,1\n"}, "quote.csv:2: column name: 'ab' is longer than char(1)"),
    ):
        for name, text in change.items():
            (tmp_path / name).write_text(text)
        done = semiactive("mqo", "run", str(tmp_path / "q.cql"), *without_tick, "--out", str(out))
        assert done.returncode == 2 and needle in done.stderr and done.stderr.count("\n") == 1, done.stderr
    no_quote = [a for a in without_tick if not a.startswith("Quote=")]
    no_quote.remove("--stream")
    done = semiactive("mqo", "run", str(tmp_path / "q.cql"), *no_quote, "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert "stream Quote is declared" in done.stderr and "give --stream Quote=FILE" in done.stderr, (
        done.stderr
    )


@pytest.mark.slow
def test_the_experiment_writes_its_table_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "exp"
    done = semiactive("experiment", "mqo", "--queries", "40", "--units", "24", "--out", str(out), timeout=300)
    assert done.returncode == 0, done.stderr
    assert "every method gave every one of the 40 queries the same results" in done.stdout
    table = (out / "table.md").read_text()
    for method in ("dynamic", "static", "single", "none"):
        assert f"| {method} |" in table
    rows = {r.split(",")[0]: r.split(",") for r in (out / "table.csv").read_text().splitlines()[1:]}
    header = (out / "table.csv").read_text().splitlines()[0].split(",")
    probes = header.index("probes_after")
    assert int(rows["none"][probes]) > int(rows["dynamic"][probes])  # sharing saves join work
    for png in ("time_per_unit.png", "work_per_unit.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = semiactive("experiment", "mqo", "--methods", "dynamic,magic", "--out", str(tmp_path / "x"))
    assert bad.returncode == 2 and "magic" in bad.stderr
