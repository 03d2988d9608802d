"""Python the engine generates, compiled under names tracebacks can show.

Every distinct piece of generated source (an expression's lambda, a plan's
slice function) is compiled once, with a file name of its own,
``<semiactive-slice-3>``, whose text is put in :mod:`linecache`: a
traceback through generated code shows the generated line, not ``???``.
The same source compiled again (the same query on another replica, or in
another simulated run) reuses the code object, so the cache is bounded by
the distinct queries a process compiles. ``semiactive query check
--show-code`` prints the slice functions.
"""

from __future__ import annotations

import functools
import itertools
import linecache
from types import CodeType
from typing import Literal

_numbers = itertools.count(1)


@functools.cache
def compile_generated(source: str, kind: str, mode: Literal["eval", "exec"]) -> CodeType:
    filename = f"<semiactive-{kind}-{next(_numbers)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    return compile(source, filename, mode)
