"""The coordinator's control loop during a run (ha-protocol.md, Failover 5).

Failover itself is decentralised: the secondary detects, takes over and
broadcasts its view. The coordinator then does what needs a global picture:

- converge views: any node holding an older view of a stage is told the
  newest one (a primary that was frozen learns it was replaced);
- re-protect: a protected stage left without a live secondary gets a spare
  as its new secondary, which bootstraps from its producers' retained logs
  (and takes over if the primary is gone too);
- replace machines: a node that died is restarted, empty, as a spare.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

import grpc

from ha.views import StageView
from node.events import EventLog
from node.messages import view_from_pb, view_to_pb

if TYPE_CHECKING:
    from coordinator.launcher import Cluster

log = logging.getLogger(__name__)

RESTART_DELAY_S = 0.5


class Coordinator:
    def __init__(self, cluster: Cluster, reprotect: bool = True, period: float = 0.1) -> None:
        self.cluster = cluster
        self.reprotect = reprotect
        self.period = period
        self.events = EventLog("coordinator", cluster.run_dir)
        # What each node said it is and serves in its last status; a
        # replacement machine restarted under a dead node's name is a spare
        # even where a view still names it.
        self.roles: dict[str, str] = {}
        self.serving: dict[str, str] = {}
        self.views: dict[str, StageView] = {}
        self.died_at: dict[str, float] = {}
        # When a live primary (or source, sink) of each stage was last seen.
        self.served_at: dict[str, float] = {}
        self.started = time.monotonic()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            try:
                await self.step()
            except grpc.aio.AioRpcError:
                continue
            except Exception as exc:  # keep coordinating; say what went wrong
                log.exception("coordinator step failed")
                self.events.emit("coordinator_error", error=repr(exc))

    async def step(self) -> None:
        cluster = self.cluster
        alive = [p for p in cluster.processes.values() if p.alive]
        statuses = await asyncio.gather(*(cluster.status(p.name, timeout=0.3) for p in alive))
        held: dict[str, dict[str, StageView]] = {}
        for p, status in zip(alive, statuses, strict=True):
            if status is None:
                continue
            self.roles[p.name] = status.role
            self.serving[p.name] = status.stage
            if status.role in ("primary", "source", "sink") and status.stage:
                self.served_at[status.stage] = time.monotonic()
            held[p.name] = {v.stage: view_from_pb(v) for v in status.views}
            for view in held[p.name].values():
                current = self.views.get(view.stage)
                if current is None or (view.epoch, view.version) > (current.epoch, current.version):
                    self.views[view.stage] = view
        if self.reprotect:
            await self._reprotect(held)
        await self._converge(held)
        if self.reprotect:
            self._replace_dead()

    def unserved_for(self, stage: str) -> float:
        """Seconds since a live primary of ``stage`` was last seen."""
        return time.monotonic() - self.served_at.get(stage, self.started)

    async def _converge(self, held: dict[str, dict[str, StageView]]) -> None:
        for node, views in held.items():
            for stage, newest in self.views.items():
                have = views.get(stage)
                if have is None or (have.epoch, have.version) < (newest.epoch, newest.version):
                    await self._tell(node, newest)

    async def _reprotect(self, held: dict[str, dict[str, StageView]]) -> None:
        """Give every protected stage without a serving secondary a spare as
        its secondary. Where the primary is gone too (both replicas lost),
        the spare rebuilds the stage from its producers' retained logs,
        finds the primary gone and takes over (ha-protocol.md, "retained")."""
        cluster = self.cluster
        for stage in cluster.topology.stages.values():
            if stage.config is None or stage.config.ha.mode == "none":
                continue
            view = self.views.get(stage.name)
            if view is None:
                continue
            # A secondary merely slow to answer may be taking over right now:
            # only one known to be gone is replaced.
            if view.secondary is not None and not self._gone(view.secondary, stage.name, held):
                continue
            # The spare must not be the primary's name: a node restarted
            # under it would be asked to watch itself.
            spare = self._free_spare(held, exclude=view.primary)
            if spare is None:
                continue
            new = view.with_secondary(spare)
            self.views[stage.name] = new
            self.roles[spare] = "secondary"
            rebuild = not self._serving(view.primary, stage.name, held)
            self.events.emit(
                "assigned", stage=stage.name, secondary=spare, version=new.version, rebuild=rebuild
            )
            for node in held:
                await self._tell(node, new)

    def _alive(self, node: str) -> bool:
        process = self.cluster.processes.get(node)
        return process is not None and process.alive

    def _serving(self, node: str, stage: str, held: dict[str, dict[str, StageView]]) -> bool:
        return self._alive(node) and node in held and self.serving.get(node) == stage

    def _gone(self, node: str, stage: str, held: dict[str, dict[str, StageView]]) -> bool:
        """Known not to serve ``stage``: dead, or answering as something
        else (a node restarted under a replica's name serves nothing)."""
        return not self._alive(node) or (node in held and self.serving.get(node) != stage)

    def _free_spare(self, held: dict[str, dict[str, StageView]], exclude: str) -> str | None:
        """A node whose last status said spare and that was not assigned
        since (roles are set to secondary on assignment)."""
        for node in sorted(held):
            if node != exclude and self.roles.get(node) == "spare":
                return node
        return None

    async def _tell(self, node: str, view: StageView) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError):
            await self.cluster.control(node).UpdateView(view_to_pb(view), timeout=0.5)

    def _replace_dead(self) -> None:
        now = time.monotonic()
        for p in self.cluster.processes.values():
            if p.alive or p.popen is None or p.role in ("source", "sink"):
                continue
            if p.name not in self.died_at:
                self.died_at[p.name] = now
                continue
            if now - self.died_at[p.name] >= RESTART_DELAY_S:
                del self.died_at[p.name]
                self.cluster.restart_as_spare(p)
                self.roles[p.name] = "starting"
                self.events.emit("restarted", restarted=p.name, role="spare")
