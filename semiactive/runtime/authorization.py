"""Who may do what to a node: decided from the caller's verified name
(:func:`semiactive.runtime.tls.caller`) and the node's current views, never from a name a
message claims (docs/security.md).

- start, stop: the launcher or operator (``admin``) and the coordinator;
- change a view of one of the config's stages (never of another): the
  coordinator and ``admin``; otherwise only a replica of that stage
  announcing itself as its primary (a takeover) at most one epoch ahead of
  the view this node holds;
- send rows as stage X: a replica of X (its primary or secondary here), as
  itself, at most one epoch ahead;
- acknowledge an edge: a replica of the edge's consumer, as itself;
- report to the coordinator: a node, as itself;
- push into an ingest source: ``admin`` or an ``ingest-*`` identity.

Pure: each check returns None when allowed, else why not. A caller of None
is an insecure cluster's (``insecure: true``): nobody is authenticated, so
every check passes.
"""

from __future__ import annotations

from semiactive.ha.views import StageView, ViewTable
from semiactive.runtime.tls import ADMIN, COORDINATOR

OPERATORS = (ADMIN, COORDINATOR)


def _replicas(views: ViewTable, stage: str) -> set[str]:
    if stage not in views:
        return set()
    view = views[stage]
    return {view.primary, *([view.secondary] if view.secondary else [])}


def may_control(caller: str | None, action: str) -> str | None:
    if caller is None or caller in OPERATORS:
        return None
    return f"{caller} may not {action} a node (only {' and '.join(OPERATORS)})"


def may_change_view(caller: str | None, views: ViewTable, view: StageView) -> str | None:
    if caller is None:
        return None
    if view.stage not in views:
        # Not even an operator's: every node holds a view of every stage of
        # its config, so this one would only sit in the table (and reach
        # the coordinator's reports) or, naming a spare as its secondary,
        # make the spare look the stage up in its topology and fail.
        return f"no stage {view.stage!r}"
    if caller in OPERATORS:
        return None
    current = views[view.stage]
    if caller not in _replicas(views, view.stage) or view.primary != caller:
        return f"{caller} may not change the view of {view.stage} (it can only announce its own takeover)"
    if view.epoch > current.epoch + 1:
        return f"{caller} announced epoch {view.epoch} of {view.stage}, at {current.epoch} here"
    return None


def may_send_as(caller: str | None, views: ViewTable, sender: str, stage: str, epoch: int) -> str | None:
    """Why ``caller`` may not send rows of ``stage`` claiming to be ``sender``."""
    if caller is None:
        return None
    if sender != caller:
        return f"{caller} sends as {sender!r}"
    if caller not in _replicas(views, stage):
        return f"{caller} is no replica of {stage} in this node's views"
    if epoch > views[stage].epoch + 1:
        return f"{caller} sends {stage} at epoch {epoch}, at {views[stage].epoch} here"
    return None


def may_acknowledge(caller: str | None, views: ViewTable, sender: str, consumer: str) -> str | None:
    if caller is None:
        return None
    if sender != caller:
        return f"{caller} acknowledges as {sender!r}"
    if caller not in _replicas(views, consumer):
        return f"{caller} is no replica of {consumer}, the edge's consumer"
    return None


def may_report(caller: str | None, name: str) -> str | None:
    if caller is None or caller == name:
        return None
    return f"{caller} reports as {name!r}"


def may_ingest(caller: str | None) -> str | None:
    if caller is None or caller == ADMIN or caller.startswith("ingest"):
        return None
    return f"{caller} may not push into a source (only {ADMIN} and ingest-* identities)"
