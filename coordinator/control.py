"""The coordinator's decisions (ha-protocol.md, Failover 5), from what the
nodes report. No I/O: :mod:`semiactive.coordinator.service` is the gRPC shell.

Failover itself is decentralised: the secondary detects, takes over and
broadcasts its view. The coordinator does what needs a global picture:

- converge views: a node that reports an older view of a stage is answered
  with the newest one (a primary that was frozen learns it was replaced);
- re-protect: a protected stage left without a secondary that serves it
  gets a spare as its new secondary, which bootstraps from its producers'
  retained logs (and takes over if the primary is gone too);
- tune: for every edge into an ``asas`` stage, a batch-size tuner decides B
  from the measurements the nodes report (:mod:`semiactive.coordinator.adaptive_backup`).

Everything it knows comes from the nodes' reports (role, stage, views) and
from probes of nodes that stopped reporting: a port that refuses
connections is a dead process (DOWN); one that accepts them belongs to a
process that is alive but not answering (SILENT: frozen, or busy taking
over), which is never replaced, since a second node taking over the same
stage would claim the same epoch. A coordinator restarted from nothing
rebuilds all of this from the next round of reports; it decides nothing
until it has heard from the cluster for a moment.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from semiactive.coordinator.adaptive_backup import AdaptiveBackup
from semiactive.coordinator.migration import Migrations
from semiactive.coordinator.replacement import NetworkMonitor, Replacer
from semiactive.ha.routing import initial_views
from semiactive.ha.views import StageView, ViewTable
from semiactive.runtime import authorization
from semiactive.runtime.events import EventLog
from semiactive.runtime.messages import view_from_pb
from semiactive.topology import Topology
from semiactive.wire import control_pb2 as cpb
from semiactive.wire import coordinator_pb2 as cdpb

REPORT_INTERVAL_S = 0.1
# No report for this long: the node is probed (refused: down; open: silent).
SILENCE_S = 0.35
# A coordinator (re)started decides nothing before it has heard reports for this long.
WARMUP_S = 0.5
# A node never heard from may still be starting (a refused port proves
# nothing then): it is taken for down only this long after the coordinator
# started. A node that died while the coordinator was down is therefore
# replaced this late after a coordinator restart. One that listens but has
# never reported is starting (waiting for its peers, or descheduled on a
# loaded host): never taken for silent.
NEVER_REPORTED_GRACE_S = 10.0


class Liveness(enum.StrEnum):
    UP = "up"
    SILENT = "silent"
    DOWN = "down"
    UNKNOWN = "unknown"


@dataclass
class NodeRecord:
    """What the coordinator knows of one node."""

    name: str
    address: str
    role: str = ""
    stage: str = ""
    held: dict[str, StageView] = field(default_factory=dict)
    reported_at: float | None = None
    port_open: bool | None = None  # the last probe's answer, while silent
    status: cpb.NodeStatus | None = None


class Coordinator:
    def __init__(
        self,
        topology: Topology,
        addresses: dict[str, str],
        events: EventLog,
        now: float,
        reprotect: bool = True,
    ) -> None:
        self.topology = topology
        self.events = events
        self.reprotect = reprotect
        self.started = now
        self.nodes = {name: NodeRecord(name, address) for name, address in addresses.items()}
        self.views: dict[str, StageView] = {}
        # When a live primary (or source, sink) of each stage was last reported.
        self.served_at: dict[str, float] = {}
        # Rows per backup batch into each SAS stage.
        self.batch_sizes = {
            s.name: s.config.ha.batch_size
            for s in topology.stages.values()
            if s.config is not None and s.config.ha.mode == "sas"
        }
        self.tuning = AdaptiveBackup(topology, events)
        self.migrations = Migrations(self)
        self.monitor: NetworkMonitor | None = None
        self.replacer: Replacer | None = None
        if topology.network is not None and topology.config.network is not None:
            self.monitor = NetworkMonitor(topology, topology.network, topology.config.network.rate_window_s)
            self.replacer = Replacer(self, self.monitor)

    # -- what the nodes say -------------------------------------------------------------

    def check(self, status: cpb.NodeStatus) -> str | None:
        """Why a report cannot be taken (None: it can): only the config's
        nodes report, as what they can be."""
        if status.name not in self.topology.nodes:
            return f"no node named {status.name!r} in this cluster"
        if status.stage and status.stage not in self.topology.stages:
            return f"{status.name} reports serving {status.stage!r}, which is no stage of this cluster"
        return None

    def on_report(self, status: cpb.NodeStatus, address: str, now: float) -> list[StageView]:
        """A node's report (already :meth:`check`-ed); returns the views it
        should adopt. Views of unknown stages, or naming unknown nodes, are
        ignored."""
        record = self.nodes.get(status.name)
        if record is None:
            record = self.nodes[status.name] = NodeRecord(status.name, address)
        if record.reported_at is None:
            self.events.emit("registered", target=status.name, role=status.role, address=address)
        record.address = record.address or address  # the configured address wins over a claimed one
        record.role, record.stage, record.status = status.role, status.stage, status
        known = self.topology.nodes
        record.held = {
            v.stage: view_from_pb(v)
            for v in status.views
            if v.stage in self.topology.stages
            and v.primary in known
            and (not v.secondary or v.secondary in known)
        }
        record.reported_at, record.port_open = now, None
        if status.role in ("primary", "source", "sink") and status.stage:
            self.served_at[status.stage] = now
        for view in record.held.values():
            current = self.views.get(view.stage)
            newer = current is None or (view.epoch, view.version) > (current.epoch, current.version)
            if newer and self._adoptable(status.name, view):
                self.views[view.stage] = view
        self.tuning.observe(status, now)
        if self.monitor is not None:
            self.monitor.observe(status, now)
        return self.newer_than_held(record)

    def _adoptable(self, reporter: str, view: StageView) -> bool:
        """Whether a newer view a node holds may become the cluster's: the
        coordinator hands its views to every node, which adopt them without
        question, so it must not launder a view no one could have made. It
        takes the reporter's own takeover (a replica of the stage naming
        itself primary, one epoch on: what a node may announce to its peers,
        :func:`semiactive.runtime.authorization.may_change_view`), or a view two nodes
        hold (after a restart of the coordinator, or takeovers it missed).
        A member forging ``primary: itself, epoch: 2**63`` in its report is
        neither."""
        known = ViewTable(self.views.values())
        if view.stage not in known:
            known.apply(next(v for v in initial_views(self.topology) if v.stage == view.stage))
        if authorization.may_change_view(reporter, known, view) is None:
            return True
        holders = [r for r in self.nodes.values() if r.held.get(view.stage) == view]
        return len(holders) >= 2

    def batch_sizes_for(self, status: cpb.NodeStatus) -> dict[str, int]:
        """The B of each edge this node produces on into a SAS stage: the
        configured one, the A-SAS tuner's, or 1 while the consumer migrates
        (its target then lags by no batch when it takes over)."""
        sizes = dict(self.tuning.batch_sizes_for(status))
        for out in status.outputs:
            consumer = out.edge.split("->", 1)[-1]
            stage = self.topology.stages.get(consumer)
            if stage is None or stage.config is None or stage.config.ha.mode not in ("sas", "asas"):
                continue
            if consumer in self.migrations.active:
                sizes[out.edge] = 1
            elif out.edge not in sizes and consumer in self.batch_sizes:
                sizes[out.edge] = self.batch_sizes[consumer]
        return sizes

    def newer_than_held(self, record: NodeRecord) -> list[StageView]:
        out = []
        for stage, newest in self.views.items():
            have = record.held.get(stage)
            if have is None or (have.epoch, have.version) < (newest.epoch, newest.version):
                out.append(newest)
        return out

    def probed(self, node: str, port_open: bool) -> None:
        self.nodes[node].port_open = port_open

    def liveness(self, node: str, now: float) -> Liveness:
        record = self.nodes.get(node)
        if record is None:
            return Liveness.UNKNOWN
        if record.reported_at is not None and now - record.reported_at < SILENCE_S:
            return Liveness.UP
        if record.port_open is None:
            return Liveness.UNKNOWN
        if record.reported_at is None and (record.port_open or now - self.started < NEVER_REPORTED_GRACE_S):
            return Liveness.UNKNOWN
        return Liveness.SILENT if record.port_open else Liveness.DOWN

    def alive(self, now: float) -> list[str]:
        """Nodes heard from lately (the witness a cut-off secondary asks)."""
        return [n for n in self.nodes if self.liveness(n, now) is Liveness.UP]

    def to_probe(self, now: float) -> list[str]:
        """Nodes not heard from lately whose address is known (the shell
        probes their ports; the others stay UNKNOWN, never taken for dead)."""
        return [n for n, r in self.nodes.items() if r.address and self.liveness(n, now) is not Liveness.UP]

    def unserved_for(self, stage: str, now: float) -> float:
        """Seconds since a live primary of ``stage`` was last reported."""
        return now - self.served_at.get(stage, self.started)

    # -- decisions --------------------------------------------------------------------------

    def step(self, now: float) -> None:
        if now - self.started < WARMUP_S:
            return
        self.migrations.step(now)
        if self.reprotect:
            self._reprotect(now)
        if self.replacer is not None:
            self.replacer.step(now)

    def tune(self, now: float) -> None:
        """Run the A-SAS tuners whose interval has passed."""
        self.tuning.step(now)

    def _reprotect(self, now: float) -> None:
        """Give every protected stage without a serving secondary a spare as
        its secondary. Where the primary is gone too (both replicas lost),
        the spare rebuilds the stage from its producers' retained logs,
        finds the primary gone and takes over (ha-protocol.md, "retained")."""
        for stage in self.topology.stages.values():
            if stage.config is None or stage.config.ha.mode == "none":
                continue
            view = self.views.get(stage.name)
            if view is None:
                continue
            if view.secondary is not None and not self._gone(view.secondary, view, now):
                continue
            primary = self.nodes.get(view.primary)
            if primary is not None and primary.status is not None and primary.status.finished:
                # Drained: nothing left to protect, and a secondary assigned
                # now would find the primary gone and take over after the end.
                continue
            spare = self._free_spare(view, now)
            if spare is None:
                continue
            new = view.with_secondary(spare)
            self.views[stage.name] = new
            # A guess for the telemetry: the spare itself finds out whether
            # the primary is gone (it takes over if so).
            rebuild = not self.is_serving(view.primary, stage.name, now, within=1.5 * REPORT_INTERVAL_S)
            self.events.emit(
                "assigned", stage=stage.name, secondary=spare, version=new.version, rebuild=rebuild
            )

    def is_serving(self, node: str, stage: str, now: float, within: float = SILENCE_S) -> bool:
        """``node`` reported serving ``stage`` within the last ``within`` seconds."""
        record = self.nodes[node]
        fresh = record.reported_at is not None and now - record.reported_at < within
        return fresh and record.stage == stage

    def _gone(self, node: str, view: StageView, now: float) -> bool:
        """Known not to serve ``view``'s stage: down, or up and serving
        something else although it holds that very view (a node restarted
        under a replica's name serves nothing; one that has not yet heard
        of its assignment is not gone)."""
        live = self.liveness(node, now)
        if live is Liveness.DOWN:
            return True
        if live is not Liveness.UP:
            return False
        record = self.nodes[node]
        held = record.held.get(view.stage)
        seen = held is not None and (held.epoch, held.version) >= (view.epoch, view.version)
        return seen and record.stage != view.stage

    def _free_spare(self, view: StageView, now: float) -> str | None:
        """The first free spare by name or, with a network, the one whose
        backup streams (the stage's inputs, at their measured rates) cost
        the least rate x latency."""
        free = [n for n in sorted(self.nodes) if self.is_free_spare(n, view, now)]
        if not free or self.monitor is None:
            return free[0] if free else None
        monitor = self.monitor
        inputs = [e for e in self.topology.edges if e.consumer == view.stage]

        def backup_cost(node: str) -> float:
            return sum(
                monitor.rates.get(e.id, 1.0)
                * monitor.sites.latency_s(monitor.node_of(e.producer, self), node)
                for e in inputs
            )

        return min(free, key=backup_cost)

    def is_free_spare(self, node: str, view: StageView, now: float) -> bool:
        """A node reporting itself spare that no newest view names, but for
        ``view``'s own gone secondary (restarted under its name, it may
        serve the stage again); never the primary's name (a node restarted
        under it would be asked to watch itself)."""
        named = {n for v in self.views.values() if v.stage != view.stage for n in (v.primary, v.secondary)}
        named.add(view.primary)
        record = self.nodes.get(node)
        return (
            record is not None
            and node not in named
            and record.role == "spare"
            and self.liveness(node, now) is Liveness.UP
        )

    # -- what `semiactive status` shows ------------------------------------------------------

    def cluster_state(self, now: float) -> cdpb.ClusterStatus:
        state = cdpb.ClusterStatus(name=self.topology.config.name, uptime_s=now - self.started)
        for stage in self.topology.stages.values():
            view = self.views.get(stage.name)
            mode = stage.config.ha.mode if stage.config is not None else "none"
            row = state.stages.add(stage=stage.name, role=stage.role, mode=mode)
            if view is not None:
                row.primary, row.secondary = view.primary, view.secondary or ""
                row.epoch, row.version = view.epoch, view.version
                row.protected = view.secondary is not None and self.is_serving(
                    view.secondary, stage.name, now
                )
            elif stage.role != "stage":
                row.primary = stage.primary
            row.batch_size = self.batch_sizes.get(stage.name, 0)
            for tuning in self.tuning.stage_states(stage.name):
                row.tuning.append(tuning)
                row.batch_size = max(row.batch_size, tuning.batch_size)
        for name, record in sorted(self.nodes.items()):
            age = now - record.reported_at if record.reported_at is not None else -1.0
            state.nodes.add(
                name=name,
                role=record.role,
                stage=record.stage,
                liveness=self.liveness(name, now).value,
                last_report_s=age,
                address=record.address,
                outage=_one_line(record.status.outage) if record.status is not None else "",
            )
        return state


OUTAGE_CHARS = 200


def _one_line(text: str) -> str:
    """A node's own words for an operator's screen: printable, one line,
    bounded (a report is authenticated, not trusted to be tidy)."""
    flat = "".join(c if c.isprintable() else " " for c in text)
    return flat if len(flat) <= OUTAGE_CHARS else flat[: OUTAGE_CHARS - 3] + "..."
