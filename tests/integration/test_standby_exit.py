"""A member of a protected source whose peers never come up still exits at
once when told to: a waiting one's connections made ahead of a takeover,
and a serving one's loops started when it took the lock, end at exit (two
versions whose task group waited for them hung on SIGTERM)."""

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


@pytest.mark.parametrize("name", ["node-0b", "node-0"])
def test_a_member_exits_on_sigterm_though_no_peer_ever_came_up(tmp_path: Path, name: str) -> None:
    """node-0b waits (until node-0 has served); node-0, the configured
    primary, serves at once: both exit on SIGTERM, whatever their loops wait for."""
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
    command = [sys.executable, "-m", "semiactive", "node", "--config", str(config_path), "--name", name]
    command += ["--run-dir", str(tmp_path / "run"), "--endpoints", str(tmp_path / "endpoints.json")]
    node = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        port = ports[name]
        wait_until(lambda: listening(port) or node.poll() is not None, timeout=30, what=f"{name} listening")
        assert node.poll() is None, node.communicate()[0]
        node.send_signal(signal.SIGTERM)
        out, _ = node.communicate(timeout=5)
        assert "(standby) listening" in out, out
        assert name == "node-0b" or "serves source node-0" in out, out
    finally:
        if node.poll() is None:
            node.kill()
            node.wait()
