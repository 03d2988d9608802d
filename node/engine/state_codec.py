"""Operator state as bytes and back: a codec of plain values, never pickle.

A snapshot of an engine's state travels between replicas (a peer's bytes
must never run code, so ``pickle`` and ``marshal`` are out). Operator state
is plain containers (tuples, lists, deques, dicts in insertion order) of
ints, floats, strings and None, plus a few small classes of the engine's
own (multisets, heaps of MIN/MAX, lineage bounds) registered here by name
with the attributes they are rebuilt from.

The bytes are JSON (exact for floats, NaN and infinities included) of a
tagged tree: a scalar stands for itself; a list ``[tag, ...]`` for a
container or object. Mutable containers and objects are numbered as they
are first met, and a second reference to one is written as ``["@", n]``, so
state that shares an object (two windows over one buffer) gets one shared
object back. Decoding builds only the types listed here; anything else is
a :class:`StateFormatError`.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from typing import Any


class StateFormatError(ValueError):
    """Bytes that are not a state this codec wrote (truncated, forged, or
    from another version)."""


class _Registry:
    """Classes whose instances may appear in state: name -> (class, the
    attributes that make up an instance)."""

    def __init__(self) -> None:
        self.by_name: dict[str, tuple[type, tuple[str, ...]]] = {}
        self.by_type: dict[type, tuple[str, tuple[str, ...]]] = {}

    def add(self, cls: type, attributes: tuple[str, ...]) -> None:
        self.by_name[cls.__name__] = (cls, attributes)
        self.by_type[cls] = (cls.__name__, attributes)


STATE_CLASSES = _Registry()


def state_class(*attributes: str) -> Callable[[type], type]:
    """Class decorator: instances may be part of an operator's state and
    are rebuilt from ``attributes`` (without calling ``__init__``)."""

    def register(cls: type) -> type:
        STATE_CLASSES.add(cls, attributes)
        return cls

    return register


_SCALARS = (int, float, str, type(None))


class _Encoder:
    def __init__(self) -> None:
        self.seen: dict[int, int] = {}
        self.keep: list[Any] = []  # keeps ids valid while encoding

    def tree(self, value: Any) -> Any:
        if isinstance(value, _SCALARS) and type(value) is not bool:
            return value
        kind = type(value)
        if kind is tuple:
            return ["t", *map(self.tree, value)]
        if kind is bool:
            return ["?", int(value)]
        ref = self.seen.get(id(value))
        if ref is not None:
            return ["@", ref]
        n = len(self.seen)
        self.seen[id(value)] = n
        self.keep.append(value)
        if kind is list:
            return ["l", *map(self.tree, value)]
        if kind is deque:
            return ["q", value.maxlen, *map(self.tree, value)]
        if kind is dict:
            out: list[Any] = ["d"]
            for k, v in value.items():
                out.append(self.tree(k))
                out.append(self.tree(v))
            return out
        registered = STATE_CLASSES.by_type.get(kind)
        if registered is None:
            raise TypeError(f"a {kind.__name__} cannot be part of a state snapshot")
        name, attributes = registered
        return ["o", name, *(self.tree(getattr(value, a)) for a in attributes)]


class _Decoder:
    def __init__(self) -> None:
        self.objects: list[Any] = []

    def value(self, node: Any) -> Any:
        if not isinstance(node, list):
            if isinstance(node, _SCALARS) and type(node) is not bool:
                return node
            raise StateFormatError(f"unexpected {type(node).__name__} in a state snapshot")
        if not node or not isinstance(node[0], str):
            raise StateFormatError("a container in a state snapshot has no tag")
        tag = node[0]
        if tag == "t":
            return tuple(self.value(x) for x in node[1:])
        if tag == "?":
            return self._bool(node)
        if tag == "@":
            return self._ref(node)
        if tag == "l":
            out: list[Any] = []
            self.objects.append(out)
            out.extend(self.value(x) for x in node[1:])
            return out
        if tag == "q":
            return self._deque(node)
        if tag == "d":
            return self._dict(node)
        if tag == "o":
            return self._object(node)
        raise StateFormatError(f"unknown tag {tag!r} in a state snapshot")

    def _bool(self, node: list[Any]) -> bool:
        if len(node) != 2 or node[1] not in (0, 1) or type(node[1]) is not int:
            raise StateFormatError("a malformed boolean in a state snapshot")
        return bool(node[1])

    def _ref(self, node: list[Any]) -> Any:
        if len(node) != 2 or type(node[1]) is not int or not 0 <= node[1] < len(self.objects):
            raise StateFormatError("a reference to no earlier object in a state snapshot")
        return self.objects[node[1]]

    def _deque(self, node: list[Any]) -> deque[Any]:
        if len(node) < 2 or not (node[1] is None or (type(node[1]) is int and node[1] >= 0)):
            raise StateFormatError("a malformed deque in a state snapshot")
        out: deque[Any] = deque(maxlen=node[1])
        self.objects.append(out)
        out.extend(self.value(x) for x in node[2:])
        return out

    def _dict(self, node: list[Any]) -> dict[Any, Any]:
        if len(node) % 2 != 1:
            raise StateFormatError("a dict with a key but no value in a state snapshot")
        out: dict[Any, Any] = {}
        self.objects.append(out)
        for i in range(1, len(node), 2):
            key = self.value(node[i])
            try:
                out[key] = self.value(node[i + 1])
            except TypeError:
                raise StateFormatError("an unhashable dict key in a state snapshot") from None
        return out

    def _object(self, node: list[Any]) -> Any:
        name = node[1] if len(node) >= 2 else None
        registered = STATE_CLASSES.by_name.get(name) if isinstance(name, str) else None
        if registered is None:
            raise StateFormatError(f"no state class {node[1:2]!r}")
        cls, attributes = registered
        if len(node) != 2 + len(attributes):
            raise StateFormatError(f"a {cls.__name__} in a state snapshot has the wrong number of fields")
        out: Any = object.__new__(cls)
        self.objects.append(out)
        for name, field in zip(attributes, node[2:], strict=True):
            setattr(out, name, self.value(field))
        return out


def encode_state(value: Any) -> bytes:
    """``value`` (plain containers, scalars and registered objects) as bytes.
    Raises TypeError for anything else: state the codec does not know must
    fail the snapshot, not be left out of it."""
    return json.dumps(_Encoder().tree(value), separators=(",", ":"), allow_nan=True).encode()


def decode_state(data: bytes) -> Any:
    """What :func:`encode_state` was given (equal, sharing preserved), or
    :class:`StateFormatError`."""
    try:
        tree = json.loads(data)
        return _Decoder().value(tree)
    except RecursionError:
        raise StateFormatError("a state snapshot nested too deeply") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StateFormatError(f"a state snapshot is not valid: {exc}") from None
