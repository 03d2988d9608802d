"""The embedded single-process mode: ``semiactive query check`` and
``semiactive query run``.

``run`` reads every ``--stream NAME=FILE`` (CSV with a header, or JSON
Lines; column ``ts`` is event time in ms; a relation's file has ``op``), feeds
the engine in timestamp order and prints the chosen query's output as JSON
Lines: ``{"seq": n, "ts": t, <fields in SELECT order>}``, with ``"op"`` for
a relation-valued query. It streams (:func:`stream`): memory holds the
program's state and one slice of input rows, whatever the input's length.
A vectorized query over input streams takes the column path
(:func:`stream_columns`): a CSV file of numbers goes from numpy's parser to
the columnar engine as arrays, with no row in between.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Protocol, TextIO

import numpy as np

from semiactive.errors import UserError
from semiactive.node.connectors.csv_numeric import NumericBlock
from semiactive.node.connectors.jsonl import formatter
from semiactive.node.connectors.sources import SourceDataError, read_blocks, read_rows
from semiactive.node.cql import CqlError, compile_program, explain, plan
from semiactive.node.cql.bounds import WindowBounds
from semiactive.node.cql.partitioning import check_partitioning
from semiactive.node.engine.columnar.batch import ColumnBatch, concat
from semiactive.node.engine.columnar.shape import NotVectorized, describe
from semiactive.node.engine.columnar.vector_engine import ElementEngine, VectorEngine
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine, EvaluationError, InputOrderError
from semiactive.node.engine.operators.streaming import DelayOp
from semiactive.node.sections.partitions import InputRouting


def load_program(
    file: str, insert_delays: bool = False, window_bounds: WindowBounds = "closed"
) -> plan.Program:
    try:
        text = Path(file).read_text()
    except OSError as exc:
        raise CqlError(f"cannot read: {exc.strerror}", 1, 1, file) from None
    return compile_program(text, file=file, insert_delays=insert_delays, window_bounds=window_bounds)


def check(
    file: str,
    *,
    insert_delays: bool = False,
    show_code: bool = False,
    window_bounds: WindowBounds = "closed",
    partition_by: Mapping[str, tuple[str, ...]] | None = None,
) -> str:
    """The plan of ``file``, once its code is also generated: a query the
    engine could not compile is a :class:`CqlError` here, not at run time.
    ``show_code``: with the generated Python of every registered query.
    ``partition_by``: whether partitions routed so (stream -> key columns,
    () round-robin, absent broadcast) keep the last query's result
    (:class:`PartitioningError` if not)."""
    program = load_program(file, insert_delays, window_bounds)
    text = explain(program)
    if not program.queries:
        return text
    if partition_by is not None:
        check_partitioning(program, program.last_query, partition_by)
        routed = ", ".join(
            f"{s} by {', '.join(k)}" if k else f"{s} round-robin" for s, k in partition_by.items()
        )
        text += f"\n\npartitioned ({routed}; other inputs whole to every partition): keeps the result"
    for name in list(program.queries) if show_code else [program.last_query]:
        engine = Engine(program, [name])
        if show_code:
            text += f"\n\n-- generated code of {name} --\n{engine.generated_source or ''}"
    paths = describe(program)
    text += "\n\ncolumnar engine (what query run uses for a vectorized query):\n"
    text += "\n".join(f"  {name}: {path}" for name, path in paths.items())
    return text


def parse_partition_by(specs: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """``--partition-by STREAM=COL[,COL]`` (``STREAM=``: round-robin)."""
    out: dict[str, tuple[str, ...]] = {}
    for spec in specs:
        stream, sep, columns = spec.partition("=")
        if not sep or not stream:
            raise UserError(f"--partition-by {spec!r}: write STREAM=COL[,COL] (STREAM= for round-robin)")
        out[stream] = tuple(c.strip() for c in columns.split(",") if c.strip())
    return out


def parse_streams(specs: Sequence[str], program: plan.Program) -> dict[str, str]:
    files: dict[str, str] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise SourceDataError(f"--stream {spec!r}: expected NAME=FILE")
        if name not in program.inputs:
            known = ", ".join(program.inputs) or "none"
            raise SourceDataError(
                f"--stream {name}: the program registers no stream or relation {name!r} (known: {known})"
            )
        files[name] = path
    return files


def load_inputs(program: plan.Program, files: dict[str, str]) -> dict[str, Iterator[Element]]:
    """Each input's rows, read lazily: a file is read as the run needs it."""
    return {
        name: read_rows(path, program.inputs[name].schema, program.inputs[name].kind)
        for name, path in files.items()
    }


SLICE_ROWS = 10_000


class _Runner(Protocol):
    def push(self, name: str, elements: Sequence[Element]) -> None: ...
    def advance(self, watermark: int) -> dict[str, list[Element]]: ...


def execute(
    program: plan.Program,
    inputs: Mapping[str, Iterable[Element]],
    output: str | None = None,
    executor: str = "dts",
    run_limit: int = 100,
    end_watermark: int | None = None,
    slice_rows: int = SLICE_ROWS,
) -> list[Element]:
    """The output query's rows of :func:`stream`, as one list."""
    return [
        row
        for part in stream(program, inputs, output, executor, run_limit, end_watermark, slice_rows)
        for row in part
    ]


def stream(
    program: plan.Program,
    inputs: Mapping[str, Iterable[Element]],
    output: str | None = None,
    executor: str = "dts",
    run_limit: int = 100,
    end_watermark: int | None = None,
    slice_rows: int = SLICE_ROWS,
) -> Iterator[list[Element]]:
    """Run ``program`` over its inputs (each in ts order) and yield the
    output query's rows as they are produced.

    The inputs are merged by timestamp and fed ``slice_rows`` rows at a time
    (0: all at once); after each slice the engine runs up to the instant
    before the slice's last timestamp (rows at that instant may still
    follow), so that memory holds window and relation state and one slice,
    whatever the length of the input. At the end it runs up to
    ``end_watermark`` (default: the last input timestamp) and, for a
    recursive program, on until its delays hold nothing (:func:`_settle`).
    """
    name = _output(program, output)
    runner, settles = _runner(program, name, executor, run_limit)
    names = list(inputs)
    merged = heapq.merge(*(_tagged(n, rows) for n, rows in enumerate(inputs.values())), key=_ts_and_input)
    end = 0
    try:
        while True:
            chunk = list(islice(merged, slice_rows)) if slice_rows > 0 else list(merged)
            by_input: dict[int, list[Element]] = {}
            for _, n, row in chunk:
                by_input.setdefault(n, []).append(row)
            for n, rows in by_input.items():
                runner.push(names[n], rows)
            if not chunk:
                break
            end = max(end, chunk[-1][0])
            if len(chunk) < slice_rows or slice_rows <= 0:
                break
            part = runner.advance(chunk[-1][0] - 1)[name]
            if part:
                yield part
        if end_watermark is not None:
            end = max(end, end_watermark)
        part = runner.advance(end)[name]
        if part:
            yield part
        if end_watermark is None and settles:
            assert isinstance(runner, Engine)
            part = _settle(runner, name, end)
            if part:
                yield part
    except (EvaluationError, InputOrderError) as exc:
        raise SourceDataError(str(exc)) from None


def stream_columns(
    engine: VectorEngine,
    inputs: Mapping[str, Iterable[list[Element] | NumericBlock]],
    name: str,
    slice_rows: int = SLICE_ROWS,
) -> Iterator[list[Element]]:
    """:func:`stream` for input streams read as column blocks
    (:func:`read_blocks`): a CSV file of numbers goes from numpy's parser
    to the columnar engine with no row in between, and several files are
    merged by timestamp a block at a time, not a row at a time. Each round
    the engine takes every input's rows before the earliest last ts among
    the blocks in hand (rows at that instant may still follow in that
    input's next block), about ``slice_rows`` rows at a time, running up
    to each slice's last instant, so that what it holds is the state and
    one slice, as in :func:`stream`; at the end it takes the rest and runs
    up to the last ts."""
    blocks = {n: iter(b) for n, b in inputs.items()}
    held = {n: ColumnBatch.empty(engine.widths[n]) for n in inputs}
    open_inputs = set(inputs)
    end = 0

    def fill(input_name: str) -> None:
        block = next(blocks[input_name], None)
        if block is None:
            open_inputs.discard(input_name)
        else:
            held[input_name] = concat(held[input_name], _column_batch(block, engine.widths[input_name]))

    def feed(parts: dict[str, ColumnBatch], upto: int | None) -> Iterator[list[Element]]:
        """Push ``parts`` (every input's rows before ``upto``; None: the
        rest) about ``slice_rows`` rows at a time, running up to each
        slice's last instant (then up to the instant before ``upto``)."""
        stamps = np.sort(np.concatenate([p.ts for p in parts.values()]))
        step = slice_rows if slice_rows > 0 else max(len(stamps), 1)
        cuts = [int(t) for t in np.unique(stamps[step - 1 :: step])]
        if upto is not None:
            cuts.append(upto - 1)
        elif len(stamps):
            cuts.append(int(stamps[-1]))
        for cut in cuts:
            for input_name, part in parts.items():
                at = int(np.searchsorted(part.ts, cut, side="right"))
                if at:
                    engine.push(input_name, part.take(slice(0, at)))  # type: ignore[arg-type]
                    parts[input_name] = part.take(slice(at, None))  # type: ignore[arg-type]
            out = engine.advance(cut)[name]
            if len(out):
                yield out.to_elements()

    try:
        while open_inputs:
            for input_name in [n for n in open_inputs if not len(held[n])]:
                fill(input_name)
            if not open_inputs:
                break
            horizon = min(int(held[n].ts[-1]) for n in open_inputs)
            ready: dict[str, ColumnBatch] = {}
            for input_name, batch in held.items():
                cut = int(np.searchsorted(batch.ts, horizon, side="left"))
                ready[input_name] = batch.take(slice(0, cut))  # type: ignore[arg-type]
                held[input_name] = batch.take(slice(cut, None))  # type: ignore[arg-type]
            yield from feed(ready, horizon)
            for input_name in [n for n in open_inputs if int(held[n].ts[-1]) == horizon]:
                fill(input_name)  # its rows at the horizon may go on in its next block
        end = max((int(batch.ts[-1]) for batch in held.values() if len(batch)), default=end)
        yield from feed(held, None)
        part = engine.advance(end)[name]
        if len(part):
            yield part.to_elements()
    except (EvaluationError, InputOrderError) as exc:
        raise SourceDataError(str(exc)) from None


def _column_batch(block: list[Element] | NumericBlock, width: int) -> ColumnBatch:
    if isinstance(block, list):
        return ColumnBatch.from_elements(block, width)
    lineage = np.arange(block.first_seq, block.first_seq + len(block), dtype=np.int64)
    return ColumnBatch(block.ts, lineage, block.columns)


def _streams_only(program: plan.Program, files: Mapping[str, str]) -> bool:
    return all(program.inputs[n].kind is plan.Kind.STREAM for n in files)


def _output(program: plan.Program, output: str | None) -> str:
    name = output or program.last_query
    if name not in program.queries:
        raise SourceDataError(
            f"--output {name}: no registered query of that name ({', '.join(program.queries)})"
        )
    return name


def _ts_and_input(item: tuple[int, int, Element]) -> tuple[int, int]:
    return item[0], item[1]


def _tagged(n: int, rows: Iterable[Element]) -> Iterator[tuple[int, int, Element]]:
    for row in rows:
        yield row[0], n, row


def _runner(program: plan.Program, name: str, executor: str, run_limit: int) -> tuple[_Runner, bool]:
    """The engine that runs ``executor`` and whether the program's delays
    must be settled at the end."""
    if executor == "hb":
        from semiactive.node.engine.heartbeat import HeartbeatEngine, RecursiveProgramError

        try:
            return HeartbeatEngine(program, [name], run_limit=run_limit), False
        except RecursiveProgramError as exc:
            raise SourceDataError(f"--executor hb: {exc}") from None
    vector = _vector_engine(program, name, executor)
    if vector is not None:
        return ElementEngine(vector), False
    engine = Engine(program, [name])
    return engine, bool(engine.cut_delays)


def _vector_engine(program: plan.Program, name: str, executor: str) -> VectorEngine | None:
    """The columnar engine if ``executor`` asks for it and the query is
    vectorized; None for the row engines (``columnar`` insists)."""
    if executor not in ("columnar", "auto"):
        return None
    try:
        return VectorEngine(program, [name])
    except NotVectorized as exc:
        if executor == "columnar":
            raise SourceDataError(f"--executor columnar: {exc}: it keeps the row engine (dts)") from None
        return None


SETTLE_LIMIT_MS = 60_000


def _settle(engine: Engine, name: str, end: int) -> list[Element]:
    """A recursive program's last inputs still act through its delays (an
    order at the last tick is paid for 1 ms later): run on until no delay
    holds a tuple, at most :data:`SETTLE_LIMIT_MS` of event time after the
    last input (a loop that never settles is cut there, with a warning)."""
    delays = [op for op in engine.operators if isinstance(op, DelayOp)]
    out: list[Element] = []
    while any(d.pending for d in delays):
        t = engine.next_event()
        if t is None or t > end + SETTLE_LIMIT_MS:
            print(
                f"semiactive: warning: the program still holds delayed tuples {SETTLE_LIMIT_MS} ms "
                "after its last input; output cut there",
                file=sys.stderr,
            )
            break
        out += engine.advance(t)[name]
    return out


def run(
    file: str,
    streams: Sequence[str],
    *,
    output: str | None,
    executor: str,
    run_limit: int,
    out: TextIO | None = None,
    slice_rows: int = SLICE_ROWS,
    window_bounds: WindowBounds = "closed",
) -> int:
    program = load_program(file, window_bounds=window_bounds)
    if not program.queries:
        raise CqlError("the program registers no query: there is nothing to run", 1, 1, file)
    files = parse_streams(streams, program)
    missing = [n for n in program.inputs if n not in files and _used(program, n)]
    if missing:
        raise SourceDataError(f"no --stream given for input(s) {', '.join(missing)}")
    name = _output(program, output)
    root = program.query(name)
    fmt = formatter(root.schema, root.kind)
    out = out or sys.stdout  # looked up now: sys.stdout may be replaced (tests, redirection)
    parts: Iterator[list[Element]]
    vector = _vector_engine(program, name, executor) if _streams_only(program, files) else None
    if vector is not None:
        blocks = {
            n: read_blocks(path, program.inputs[n].schema, plan.Kind.STREAM) for n, path in files.items()
        }
        parts = stream_columns(vector, blocks, name, slice_rows)
    else:
        inputs = load_inputs(program, files)
        parts = stream(program, inputs, output, executor, run_limit, slice_rows=slice_rows)
    seq = 0
    for part in parts:
        out.write("".join(fmt(i, r) for i, r in enumerate(part, start=seq + 1)))
        seq += len(part)
    return 0


def _used(program: plan.Program, name: str) -> bool:
    scan = program.scans.get(name)
    if scan is None:
        return False
    seen: set[int] = set()
    stack = [plan.resolve(q) for q in program.queries.values()]
    while stack:
        node = stack.pop()
        if node is scan:
            return True
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(plan.resolve(c) for c in node.children)
    return False


def execute_partitioned(
    program: plan.Program,
    inputs: Mapping[str, Sequence[Element]],
    output: str,
    routing: Mapping[str, InputRouting],
    count: int,
    end_watermark: int,
) -> list[Element]:
    """What the consumer of a partitioned stage sees: ``program`` run as
    ``count`` partitions, and their outputs merged.

    ``routing`` maps an input stream to its :class:`semiactive.node.sections.partitions.InputRouting`.
    A stream that is absent is broadcast. Partition i gets the rows that
    ``InputRouting.owned`` gives it, and runs :func:`execute`. The outputs
    are merged by (ts, partition index, position in that partition's output),
    as a consumer's input section merges its edges, and seq is renumbered
    1..n. Every partition runs to the same end as the unpartitioned
    :func:`execute` with ``end_watermark``: that watermark, or the last
    timestamp of any input if later."""
    end = max((int(row[0]) for rows in inputs.values() for row in rows), default=end_watermark)
    end = max(end, end_watermark)
    outputs: list[list[Element]] = []
    for index in range(count):
        own: dict[str, list[Element]] = {}
        for name, rows in inputs.items():
            rule = routing.get(name)
            if rule is None:
                own[name] = list(rows)
                continue
            owned = rule.owned(rows, index, count)
            own[name] = [row for row, mine in zip(rows, owned, strict=True) if mine]
        outputs.append(execute(program, own, output, end_watermark=end))
    return merge_edges(outputs)


def merge_edges(runs: Sequence[Sequence[Element]]) -> list[Element]:
    """Rows of several edges (each in its order) merged as an input section
    merges them, by (ts, edge index, position on the edge), and numbered
    1..n in that order: what a consumer of a partitioned stage sees."""
    keyed = ([(e[0], index, n, e) for n, e in enumerate(rows)] for index, rows in enumerate(runs))
    merged = heapq.merge(*keyed, key=lambda item: item[:3])
    return [(e[0], seq, *e[2:]) for seq, (_, _, _, e) in enumerate(merged, start=1)]
