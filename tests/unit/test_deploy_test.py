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
        assert service["restart"] == "unless-stopped"
        # A source or sink member comes back with --resume (as the standby),
        # a stage replica as a spare (deploy/entrypoint.sh).
        edge = info.role in (NodeRole.SOURCE, NodeRole.SINK)
        again = service.get("environment", {}).get("SEMIACTIVE_RESTART_AS", "spare")
        assert again == ("resume" if edge else "spare")
        if edge:  # a standby and the process it stands in for share the run directory (the lock)
            assert f"${{SEMIACTIVE_STATE:-./runs/deploy}}/run:{dt.RUN_IN_CONTAINER}" in service["volumes"]
    # The coordinator after every node (a node it never heard from counts as
    # down 10 s after it started), `start` after the coordinator.
    assert set(SERVICES["coordinator"]["depends_on"]) == set(CLUSTER.nodes)
    assert set(SERVICES["start"]["depends_on"]) == set(CLUSTER.nodes) | {"coordinator"}


def test_every_source_and_sink_has_a_standby_container() -> None:
    for stage in CLUSTER.stages.values():
        if stage.role in ("source", "sink"):
            assert stage.secondary is not None and stage.secondary in SERVICES
    assert dt.expected_roles(CLUSTER)["node-0b"] == "standby"
    assert dt.expected_roles(CLUSTER)["sink-b"] == "standby"
    assert dt.expected_roles(CLUSTER)["node-0"] == "source"


def test_the_broker_and_the_database_are_what_the_config_names() -> None:
    source = next(s for s in CLUSTER.config.sources if s.name == dt.SOURCE)
    sink = next(s for s in CLUSTER.config.sinks if s.name == dt.SINK)
    assert source.kafka is not None and sink.postgres is not None
    host = source.kafka.bootstrap.split(":")[0]
    assert host in SERVICES and SERVICES[host]["environment"]["KAFKA_ADVERTISED"] == source.kafka.bootstrap
    assert SERVICES[host]["environment"]["KAFKA_TOPICS"].split(":")[0] == source.kafka.topic
    assert "@postgres:5432/results" in sink.postgres.dsn
    assert SERVICES["postgres"]["environment"]["POSTGRES_DB"] == "results"
    for service in (dt.SINK, "sink-b", "admin"):
        assert SERVICES[service]["environment"]["PGPASSFILE"] == "/etc/semiactive/pgpass"
    assert dt.bad_every(SERVICES) > 0


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
    assert set(checked) == set(up) - {"start", "producer"}


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


def test_what_was_produced() -> None:
    assert dt.produced_count("produced 5 messages to readings (2 partitions)\n") == 5
    with pytest.raises(dt.DeployTestError):
        dt.produced_count("Traceback ...")
    ids = dt.readings(10, 4)
    assert ids == {1, 2, 3, 5, 6, 7, 9, 10}
    log = [{"seq": n + 1, "id": i} for n, i in enumerate(sorted(ids))]
    assert dt.row_log_problems(log, ids) == []
    assert dt.row_log_problems(log[:-1], ids) == ["1 ids missing (e.g. [10])"]
    assert dt.row_log_problems([*log, {"seq": 9, "id": 1}], ids) == ["1 ids twice (e.g. [1])"]
    assert dt.row_log_problems(log[1:], ids)[0] == "its seqs are not 1..N in order"
    dead = {"messages": 3, "keys": 2, "payloads": [dt.BAD_MESSAGE], "reasons": ["malformed"]}
    assert dt.dead_letter_problems(dead, 2) == []
    assert dt.dead_letter_problems(dead, 3) == ["2 distinct dead letters, 3 messages were not readings"]


def test_table_problems() -> None:
    assert dt.TableState(3, 3, 1, 3, 0).problems() == []
    assert dt.TableState(0, 0, None, None, None).problems() == ["no rows"]
    assert dt.TableState(4, 3, 1, 3, 0).problems() == ["1 seqs more than once"]
    assert dt.TableState(3, 3, 2, 4, 0).problems() == ["seqs 2..4: 3 distinct, not 1..N"]


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
