"""Faults nobody announced, without a cluster: the report's three origins of
a fault, the stages a run takes for stopped, the drain's "nothing moves"
condition, and the nemesis and the launcher's watch on real processes
(signals sent and observed for real)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from semiactive import config, topology
from semiactive.campaigns.nemesis import Nemesis, NemesisError, launcher_started, read_history, runs
from semiactive.errors import UserError
from semiactive.launcher.faults import Fault, FaultKind
from semiactive.launcher.measurements import analyse
from semiactive.launcher.outcome import UNSERVED_LIMIT_S, stopped_stages, surviving_positions
from semiactive.launcher.supervision import ProcessWatch, process_state, start_ticks
from semiactive.runtime.events import EventLog
from semiactive.topology import Topology
from semiactive.wire import control_pb2 as cpb
from tests.processes import ROOT
from tests.waiting import wait_until

T0 = 1_800_000_000.0


def _chain() -> Topology:
    return topology.resolve(config.load(str(ROOT / "examples" / "paper-chain-ha.yaml")))


def _write(path: Path, records: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


# -- the report: where a fault comes from -------------------------------------------------------


def _run_dir(tmp_path: Path) -> Path:
    (tmp_path / "telemetry").mkdir()
    (tmp_path / "cluster.json").write_text(json.dumps({"t0_unix": T0, "processes": []}))
    return tmp_path


def test_an_observed_exit_the_nemesis_explains_is_one_fault_timed_by_the_nemesis(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    _write(
        run_dir / "telemetry" / "nemesis.jsonl",
        [{"node": "node-2", "kind": "kill", "at": 2.0, "pid": 41, "t": T0 + 2.0, "duration": 0.0}],
    )
    _write(
        run_dir / "telemetry" / "events-launcher.jsonl",
        [{"t": T0 + 2.015, "node": "launcher", "event": "process_exited", "target": "node-2", "pid": 41}],
    )
    _write(
        run_dir / "telemetry" / "events-node-4.jsonl",
        [
            {"t": T0 + 2.012, "node": "node-4", "event": "failure_detected", "primary": "node-2"},
            {"t": T0 + 2.03, "node": "node-4", "event": "recovered", "recovery_ms": 9.0},
        ],
    )
    (fault,) = analyse(_chain(), run_dir).faults
    assert (fault.node, fault.kind, fault.origin, fault.at) == ("node-2", "kill", "nemesis", 2.0)
    assert fault.detection_ms == pytest.approx(12.0, abs=0.01) and fault.recovery_ms == 9.0


def test_an_exit_nobody_announced_is_a_fault_at_the_moment_it_was_seen(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    # The nemesis killed another pid of node-2: that does not explain this one.
    _write(
        run_dir / "telemetry" / "nemesis.jsonl", [{"node": "node-2", "kind": "kill", "pid": 7, "t": T0 + 1}]
    )
    _write(
        run_dir / "telemetry" / "events-launcher.jsonl",
        [
            {"t": T0 + 3.5, "node": "launcher", "event": "process_exited", "target": "node-2", "pid": 99},
            {"t": T0 + 4.0, "node": "launcher", "event": "process_frozen", "target": "node-3", "pid": 98},
        ],
    )
    faults = analyse(_chain(), run_dir).faults
    assert [(f.node, f.kind, f.origin, round(f.at, 3)) for f in faults] == [
        ("node-2", "kill", "nemesis", 1.0),
        ("node-2", "exit", "observed", 3.5),
        ("node-3", "freeze", "observed", 4.0),
    ]


def test_a_skipped_nemesis_fault_is_not_a_fault(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    _write(
        run_dir / "telemetry" / "nemesis.jsonl",
        [{"node": "node-2", "kind": "kill", "pid": None, "t": T0 + 1, "skipped": "not running"}],
    )
    assert analyse(_chain(), run_dir).faults == []


# -- stopped stages and the drain -------------------------------------------------------------------


@dataclass
class FakeProcess:
    name: str
    role: str
    stage: str | None
    restarts: int = 0
    alive: bool = True
    abandoned: bool = False


def _processes(topo: Topology) -> dict[str, FakeProcess]:
    return {n: FakeProcess(n, info.role, info.stage) for n, info in topo.nodes.items()}


def test_only_deaths_no_replica_covers_stop_a_stage() -> None:
    topo = _chain()
    procs = _processes(topo)
    never = lambda stage: 0.0  # noqa: E731
    assert stopped_stages(topo, procs, never) == []
    procs["node-2"].alive = False  # protected by node-4: not stopped
    assert stopped_stages(topo, procs, never) == []
    procs["node-3"].restarts = 1  # unprotected: its node died (restarted empty)
    procs["node-0"].alive = False  # the source: a generator, started again as itself
    assert {s.stage for s in stopped_stages(topo, procs, never)} == {"select-3"}
    procs["node-0"].abandoned = True  # it exited by itself: not started again
    stopped = {s.stage: s.reason for s in stopped_stages(topo, procs, never)}
    assert set(stopped) == {"select-3", "node-0"}
    assert "unprotected" in stopped["select-3"] and "source" in stopped["node-0"]
    # A protected stage with no primary for longer than a rebuild takes.
    long = {"select-2": UNSERVED_LIMIT_S + 1}
    names = {s.stage for s in stopped_stages(topo, procs, lambda s: long.get(s, 0.0))}
    assert "select-2" in names


def _status(role: str, outputs: list[tuple[str, int, int]], inputs: list[tuple[str, int]]) -> cpb.NodeStatus:
    st = cpb.NodeStatus(role=role)
    for edge, seq, acked in outputs:
        st.outputs.add(edge=edge, seq=seq, acked=acked)
    for edge, seq in inputs:
        st.inputs.add(edge=edge, seq=seq)
    return st


def test_the_drain_waits_for_every_surviving_producer_but_not_for_a_stopped_consumer() -> None:
    topo = _chain()
    procs = {"node-3": FakeProcess("node-3", "primary", "select-3", restarts=1)}
    stopped = stopped_stages(topo, procs, lambda stage: 0.0)
    assert [s.stage for s in stopped] == ["select-3"]
    statuses: dict[str, cpb.NodeStatus | None] = {
        # select-2 holds rows for select-3, which stopped: nobody will take them.
        "node-2": _status("primary", [("select-2->select-3", 500, 300)], [("select-1->select-2", 500)]),
        "node-1": _status("primary", [("select-1->select-2", 500, 480)], []),
        "node-4": _status("secondary", [("select-2->select-3", 500, 0)], []),  # trimmed late: ignored
    }
    assert surviving_positions(topo, statuses, stopped) is None  # node-1 still owes node-2 20 rows
    statuses["node-1"] = _status("primary", [("select-1->select-2", 500, 500)], [])
    assert surviving_positions(topo, statuses, stopped) is not None


# -- the nemesis and the watch, on real processes ----------------------------------------------------


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """A process that looks like node ``node-9`` to the nemesis."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "--name", "node-9"], start_new_session=True
    )
    wait_until(lambda: runs(proc.pid, "node-9"), what="the victim to be exec'd", timeout=5, interval=0.005)
    yield proc
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
    proc.wait()


def _cluster_json(run_dir: Path, pid: int) -> None:
    doc = {"t0_unix": time.time(), "launcher_pid": None, "processes": [{"name": "node-9", "pid": pid}]}
    (run_dir / "cluster.json").write_text(json.dumps(doc))


def test_the_nemesis_signals_only_a_pid_that_runs_that_node(
    tmp_path: Path, victim: subprocess.Popen[bytes]
) -> None:
    assert runs(victim.pid, "node-9")
    assert not runs(victim.pid, "node-1")
    assert not runs(os.getpid(), "node-9")  # this pytest process: not that node
    _cluster_json(tmp_path, os.getpid())  # cluster.json names a pid that is not node-9
    assert Nemesis(tmp_path, [Fault("node-9", 0.0, FaultKind.KILL)]).run() == 1
    assert read_history(tmp_path)[0]["skipped"] == "not running"


def test_a_node_recorded_with_its_start_is_known_by_it_not_by_its_command_line(tmp_path: Path) -> None:
    """A node forked by the run's fork server runs ``semiactive fork-server ...``:
    cluster.json's ``started`` names it; a pid started at another time (a
    recycled one) is not it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        started = start_ticks(proc.pid)
        assert started is not None
        assert runs(proc.pid, "node-9", started) and not runs(proc.pid, "node-9")
        assert not runs(proc.pid, "node-9", started + 1)
        doc: dict[str, Any] = {"t0_unix": time.time(), "launcher_pid": None, "processes": []}
        doc["processes"] = [{"name": "node-9", "pid": proc.pid, "started": started + 1}]
        (tmp_path / "cluster.json").write_text(json.dumps(doc))
        assert Nemesis(tmp_path, [Fault("node-9", 0.0, FaultKind.KILL)]).run() == 1
        assert proc.poll() is None
        doc["processes"] = [{"name": "node-9", "pid": proc.pid, "started": started}]
        (tmp_path / "cluster.json").write_text(json.dumps(doc))
        assert Nemesis(tmp_path, [Fault("node-9", 0.0, FaultKind.KILL)]).run() == 0
        assert proc.wait(timeout=5) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_nemesis_refuses_a_target_the_run_does_not_have(tmp_path: Path) -> None:
    _cluster_json(tmp_path, os.getpid())
    with pytest.raises(UserError, match=r"no process 'node9' in this run \(did you mean node-9\?\)"):
        Nemesis(tmp_path, [Fault("node9", 4.0, FaultKind.KILL)]).run()
    assert not (tmp_path / "telemetry" / "nemesis.jsonl").exists()


def test_the_nemesis_refuses_a_run_that_has_ended(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass", "cluster", "up"])
    gone.wait()
    doc = {"t0_unix": time.time() - 30, "launcher_pid": gone.pid, "processes": [{"name": "node-2", "pid": 1}]}
    (tmp_path / "cluster.json").write_text(json.dumps(doc))
    with pytest.raises(NemesisError, match="has ended"):
        Nemesis(tmp_path, [Fault("node-2", 5.0, FaultKind.KILL)]).run()


def test_a_fault_the_nemesis_could_not_inject_is_said_and_fails_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _cluster_json(tmp_path, os.getpid())
    assert Nemesis(tmp_path, [Fault("node-9", 0.0, FaultKind.KILL)]).run() == 1
    assert "kill node-9@0 not injected: not running" in capsys.readouterr().err


def test_the_nemesis_freezes_resumes_and_kills_and_the_watch_sees_it(
    tmp_path: Path, victim: subprocess.Popen[bytes]
) -> None:
    @dataclass
    class Watched:
        name: str = "node-9"
        stage: str | None = "select-2"
        expected_exit: bool = False
        frozen_by_launcher: bool = False

        @property
        def pid(self) -> int:
            return victim.pid

        def returncode(self) -> int | None:
            return victim.poll()

    _cluster_json(tmp_path, victim.pid)
    watch = ProcessWatch(EventLog("launcher", tmp_path))
    watched = [Watched()]
    nemesis = Nemesis(tmp_path, [Fault("node-9", 0.0, FaultKind.STOP, 0.3)])
    nemesis.wait_for_start()
    assert nemesis.inject(nemesis.plan[0])
    wait_until(
        lambda: process_state(victim.pid),
        until=lambda state: state == "T",
        what="the victim to be stopped (signals arrive asynchronously)",
        timeout=5,
        interval=0.005,
    )
    assert watch.observe(watched) == [] and watch.frozen(victim.pid)
    nemesis._sleep_until(None)  # the SIGCONT falls due
    wait_until(
        lambda: process_state(victim.pid),
        until=lambda state: state != "T",
        what="the victim to run again",
        timeout=5,
        interval=0.005,
    )
    watch.observe(watched)
    assert not watch.frozen(victim.pid)
    assert nemesis.inject(Fault("node-9", 0.0, FaultKind.KILL))
    victim.wait(5)
    (exit_,) = watch.observe(watched)
    assert exit_.returncode == -signal.SIGKILL and "SIGKILL" in exit_.describe()
    assert watch.observe(watched) == []  # seen once
    kinds = [r["kind"] for r in read_history(tmp_path)]
    assert kinds == ["stop", "resume", "kill"]
    events = [json.loads(line)["event"] for line in (tmp_path / "telemetry" / "events-launcher.jsonl").open()]
    assert events == ["process_frozen", "process_resumed", "process_exited"]


def test_an_exit_the_launcher_caused_is_not_a_fault(tmp_path: Path, victim: subprocess.Popen[bytes]) -> None:
    @dataclass
    class Killed:
        name: str = "node-9"
        stage: str | None = None
        expected_exit: bool = True
        frozen_by_launcher: bool = False
        pid: int = victim.pid

        def returncode(self) -> int | None:
            return victim.poll()

    victim.kill()
    victim.wait()
    assert ProcessWatch(EventLog("launcher", tmp_path)).observe([Killed()]) == []


def test_the_nemesis_gives_up_on_a_run_whose_launcher_is_gone(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass", "cluster", "up"])
    gone.wait()
    doc = {"t0_unix": None, "launcher_pid": gone.pid, "processes": [{"name": "node-9", "pid": 1}]}
    (tmp_path / "cluster.json").write_text(json.dumps(doc))
    started = time.monotonic()
    with pytest.raises(NemesisError, match="ended before it started"):
        Nemesis(tmp_path, [Fault("node-9", 0.0, FaultKind.KILL)]).wait_for_start(timeout=30)
    assert time.monotonic() - started < 5


def test_the_nemesis_waits_as_long_as_a_live_launcher_starts_and_no_longer_for_none(tmp_path: Path) -> None:
    """A large run loads its sources for minutes: past the timeout, a live
    launcher is waited for; a run directory without one is not."""
    launcher = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "cluster", "up"])
    try:
        node = {"name": "node-9", "pid": 1}
        (tmp_path / "cluster.json").write_text(
            json.dumps({"t0_unix": None, "launcher_pid": launcher.pid, "processes": [node]})
        )
        started = threading.Timer(
            0.8,
            lambda: (tmp_path / "cluster.json").write_text(
                json.dumps({"t0_unix": 1234.5, "launcher_pid": launcher.pid, "processes": [node]})
            ),
        )
        started.start()
        nemesis = Nemesis(tmp_path, [Fault("node-9", 0.0, FaultKind.KILL)])
        assert nemesis.wait_for_start(timeout=0.2) == 1234.5
    finally:
        launcher.kill()
        launcher.wait()
    (tmp_path / "cluster.json").unlink()
    with pytest.raises(NemesisError, match="no run in"):
        Nemesis(tmp_path, [Fault("node-9", 0.0, FaultKind.KILL)]).wait_for_start(timeout=0.2)


def test_a_campaign_running_its_runs_in_process_is_known_as_the_launcher_by_its_start(tmp_path: Path) -> None:
    """``chaos`` and ``experiment`` launch their runs in-process: the
    launcher is not ``cluster up``. It is known by the start time the run
    recorded; the same pid with another start (recycled) is not it."""
    campaign = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "chaos"])
    try:
        started = start_ticks(campaign.pid)
        assert started is not None
        doc = {"t0_unix": None, "launcher_pid": campaign.pid, "launcher_started": started}
        (tmp_path / "cluster.json").write_text(json.dumps(doc))
        timer = threading.Timer(
            0.5, lambda: (tmp_path / "cluster.json").write_text(json.dumps({**doc, "t0_unix": 99.0}))
        )
        timer.start()
        assert Nemesis(tmp_path, [Fault("launcher", 0.0, FaultKind.KILL)]).wait_for_start(timeout=0.2) == 99.0
        timer.join()
        (tmp_path / "cluster.json").write_text(
            json.dumps({**doc, "t0_unix": None, "launcher_started": started - 1})
        )
        with pytest.raises(NemesisError, match="ended before it started"):
            Nemesis(tmp_path, [Fault("launcher", 0.0, FaultKind.KILL)]).wait_for_start(timeout=5)
    finally:
        campaign.kill()
        campaign.wait()


@pytest.mark.parametrize("garbage", ["12", 1.5, True, None, [1], {"t": 1}])
def test_a_launcher_start_that_is_not_an_integer_is_not_used(garbage: object) -> None:
    assert launcher_started({"launcher_started": garbage}) is None
    assert launcher_started({"launcher_started": 12}) == 12


def test_a_process_just_started_is_recognised_though_its_exec_is_not_finished() -> None:
    """``Popen`` returns before the kernel has placed the new program's
    arguments; read at once, /proc/PID/cmdline is often empty (CI saw the
    nemesis call a live launcher gone). A kernel thread, always empty, is
    not taken for one."""
    for _ in range(40):
        fresh = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "cluster", "up"])
        try:
            assert runs(fresh.pid, "launcher")
        finally:
            fresh.kill()
            fresh.wait()
    kthreadd = 2
    started = time.monotonic()
    assert not runs(kthreadd, "launcher")
    assert time.monotonic() - started < 3


def test_a_detection_just_before_the_launcher_saw_the_exit_belongs_to_it(tmp_path: Path) -> None:
    # node-4's connection broke at the kill and it detected at once; the
    # launcher, polling every 20 ms, saw the exit 1 ms later (a real run).
    run_dir = _run_dir(tmp_path)
    _write(
        run_dir / "telemetry" / "events-launcher.jsonl",
        [{"t": T0 + 2.011, "node": "launcher", "event": "process_exited", "target": "node-2", "pid": 41}],
    )
    _write(
        run_dir / "telemetry" / "events-node-4.jsonl",
        [
            {"t": T0 + 2.010, "node": "node-4", "event": "failure_detected", "primary": "node-2"},
            # It even took over before the launcher looked: node-2 was still
            # the primary when it was hit.
            {"t": T0 + 2.0105, "node": "node-4", "event": "takeover", "stage": "select-2", "epoch": 1},
            {"t": T0 + 2.03, "node": "node-4", "event": "recovered", "recovery_ms": 14.9},
        ],
    )
    (fault,) = analyse(_chain(), run_dir).faults
    assert (fault.origin, fault.detected_by, fault.detection_ms, fault.recovery_ms) == (
        "observed",
        "node-4",
        0.0,
        14.9,
    )


def test_a_sink_that_writes_a_table_is_started_again_not_stopped(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "paper-chain-ha.yaml").read_text()
    text = text.replace(
        "  - name: sink\n",
        "  - name: sink\n    kind: postgres\n    postgres: {dsn: 'postgresql://u@h/db', table: out}\n",
    )
    (tmp_path / "c.yaml").write_text(text)
    topo = topology.resolve(config.load(tmp_path / "c.yaml"))
    procs = _processes(topo)
    procs["sink"].alive = False  # killed: the launcher starts it again
    assert stopped_stages(topo, procs, lambda stage: 0.0) == []
    procs["sink"].abandoned = True  # it exited by itself: not started again
    assert [s.stage for s in stopped_stages(topo, procs, lambda stage: 0.0)] == ["sink"]
    file_sink = _processes(_chain())
    file_sink["sink"].alive = False
    assert [s.stage for s in stopped_stages(_chain(), file_sink, lambda stage: 0.0)] == ["sink"]
