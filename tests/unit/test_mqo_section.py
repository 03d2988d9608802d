"""The MQO stage's operator section under the HA contract: its output is
The MQO paper's semantics (semiactive.oracle.mqo_reference) whatever the clustering, with queries
registered and removed through the registry stream; and a replica rebuilt
from any snapshot's cut (rows from ``state_low`` to the snapshot, then the
counters) emits exactly what the original emits from there on."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from semiactive.mqo.clocks import Clock
from semiactive.mqo.executor import Method
from semiactive.mqo.query import parse_queries
from semiactive.mqo.stage import MqoStageSpec, output_columns
from semiactive.node.sections.mqo import MqoEngine, pack_text, unpack_text
from semiactive.oracle.mqo_reference import reference_output

Element = tuple[Any, ...]
SCHEMAS = {"Quote": ("name", "price"), "News": ("company", "id"), "M": ("x",)}
CLOCKS = {"C0": Clock("C0", 1000, 0), "C1": Clock("C1", 1000, 500)}
TEMPLATE = "SELECT * FROM Quote, News WHERE Quote.name = News.company"


def _query(rng: random.Random, name: str, registered: bool = False) -> str:
    master = rng.choice(["C0", "C1", "M"])
    # Finite windows: an unbounded one holds every row, so every cut would be the first row.
    # Registered queries may be wider than any configured one: a rebuilt replica must
    # keep the rows they need before it learns of them.
    windows = [300, 700, 1500] + ([2500, 2500] if registered else [])
    window = f" WINDOW SIZE {rng.choice(windows)}"
    extra = rng.choice(["", " AND Quote.price > 40", " AND Quote.price < News.id"])
    return f"CREATE {name} MASTER {master}{window} {TEMPLATE}{extra}"


def _spec(rng: random.Random, method: Method) -> MqoStageSpec:
    queries = parse_queries("\n".join(_query(rng, f"q{i}") for i in range(8)))
    schemas = dict(SCHEMAS)
    return MqoStageSpec(
        tuple(queries),
        schemas,
        output_columns(queries, schemas),
        CLOCKS,
        method,
        theta=0.5,
        log_period=3000,
        check_every=2000 if method is Method.DYNAMIC else None,
        registry="reg",
    )


def _events(rng: random.Random, end: int) -> list[tuple[int, str, tuple[Any, ...]]]:
    events: list[tuple[int, str, tuple[Any, ...]]] = []
    names = [f"r{i}" for i in range(4)]
    for t in sorted(rng.sample(range(1, end), end // 40)):
        for stream in ("Quote", "News", "M", "reg"):
            chance = {"Quote": 0.7, "News": 0.7, "M": 0.1, "reg": 0.04}[stream]
            for _ in range(rng.choice([1, 1, 2]) if rng.random() < chance else 0):
                if stream in ("Quote", "News"):
                    events.append((t, stream, (rng.randrange(4), rng.randrange(100))))
                elif stream == "M":
                    events.append((t, stream, (0,)))
                else:
                    name = rng.choice([*names, "q1", "q2"])
                    if rng.random() < 0.6:
                        bad = rng.random() < 0.15
                        text = "CREATE nonsense" if bad else _query(rng, name, registered=True)
                        events.append((t, stream, ("add", name, text)))
                    else:
                        events.append((t, stream, ("remove", name, "")))
    return events


def _elements(events: list[tuple[int, str, tuple[Any, ...]]]) -> list[tuple[str, Element]]:
    """Stage-local positions (lin) in merge order: by ts, then stream."""
    order = {"Quote": 0, "News": 1, "M": 2, "reg": 3}
    ranked = sorted(events, key=lambda e: (e[0], order[e[1]]))
    return [(stream, (t, lin, 1, *values)) for lin, (t, stream, values) in enumerate(ranked, start=1)]


def _chunks(elements: list[tuple[str, Element]], rng: random.Random) -> list[list[tuple[str, Element]]]:
    """Runs of whole instants, as an input section hands them over."""
    chunks: list[list[tuple[str, Element]]] = []
    current: list[tuple[str, Element]] = []
    for i, (stream, e) in enumerate(elements):
        current.append((stream, e))
        last_of_instant = i + 1 == len(elements) or elements[i + 1][1][0] != e[0]
        if last_of_instant and rng.random() < 0.3:
            chunks.append(current)
            current = []
    if current:
        chunks.append(current)
    return chunks


def _feed(engine: MqoEngine, chunk: list[tuple[str, Element]], watermark: int) -> list[Element]:
    by_stream: dict[str, list[Element]] = {}
    for stream, e in chunk:
        by_stream.setdefault(stream, []).append(e)
    for stream, rows in by_stream.items():
        engine.push(stream, rows)
    return engine.advance(watermark)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("method", [Method.DYNAMIC, Method.SINGLE, Method.NONE])
def test_output_is_the_reference_and_rebuilds_agree(seed: int, method: Method) -> None:
    rng = random.Random(seed * 31 + len(method))
    spec = _spec(rng, method)
    end = 8_000
    elements = _elements(_events(rng, end))
    chunks = _chunks(elements, rng)
    marks = [chunk[-1][1][0] for chunk in chunks]

    original = MqoEngine(spec)
    outputs: list[list[Element]] = []
    snapshots = []
    for chunk, mark in zip(chunks, marks, strict=True):
        outputs.append(_feed(original, chunk, mark))
        position = chunk[-1][1][1]
        snapshots.append((position, original.state_low(), original.counters(), original.time))
    last = _feed(original, [], end)

    streams: dict[str, list[Element]] = {}
    for stream, e in elements:
        streams.setdefault(stream, []).append(e)
    produced = [row for out in outputs for row in out] + last
    expected = reference_output(spec, streams, end)
    assert produced == expected
    assert any(r[3].startswith("r") for r in produced) or not original.runtime  # registered queries output

    late = [k for k, (_, low, _, _) in enumerate(snapshots) if low is not None and low > 1]
    assert len(late) > len(snapshots) // 2  # the cuts move: rebuilding starts later and later
    for k in rng.sample(range(len(chunks)), min(8, len(chunks))):
        position, low, counters, time = snapshots[k]
        rebuilt = MqoEngine(spec)
        cut = low if low is not None else position + 1
        replay = [(s, e) for s, e in elements if cut <= e[1] <= position]
        for chunk in _chunks(replay, rng):
            _feed(rebuilt, chunk, chunk[-1][1][0])
        rebuilt.advance(time)
        rebuilt.restore_counters(counters)
        after = [
            row
            for chunk, mark in zip(chunks[k + 1 :], marks[k + 1 :], strict=True)
            for row in _feed(rebuilt, chunk, mark)
        ]
        after += _feed(rebuilt, [], end)
        assert after == [row for out in outputs[k + 1 :] for row in out] + last, f"rebuilt from chunk {k}"


def test_registrations_pack_into_counters() -> None:
    for text in ["", "x", "CREATE q MASTER M SELECT * FROM Quote", "é" * 50, "a" * 7, "b" * 8]:
        assert unpack_text(pack_text(text)) == text
    with pytest.raises(ValueError):
        unpack_text((5, 1 << 60))
    with pytest.raises(ValueError):
        unpack_text((20, 1))


def test_a_bad_counter_snapshot_is_refused() -> None:
    spec = _spec(random.Random(1), Method.DYNAMIC)
    engine = MqoEngine(spec)
    with pytest.raises(ValueError):
        engine.restore_counters(((1, 2),))
    with pytest.raises(ValueError):
        engine.restore_counters((tuple(range(8)), (3, 1, 2), ()))
    garbage = json.dumps({"add": [["x", "CREATE nonsense", 5]], "removed": []})
    with pytest.raises(ValueError, match="refuses"):
        engine.restore_counters((tuple(range(8)), pack_text(garbage), (0,)))
    with pytest.raises(ValueError):
        engine.restore_counters((tuple(range(8)), pack_text('{"add": 3}'), ()))
