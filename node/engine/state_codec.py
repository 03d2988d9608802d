"""Operator state as bytes and back: a codec of plain values, never pickle.

A snapshot of an engine's state travels between replicas (a peer's bytes
must never run code, so ``pickle`` and ``marshal`` are out). Operator state
is plain containers (tuples, lists, deques, dicts in insertion order) of
ints, floats, strings and None, plus a few small classes of the engine's
own (multisets, heaps of MIN/MAX, lineage bounds) registered here by name
with the attributes they are rebuilt from.

The bytes are JSON (exact for floats, NaN and infinities included): a
scalar or a tuple stands for itself (a tuple as an array, the bulk of any
state: rows and elements), every other container for a one-key object
(``{"l": items}``, ``{"q": [maxlen, items..]}``, ``{"d": [k, v, ..]}``,
``{"o": [class, attributes..]}``). Containers and objects are numbered as
they are finished, and a second reference to one is written ``{"@": n}``,
so state that shares an object gets one shared object back. Decoding
builds only the types listed here; anything else is a
:class:`StateFormatError`.
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

_SCALARS = frozenset({int, float, str, bool, type(None)})


class StateFormatError(ValueError):
    """Bytes that are not a state this codec wrote (truncated, forged, or
    from another version)."""


@dataclass(frozen=True)
class Form:
    """A flat form for a large, regular part of a state (a join's synopsis:
    millions of rows), written without the walk over every value: ``dump``
    gives a list of scalars and tuples of scalars only; ``load`` rebuilds
    the value from what JSON gives back (tuples as lists) and raises
    :class:`StateFormatError` on anything else (use :func:`plain_row`)."""

    name: str
    dump: Callable[[Any], list[Any]]
    load: Callable[[list[Any]], Any]


class Formed:
    """A value to be written in ``form``."""

    __slots__ = ("form", "value")

    def __init__(self, form: Form, value: Any) -> None:
        self.form = form
        self.value = value


class _Registry:
    """Classes whose instances may appear in state: name -> (class, the
    attributes that make up an instance); and the flat forms by name."""

    def __init__(self) -> None:
        self.by_name: dict[str, tuple[type, tuple[str, ...]]] = {}
        self.by_type: dict[type, tuple[str, tuple[str, ...]]] = {}
        self.forms: dict[str, Form] = {}
        self.form_of: dict[type, Form] = {}

    def add(self, cls: type, attributes: tuple[str, ...]) -> None:
        self.by_name[cls.__name__] = (cls, attributes)
        self.by_type[cls] = (cls.__name__, attributes)

    def add_form(self, form: Form) -> Form:
        self.forms[form.name] = form
        return form

    def knows(self, cls: type) -> bool:
        """Whether instances of ``cls`` may be part of a state."""
        return cls in self.by_type or cls in self.form_of


STATE_CLASSES = _Registry()


def state_class(*attributes: str, form: Form | None = None) -> Callable[[type], type]:
    """Class decorator: instances may be part of an operator's state and
    are rebuilt from ``attributes`` (without calling ``__init__``), or, for
    a class given a ``form`` (and no attributes), written and read only in
    that form."""
    if (form is None) == (not attributes):
        raise TypeError("a state class has attributes or a form, not both")

    def register(cls: type) -> type:
        if form is None:
            STATE_CLASSES.add(cls, attributes)
        else:
            STATE_CLASSES.form_of[cls] = STATE_CLASSES.add_form(form)
        return cls

    return register


def state_form(form: Form) -> Form:
    """Register ``form`` (an operator's ``STATE_FORMS`` for an attribute)."""
    return STATE_CLASSES.add_form(form)


def plain_row(value: Any) -> tuple[Any, ...]:
    """A row as JSON gave it back (a list of scalars) as a tuple."""
    if type(value) is not list or not _SCALARS.issuperset(map(type, value)):
        raise StateFormatError("a row in a state snapshot that is not a list of values")
    return tuple(value)


def plain_int(value: Any) -> int:
    if type(value) is not int:
        raise StateFormatError("a count in a state snapshot that is not an integer")
    return value


class _Encoder:
    """Values to a JSON-able tree: scalars and tuples as themselves (arrays),
    every other container as a one-key object. Containers and objects are
    numbered when finished (children first, the order in which the JSON
    decoder completes objects), so a second reference can name one."""

    def __init__(self) -> None:
        self.numbers: dict[int, int] = {}  # id -> number (-1 while its children are encoded)
        self.keep: list[Any] = []  # keeps ids valid while encoding
        self.finished = 0

    def tree(self, value: Any) -> Any:
        kind = type(value)
        if kind in _SCALARS:
            return value
        if kind is tuple:
            if _SCALARS.issuperset(map(type, value)):
                return value
            return [self.tree(v) for v in value]
        form = STATE_CLASSES.form_of.get(kind)
        if form is not None or kind is Formed:
            if form is None:
                form, value = value.form, value.value
            return {"f": [form.name, form.dump(value)]}
        key = id(value)
        ref = self.numbers.get(key)
        if ref is not None:
            if ref < 0:
                raise TypeError("a state snapshot cannot hold a container inside itself")
            return {"@": ref}
        self.numbers[key] = -1
        self.keep.append(value)
        tree = self.tree
        out: dict[str, list[Any]]
        if kind is list:
            out = {"l": [tree(v) for v in value]}
        elif kind is deque:
            out = {"q": [value.maxlen, *[tree(v) for v in value]]}
        elif kind is dict:
            flat: list[Any] = []
            for k, v in value.items():
                flat.append(tree(k))
                flat.append(tree(v))
            out = {"d": flat}
        else:
            registered = STATE_CLASSES.by_type.get(kind)
            if registered is None:
                raise TypeError(f"a {kind.__name__} cannot be part of a state snapshot")
            name, attributes = registered
            out = {"o": [name, *(tree(getattr(value, a)) for a in attributes)]}
        self.numbers[key] = self.finished
        self.finished += 1
        return out


class _Box:
    """A container the decoder finished, on its way into its parent (a bare
    list would be taken for a tuple's array)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _value(node: Any) -> Any:
    kind = type(node)
    if kind is list:
        return tuple(map(_value, node))
    if kind is _Box:
        return node.value
    return node


class _Decoder:
    """Called by the JSON decoder for every object, children first."""

    def __init__(self) -> None:
        self.objects: list[Any] = []

    def __call__(self, pairs: list[tuple[str, Any]]) -> _Box:
        if len(pairs) != 1:
            raise StateFormatError("an object in a state snapshot with other than one tag")
        tag, body = pairs[0]
        if tag == "@":
            if type(body) is not int or not 0 <= body < len(self.objects):
                raise StateFormatError("a reference to no earlier object in a state snapshot")
            return _Box(self.objects[body])
        if type(body) is not list:
            raise StateFormatError(f"a {tag!r} in a state snapshot without its items")
        if tag == "f":
            form = STATE_CLASSES.forms.get(body[0]) if len(body) == 2 and isinstance(body[0], str) else None
            if form is None or type(body[1]) is not list:
                raise StateFormatError(f"no state form {body[:1]!r}")
            return _Box(form.load(body[1]))
        out: Any
        if tag == "l":
            out = list(map(_value, body))
        elif tag == "q":
            if not body or not (body[0] is None or (type(body[0]) is int and 0 <= body[0] <= sys.maxsize)):
                raise StateFormatError("a malformed deque in a state snapshot")
            out = deque(map(_value, body[1:]), maxlen=body[0])
        elif tag == "d":
            out = self._dict(body)
        elif tag == "o":
            out = self._object(body)
        else:
            raise StateFormatError(f"unknown tag {tag!r} in a state snapshot")
        self.objects.append(out)
        return _Box(out)

    @staticmethod
    def _dict(body: list[Any]) -> dict[Any, Any]:
        if len(body) % 2:
            raise StateFormatError("a dict with a key but no value in a state snapshot")
        items = iter(map(_value, body))
        try:
            return dict(zip(items, items, strict=True))
        except TypeError:
            raise StateFormatError("an unhashable dict key in a state snapshot") from None

    @staticmethod
    def _object(body: list[Any]) -> Any:
        name = body[0] if body else None
        registered = STATE_CLASSES.by_name.get(name) if isinstance(name, str) else None
        if registered is None:
            raise StateFormatError(f"no state class {name!r}")
        cls, attributes = registered
        if len(body) != 1 + len(attributes):
            raise StateFormatError(f"a {cls.__name__} in a state snapshot has the wrong number of fields")
        out: Any = object.__new__(cls)
        for attribute, field in zip(attributes, body[1:], strict=True):
            setattr(out, attribute, _value(field))
        return out


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """Millions of new tuples and lists (a join synopsis) set off the cyclic
    collector again and again, each time over the whole heap: decoding took
    several times longer. Nothing made here forms a cycle."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def encode_state(value: Any) -> bytes:
    """``value`` (plain containers, scalars and registered objects) as bytes.
    Raises TypeError for anything else: state the codec does not know must
    fail the snapshot, not be left out of it."""
    with _no_collection():
        return json.dumps(_Encoder().tree(value), separators=(",", ":"), allow_nan=True).encode()


def decode_state(data: bytes | bytearray) -> Any:
    """What :func:`encode_state` was given (equal, sharing preserved), or
    :class:`StateFormatError`."""
    try:
        with _no_collection():
            return _value(json.loads(data, object_pairs_hook=_Decoder()))
    except RecursionError:
        raise StateFormatError("a state snapshot nested too deeply") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StateFormatError(f"a state snapshot is not valid: {exc}") from None
