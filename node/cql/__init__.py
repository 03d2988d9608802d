"""The CQL compiler front-end: CQL text -> logical plan (:mod:`semiactive.node.cql.plan`).

``compile_program`` parses (parser.py, grammar.lark), binds and type-checks
(binder.py, exprs.py) and validates the delay rule for recursive programs
(cycles.py); ``explain`` describes the result (explain.py). Every error is a
:class:`CqlError` positioned at the offending token; nesting is bounded
(limits.py), so that no input crashes the compiler.
"""

from __future__ import annotations

from collections.abc import Mapping

from semiactive.node.cql import plan
from semiactive.node.cql.binder import bind
from semiactive.node.cql.bounds import WindowBounds, with_bounds
from semiactive.node.cql.cycles import check_delays
from semiactive.node.cql.errors import CqlError
from semiactive.node.cql.explain import explain
from semiactive.node.cql.limits import recursion_headroom
from semiactive.node.cql.parser import parse

__all__ = ["CqlError", "compile_program", "explain", "parse"]


def compile_program(
    text: str,
    *,
    inputs: Mapping[str, plan.InputDecl] | None = None,
    file: str = "<query>",
    insert_delays: bool = False,
    window_bounds: WindowBounds = "closed",
) -> plan.Program:
    """Compile a CQL program.

    ``inputs`` declares stage inputs in addition to the program's own
    ``REGISTER STREAM`` / ``REGISTER RELATION`` statements. Every cycle must
    pass through a delay (``ISTREAM(...)<Now>``); with ``insert_delays`` an
    epsilon delay is added after a stream operator on each cycle without one.
    ``window_bounds``: closed (CQL's) or half-open (Stanford STREAM's)
    ``[Range T]`` windows (bounds.py).
    """
    with recursion_headroom():
        try:
            bound = bind(with_bounds(parse(text, file), window_bounds), inputs, file)
            check_delays(bound.program, positions=bound.positions, file=file, insert_delays=insert_delays)
        except (RecursionError, MemoryError) as exc:
            # The parser bounds nesting (limits.py); this is the safety net.
            reason = "nested too deeply" if isinstance(exc, RecursionError) else "too large"
            raise CqlError(f"the program is {reason} to compile", 1, 1, file) from None
    return bound.program
