"""The fork server's orders and what it imports
(semiactive.launcher.fork_server)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from semiactive.launcher.fork_server import (
    COORDINATOR_MODULES,
    NODE_MODULES,
    OrdersError,
    modules_for,
    read_orders,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
COMMON = [*NODE_MODULES, *COORDINATOR_MODULES]


def orders(raw: object) -> io.BytesIO:
    return io.BytesIO(json.dumps(raw).encode() + b"\n")


def test_an_order_names_a_command_line_and_its_log() -> None:
    got = read_orders(orders({"argv": ["node", "--name", "n"], "log": "/tmp/n.log"}))
    assert got is not None
    assert got.argv == ["node", "--name", "n"] and got.log == Path("/tmp/n.log")
    coordinator = read_orders(orders({"argv": ["coordinator", "--listen", "x"], "log": "/tmp/c.log"}))
    assert coordinator is not None and coordinator.argv[0] == "coordinator"


def test_end_of_input_is_no_order() -> None:
    assert read_orders(io.BytesIO(b"")) is None


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"{not json\n", "not JSON"),
        (b"\xff\xfe\n", "not JSON"),
        (json.dumps(["node"]).encode() + b"\n", "argv and log"),
        (json.dumps({"argv": ["node"]}).encode() + b"\n", "argv and log"),
        (json.dumps({"argv": ["node"], "log": "x", "more": 1}).encode() + b"\n", "argv and log"),
        (json.dumps({"argv": [], "log": "x"}).encode() + b"\n", "non-empty list"),
        (json.dumps({"argv": ["node", 3], "log": "x"}).encode() + b"\n", "non-empty list"),
        (json.dumps({"argv": ["cluster", "up"], "log": "x"}).encode() + b"\n", "node or coordinator"),
        (json.dumps({"argv": ["node"], "log": ""}).encode() + b"\n", "file name"),
    ],
)
def test_anything_else_is_refused_with_why(line: bytes, why: str) -> None:
    with pytest.raises(OrdersError, match=why):
        read_orders(io.BytesIO(line))


def test_the_connectors_a_config_uses_are_imported_too() -> None:
    modules = modules_for(str(EXAMPLES / "kafka-to-postgres.yaml"))
    assert modules[: len(COMMON)] == COMMON
    assert "semiactive.node.connectors.kafka" in modules and "psycopg" in modules
    assert not any("nats" in m for m in modules)
    assert modules_for(str(EXAMPLES / "chaos-chain.yaml")) == COMMON


def test_a_config_that_does_not_load_gets_the_common_modules(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("sources: [")
    assert modules_for(str(bad)) == COMMON
    assert modules_for(str(tmp_path / "missing.yaml")) == COMMON
