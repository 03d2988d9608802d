"""A call's changes of a relation grouped by key (a row, a group), instant
by instant: what both RSTREAM of a join (:mod:`.relation_stream`) and a
GROUP BY over it (:mod:`.change_aggregate`) walk. Each key's running
totals come from one cumulative sum, and its state at an instant is the
one after its last change there."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from semiactive.node.engine.columnar.batch import Array, Int64s

Bools = Array


@dataclass(frozen=True)
class KeyRuns:
    """The changes sorted by key, in their order within each key."""

    order: Int64s  # each sorted change's index among the call's
    key: Int64s
    at: Int64s  # its instant
    sign: Int64s
    first: Bools  # the first change of its key
    opens: Bools  # the first change of its key at its instant
    closes: Bools  # the last change of its key at its instant

    @classmethod
    def of(cls, key: Int64s, at: Int64s, sign: Int64s) -> KeyRuns:
        n = len(key)
        order = np.argsort(key, kind="stable")
        key, at = key[order], at[order]
        first = np.ones(n, dtype=bool)
        first[1:] = key[1:] != key[:-1]
        closes = np.ones(n, dtype=bool)
        closes[:-1] = first[1:] | (at[1:] != at[:-1])
        opens = np.ones(n, dtype=bool)
        opens[1:] = closes[:-1]
        return cls(order, key, at, sign[order], first, opens, closes)

    def running(self, steps: Array) -> Array:
        """Within each key, the sum of its (sorted) steps up to each change."""
        starts = np.flatnonzero(self.first)
        sums = np.cumsum(steps)
        lengths = np.diff(np.append(starts, len(steps)))
        return sums - np.repeat(sums[starts] - steps[starts], lengths)  # type: ignore[no-any-return]

    def last_state(self) -> Bools:
        """Of the states (one per key and instant, :attr:`closes`), each
        key's last in the call."""
        keys = self.key[self.closes]
        last = np.ones(len(keys), dtype=bool)
        last[:-1] = keys[1:] != keys[:-1]
        return last
