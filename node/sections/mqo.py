"""The operator section of an MQO stage: the MQO paper's shared execution of
many continuous queries (``semiactive.mqo.executor``) behind the engine's interface.

Pure, as :class:`~semiactive.node.sections.operator.OperatorSection`: rows per input
stream and a watermark in, output rows out. Each output row is ``(ts = the
master arrival, lin = the oldest input position it joins, +1, query,
columns...)`` in :func:`semiactive.mqo.stage.canonical` order. For the HA layer it
answers like the CQL engine: ``state_low`` is the oldest input position the
windows, buffers or pending rows still hold; the counters are each query's
last firing time, so a replica rebuilt from a later cut does not output again
what its queries output before.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from semiactive.mqo.executor import SharedExecutor
from semiactive.mqo.grouping import load_clustering
from semiactive.mqo.nodes import NEVER
from semiactive.mqo.stage import MqoStageSpec, OutputRows, check_registration
from semiactive.node.engine.elements import VALUES, Element
from semiactive.node.engine.engine import BEFORE_TIME, check_order
from semiactive.node.sections.operator import CostSchedule, TimedSection

log = logging.getLogger(__name__)
_CHUNK = 7  # bytes per packed counter value: non-negative and below 2**56


def pack_text(text: str) -> tuple[int, ...]:
    """Text as counter values (the resync point carries only integers)."""
    data = text.encode()
    return (len(data), *(int.from_bytes(data[i : i + _CHUNK], "big") for i in range(0, len(data), _CHUNK)))


def unpack_text(values: Sequence[int]) -> str:
    if not values or values[0] < 0 or len(values) - 1 != -(-values[0] // _CHUNK):
        raise ValueError("malformed packed text")
    size = values[0]
    parts = []
    for i, v in enumerate(values[1:]):
        n = min(_CHUNK, size - i * _CHUNK)
        if not 0 <= v < 1 << (8 * n):
            raise ValueError("malformed packed text")
        parts.append(v.to_bytes(n, "big"))
    return b"".join(parts).decode()


class MqoEngine:
    """The engine-like core: push rows, advance the time, read the HA state."""

    def __init__(self, spec: MqoStageSpec) -> None:
        self.spec = spec
        load_clustering()  # built before the node serves; see load_clustering
        self.executor = SharedExecutor(
            spec.queries,
            spec.schemas,
            spec.clocks,
            method=spec.method,
            theta=spec.theta,
            log_period=spec.log_period,
            check_every=spec.check_every,
            patience=spec.patience,
            value_offset=VALUES,
        )
        self.names = sorted(q.name for q in spec.queries)
        self.time = BEFORE_TIME
        self.pending: dict[int, dict[str, list[Element]]] = {}
        self.registrations: dict[int, list[Element]] = {}
        self.output = OutputRows(spec, VALUES)
        self.runtime: dict[str, tuple[str, int]] = {}  # registered while running: text, after
        self.removed: list[str] = []  # configured queries removed while running
        # Registrations judged since the HA layer last read them: (instant, op, name, why refused or "").
        self.judged: list[tuple[int, str, str, str]] = []
        self._blob: tuple[int, ...] | None = None
        # Rows are kept until the HA layer first reads the state: a replica
        # rebuilding from a cut may learn of wider registered queries at the end.
        self.executor.hold_retention = True

    def push(self, name: str, elements: Sequence[Element]) -> None:
        if not elements:
            return
        if name == self.spec.registry:
            check_order(name, elements, self.time, None)
            for e in elements:
                self.registrations.setdefault(e[0], []).append(e)
            return
        if name not in self.spec.schemas:
            raise KeyError(f"the MQO stage has no input named {name!r}")
        check_order(name, elements, self.time, None)
        pending = self.pending
        for e in elements:
            at = pending.get(e[0])
            if at is None:
                pending[e[0]] = {name: [e]}
            else:
                at.setdefault(name, []).append(e)

    def advance(self, watermark: int) -> list[Element]:
        """Every instant up to ``watermark`` (arrivals and clock ticks), in order."""
        if watermark <= self.time:
            return []
        instants = {t for t in self.pending if t <= watermark}
        instants.update(t for t in self.registrations if t <= watermark)
        start = -1 if self.time == BEFORE_TIME else self.time  # event time starts at 0
        for clock in self.spec.clocks.values():
            instants.update(clock.ticks(start, watermark))
        out: list[Element] = []
        for t in sorted(instants):
            for registration in sorted(self.registrations.pop(t, []), key=lambda e: e[1]):
                self._register(t, *registration[VALUES : VALUES + 3])
            arrivals = self.pending.pop(t, {})
            for stream in arrivals:
                arrivals[stream].sort(key=lambda e: e[1])
            results = self.executor.process(t, dict(sorted(arrivals.items())))
            if results:
                out += self.output.rows(t, results)
        self.time = watermark
        return out

    def _register(self, t: int, op: str, name: str, text: str) -> None:
        """Apply one registration at instant ``t``, before its arrivals. A bad
        one is refused the same way by every replica (and logged)."""
        query, refused = check_registration(self.spec, set(self.executor.queries), op, name, text)
        self.judged.append((t, op, name, refused or ""))
        if refused is not None:
            log.warning("refused registration %s of %s at %d: %s", op, name, t, refused)
            return
        if query is None:
            self.executor.remove(name)
            if self.runtime.pop(name, None) is None:
                self.removed.append(name)
        else:
            self.executor.add(query, registered_after=t)
            self.output.track(query)
            self.runtime[name] = (text, t)
        self._blob = None

    def state_low(self) -> int | None:
        self.executor.hold_retention = False
        lows = [e[1] for rows in self.pending.values() for es in rows.values() for e in es[:1]]
        held = self.executor.oldest_seq()
        if held is not None:
            lows.append(held)
        return min(lows) if lows else None

    def counters(self) -> tuple[tuple[int, ...], ...]:
        """Last firing of every configured query; the registrations made while
        running (packed JSON); last firing of each registered query."""
        self.executor.hold_retention = False
        fired = self.executor.last_fired()
        if self._blob is None:
            state = {
                "add": [[n, text, after] for n, (text, after) in self.runtime.items()],
                "removed": self.removed,
            }
            self._blob = pack_text(json.dumps(state, separators=(",", ":")))
        return (
            tuple(fired.get(n, NEVER) for n in self.names),
            self._blob,
            tuple(fired[n] for n in self.runtime),
        )

    def restore_counters(self, values: Sequence[tuple[int, ...]]) -> dict[str, list[Element]]:
        """Adopt a replica's state after rebuilding from its cut: the
        registrations made before the cut, and every query's last firing."""
        try:
            configured, blob, runtime_fired = values
            state = json.loads(unpack_text(blob))
            added = [(str(n), str(text), int(after)) for n, text, after in state["add"]]
            removed = [str(n) for n in state["removed"]]
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"counter snapshot does not match this MQO stage: {exc}") from None
        if len(configured) != len(self.names) or len(runtime_fired) != len(added):
            raise ValueError("counter snapshot does not match this MQO stage")
        ex = self.executor
        for name in removed:
            if name in ex.queries and name not in self.runtime:
                ex.remove(name)
        self.removed = removed
        wanted = {n: (text, after) for n, text, after in added}
        for name in [n for n in self.runtime if wanted.get(n) != self.runtime[n]]:
            ex.remove(name)
            del self.runtime[name]
        fired = dict(zip(self.names, configured, strict=True))
        for (name, text, after), at in zip(added, runtime_fired, strict=True):
            if name in self.runtime:
                fired[name] = at
                continue
            if name in ex.queries:  # a configured query this replica still has
                ex.remove(name)
            query, refused = check_registration(self.spec, set(ex.queries), "add", name, text)
            if query is None:
                raise ValueError(f"counter snapshot registers a query this stage refuses: {refused}")
            ex.add(query, registered_after=after)
            self.output.track(query)
            ex.seed(name, at)
            self.runtime[name] = (text, after)
        ex.restore_fired({n: at for n, at in fired.items() if n in ex.queries})
        ex.hold_retention = False
        self._blob = None
        self.judged.clear()  # what the replay judged is not what the stage decided
        return {}


class MqoSection(TimedSection):
    """:class:`~semiactive.node.sections.operator.OperatorSection`'s interface over an :class:`MqoEngine`."""

    def __init__(self, spec: MqoStageSpec, cost: CostSchedule | None = None) -> None:
        self.engine: MqoEngine = MqoEngine(spec)
        self.cost = cost or CostSchedule()
        self.rows_in = 0
        self.busy_s = 0.0

    def _advance(self, watermark: int) -> list[Element]:
        return self.engine.advance(watermark)
