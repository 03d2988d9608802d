"""A real ``semiactive warm`` process handed a command line by the
launcher's WarmProcess: it runs it with its output in the given log."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import IO

from semiactive.launcher.warm_process import WarmProcess

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "chaos-chain.yaml")


def wait(popen: subprocess.Popen[bytes], timeout: float = 60) -> int:
    return popen.wait(timeout=timeout)


def test_the_waiting_interpreter_becomes_the_command_it_is_handed(tmp_path: Path) -> None:
    warm = WarmProcess(EXAMPLE, tmp_path, dict(os.environ))
    try:
        warm.keep_ready()
        waiting = warm.popen
        assert waiting is not None
        node_log = tmp_path / "node.log"
        node_log.write_text("before\n")
        popen = warm.take(["node", "--help"], node_log)
        assert popen is waiting and warm.popen is None and warm.handed_over == 1
        # The next one waits a moment: its imports would slow the node just handed over.
        warm.keep_ready()
        assert warm.popen is None
        assert warm.take(["node", "--help"], node_log) is None
        assert wait(popen) == 0
        text = node_log.read_text()
        assert text.startswith("before\n") and "--resume" in text  # appended: node's help
    finally:
        warm.close()


def waiting(tmp_path: Path) -> tuple[WarmProcess, subprocess.Popen[bytes], IO[bytes]]:
    """A warm interpreter started and waiting; its process and its input."""
    warm = WarmProcess(EXAMPLE, tmp_path, dict(os.environ))
    warm.keep_ready()
    popen = warm.popen
    assert popen is not None and popen.stdin is not None
    return warm, popen, popen.stdin


def test_bad_orders_end_it_with_status_2_and_why(tmp_path: Path) -> None:
    warm, popen, orders = waiting(tmp_path)
    try:
        orders.write(b'{"argv": ["coordinator"], "log": "x"}\n')
        orders.close()
        assert wait(popen) == 2
        assert "bad orders: a warm interpreter becomes a node" in (tmp_path / "logs" / "warm.log").read_text()
    finally:
        warm.close()


def test_it_ends_when_the_launcher_closes_its_input_and_close_kills_it(tmp_path: Path) -> None:
    warm, popen, orders = waiting(tmp_path)
    orders.close()
    assert wait(popen) == 0
    warm.popen = None
    warm.keep_ready()
    second = warm.popen
    assert second is not None
    warm.close()
    assert second.poll() == -9 and warm.popen is None
