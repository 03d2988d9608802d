"""Compile typed plan expressions to Python source, then to functions.

Operators run generated code (a list comprehension for a whole batch, a
key function for a group) instead of interpreting an expression tree per
tuple: in CPython that is the difference between ~50 ns and ~1 us per tuple.

Only expressions marked ``nullable`` (those containing ``/`` or ``%``) pay for
NULL checks. Integer ``/`` and ``%`` truncate toward zero, as in C and
Stanford STREAM; division by zero gives NULL; a comparison with NULL is false.

A left-deep chain of ``+ - *`` (``a + b - c + ...``, which is how the parser
reads a long sum) is written flat, with parentheses only where precedence
needs them: nested, a 300-term sum would exceed CPython's limit of 200
nested parentheses. The Python nesting of the generated code thus follows
the CQL expression's own nesting, which the parser bounds
(:mod:`semiactive.node.cql.limits`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from semiactive.node.cql import plan
from semiactive.node.engine.elements import VALUES
from semiactive.node.engine.generated_code import compile_generated


def _idiv(a: int | None, b: int | None) -> int | None:
    if a is None or b is None or b == 0:
        return None
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _imod(a: int | None, b: int | None) -> int | None:
    if a is None or b is None or b == 0:
        return None
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def _fdiv(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def _fmod(a: float | None, b: float | None) -> float | None:
    """C's ``fmod``; its domain errors (an infinite or NaN dividend) give
    NULL, as a zero divisor does."""
    if a is None or b is None or b == 0 or not math.isfinite(a):
        return None
    return math.fmod(a, b)


def _nadd(a: Any, b: Any) -> Any:
    return None if a is None or b is None else a + b


def _nsub(a: Any, b: Any) -> Any:
    return None if a is None or b is None else a - b


def _nmul(a: Any, b: Any) -> Any:
    return None if a is None or b is None else a * b


def _nneg(a: Any) -> Any:
    return None if a is None else -a


def _nchain(ops: str, first: Any, *rest: Any) -> Any:
    """``((first ops[0] rest[0]) ops[1] rest[1]) ...`` for ``+ - *``, NULL if
    any operand is: a nullable chain as one call instead of nested ones."""
    if first is None or None in rest:
        return None
    value = first
    for op, x in zip(ops, rest, strict=True):
        value = value + x if op == "+" else value - x if op == "-" else value * x
    return value


def _ncmp(op: str) -> Callable[[Any, Any], bool]:
    import operator

    fn = {
        "=": operator.eq,
        "!=": operator.ne,
        "<": operator.lt,
        "<=": operator.le,
        ">": operator.gt,
        ">=": operator.ge,
    }[op]

    def compare(a: Any, b: Any) -> bool:
        return a is not None and b is not None and bool(fn(a, b))

    return compare


def _nfloat(a: int | None) -> float | None:
    return None if a is None else float(a)


RUNTIME: dict[str, Any] = {
    "_nfloat": _nfloat,
    "_idiv": _idiv,
    "_imod": _imod,
    "_fdiv": _fdiv,
    "_fmod": _fmod,
    "_nadd": _nadd,
    "_nsub": _nsub,
    "_nmul": _nmul,
    "_nneg": _nneg,
    "_nchain": _nchain,
    "_ncmp_eq": _ncmp("="),
    "_ncmp_ne": _ncmp("!="),
    "_ncmp_lt": _ncmp("<"),
    "_ncmp_le": _ncmp("<="),
    "_ncmp_gt": _ncmp(">"),
    "_ncmp_ge": _ncmp(">="),
}

_CMP_NAMES = {"=": "eq", "==": "eq", "!=": "ne", "<>": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
_CMP_PY = {"=": "==", "==": "==", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_NULL_ARITH = {"+": "_nadd", "-": "_nsub", "*": "_nmul"}


def may_be_null(expr: plan.Expr) -> bool:
    """Whether the arithmetic ``expr`` can be NULL: it divides, or reads a
    column computed by a division somewhere upstream. A loop, not a
    recursion: the generator asks this of every link of a long chain."""
    todo = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, plan.ColRef | plan.Arith | plan.Negate | plan.Case) and node.nullable:
            return True
        if isinstance(node, plan.Arith | plan.Negate):
            todo.extend(_operands(node))
    return False


def _operands(expr: plan.Expr) -> tuple[plan.Expr, ...]:
    if isinstance(expr, plan.Arith | plan.Compare):
        return (expr.left, expr.right)
    if isinstance(expr, plan.Negate | plan.Not):
        return (expr.operand,)
    if isinstance(expr, plan.BoolOp):
        return expr.operands
    return ()


# How tightly generated text binds: an atom (a name, an index, a call, a
# parenthesised or unary expression) goes anywhere, a product inside a sum.
_SUM, _PRODUCT, _ATOM = 0, 1, 2
_CHAIN_OPS = ("+", "-", "*")


def source(expr: plan.Expr, var: str = "e", offset: int = VALUES) -> str:
    """Python source evaluating ``expr`` on the tuple named ``var`` whose
    attribute values start at index ``offset`` (parenthesised where needed,
    so that callers can embed it anywhere)."""
    text, binding = _source(expr, var, offset)
    return text if binding == _ATOM else f"({text})"


def literal(value: int | float | str) -> str:
    """A constant as Python source. Infinities are written as a literal that
    overflows (``repr`` gives ``inf``, which is no Python name)."""
    if isinstance(value, float) and not math.isfinite(value):
        if math.isnan(value):
            return "(1e999 * 0)"
        return "1e999" if value > 0 else "-1e999"
    return repr(value)


def _source(expr: plan.Expr, var: str, offset: int) -> tuple[str, int]:
    if isinstance(expr, plan.ColRef):
        return f"{var}[{expr.index + offset}]", _ATOM
    if isinstance(expr, plan.Literal):
        return literal(expr.value), _ATOM
    if isinstance(expr, plan.Negate):
        if may_be_null(expr.operand):
            return f"_nneg({source(expr.operand, var, offset)})", _ATOM
        return f"-{source(expr.operand, var, offset)}", _ATOM
    if isinstance(expr, plan.Arith):
        return _arith(expr, var, offset)
    if isinstance(expr, plan.Compare):
        division = _literal_division(expr.left, var, offset)
        if division is not None and isinstance(expr.right, plan.Literal) and expr.right.value is not None:
            column, value = division
            right = literal(expr.right.value)
            return f"({column} is not None and {value} {_CMP_PY[expr.op]} {right})", _ATOM
        left, _ = _source(expr.left, var, offset)
        right, _ = _source(expr.right, var, offset)
        if may_be_null(expr.left) or may_be_null(expr.right):
            return f"_ncmp_{_CMP_NAMES[expr.op]}({left}, {right})", _ATOM
        return f"({left} {_CMP_PY[expr.op]} {right})", _ATOM
    if isinstance(expr, plan.BoolOp):
        joiner = " and " if expr.op.lower() == "and" else " or "
        return "(" + joiner.join(source(o, var, offset) for o in expr.operands) + ")", _ATOM
    if isinstance(expr, plan.Not):
        return f"(not {source(expr.operand, var, offset)})", _ATOM
    if isinstance(expr, plan.Case):
        return _case(expr, var, offset), _ATOM
    raise TypeError(f"cannot compile expression {expr!r}")


def _case(expr: plan.Case, var: str, offset: int) -> str:
    """Nested conditional expressions; an integer value of a float CASE is
    made a float, so the column's values have one type."""

    def value(v: plan.Expr) -> str:
        text = source(v, var, offset)
        if expr.type == plan.FLOAT and v.type.name is plan.TypeName.INTEGER:
            return f"_nfloat({text})" if may_be_null(v) else f"float({text})"
        return text

    text = "None" if expr.otherwise is None else value(expr.otherwise)
    for condition, v in reversed(list(zip(expr.conditions, expr.values, strict=True))):
        text = f"({value(v)} if {source(condition, var, offset)} else {text})"
    return text


def _arith(expr: plan.Arith, var: str, offset: int) -> tuple[str, int]:
    integer = expr.type.name is plan.TypeName.INTEGER
    division = _literal_division(expr, var, offset)
    if division is not None:
        column, value = division
        return f"(None if {column} is None else {value})", _ATOM
    if expr.op in ("/", "%"):
        left, _ = _source(expr.left, var, offset)
        right, _ = _source(expr.right, var, offset)
        helper = ("_idiv" if integer else "_fdiv") if expr.op == "/" else ("_imod" if integer else "_fmod")
        return f"{helper}({left}, {right})", _ATOM
    ops, operands = _chain(expr)
    if any(may_be_null(o) for o in operands):
        texts = [_source(o, var, offset)[0] for o in operands]
        if len(ops) == 1:
            return f"{_NULL_ARITH[ops[0]]}({texts[0]}, {texts[1]})", _ATOM
        return f"_nchain({''.join(ops)!r}, {', '.join(texts)})", _ATOM
    text, binding = _source(operands[0], var, offset)
    for op, operand in zip(ops, operands[1:], strict=True):
        if op == "*" and binding == _SUM:
            text = f"({text})"
        right, right_binding = _source(operand, var, offset)
        if right_binding <= (_PRODUCT if op == "*" else _SUM):
            right = f"({right})"
        text, binding = f"{text} {op} {right}", (_PRODUCT if op == "*" else _SUM)
    return text, binding


def _chain(expr: plan.Arith) -> tuple[list[str], list[plan.Expr]]:
    """The operators and operands of the left-deep chain of ``+ - *`` at
    ``expr``: ``((a + b) - c) * d`` is ``["+", "-", "*"], [a, b, c, d]``."""
    ops: list[str] = []
    operands: list[plan.Expr] = []
    node: plan.Expr = expr
    while isinstance(node, plan.Arith) and node.op in _CHAIN_OPS:
        ops.append(node.op)
        operands.append(node.right)
        node = node.left
    operands.append(node)
    ops.reverse()
    operands.reverse()
    return ops, operands


def _literal_division(expr: plan.Expr, var: str, offset: int) -> tuple[str, str] | None:
    """For ``column / k`` or ``column % k`` on integers with a non-zero
    literal ``k`` (NULL only when the column is): the column's source and the
    result's source for a non-NULL column, truncating toward zero as
    :func:`_idiv` and :func:`_imod` do. Inline, it costs no call."""
    if not (
        isinstance(expr, plan.Arith)
        and expr.op in ("/", "%")
        and expr.type.name is plan.TypeName.INTEGER
        and isinstance(expr.left, plan.ColRef)
        and isinstance(expr.right, plan.Literal)
        and type(expr.right.value) is int
        and expr.right.value != 0
    ):
        return None
    column = source(expr.left, var, offset)
    divisor = expr.right.value
    k = abs(divisor)
    if expr.op == "%":
        value = f"({column} % {k} if {column} >= 0 else -(-{column} % {k}))"
    elif divisor > 0:
        value = f"({column} // {k} if {column} >= 0 else -(-{column} // {k}))"
    else:
        value = f"(-({column} // {k}) if {column} >= 0 else -{column} // {k})"
    return column, value


def build(code: str, **extra: Any) -> Any:
    """Evaluate generated ``code`` (one expression, usually a lambda) with the
    runtime helpers in scope."""
    namespace = dict(RUNTIME)
    namespace.update(extra)
    return eval(compile_generated(code, "expression", "eval"), namespace)  # noqa: S307


def row_function(
    exprs: tuple[plan.Expr, ...], offset: int = VALUES
) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A function mapping an element to the tuple of ``exprs`` values."""
    items = ", ".join(source(x, "e", offset) for x in exprs)
    return build(f"lambda e: ({items}{',' if len(exprs) == 1 else ''})")  # type: ignore[no-any-return]


def scalar_function(expr: plan.Expr, offset: int = VALUES) -> Callable[[tuple[Any, ...]], Any]:
    return build(f"lambda e: {source(expr, 'e', offset)}")  # type: ignore[no-any-return]


def element_source(var: str, width: int, ts: str | None = None, sign: str | None = None) -> str:
    """Source of a copy of element ``var`` (``width`` values) with ``ts`` and
    ``sign`` replaced: spelled out field by field, which CPython builds about
    twice as fast as ``(ts, *var[1:])``."""
    values = "".join(f", {var}[{VALUES + i}]" for i in range(width))
    return f"({ts or var + '[0]'}, {var}[1], {sign or var + '[2]'}{values})"
