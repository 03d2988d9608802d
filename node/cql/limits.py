"""How deep a program may nest, and the recursion room to compile one.

The compiler and the engine's code generator walk syntax trees and plans
recursively, and CPython refuses both deep recursion (``RecursionError``)
and generated code with more than 200 nested parentheses (``SyntaxError``).
Rather than fail somewhere inside with a traceback, the parser measures
every statement and refuses, as a :class:`CqlError` at the offending token:

- more than :data:`MAX_DEPTH` levels of queries, subqueries, set operations,
  FROM items (joins are left-deep), operators and function calls;
- an expression nested more than :data:`MAX_NESTING` levels, where a chain
  such as ``a + b - c + ...`` counts once (the generator writes it flat).

Trees within those bounds need more recursion than CPython's default limit
of 1000 frames allows (a frozen dataclass's ``==`` alone takes three frames
per level), so the compiler and the engine's constructor run inside
:func:`recursion_headroom`.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from types import FrameType

from semiactive.node.cql import ast
from semiactive.node.cql.errors import CqlError

MAX_DEPTH = 500
MAX_NESTING = 100

# Frames per level of the deepest recursive walk (dataclass equality of
# expressions takes 3), with room for the code around it.
HEADROOM_FRAMES = 6 * MAX_DEPTH + 1000

_ADDITIVE = ("+", "-")
_CHAINED = ("+", "-", "*")


def check_depth(program: ast.Program, file: str) -> None:
    """Raise :class:`CqlError` at the first node of ``program`` beyond
    :data:`MAX_DEPTH` or :data:`MAX_NESTING`. Iterative: the point is to
    measure trees too deep to walk recursively."""
    todo: list[tuple[ast.Node, int, int]] = [(s, 1, 0) for s in program.statements]
    while todo:
        node, depth, nesting = todo.pop()
        if depth > MAX_DEPTH:
            raise CqlError(
                f"nested too deeply: more than {MAX_DEPTH} levels of subqueries, set operations, "
                "FROM items, operators and parentheses; split the query into registered queries",
                node.line,
                node.column,
                file,
            )
        if nesting > MAX_NESTING:
            raise CqlError(
                f"expression nested too deeply: more than {MAX_NESTING} levels of parentheses, "
                "operators and function calls (a chain such as a + b - c counts once); "
                "split it into registered queries",
                node.line,
                node.column,
                file,
            )
        for child, extra_depth, extra_nesting in _children(node):
            todo.append((child, depth + extra_depth, nesting + extra_nesting))


def _children(node: ast.Node) -> Iterator[tuple[ast.Node, int, int]]:
    """The children of ``node`` with what each adds to depth and nesting."""
    if isinstance(node, ast.RegisterQuery):
        yield node.query, 1, 0
    elif isinstance(node, ast.Query):
        yield node.body, 1, 0
    elif isinstance(node, ast.SetOp):
        yield node.left, 1, 0
        yield node.right, 1, 0
    elif isinstance(node, ast.StreamOp):
        yield node.query, 1, 0
    elif isinstance(node, ast.Select):
        yield from _select_children(node)
    elif isinstance(node, ast.FromSubquery):
        yield node.query, 1, 0
    elif isinstance(node, ast.ExprItem):
        yield node.expr, 1, 1
    elif isinstance(node, ast.Negate | ast.Not):
        yield node.operand, 1, 1
    elif isinstance(node, ast.BoolExpr):
        for operand in node.operands:
            yield operand, 1, 1
    elif isinstance(node, ast.Case):
        for part in node.parts:
            yield part, 1, 1
    elif isinstance(node, ast.Call):
        for arg in node.args:
            yield arg, 1, 1
    elif isinstance(node, ast.Binary):
        yield node.left, 1, 0 if _chain_link(node) else 1
        yield node.right, 1, 1


def _select_children(select: ast.Select) -> Iterator[tuple[ast.Node, int, int]]:
    # The FROM items are joined left-deep: the n-th sits n joins down.
    for number, item in enumerate(select.from_items, start=1):
        yield item, number, 0
    for select_item in select.items:
        yield select_item, 1, 0
    clauses = [select.where, select.having, *(select.group_by or ())]
    for clause in clauses:
        if clause is not None:
            yield clause, 1, 1


def _chain_link(node: ast.Binary) -> bool:
    """Whether ``node``'s left operand continues a chain the generator
    writes without parentheses (``a * b + c``, ``a + b - c``, ``a * b * c``)."""
    left = node.left
    if not isinstance(left, ast.Binary) or node.op not in _CHAINED or left.op not in _CHAINED:
        return False
    return node.op in _ADDITIVE or left.op == "*"


_lock = threading.Lock()
_active = 0
_saved = 0


@contextlib.contextmanager
def recursion_headroom(frames: int = HEADROOM_FRAMES) -> Iterator[None]:
    """Run the block with the recursion limit at least ``frames`` above the
    current stack depth, then restore it (when the last of concurrent
    blocks ends, so that threads do not lower each other's limit)."""
    global _active, _saved
    wanted = _stack_depth() + frames
    with _lock:
        if _active == 0:
            _saved = sys.getrecursionlimit()
        _active += 1
        if wanted > sys.getrecursionlimit():
            sys.setrecursionlimit(wanted)
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                sys.setrecursionlimit(_saved)


def _stack_depth() -> int:
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth
