"""The deployment's files agree with each other (docker-compose.yml,
deploy/cluster.yaml, deploy/prometheus.yml), and the pure parts of
``make deploy-test`` (deploy/deploy_test.py) read what podman, Prometheus
and ``semiactive status --json`` say. The deployment itself runs in
``make deploy-test``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from semiactive import config, topology
from semiactive.topology import NodeRole

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("deploy_test", ROOT / "deploy" / "deploy_test.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["deploy_test"] = module
    spec.loader.exec_module(module)
    return module


dt = _load()
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
CLUSTER = topology.resolve(config.load(ROOT / "deploy" / "cluster.yaml"))


def test_every_node_is_a_service_that_checks_its_own_health() -> None:
    for name, info in CLUSTER.nodes.items():
        service = SERVICES[name]
        ep = CLUSTER.config.endpoints[name]
        assert service["hostname"] == ep.host == name
        assert service["healthcheck"]["test"] == ["CMD", "semiactive", "health", f"{name}:{ep.port}"]
        assert f"--name={name}" in service["command"]
        assert any(v.endswith(f"/tls/{name}:/tls:ro") for v in service["volumes"])  # its own key only
        # Nothing replicates a source or a sink: a restart would not resume them.
        unreplicated = info.role in (NodeRole.SOURCE, NodeRole.SINK)
        assert service["restart"] == ("no" if unreplicated else "unless-stopped")
    assert set(SERVICES["start"]["depends_on"]) == set(CLUSTER.nodes)


def test_ports_are_published_on_loopback_only() -> None:
    published = [p for s in SERVICES.values() for p in s.get("ports", [])]
    assert published and all(p.startswith("127.0.0.1:") for p in published)


def test_prometheus_scrapes_what_the_test_expects() -> None:
    expected = dt.expected_targets(yaml.safe_load((ROOT / "deploy" / "cluster.yaml").read_text()))
    assert expected == {f"{n}:9100" for n in CLUSTER.nodes} | {"coordinator:9100"}
    scrape = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())["scrape_configs"]
    targets = {t for job in scrape for sc in job["static_configs"] for t in sc["targets"]}
    assert targets == expected
    assert "--metrics-port=9100" in SERVICES["coordinator"]["command"]


def test_the_test_leaves_out_grafana_and_the_one_off_services() -> None:
    up, checked = dt.services()
    assert "grafana" in SERVICES and "grafana" not in up
    assert {"init", "admin"} & set(up) == set()
    assert set(checked) == set(up) - {"start"}


def test_missing_tools_names_debian_packages() -> None:
    assert dt.missing_tools(lambda tool: True) == []
    assert dt.missing_tools(lambda tool: tool not in ("podman", "/usr/lib/podman/netavark")) == [
        "podman",
        "netavark",
    ]


def test_targets_by_scraped_address() -> None:
    reply = {
        "data": {
            "activeTargets": [
                {"scrapeUrl": "http://node-1:9100/metrics", "labels": {"instance": "node-1"}, "health": "up"},
                {
                    "scrapeUrl": "http://node-2:9100/metrics",
                    "labels": {"instance": "node-2"},
                    "health": "down",
                    "lastError": "connection refused",
                },
                {
                    "scrapeUrl": "http://sink:9100/metrics",
                    "labels": {"instance": "sink"},
                    "health": "unknown",
                },
            ]
        }
    }
    up, down = dt.targets_up(reply)
    assert up == {"node-1:9100": "node-1"}
    assert down == {"node-2:9100": "connection refused", "sink:9100": "unknown"}


def test_status_json_defaults() -> None:
    # MessageToDict leaves out nothing here, but a stage read before its
    # first view may lack fields: they are the proto defaults.
    state = {
        "stages": [{"stage": "select-2", "primary": "node-4", "epoch": "1"}],
        "nodes": [{"name": "node-2", "role": "spare", "liveness": "up"}],
    }
    assert dt.stage_state(state, "select-2") == {
        "stage": "select-2",
        "primary": "node-4",
        "secondary": "",
        "epoch": "1",
        "protected": False,
    }
    assert dt.node_role(state, "node-2") == ("spare", "up")
    assert dt.node_role(state, "node-9") == ("", "")
    with pytest.raises(dt.DeployTestError):
        dt.stage_state(state, "select-9")
