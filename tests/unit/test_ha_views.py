"""Views, epochs and fencing; the failure detector's deadline."""

from __future__ import annotations

from semiactive.ha.detector import FailureDetector, becoming_primary, may_be_starting
from semiactive.ha.views import StageView, ViewTable


def test_newer_views_win_epoch_first() -> None:
    table = ViewTable([StageView("x", 0, 0, "p", "s")])
    takeover = table["x"].promoted("s")
    assert (takeover.epoch, takeover.version, takeover.primary, takeover.secondary) == (1, 1, "s", None)
    assert table.apply(takeover)
    assert not table.apply(takeover)  # the same view twice changes nothing
    assert not table.apply(StageView("x", 0, 5, "p", "s"))  # an older epoch loses whatever its version
    reprotected = table["x"].with_secondary("spare")
    assert table.apply(reprotected) and table["x"].secondary == "spare" and table["x"].epoch == 1


def test_stale_epochs_are_fenced_and_a_newer_one_is_witnessed() -> None:
    table = ViewTable([StageView("x", 1, 3, "s", None)])
    assert table.stale("x", 0)
    assert not table.stale("x", 1)
    # A producer stamped with a newer epoch took over: adopt it until the full view arrives.
    assert table.witness("x", 2, "t")
    assert table["x"].primary == "t" and table["x"].epoch == 2
    assert table.stale("x", 1)
    assert not table.witness("x", 2, "u")
    full = StageView("x", 2, 4, "t", "spare")
    assert table.apply(full) and table["x"].secondary == "spare"


def test_roles() -> None:
    view = StageView("x", 0, 0, "p", "s")
    assert [view.role_of(n) for n in ("p", "s", "q")] == ["primary", "secondary", "none"]


def test_detector_deadline_counts_from_the_last_pong() -> None:
    d = FailureDetector(interval=0.25, timeout=0.5)
    d.start(10.0)
    assert not d.expired(10.4)
    assert d.expired(10.6)  # never answered: one timeout after the start
    d.on_pong(10.6)
    assert not d.expired(11.0)
    assert d.expired(11.2)
    assert abs(d.silent_for(11.2) - 0.6) < 1e-9


def test_a_primary_not_yet_switched_to_its_view_is_not_gone() -> None:
    # spare-1 handed join-1 at epoch 1 by a migration, still its secondary at epoch 0,
    # or at epoch 1 between applying the view and serving it: alive.
    assert becoming_primary("spare-1", "secondary", "join-1", 0, "node-1", "join-1", 1)
    assert becoming_primary("spare-1", "secondary", "join-1", 1, "spare-1", "join-1", 1)
    # Anything else that does not pong no longer serves the stage.
    assert not becoming_primary("spare-1", "secondary", "join-1", 1, "node-2", "join-1", 1)
    assert not becoming_primary("spare-1", "secondary", "join-1", 2, "spare-1", "join-1", 1)
    assert not becoming_primary("spare-1", "secondary", "sum-2", 0, "node-3", "join-1", 1)
    assert not becoming_primary("spare-1", "spare", "", 0, "", "join-1", 1)  # restarted empty
    assert not becoming_primary("spare-1", "primary", "join-1", 1, "spare-1", "join-1", 1)


def test_a_primary_never_reached_may_be_starting_only_for_a_while() -> None:
    """A secondary watching since the start gives its primary the peers'
    connect timeout to come up; one that answered once, or one it was
    assigned to later, is not starting any more."""
    assert may_be_starting(reached=False, assigned=False, watched_for=3.0, grace=10.0)
    assert not may_be_starting(reached=False, assigned=False, watched_for=10.0, grace=10.0)
    assert not may_be_starting(reached=True, assigned=False, watched_for=0.1, grace=10.0)
    assert not may_be_starting(reached=False, assigned=True, watched_for=0.1, grace=10.0)
