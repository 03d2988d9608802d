"""A standby that waits for a peer that never comes up still exits at once
when told to: its connections made ahead of a takeover are not part of the
node's loops (a version whose task group waited for them hung on SIGTERM)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.loopback import free_port, listening
from tests.processes import ROOT
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


def test_a_waiting_standby_exits_on_sigterm_though_no_peer_ever_came_up(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "examples" / "chaos-chain.yaml").read_text())
    config["insecure"] = True
    config["sources"][0]["ha"] = {"secondary": "node-0b"}
    config_path = tmp_path / "standby.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    names = ["node-0", "node-0b", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6"]
    names += ["spare-1", "spare-2", "sink", "coordinator"]
    ports = {n: free_port() for n in names}
    endpoints = {n: {"host": "127.0.0.1", "port": port} for n, port in ports.items()}
    (tmp_path / "endpoints.json").write_text(json.dumps(endpoints))
    command = [sys.executable, "-m", "semiactive", "node", "--config", str(config_path), "--name", "node-0b"]
    command += ["--run-dir", str(tmp_path / "run"), "--endpoints", str(tmp_path / "endpoints.json")]
    node = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        port = ports["node-0b"]
        wait_until(lambda: listening(port) or node.poll() is not None, timeout=30, what="node-0b listening")
        assert node.poll() is None, node.communicate()[0]
        node.send_signal(signal.SIGTERM)
        out, _ = node.communicate(timeout=5)
        assert "(standby) listening" in out
    finally:
        if node.poll() is None:
            node.kill()
            node.wait()
