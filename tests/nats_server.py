"""A real NATS server with JetStream on file storage (Debian's
``nats-server``), that a test can SIGKILL and start again on the same port
and directory: a sink meets a server that goes away and comes back with
what it had stored. ``make nats`` installs it when root; otherwise the
tests skip, saying why."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.loopback import free_port, listening


@dataclass
class NatsServer:
    url: str
    port: int
    store: Path
    log: Path
    binary: str
    process: subprocess.Popen[bytes] | None = field(default=None)

    def start(self, timeout: float = 20.0) -> None:
        command = [self.binary, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.store)]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while not listening(self.port):
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"nats-server exited {self.process.returncode}: {self.log.read_text()[-2000:]}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"nats-server not listening after {timeout} s")
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL, as a crash would; returns once it is reaped."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None


@contextlib.contextmanager
def nats_server(tmp_dir: Path) -> Iterator[NatsServer]:
    """A started server on a free loopback port, JetStream on file storage
    under ``tmp_dir``; killed at exit (its log kept as ``tmp_dir/nats.log``)."""
    binary = shutil.which("nats-server") or "/usr/sbin/nats-server"
    if not Path(binary).is_file():
        pytest.skip("nats-server not found: `make nats` installs Debian's nats-server (as root)")
    port = free_port()
    server = NatsServer(f"nats://127.0.0.1:{port}", port, tmp_dir / "jetstream", tmp_dir / "nats.log", binary)
    try:
        server.start()
        yield server
    finally:
        server.kill()
