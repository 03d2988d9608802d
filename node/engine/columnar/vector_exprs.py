"""CQL expressions evaluated over whole columns, with the row engine's results.

The row engine computes in Python, whose integers do not overflow; numpy's
int64 does. So before an integer ``+ - *`` the operands' ranges (their
smallest and largest values) bound the result: inside int64 it runs on
int64 arrays, outside on object arrays of Python ints, exact either way.
A comparison of an integer with a float converts the integer to float in
numpy, which is exact only below 2**53: beyond it the comparison runs on
Python objects too. Text compares as Python compares strings: as strings
(object arrays) in one process, and as the wire's UTF-8 bytes on record
blocks, whose order is the order of code points and whose trailing NULs
numpy ignores as the row codec strips them. Division, modulo by other
than a literal, CASE and anything that can be NULL keep the row engine
(:func:`unsupported`)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from semiactive.node.cql import plan
from semiactive.node.engine.columnar.batch import Array

INT64 = (-(2**63), 2**63 - 1)
EXACT_FLOAT = 2**53

_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq,
    "==": operator.eq,
    "!=": operator.ne,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_ARITH: dict[str, Callable[[Any, Any], Any]] = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def unsupported(expr: plan.Expr) -> str | None:
    """Why ``expr`` has no vectorized form, or None when it has one."""
    if isinstance(expr, plan.ColRef):
        return "a nullable column" if expr.nullable else None
    if isinstance(expr, plan.Literal):
        return None
    if isinstance(expr, plan.Arith):
        if expr.op not in _ARITH and _literal_divisor(expr) is None:
            return f"'{expr.op}' by other than a non-zero integer literal (NULL for a zero divisor)"
        if expr.nullable:
            return "an expression that can be NULL"
        return unsupported(expr.left) or unsupported(expr.right)
    if isinstance(expr, plan.Negate):
        return "an expression that can be NULL" if expr.nullable else unsupported(expr.operand)
    if isinstance(expr, plan.Compare):
        if expr.op not in _COMPARE:
            return f"comparison '{expr.op}'"
        names = {expr.left.type.name, expr.right.type.name}
        if plan.TypeName.BYTE in names:
            return "a comparison of a byte"
        if plan.TypeName.CHAR in names:
            if names != {plan.TypeName.CHAR}:
                return "a comparison of text with other than text"
            if any(isinstance(x, plan.Literal) and "\0" in str(x.value) for x in (expr.left, expr.right)):
                return "a text literal holding NUL (the wire strips trailing NULs)"
        return unsupported(expr.left) or unsupported(expr.right)
    if isinstance(expr, plan.BoolOp):
        return next((r for r in map(unsupported, expr.operands) if r), None)
    if isinstance(expr, plan.Not):
        return unsupported(expr.operand)
    return type(expr).__name__.upper()


def columns_read(expr: plan.Expr) -> set[int]:
    """The column positions ``expr`` reads."""
    if isinstance(expr, plan.ColRef):
        return {expr.index}
    children: tuple[plan.Expr, ...] = ()
    if isinstance(expr, plan.Arith | plan.Compare):
        children = (expr.left, expr.right)
    elif isinstance(expr, plan.Negate | plan.Not):
        children = (expr.operand,)
    elif isinstance(expr, plan.BoolOp):
        children = expr.operands
    return set().union(*(columns_read(c) for c in children))


def evaluate(expr: plan.Expr, columns: Sequence[Array], n: int) -> Array:
    """The values of ``expr`` over ``n`` rows given as ``columns``."""
    if isinstance(expr, plan.ColRef):
        return columns[expr.index]
    if isinstance(expr, plan.Literal):
        return _literal(expr.value, n)
    if isinstance(expr, plan.Arith):
        divisor = _literal_divisor(expr)
        if divisor is not None:
            return _divide(expr.op, evaluate(expr.left, columns, n), divisor)
        return _arith(_ARITH[expr.op], evaluate(expr.left, columns, n), evaluate(expr.right, columns, n))
    if isinstance(expr, plan.Negate):
        value = evaluate(expr.operand, columns, n)
        if value.dtype == np.int64 and n and int(value.min()) == INT64[0]:
            value = value.astype(object)
        return -value  # type: ignore[no-any-return]
    if isinstance(expr, plan.Compare):
        if expr.left.type.name is plan.TypeName.CHAR:
            return _compare_text(expr, columns, n)
        left, right = _comparable(evaluate(expr.left, columns, n), evaluate(expr.right, columns, n))
        with np.errstate(invalid="ignore"):  # a NaN compares false, as in the row engine
            return np.asarray(_COMPARE[expr.op](left, right), dtype=bool)
    if isinstance(expr, plan.BoolOp):
        combine = np.logical_and if expr.op.lower() == "and" else np.logical_or
        values = [evaluate(o, columns, n) for o in expr.operands]
        out = values[0]
        for v in values[1:]:
            out = combine(out, v)
        return out
    if isinstance(expr, plan.Not):
        return np.logical_not(evaluate(expr.operand, columns, n))
    raise TypeError(f"no vectorized form for {expr!r}")


def _literal(value: int | float | str, n: int) -> Array:
    if type(value) is int:
        dtype: Any = np.int64 if INT64[0] <= value <= INT64[1] else object
        return np.full(n, value, dtype=dtype)
    if type(value) is float:
        return np.full(n, value, dtype=np.float64)
    out = np.empty(n, dtype=object)
    out[:] = value
    return out


def bounds(values: Array) -> tuple[int, int] | None:
    """The smallest and largest value of an integer column (None if empty or
    not integer)."""
    if not len(values):
        return None
    if values.dtype == np.int64:
        return int(values.min()), int(values.max())
    if values.dtype == object and all(type(v) is int for v in values.tolist()):
        return int(min(values)), int(max(values))
    return None


def _arith(op: Callable[[Any, Any], Any], left: Array, right: Array) -> Array:
    if left.dtype == np.int64 and right.dtype == np.int64 and len(left):
        a, b = bounds(left), bounds(right)
        assert a is not None and b is not None
        corners = [op(x, y) for x in a for y in b]
        if min(corners) < INT64[0] or max(corners) > INT64[1]:
            left, right = left.astype(object), right.astype(object)
    elif left.dtype == object or right.dtype == object:
        left, right = left.astype(object), right.astype(object)
    with np.errstate(over="ignore", invalid="ignore"):  # floats overflow to inf, as IEEE 754 says
        return np.asarray(op(left, right))


def _literal_divisor(expr: plan.Arith) -> int | None:
    """``k`` of an integer ``x / k`` or ``x % k`` with a non-zero literal
    ``k`` (NULL only where ``x`` is), else None."""
    right = expr.right
    if (
        expr.op in ("/", "%")
        and expr.type.name is plan.TypeName.INTEGER
        and isinstance(right, plan.Literal)
        and type(right.value) is int
        and right.value != 0
    ):
        return right.value
    return None


def _divide(op: str, left: Array, k: int) -> Array:
    """``left / k`` or ``left % k``, truncating toward zero as the row
    engine does (the remainder takes the dividend's sign). Over magnitudes:
    ``abs`` of int64's lowest value, and a quotient beyond int64, need
    Python integers."""
    if left.dtype != np.int64 or (len(left) and int(left.min()) == INT64[0]) or abs(k) > INT64[1]:
        left = left.astype(object)
    magnitude = np.abs(left)
    negative = np.asarray(left < 0, dtype=bool)
    if op == "%":
        out = magnitude % abs(k)
        flip = negative
    else:
        out = magnitude // abs(k)
        flip = negative != (k < 0)
    return np.where(flip, -out, out)


def _comparable(left: Array, right: Array) -> tuple[Array, Array]:
    """Operands numpy compares as Python would: as objects when one is an
    integer beyond float's exact range and the other a float, or when either
    is already an object array."""
    kinds = {left.dtype.kind, right.dtype.kind}
    if "O" in kinds:
        return left.astype(object), right.astype(object)
    if kinds == {"i", "f"}:
        ints = left if left.dtype.kind == "i" else right
        b = bounds(ints)
        if b is not None and (b[0] < -EXACT_FLOAT or b[1] > EXACT_FLOAT):
            return left.astype(object), right.astype(object)
    return left, right


def _compare_text(expr: plan.Compare, columns: Sequence[Array], n: int) -> Array:
    """A comparison of text: a literal stays one value, compared with each
    row's; beside the wire's bytes, text is compared as UTF-8 bytes."""
    sides = [
        x.value if isinstance(x, plan.Literal) else evaluate(x, columns, n) for x in (expr.left, expr.right)
    ]
    if any(isinstance(v, np.ndarray) and v.dtype.kind == "S" for v in sides):
        sides = [_as_bytes(v) for v in sides]
    out = np.asarray(_COMPARE[expr.op](*sides), dtype=bool)
    return out if out.ndim else np.full(n, bool(out))


def _as_bytes(values: object) -> Any:
    if isinstance(values, str):
        return values.encode("utf-8")
    assert isinstance(values, np.ndarray)
    if values.dtype.kind == "S":
        return values
    return np.array([v.encode("utf-8") for v in values.tolist()], dtype=bytes)
