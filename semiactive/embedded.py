"""The embedded single-process mode: ``semiactive query check`` and
``semiactive query run``.

``run`` reads every ``--stream NAME=FILE`` (CSV with a header, or JSON
Lines; column ``ts`` is event time in ms; a relation's file has ``op``), feeds
the engine in timestamp order and prints the chosen query's output as JSON
Lines: ``{"seq": n, "ts": t, <fields in SELECT order>}``, with ``"op"`` for
a relation-valued query.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from node.cql import CqlError, compile_program, explain, plan
from node.engine.elements import Element
from node.engine.engine import Engine, EvaluationError, InputOrderError
from node.engine.operators.streaming import DelayOp
from node.jsonl import formatter
from node.sources import SourceDataError, read_rows


def load_program(file: str, insert_delays: bool = False) -> plan.Program:
    try:
        text = Path(file).read_text()
    except OSError as exc:
        raise CqlError(f"cannot read: {exc.strerror}", 1, 1, file) from None
    return compile_program(text, file=file, insert_delays=insert_delays)


def check(file: str, insert_delays: bool = False, show_code: bool = False) -> str:
    """The plan of ``file``, once its code is also generated: a query the
    engine could not compile is a :class:`CqlError` here, not at run time.
    ``show_code``: with the generated Python of every registered query."""
    program = load_program(file, insert_delays)
    text = explain(program)
    if not program.queries:
        return text
    for name in list(program.queries) if show_code else [program.last_query]:
        engine = Engine(program, [name])
        if show_code:
            text += f"\n\n-- generated code of {name} --\n{engine.generated_source or ''}"
    return text


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


def load_inputs(program: plan.Program, files: dict[str, str]) -> dict[str, list[Element]]:
    return {
        name: list(read_rows(path, program.inputs[name].schema, program.inputs[name].kind))
        for name, path in files.items()
    }


def execute(
    program: plan.Program,
    inputs: dict[str, list[Element]],
    output: str | None = None,
    executor: str = "dts",
    run_limit: int = 100,
    end_watermark: int | None = None,
) -> list[Element]:
    """Run ``program`` over complete inputs up to ``end_watermark`` (default:
    the last input timestamp, and for a recursive program on until its
    delays hold nothing: see :func:`_settle`); return the output query's
    rows."""
    name = output or program.last_query
    if name not in program.queries:
        raise SourceDataError(
            f"--output {name}: no registered query of that name ({', '.join(program.queries)})"
        )
    end = max((rows[-1][0] for rows in inputs.values() if rows), default=0)
    if end_watermark is not None:
        end = max(end, end_watermark)
    if executor == "hb":
        from node.engine.heartbeat import HeartbeatEngine, RecursiveProgramError

        try:
            hb = HeartbeatEngine(program, [name], run_limit=run_limit)
        except RecursiveProgramError as exc:
            raise SourceDataError(f"--executor hb: {exc}") from None
        try:
            for stream, rows in inputs.items():
                hb.push(stream, rows)
            return hb.advance(end)[name]
        except (EvaluationError, InputOrderError) as exc:
            raise SourceDataError(str(exc)) from None
    engine = Engine(program, [name])
    try:
        for stream, rows in inputs.items():
            engine.push(stream, rows)
        out = engine.advance(end)[name]
        if end_watermark is None and engine.cut_delays:
            out += _settle(engine, name, end)
    except (EvaluationError, InputOrderError) as exc:
        raise SourceDataError(str(exc)) from None
    return out


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
    output: str | None,
    executor: str,
    run_limit: int,
    out: TextIO | None = None,
) -> int:
    program = load_program(file)
    if not program.queries:
        raise CqlError("the program registers no query: there is nothing to run", 1, 1, file)
    files = parse_streams(streams, program)
    missing = [n for n in program.inputs if n not in files and _used(program, n)]
    if missing:
        raise SourceDataError(f"no --stream given for input(s) {', '.join(missing)}")
    rows = execute(program, load_inputs(program, files), output, executor, run_limit)
    root = program.query(output or program.last_query)
    fmt = formatter(root.schema, root.kind)
    out = out or sys.stdout  # looked up now: sys.stdout may be replaced (tests, redirection)
    out.write("".join(fmt(i, r) for i, r in enumerate(rows, start=1)))
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
