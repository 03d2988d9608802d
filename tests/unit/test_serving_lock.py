"""The lock that decides which member of a protected source or sink serves
(node/service/roles/serving_lock.py) and the epochs its holders serve at
(node/service/roles/standby.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from semiactive import config, topology
from semiactive.ha.routing import initial_views
from semiactive.ha.views import StageView
from semiactive.node.service.roles.serving_lock import ServingLock
from semiactive.node.service.roles.standby import StandbyRole

CONFIG = """\
name: t
sources:
  - name: src
    stream: s0
    ha: {secondary: src-b}
stages:
  - name: stage-1
    node: node-1
    query: |
      REGISTER QUERY s1 AS
        SELECT * FROM s0
sinks:
  - name: sink
    input: s1
"""


def test_one_holder_at_a_time_and_the_next_one_the_moment_it_lets_go(tmp_path: Path) -> None:
    # flock locks belong to an open file: two in one process exclude each other as two processes do.
    first, second = ServingLock(tmp_path, "src"), ServingLock(tmp_path, "src")
    assert first.try_take() and first.held
    assert not second.try_take() and not second.held
    first.release()
    assert second.try_take()
    assert not first.try_take()
    second.release()


def test_the_epoch_is_recorded_under_the_lock(tmp_path: Path) -> None:
    lock = ServingLock(tmp_path, "src")
    assert lock.last_epoch() is None
    with pytest.raises(AssertionError, match="under the lock"):
        lock.record(1)
    assert lock.try_take()
    lock.record(3)
    assert ServingLock(tmp_path, "src").last_epoch() == 3
    lock.epoch_path.write_text("garbage")
    assert lock.last_epoch() is None
    lock.release()


def _members(tmp_path: Path) -> tuple[topology.Topology, topology.Stage]:
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    topo = topology.resolve(config.load(path))
    return topo, topo.stages["src"]


def test_the_configured_primary_serves_first_at_epoch_0(tmp_path: Path) -> None:
    topo, stage = _members(tmp_path)
    views = initial_views(topo)
    primary = StandbyRole("src", stage, ServingLock(tmp_path, "src"), resume=False)
    assert asyncio.run(primary.take(views)) is None
    assert primary.lock.last_epoch() == 0
    standby = StandbyRole("src-b", stage, ServingLock(tmp_path, "src"), resume=False)
    assert not standby.lock.try_take()
    primary.lock.release()


def test_each_later_holder_serves_at_the_next_epoch_naming_the_other_member(tmp_path: Path) -> None:
    topo, stage = _members(tmp_path)
    views = initial_views(topo)
    first = StandbyRole("src", stage, ServingLock(tmp_path, "src"), resume=False)
    asyncio.run(first.take(views))
    first.lock.release()  # it died
    standby = StandbyRole("src-b", stage, ServingLock(tmp_path, "src"), resume=False)
    view = asyncio.run(standby.take(views))
    assert view == StageView("src", 1, 1, "src-b", "src")
    views.apply(view)
    standby.lock.release()
    # The primary, started again, takes over from its successor: epoch 2,
    # even where its views had not heard of epoch 1 (the epoch file has).
    again = StandbyRole("src", stage, ServingLock(tmp_path, "src"), resume=True)
    assert asyncio.run(again.take(initial_views(topo))) == StageView("src", 2, 1, "src", "src-b")
    again.lock.release()
