"""Floats in one total order, for MIN / MAX.

Python's ``<`` is no order on floats: every comparison with a NaN is
false, so a heap holding one answers by history, and ``-0.0 == 0.0`` makes
a dict keep whichever zero came first. A float MIN / MAX accumulator keeps
instead each value's :func:`float_key`, an integer in this order:
``-inf < ... < -0.0 < 0.0 < ... < inf < NaN`` (every NaN one value, the
greatest, as in PostgreSQL), and reads back :func:`key_float`. So MIN
skips NaN unless the window holds nothing else, MAX is NaN if it holds
one, and the result depends on the window's values alone. The columnar
engine orders by the same keys (``columnar/window_aggregate.py``).
"""

from __future__ import annotations

import struct

_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")
#: A float's bits, read as an int64, give its order among non-negative
#: floats; flipping all but the sign bit of a negative one orders those.
FLIP = (1 << 63) - 1
NAN_KEY = 0x7FF8000000000000


def float_key(x: float) -> int:
    if x != x:
        return NAN_KEY
    (bits,) = _INT64.unpack(_DOUBLE.pack(x))
    return bits if bits >= 0 else bits ^ FLIP  # type: ignore[no-any-return]


def key_float(key: int | None) -> float | None:
    if key is None:
        return None
    (value,) = _DOUBLE.unpack(_INT64.pack(key if key >= 0 else key ^ FLIP))
    return value  # type: ignore[no-any-return]
