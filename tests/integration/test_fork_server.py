"""A real ``semiactive fork-server`` driven by the launcher's NodeForker:
what it forks runs the command line it was given, as a child of the
launcher in its own session, and the launcher is never left waiting."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from semiactive.launcher.node_forker import ForkedProcess, NodeForker, become_subreaper
from tests.processes import ROOT, assert_no_processes

EXAMPLE = ROOT / "examples" / "chaos-chain.yaml"


@pytest.fixture
def forker(tmp_path: Path) -> Iterator[NodeForker]:
    """A fork server for a run in ``tmp_path``; this process is the
    subreaper only for the test's length."""
    forker = NodeForker(str(EXAMPLE), tmp_path)
    try:
        yield forker
    finally:
        forker.close()
        become_subreaper(False)
        assert_no_processes(str(tmp_path))


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_a_forked_process_runs_its_command_line_as_a_child_of_the_launcher(
    forker: NodeForker, tmp_path: Path
) -> None:
    config = yaml.safe_load(EXAMPLE.read_text())
    config["insecure"] = True
    (tmp_path / "insecure.yaml").write_text(yaml.safe_dump(config))
    forker.start()
    log = tmp_path / "coordinator.log"
    log.write_text("before\n")
    argv = ["coordinator", "--config", str(tmp_path / "insecure.yaml"), "--listen", "127.0.0.1:0"]
    coordinator = forker.spawn(argv, log)
    assert isinstance(coordinator, ForkedProcess)
    assert parent_of(coordinator.pid) == os.getpid()
    assert os.getsid(coordinator.pid) == coordinator.pid  # its own session, as a cold start
    assert b"fork-server" in Path(f"/proc/{coordinator.pid}/cmdline").read_bytes()
    time.sleep(0.3)
    assert coordinator.poll() is None
    os.killpg(coordinator.pid, signal.SIGKILL)
    assert coordinator.wait(timeout=10) == -signal.SIGKILL

    helped = forker.spawn(["node", "--help"], log)
    assert helped is not None and helped.wait(timeout=30) == 0
    failed = forker.spawn(["node", "--config", str(tmp_path / "none.yaml"), "--name", "n"], log)
    assert failed is not None and failed.wait(timeout=30) == 2
    text = log.read_text()
    assert text.startswith("before\n") and "--resume" in text and "none.yaml" in text
    assert forker.forked == 3


def test_every_process_forked_in_a_row_runs(forker: NodeForker, tmp_path: Path) -> None:
    """Each waits for its adoption by the launcher, whether the process
    between has exited before it looked or after (a version that asked too
    late waited for ever: four of a CI run's clusters never got ready)."""
    forker.start()
    forked = [forker.spawn(["node", "--help"], tmp_path / f"n{i}.log") for i in range(12)]
    assert all(p is not None and parent_of(p.pid) == os.getpid() for p in forked)
    assert [p.wait(timeout=30) for p in forked if p is not None] == [0] * 12


def test_during_a_run_a_server_still_importing_is_not_waited_for(forker: NodeForker, tmp_path: Path) -> None:
    forker.start()
    assert forker.spawn(["node", "--help"], tmp_path / "n.log", wait_ready=False) is None
    helped = forker.spawn(["node", "--help"], tmp_path / "n.log")
    assert helped is not None and helped.wait(timeout=30) == 0


def test_a_server_that_does_not_answer_is_given_up(forker: NodeForker, tmp_path: Path) -> None:
    forker.start()
    helped = forker.spawn(["node", "--help"], tmp_path / "n.log")
    assert helped is not None and helped.wait(timeout=30) == 0
    assert forker.popen is not None
    os.kill(forker.popen.pid, signal.SIGSTOP)
    forker.answer_timeout_s = 0.5
    started = time.monotonic()
    assert forker.spawn(["node", "--help"], tmp_path / "n.log") is None
    assert time.monotonic() - started < 5 and forker.popen is None  # stopped and killed: not asked again
    assert forker.spawn(["node", "--help"], tmp_path / "n.log") is None


def test_bad_orders_end_it_with_status_2_and_why(
    forker: NodeForker, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    forker.start()
    assert forker.spawn(["node", "--help"], tmp_path / "n.log") is not None  # ready
    popen = forker.popen
    assert popen is not None and popen.stdin is not None
    popen.stdin.write(b'{"argv": ["cluster", "up"], "log": "x"}\n')
    popen.stdin.close()
    assert popen.wait(timeout=30) == 2
    assert "bad orders: the fork server starts node or coordinator" in capfd.readouterr().err


def test_it_ends_when_the_launcher_closes_its_input_and_close_kills_it(forker: NodeForker) -> None:
    forker.start()
    popen = forker.popen
    assert popen is not None and popen.stdin is not None
    popen.stdin.close()
    assert popen.wait(timeout=30) == 0
    forker.start()  # one that ended is replaced
    second = forker.popen
    assert second is not None and second is not popen
    forker.close()
    assert second.poll() == -signal.SIGKILL and forker.popen is None
