"""Check a run against a reference: recompute every stage in one process
from the logged source tuples, and compare each sink's file row by row
(seq, ts, values, op). A distributed run, with or without failures, must
deliver exactly this: nothing lost, nothing twice, same order.

That reference is the engine again, so it proves "distributed equals
centralised", never "correct". :func:`oracle_check` adds an independent
check: every stage recomputed by the SQLite oracle (docs/cql-oracle.md)
from the same source logs, and each sink compared with it instant by
instant, for runs whose queries the oracle covers, on a bounded prefix.
``python -m semiactive.oracle.verify RUN_DIR`` prints both.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semiactive import config
from semiactive.config import ConfigError, SourceConfig
from semiactive.embedded.query import execute, merge_edges
from semiactive.node.connectors.jsonl import formatter
from semiactive.node.connectors.sources import RateSchedule, SyntheticSource
from semiactive.node.cql import plan
from semiactive.node.engine.elements import Element
from semiactive.oracle.diff import Comparison, Timeline, compare, record_timeline, stream_timeline
from semiactive.oracle.mqo_reference import reference_output
from semiactive.oracle.sql_oracle import Feed, NotCovered, evaluate
from semiactive.topology import Stage, Topology, programs_fingerprint, resolve


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


def delivered(stage: Stage, topology: Topology, run_dir: Path) -> list[dict[str, Any]]:
    """What a sink wrote, as JSON Lines records: its file, or its table's
    rows or its subject's or topic's messages of this run."""
    assert stage.sink is not None
    if not stage.sink.durable:
        return _read_jsonl(run_dir / "sink" / f"{stage.name}.jsonl")
    from semiactive.node.connectors.postgres import read_table, run_name

    edge = stage.inputs[0]
    run = run_name(run_dir, topology.config.name)
    if stage.sink.nats is not None:
        from semiactive.node.connectors.nats import read_subject

        return read_subject(stage.sink.nats, run)
    if stage.sink.kafka is not None:
        from semiactive.node.connectors.kafka_sink import read_topic

        return read_topic(stage.sink.kafka, run)
    assert stage.sink.postgres is not None
    return read_table(stage.sink.postgres, run, edge.schema, edge.kind)


def source_rows(
    run_dir: Path, name: str, schema: plan.Schema, source: SourceConfig | None = None
) -> tuple[list[Element], int]:
    """The tuples a source emitted as elements, and its final watermark:
    its row log (``log: true``); for a synthetic ``source`` run without one,
    the first ``count`` tuples of its ``end.json`` made again from its seed
    and rate, the stream its generator emitted (it is deterministic)."""
    path = run_dir / "sources" / f"{name}.jsonl"
    end_file = run_dir / "sources" / f"{name}.end.json"
    end = json.loads(end_file.read_text()) if end_file.exists() else None
    if source is not None and source.kind == "synthetic" and not source.log and not path.exists():
        if end is None:
            raise FileNotFoundError(f"{end_file}: source {name} ran without a row log and did not end")
        schedule = RateSchedule.of((p.at_s, p.tuples_per_s) for p in source.rate)
        rows = SyntheticSource(schema, schedule, source.seed).take(int(end["count"]))
    else:
        rows = [(rec["ts"], rec["seq"], 1, *(rec[c] for c in schema.names)) for rec in _read_jsonl(path)]
    watermark = end["watermark"] if end is not None else (rows[-1][0] if rows else 0)
    return rows, int(watermark)


def expected_streams(topology: Topology, run_dir: Path) -> dict[str, list[Element]]:
    """Every stream of the run recomputed from the source logs, as a
    consumer that is no partition receives it."""
    sources = {}
    for stage in topology.stages.values():
        if stage.role == "source":
            assert stage.schema is not None
            sources[stage.name] = source_rows(run_dir, stage.name, stage.schema, stage.source)
    outputs = reference_outputs(topology, sources)
    runs: dict[str, list[list[Element]]] = {}
    for stage in topology.stages.values():  # partitions in partition order
        if stage.output is not None and stage.name in outputs:
            runs.setdefault(stage.output, []).append(outputs[stage.name])
    return {name: merge_edges(each) for name, each in runs.items()}


def stage_inputs(stage: Stage, outputs: dict[str, list[Element]]) -> dict[str, list[Element]]:
    """What a stage's (or sink's) input section hands on, per stream: each
    edge's producer output, only this partition's rows when the stage is a
    partition, merged in edge order."""
    runs: dict[str, list[list[Element]]] = {}
    for edge in sorted(stage.inputs, key=lambda e: e.index):
        rows = outputs[edge.producer]
        owned = edge.owned(rows)
        if owned is not None:
            rows = [r for r, mine in zip(rows, owned, strict=True) if mine]
        runs.setdefault(edge.stream, []).append(rows)
    return {stream: merge_edges(each) for stream, each in runs.items()}


def reference_outputs(
    topology: Topology, sources: dict[str, tuple[list[Element], int]]
) -> dict[str, list[Element]]:
    """Every stage's output (by stage name; seqs as in its log) computed in
    this process from the sources' tuples and final watermarks, stage after
    stage, each partition of a partitioned stage on its own rows."""
    outputs: dict[str, list[Element]] = {}
    end = 0
    for name, (rows, watermark) in sources.items():
        outputs[name] = rows
        end = max(end, watermark, rows[-1][0] if rows else watermark)
    pending = [s for s in topology.stages.values() if s.role == "stage"]
    while pending:
        for stage in list(pending):
            if any(e.producer not in outputs for e in stage.inputs):
                continue
            assert stage.output is not None
            inputs = stage_inputs(stage, outputs)
            if stage.mqo is not None:
                out = reference_output(stage.mqo, inputs, end)
            else:
                assert stage.program is not None
                out = execute(stage.program, inputs, stage.output, end_watermark=end)
            outputs[stage.name] = [(r[0], i, *r[2:]) for i, r in enumerate(out, start=1)]
            pending.remove(stage)
    return outputs


def check_run(topology: Topology, run_dir: Path) -> list[SinkCheck]:
    streams = expected_streams(topology, run_dir)
    results = []
    for stage in topology.stages.values():
        if stage.role != "sink":
            continue
        edge = stage.inputs[0]
        fmt = formatter(edge.schema, edge.kind)
        expected = {i: json.loads(fmt(i, row)) for i, row in enumerate(streams[edge.stream], start=1)}
        records = delivered(stage, topology, run_dir)
        check = SinkCheck(stage.name, len(expected), len(records))
        seen: set[int] = set()
        last = 0
        for rec in records:
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


# The oracle runs one SQL query per instant per relation: a bounded prefix
# of a long run keeps it to seconds.
ORACLE_MAX_ROWS = 5_000


@dataclass
class OracleCheck:
    """A sink against the SQLite oracle: ``reason`` if the run is not
    covered, else the comparison over the instants up to ``upto`` (the
    prefix of the run the oracle recomputed; None: all of it)."""

    sink: str
    reason: str | None = None
    comparison: Comparison | None = None
    instants: int = 0
    upto: int | None = None
    rows: int = 0  # source rows the oracle read
    total_rows: int = 0

    @property
    def ok(self) -> bool:
        """Not covered, or identical: only a disagreement fails."""
        return self.comparison is None or self.comparison.identical

    def describe(self) -> str:
        if self.reason is not None or self.comparison is None:
            return f"{self.sink}: oracle: not covered: {self.reason}"
        scope = ""
        if self.upto is not None:
            scope = f", prefix ts <= {self.upto} (first {self.rows:,} of {self.total_rows:,} source rows)"
        head = f"{self.sink}: oracle: SQLite, {self.instants:,} instants{scope}"
        if not self.comparison.identical:
            return f"{head}, differs: {self.comparison.describe()}"
        if not self.comparison.instants:
            return f"{head}, identical but empty (no output on either side): proves nothing"
        return f"{head}, identical"


def oracle_check(topology: Topology, run_dir: Path, max_rows: int = ORACLE_MAX_ROWS) -> list[OracleCheck]:
    """Every sink of the run against the oracle, over the first ``max_rows``
    source rows (all instants before the first row left out)."""
    feeds: dict[str, Feed] = {}
    timelines: dict[str, Timeline] = {}
    end = 0
    stamps: list[int] = []
    for stage in topology.stages.values():
        if stage.role == "source":
            assert stage.schema is not None and stage.output is not None
            rows, watermark = source_rows(run_dir, stage.name, stage.schema, stage.source)
            feeds[stage.output] = Feed([(r[0], *r[3:]) for r in rows], stage.schema, plan.Kind.STREAM)
            stamps += [r[0] for r in rows]
            end = max(end, watermark, rows[-1][0] if rows else watermark)
    stamps.sort()
    sinks = [s for s in topology.stages.values() if s.role == "sink"]
    upto = None
    if len(stamps) > max_rows:
        upto = end = stamps[max_rows] - 1
        if upto < stamps[0]:
            reason = f"more than {max_rows:,} source rows at instant {stamps[0]}"
            return [OracleCheck(s.name, reason) for s in sinks]
    for name, feed in feeds.items():
        timelines[name] = stream_timeline((r[0], r[1:]) for r in feed.rows if r[0] <= end)
    instants = 0
    pending = [s for s in topology.stages.values() if s.role == "stage"]
    while pending:
        stage = next(s for s in pending if all(e.stream in feeds for e in s.inputs))
        pending.remove(stage)
        if stage.partition is not None and stage.partition.index > 0:
            continue  # the oracle computes a partitioned stage once, whole (its first partition)
        assert stage.output is not None and stage.schema is not None
        if stage.mqo is not None:
            reason = (
                f"stage {stage.name}: MQO queries (checked against semiactive.oracle.mqo_reference instead)"
            )
            return [OracleCheck(s.name, reason) for s in sinks]
        inputs = {
            e.stream: Feed(feeds[e.stream].rows, e.schema, e.kind, feeds[e.stream].ordered)
            for e in stage.inputs
        }
        try:
            bounds = topology.config.window_bounds
            outcome = evaluate(stage.query_text, inputs, end, stage.output, bounds)
        except NotCovered as exc:
            return [OracleCheck(s.name, f"stage {stage.name}: {exc.reason}") for s in sinks]
        feeds[stage.output] = outcome.feed(stage.schema)
        timelines[stage.output] = outcome.changes
        instants = max(instants, outcome.instants)
    used = sum(1 for t in stamps if t <= end)
    checks = []
    for sink in sinks:
        edge = sink.inputs[0]
        records = [r for r in delivered(sink, topology, run_dir) if r.get("ts", 0) <= end]
        actual = record_timeline(records, edge.schema.names)
        comparison = compare(timelines[edge.stream], actual, json_values=True, other="sink")
        checks.append(OracleCheck(sink.name, None, comparison, instants, upto, used, len(stamps)))
    return checks


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m semiactive.oracle.verify RUN_DIR``: the run against the
    engine's reference and against the oracle; 1 if either disagrees."""
    parser = argparse.ArgumentParser(prog="verify", description=__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--config", help="the run's configuration (default: the one cluster.json names)")
    parser.add_argument(
        "--oracle-rows", type=int, default=ORACLE_MAX_ROWS, help="source rows the oracle reads"
    )
    args = parser.parse_args(argv)
    try:
        recorded = args.run_dir / "cluster.json"
        cluster = json.loads(recorded.read_text()) if args.config is None or recorded.exists() else {}
        path = args.config or cluster["config"]
        topology = resolve(config.load(path))
    except (OSError, ValueError, KeyError, ConfigError) as exc:
        print(f"verify: {args.run_dir}: cannot load the run's configuration: {exc}", file=sys.stderr)
        return 2
    if cluster.get("programs") not in (None, programs_fingerprint(topology)):
        print(
            f"verify: {args.run_dir}: the programs in {path} (config or query files) changed since the"
            " run started; the reference would be the new programs', not the run's",
            file=sys.stderr,
        )
        return 2
    checks = check_run(topology, args.run_dir)
    for check in checks:
        print(check.describe(), flush=True)
    oracles = oracle_check(topology, args.run_dir, args.oracle_rows)
    for oracle in oracles:
        print(oracle.describe())
    return 0 if all(c.ok for c in checks) and all(o.ok for o in oracles) else 1


if __name__ == "__main__":
    sys.exit(main())
