"""The operator section of an MQO stage: seed 003's shared execution of
many continuous queries (``mqo.executor``) behind the engine's interface.

Pure, as :class:`~node.sections.operator.OperatorSection`: rows per input
stream and a watermark in, output rows out. Each output row is ``(ts = the
master arrival, lin = the oldest input position it joins, +1, query,
columns...)`` in :func:`mqo.stage.canonical` order. For the HA layer it
answers like the CQL engine: ``state_low`` is the oldest input position the
windows, buffers or pending rows still hold; the counters are each query's
last firing time, so a replica rebuilt from a later cut does not output again
what its queries output before.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from mqo.executor import SharedExecutor
from mqo.stage import MqoStageSpec, OutputRows
from node.engine.elements import VALUES, Element
from node.engine.engine import BEFORE_TIME, check_order
from node.sections.operator import CostSchedule


class MqoEngine:
    """The engine-like core: push rows, advance the time, read the HA state."""

    def __init__(self, spec: MqoStageSpec) -> None:
        self.spec = spec
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
        self.output = OutputRows(spec, VALUES)

    def push(self, name: str, elements: Sequence[Element]) -> None:
        if not elements:
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
        start = -1 if self.time == BEFORE_TIME else self.time  # event time starts at 0
        for clock in self.spec.clocks.values():
            instants.update(clock.ticks(start, watermark))
        out: list[Element] = []
        for t in sorted(instants):
            arrivals = self.pending.pop(t, {})
            for stream in arrivals:
                arrivals[stream].sort(key=lambda e: e[1])
            results = self.executor.process(t, dict(sorted(arrivals.items())))
            if results:
                out += self.output.rows(t, results)
        self.time = watermark
        return out

    def state_low(self) -> int | None:
        lows = [e[1] for rows in self.pending.values() for es in rows.values() for e in es[:1]]
        held = self.executor.oldest_seq()
        if held is not None:
            lows.append(held)
        return min(lows) if lows else None

    def counters(self) -> tuple[tuple[int, ...], ...]:
        fired = self.executor.last_fired()
        return (tuple(fired[n] for n in self.names),)

    def restore_counters(self, values: Sequence[tuple[int, ...]]) -> dict[str, list[Element]]:
        if len(values) != 1 or len(values[0]) != len(self.names):
            raise ValueError("counter snapshot does not match this MQO stage")
        self.executor.restore_fired(dict(zip(self.names, values[0], strict=True)))
        return {}


class MqoSection:
    """:class:`~node.sections.operator.OperatorSection`'s interface over an :class:`MqoEngine`."""

    def __init__(self, spec: MqoStageSpec, cost: CostSchedule | None = None) -> None:
        self.engine = MqoEngine(spec)
        self.cost = cost or CostSchedule()
        self.rows_in = 0
        self.busy_s = 0.0

    @property
    def time(self) -> int:
        return self.engine.time

    def run(self, inputs: Mapping[str, list[Element]], watermark: int) -> list[Element]:
        started = time.perf_counter()
        count = 0
        cost_ms = 0.0
        for name, rows in inputs.items():
            if rows:
                self.engine.push(name, rows)
                count += len(rows)
                if self.cost:
                    cost_ms += self.cost.total_ms(rows)
        out = self.engine.advance(watermark)
        if cost_ms:
            deadline = started + cost_ms / 1000
            while time.perf_counter() < deadline:
                pass
        self.rows_in += count
        self.busy_s += time.perf_counter() - started
        return out
