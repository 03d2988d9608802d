"""The Grafana dashboards are generated (deploy/grafana/dashboards.py): the
committed JSON is exactly the generator's output, the uids are fixed, every
panel queries the provisioned datasource, each dashboard has the stage and
node variables, and every metric a query names is one a node or the
coordinator exposes. tests/integration/test_prometheus.py runs the queries
against a live cluster."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from tests.processes import ROOT, script_module
from tests.unit.test_metrics_names import coordinator_exposition, node_exposition, primary_status, samples

dashboards = script_module(ROOT / "deploy" / "grafana" / "dashboards.py")

DIRECTORY = ROOT / "deploy" / "grafana" / "dashboards"
PROVISIONING = ROOT / "deploy" / "grafana" / "provisioning"
UIDS = {"semiactive-overview", "semiactive-ha", "semiactive-node"}


def committed(uid: str) -> dict[str, Any]:
    board: dict[str, Any] = json.loads((DIRECTORY / f"{uid}.json").read_text())
    return board


def test_the_committed_json_is_the_generators_output() -> None:
    assert set(dashboards.DASHBOARDS) == UIDS
    assert {p.name for p in DIRECTORY.iterdir()} == {f"{uid}.json" for uid in UIDS}
    for uid in UIDS:
        assert (DIRECTORY / f"{uid}.json").read_text() == dashboards.render(uid), (
            f"{uid}.json differs from deploy/grafana/dashboards.py: run `make dashboards`"
        )


def test_the_provisioning_points_at_the_dashboards_and_the_datasource() -> None:
    sources = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert [(s["uid"], s["type"]) for s in sources] == [(dashboards.DATASOURCE.uid, "prometheus")]
    providers = yaml.safe_load((PROVISIONING / "dashboards" / "semiactive.yml").read_text())["providers"]
    assert [p["type"] for p in providers] == ["file"]
    # docker-compose.yml mounts deploy/grafana/dashboards there.
    compose = (ROOT / "docker-compose.yml").read_text()
    assert f"./deploy/grafana/dashboards:{providers[0]['options']['path']}" in compose


@pytest.mark.parametrize("uid", sorted(UIDS))
def test_a_dashboard_has_its_uid_variables_and_datasource(uid: str) -> None:
    board = committed(uid)
    assert board["uid"] == uid and board["title"].startswith("semiactive: ")
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert set(variables) == {"stage", "node"}
    assert all(v["includeAll"] and v["multi"] and v["allValue"] == ".*" for v in variables.values())
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert len(panels) >= 8
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": dashboards.DATASOURCE.uid}, panel["title"]
        assert panel["targets"] and all(t["expr"] for t in panel["targets"]), panel["title"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))


def declared(text: str) -> set[str]:
    """The sample names of an exposition, and those its families would
    have (A-SAS estimates appear once the tuner has measured)."""
    names = set(samples(text))
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE):
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(kind, [""])
        names |= {name + suffix for suffix in suffixes}
    return names


def test_every_metric_a_panel_queries_is_exposed() -> None:
    exposed = declared(coordinator_exposition())
    for role in ("primary", "secondary", "source", "sink"):
        status = primary_status()
        status.role = role
        exposed |= declared(node_exposition(status))
    for uid in UIDS:
        for title, expr in dashboards.expressions(committed(uid)):
            for name in re.findall(r"\b((?:semiactive|process)_[a-z0-9_]+)", expr):
                assert name in exposed, f"{uid} / {title}: {name} is exposed by no process"
