"""Check a run against a reference: recompute every stage in one process
from the logged source tuples, and compare each sink's file row by row
(seq, ts, values, op). A distributed run, with or without failures, must
deliver exactly this: nothing lost, nothing twice, same order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node.cql import plan
from node.engine.elements import Element
from node.jsonl import formatter
from semiactive.embedded import execute
from semiactive.topology import Topology


@dataclass
class SinkCheck:
    sink: str
    expected: int
    delivered: int
    missing: list[int] = field(default_factory=list)  # seqs
    duplicated: list[int] = field(default_factory=list)
    wrong: list[int] = field(default_factory=list)  # seq present with other content
    out_of_order: int = 0
    last_seq: int = 0  # the highest seq delivered

    @property
    def is_prefix(self) -> bool:
        """What arrived is the reference's beginning: nothing wrong, twice or
        out of order, and nothing missing before the last row delivered (a
        run whose stage stopped for good delivers exactly that)."""
        return not (self.duplicated or self.wrong or self.out_of_order) and all(
            s > self.last_seq for s in self.missing
        )

    @property
    def ok(self) -> bool:
        """Identical to the reference; an empty run proves nothing and is
        never called identical."""
        return (
            not (self.missing or self.duplicated or self.wrong or self.out_of_order)
            and self.expected == self.delivered
            and self.expected > 0
        )

    def describe(self) -> str:
        if self.ok:
            return f"{self.sink}: {self.delivered:,} rows, identical to the reference"
        if self.expected == self.delivered == 0:
            return f"{self.sink}: empty (nothing expected, nothing delivered): proves nothing"
        parts = [f"{self.sink}: expected {self.expected:,}, delivered {self.delivered:,}"]
        for name in ("missing", "duplicated", "wrong"):
            seqs = getattr(self, name)
            if seqs:
                parts.append(f"{len(seqs)} {name} (first seqs {seqs[:5]})")
        if self.out_of_order:
            parts.append(f"{self.out_of_order} out of order")
        return "; ".join(parts)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def source_rows(run_dir: Path, name: str, schema: plan.Schema) -> tuple[list[Element], int]:
    """The logged tuples of a source as elements, and its final watermark."""
    rows = []
    for rec in _read_jsonl(run_dir / "sources" / f"{name}.jsonl"):
        rows.append((rec["ts"], rec["seq"], 1, *(rec[c] for c in schema.names)))
    end_file = run_dir / "sources" / f"{name}.end.json"
    end = json.loads(end_file.read_text())["watermark"] if end_file.exists() else (rows[-1][0] if rows else 0)
    return rows, int(end)


def expected_streams(topology: Topology, run_dir: Path) -> dict[str, list[Element]]:
    """Every stream of the run recomputed from the source logs."""
    sources = {}
    for stage in topology.stages.values():
        if stage.role == "source":
            assert stage.schema is not None
            sources[stage.name] = source_rows(run_dir, stage.name, stage.schema)
    return reference_streams(topology, sources)


def reference_streams(
    topology: Topology, sources: dict[str, tuple[list[Element], int]]
) -> dict[str, list[Element]]:
    """Every stream computed in this process from the sources' tuples and
    final watermarks (by source name), stage after stage."""
    streams: dict[str, list[Element]] = {}
    end = 0
    for name, (rows, watermark) in sources.items():
        output = topology.stages[name].output
        assert output is not None
        streams[output] = rows
        end = max(end, watermark, rows[-1][0] if rows else watermark)
    pending = [s for s in topology.stages.values() if s.role == "stage"]
    while pending:
        for stage in list(pending):
            needed = [e.stream for e in stage.inputs]
            if any(n not in streams for n in needed):
                continue
            assert stage.program is not None and stage.output is not None
            inputs = {n: list(streams[n]) for n in needed}
            out = execute(stage.program, inputs, stage.output, end_watermark=end)
            streams[stage.output] = [(r[0], i, *r[2:]) for i, r in enumerate(out, start=1)]
            pending.remove(stage)
    return streams


def check_run(topology: Topology, run_dir: Path) -> list[SinkCheck]:
    streams = expected_streams(topology, run_dir)
    results = []
    for stage in topology.stages.values():
        if stage.role != "sink":
            continue
        edge = stage.inputs[0]
        fmt = formatter(edge.schema, edge.kind)
        expected = {i: json.loads(fmt(i, row)) for i, row in enumerate(streams[edge.stream], start=1)}
        delivered = _read_jsonl(run_dir / "sink" / f"{stage.name}.jsonl")
        check = SinkCheck(stage.name, len(expected), len(delivered))
        seen: set[int] = set()
        last = 0
        for rec in delivered:
            seq = rec.get("seq")
            if not isinstance(seq, int):
                check.wrong.append(-1)
                continue
            if seq in seen:
                check.duplicated.append(seq)
                continue
            seen.add(seq)
            if seq < last:
                check.out_of_order += 1
            last = seq
            check.last_seq = max(check.last_seq, seq)
            if expected.get(seq) != rec:
                check.wrong.append(seq)
        check.missing = [s for s in expected if s not in seen]
        results.append(check)
    return results
