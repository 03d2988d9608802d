"""A network that can be loaded: network namespaces on a bridge, with
rate-limited links and iperf3 traffic (the SAS paper's experiment 3).

Loopback has no link to share, so background load cannot slow anything on
it. :class:`NetworkLab` gives every node a network namespace of its own,
joined to a bridge in the root namespace by a veth pair whose two ends are
each shaped by a ``tbf`` qdisc (a full-duplex link of ``rate_bit_s``, like a
switched LAN's), addresses in a private ``10.213.X.0/24`` (X free on this
machine), and the bridge one address, so that the launcher, the coordinator
and the nemesis, in the root namespace, reach the nodes. The launcher runs
a node there with :meth:`NetworkLab.command_prefix` (``ip netns exec``,
which execs: the pid it records is the node's). :meth:`NetworkLab.load`
runs an iperf3 flow between two namespaces at a given rate.

Partitions (:meth:`NetworkLab.isolate`, :meth:`NetworkLab.cut`): two ways
to take connectivity away and give it back, both silent (packets vanish on
the way, as with a pulled cable or a failed switch; no sender is told at
once, so connections time out rather than fail):

- ``isolate(name)`` / ``rejoin(name)``: ``ip link set ... down`` / ``up`` of
  the node's veth end on the bridge. The node is cut from everyone, the
  other nodes and the root namespace alike (all its traffic crosses that
  one link); the bridge port forwards again as soon as it is up (no STP).
  As on a real LAN, once the peers' ARP entries for it have failed (after
  several seconds) their new connections may be told "no route to host".
- ``cut(a, b)`` / ``heal(a, b)``: only the pair ``a``-``b``; ``b`` may be
  :data:`ROOT`, the root namespace, where the launcher, the coordinator and
  the nemesis run. On a bridge a link is shared by all of a node's peers,
  so a pair is cut by routes instead: inside ``a``'s namespace a host route
  to ``b``'s address through :data:`CUT_DEVICE`, which drops whatever it is
  given (a veth end without carrier or ARP), and the same the other way
  round in ``b``'s. A cut from ``ROOT`` needs only the route in ``a``'s
  namespace: the root's packets still arrive, but every answer (SYN-ACK,
  ACK) is dropped, so nothing connects either way, and the root
  namespace's routes are never touched. ``blackhole``/``prohibit`` routes
  are not used: they make the kernel fail the sender's own calls at once
  (EINVAL, EACCES), which no real partition does, and the coordinator's
  probe would take such a node for dead.

Every cut is healable (``heal``, ``rejoin``, :meth:`NetworkLab.heal_all`)
and lives inside the lab's namespaces and links, so it goes with the lab.

Names carry a random tag, so two labs never collide. Every lab records
itself under ``/run/semiactive/netlab`` before creating anything, and is
torn down on leaving its ``with`` block, exceptions and Ctrl-C included; a
lab whose creator died without tearing down (SIGKILL, or a second Ctrl-C,
which exits at once) is removed by the next one created, and its iperf3
processes die with their parent.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from semiactive.launcher.supervision import process_state

SUBNET = "10.213"  # each lab takes a free 10.213.X.0/24
LINK_RATE_BIT_S = 1e9  # the SAS paper's 1 Gbit/s LAN: 40 and 60 MB/s are 32% and 48% of it
TBF_LATENCY = "20ms"
STATE_DIR = Path("/run/semiactive/netlab")
IPERF_PORT = 5201
STOP_TIMEOUT_S = 5.0
ROOT = "root"  # the root namespace, as the other end of a cut
CUT_DEVICE = "cut0"  # in a namespace, a device that drops what is routed to it


class NetLabError(RuntimeError):
    """A lab could not be built or a command of it failed."""


@dataclass(frozen=True)
class LabNode:
    name: str
    netns: str
    address: str
    host_if: str  # the veth end on the bridge
    ns_if: str  # the veth end in the namespace


def _run(*cmd: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NetLabError(f"{' '.join(cmd)}: {done.stderr.strip() or f'exit status {done.returncode}'}")
    return done.stdout


def _start_ticks(pid: int) -> int | None:
    """A process's start time (``/proc/PID/stat`` field 22): with the pid, it
    names one process even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """Serialises choosing subnets and cleaning stale labs between processes."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with (STATE_DIR / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is over (a teardown cut short
    leaves namespaces behind), then interrupt as usual."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if caught:
        raise KeyboardInterrupt


def _kill_namespace(netns: str) -> None:
    """SIGKILL whatever still runs in ``netns`` (a namespace with a process
    in it outlives ``ip netns del``, and so do its links), and wait."""
    try:
        pids = [int(p) for p in _run("ip", "netns", "pids", netns).split()]
    except NetLabError:
        return
    for pid in pids:
        for sig in (signal.SIGKILL, signal.SIGCONT):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and any(process_state(p) not in (None, "Z") for p in pids):
        time.sleep(0.02)


def _make_cut_device(netns: str) -> None:
    """:data:`CUT_DEVICE` in ``netns``: one end of a veth pair whose other
    end stays down, so it has no carrier and drops whatever is routed to
    it, silently; without ARP, so that no neighbour lookup fails and
    reports the destination unreachable either. (A ``dummy`` device would
    do, but its module is not always there; veth is what a lab is made of.)"""
    _run("ip", "-n", netns, "link", "add", CUT_DEVICE, "type", "veth", "peer", "name", CUT_DEVICE + "-peer")
    _run("ip", "-n", netns, "link", "set", CUT_DEVICE, "arp", "off", "up")


def _remove(state: dict[str, Any]) -> None:
    """Everything a lab made. Links are deleted explicitly: a deleted
    namespace takes its veths with it only later, asynchronously."""
    for netns in state["namespaces"]:
        _kill_namespace(netns)
    for link in [*state["links"], state["bridge"]]:
        with contextlib.suppress(NetLabError):
            _run("ip", "link", "del", link)
    for netns in state["namespaces"]:
        with contextlib.suppress(NetLabError):
            _run("ip", "netns", "del", netns)
    (STATE_DIR / f"{state['tag']}.json").unlink(missing_ok=True)


def clean_stale() -> list[str]:
    """Remove the labs whose creating process is gone; their tags."""
    removed = []
    for path in sorted(STATE_DIR.glob("*.json")):
        try:
            state = json.loads(path.read_text())
            alive = _start_ticks(state["pid"]) == state["start_ticks"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not alive:
            _remove(state)
            removed.append(str(state["tag"]))
    return removed


def _free_subnet() -> str:
    in_use = _run("ip", "-4", "-o", "addr", "show") + _run("ip", "-4", "route", "show")
    for path in STATE_DIR.glob("*.json"):
        with contextlib.suppress(OSError):
            in_use += path.read_text()
    taken = {int(x) for x in re.findall(rf"\b{re.escape(SUBNET)}\.(\d+)\.", in_use)}
    free = [x for x in range(256) if x not in taken]
    if not free:
        raise NetLabError(f"no free {SUBNET}.X.0/24 subnet left")
    return f"{SUBNET}.{free[0]}"


class NetworkLab:
    """Namespaces for ``nodes`` on one bridge, every link shaped to
    ``rate_bit_s`` in each direction. Use as a context manager."""

    def __init__(self, nodes: Sequence[str], rate_bit_s: float = LINK_RATE_BIT_S) -> None:
        if not 1 <= len(nodes) <= 253:
            raise ValueError("a lab has 1 to 253 nodes")
        if ROOT in nodes:
            raise ValueError(f"{ROOT!r} names the root namespace, not a node")
        self.tag = "sa" + secrets.token_hex(3)
        self.rate_bit_s = rate_bit_s
        self.bridge = f"{self.tag}-br"
        self.names = list(nodes)
        self.nodes: dict[str, LabNode] = {}
        self.host_address = ""
        self.workdir: Path | None = None
        self._loads: list[Load] = []
        self._next_port = IPERF_PORT
        self._cuts: set[frozenset[str]] = set()
        self._isolated: set[str] = set()
        self._cut_devices: set[str] = set()  # namespaces that have their CUT_DEVICE

    @staticmethod
    def why_unavailable(load: bool = True, cuts: bool = False) -> str | None:
        """Why no lab can be built here (None: it can): root, ``ip``, ``tc``,
        a namespace that can really be made; ``iperf3`` unless no ``load`` is
        wanted; with ``cuts``, the device that drops packets (partitions)."""
        if os.geteuid() != 0:
            return f"network namespaces need root (this is uid {os.geteuid()})"
        tools = [("ip", "iproute2"), ("tc", "iproute2")] + ([("iperf3", "`make iperf3`")] if load else [])
        for tool, hint in tools:
            if shutil.which(tool) is None:
                return f"`{tool}` is not installed (install it with {hint})"
        probe = "sa" + secrets.token_hex(3) + "-probe"
        try:
            _run("ip", "netns", "add", probe)
        except NetLabError as exc:
            return f"cannot create a network namespace: {exc}"
        try:
            if cuts:
                _make_cut_device(probe)
        except NetLabError as exc:
            return f"cannot make a device that drops packets in a network namespace: {exc}"
        finally:
            with contextlib.suppress(NetLabError):
                _run("ip", "netns", "del", probe)
        return None

    def __enter__(self) -> NetworkLab:
        self.create()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.teardown()

    # -- what the launcher asks ---------------------------------------------------------

    def host(self, name: str) -> str:
        """The address ``name`` listens on: its namespace's, or the bridge's
        for a process the lab has no namespace for (it runs in the root one)."""
        node = self.nodes.get(name)
        return node.address if node is not None else self.host_address

    def command_prefix(self, name: str) -> list[str]:
        node = self.nodes.get(name)
        return ["ip", "netns", "exec", node.netns] if node is not None else []

    # -- build and remove ---------------------------------------------------------------

    def _state(self) -> dict[str, Any]:
        pid = os.getpid()
        return {
            "tag": self.tag,
            "pid": pid,
            "start_ticks": _start_ticks(pid),
            "subnet": self.host_address.rsplit(".", 1)[0] + ".0/24",
            "bridge": self.bridge,
            "links": [n.host_if for n in self.nodes.values()],
            "namespaces": [n.netns for n in self.nodes.values()],
        }

    def create(self) -> None:
        with _locked():
            clean_stale()
            subnet = _free_subnet()
            self.host_address = f"{subnet}.1"
            for i, name in enumerate(self.names, start=2):
                self.nodes[name] = LabNode(
                    name, f"{self.tag}-{name}", f"{subnet}.{i}", f"{self.tag}h{i}", "eth0"
                )
            (STATE_DIR / f"{self.tag}.json").write_text(json.dumps(self._state()))
            try:
                self._build()
            except BaseException:
                self.teardown()
                raise
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{self.tag}-"))

    def _build(self) -> None:
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.host_address}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        for node in self.nodes.values():
            _run("ip", "netns", "add", node.netns)
            _run(
                "ip",
                "link",
                "add",
                node.host_if,
                "type",
                "veth",
                "peer",
                "name",
                node.ns_if,
                "netns",
                node.netns,
            )
            _run("ip", "-n", node.netns, "addr", "add", f"{node.address}/24", "dev", node.ns_if)
            _run("ip", "-n", node.netns, "link", "set", node.ns_if, "up")
            _run("ip", "-n", node.netns, "link", "set", "lo", "up")
            _run("ip", "link", "set", node.host_if, "master", self.bridge, "up")
            self._tbf([], node.host_if)
            self._tbf(["-n", node.netns], node.ns_if)

    def _tbf(self, where: list[str], dev: str) -> None:
        """Shape ``dev``'s egress to the link rate; a burst of 2 ms of it."""
        rate = f"{int(self.rate_bit_s)}bit"
        burst = str(max(int(self.rate_bit_s / 8 * 0.002), 64 * 1024))
        _run(
            "tc",
            *where,
            "qdisc",
            "add",
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            rate,
            "burst",
            burst,
            "latency",
            TBF_LATENCY,
        )

    def teardown(self) -> None:
        """Stop the loads, kill what runs in the namespaces, remove the
        links, the bridge and the namespaces."""
        if not self.host_address:
            return
        with _signals_deferred():
            for load in self._loads:
                load.stop()
            self._loads = []
            _remove(self._state())
            if self.workdir is not None:
                shutil.rmtree(self.workdir, ignore_errors=True)
            self.host_address, self.nodes, self.workdir = "", {}, None
            self._cuts, self._isolated, self._cut_devices = set(), set(), set()

    # -- partitions ----------------------------------------------------------------------

    def isolate(self, name: str) -> None:
        """Cut ``name`` from everyone, root namespace included: its link to
        the bridge goes down (``ip link set DEV down``)."""
        _run("ip", "link", "set", self.nodes[name].host_if, "down")
        self._isolated.add(name)

    def rejoin(self, name: str) -> None:
        """Undo :meth:`isolate`: the link to the bridge comes up again; this
        returns once both its ends are up. A peer that tried to reach the
        node meanwhile may hold packets for it until its next ARP attempt
        (up to a second), as on a real LAN."""
        node = self.nodes[name]
        _run("ip", "link", "set", node.host_if, "up")
        self._isolated.discard(name)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            ends = _run("ip", "-o", "link", "show", node.host_if)
            ends += _run("ip", "-n", node.netns, "-o", "link", "show", node.ns_if)
            if ends.count("state UP") == 2:
                return
            time.sleep(0.02)
        raise NetLabError(f"the link of {name} is not up {STOP_TIMEOUT_S:g} s after `ip link set up`")

    def cut(self, a: str, b: str = ROOT) -> None:
        """Drop every packet between ``a`` and ``b`` (a node, or :data:`ROOT`),
        both ways, silently, until :meth:`heal`. Idempotent."""
        pair = self._pair(a, b)
        if pair in self._cuts:
            return
        for here, there in ((a, b), (b, a)):
            if here != ROOT:
                self._route(here, there, "add")
        self._cuts.add(pair)

    def heal(self, a: str, b: str = ROOT) -> None:
        """Undo :meth:`cut` of ``a`` and ``b``. Idempotent."""
        pair = self._pair(a, b)
        if pair not in self._cuts:
            return
        for here, there in ((a, b), (b, a)):
            if here != ROOT:
                self._route(here, there, "del")
        self._cuts.discard(pair)

    def partition(self, side: Iterable[str], other: Iterable[str]) -> None:
        """Cut every member of ``side`` from every member of ``other`` (either
        may hold :data:`ROOT`); within each side nothing changes."""
        others = list(other)
        for a in side:
            for b in others:
                self.cut(a, b)

    def heal_all(self) -> None:
        """Every cut healed, every isolated node rejoined."""
        for pair in list(self._cuts):
            self.heal(*pair)
        for name in list(self._isolated):
            self.rejoin(name)

    @property
    def cuts(self) -> set[frozenset[str]]:
        """The pairs cut now (isolated nodes are in :attr:`isolated`)."""
        return set(self._cuts)

    @property
    def isolated(self) -> set[str]:
        return set(self._isolated)

    def _pair(self, a: str, b: str) -> frozenset[str]:
        for name in (a, b):
            if name != ROOT and name not in self.nodes:
                raise NetLabError(f"no node {name!r} in this lab")
        if a == b:
            raise NetLabError(f"cannot cut {a!r} from itself")
        return frozenset((a, b))

    def _route(self, here: str, there: str, action: str) -> None:
        """Add or delete, in ``here``'s namespace, the host route that sends
        what goes to ``there`` into :data:`CUT_DEVICE` (dropped)."""
        netns = self.nodes[here].netns
        if netns not in self._cut_devices:
            _make_cut_device(netns)
            self._cut_devices.add(netns)
        address = self.host_address if there == ROOT else self.nodes[there].address
        _run("ip", "-n", netns, "route", action, f"{address}/32", "dev", CUT_DEVICE)

    # -- traffic -------------------------------------------------------------------------

    def load(self, client: str, server: str, bytes_per_s: float | None, seconds: float = 0) -> Load:
        """An iperf3 TCP flow from ``client``'s namespace to ``server``'s at
        ``bytes_per_s`` (None: as fast as the links allow) for ``seconds``
        (0: until stopped); started, it runs on the links of both."""
        if self.workdir is None:
            raise NetLabError("the lab is not built")
        port, self._next_port = self._next_port, self._next_port + 1
        load = Load(self, self.nodes[client], self.nodes[server], port, bytes_per_s, seconds)
        self._loads.append(load)
        return load

    def measure(self, client: str, server: str, seconds: float = 1.0) -> float:
        """The bytes per second one TCP flow achieves from client to server."""
        load = self.load(client, server, None, seconds)
        load.wait(seconds + STOP_TIMEOUT_S)
        achieved = load.stop()
        if achieved is None:
            raise NetLabError(f"iperf3 {client} -> {server} measured nothing: {load.error()}")
        return achieved


class Load:
    """One iperf3 server and client; :meth:`stop` gives the bytes per second
    the client sent (None if it never ran)."""

    def __init__(
        self, lab: NetworkLab, client: LabNode, server: LabNode, port: int, rate: float | None, seconds: float
    ) -> None:
        assert lab.workdir is not None
        self.output = lab.workdir / f"iperf3-{port}.json"
        self.achieved: float | None = None
        guard = ["setpriv", "--pdeathsig", "KILL", "--"]  # gone with us, even if SIGKILLed
        serve = ["iperf3", "-s", "-1", "-B", server.address, "-p", str(port)]
        self.server = self._spawn(["ip", "netns", "exec", server.netns, *guard, *serve], subprocess.DEVNULL)
        self._wait_listening(port)
        send = ["iperf3", "-c", server.address, "-B", client.address, "-p", str(port), "-J", "-i", "0"]
        send += ["-t", f"{seconds:g}"] + (["-b", str(int(rate * 8))] if rate is not None else [])
        with self.output.open("w") as out:
            self.client = self._spawn(["ip", "netns", "exec", client.netns, *guard, *send], out)

    @staticmethod
    def _spawn(cmd: list[str], out: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def _wait_listening(self, port: int) -> None:
        """Until the server listens: its own namespace's sockets, in /proc."""
        deadline = time.monotonic() + STOP_TIMEOUT_S
        tcp = Path(f"/proc/{self.server.pid}/net/tcp")
        while time.monotonic() < deadline and self.server.poll() is None:
            with contextlib.suppress(OSError):
                for line in tcp.read_text().splitlines()[1:]:
                    local, state = line.split()[1], line.split()[3]
                    if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                        return
            time.sleep(0.01)
        self.stop()
        raise NetLabError(f"iperf3 server on port {port} did not start")

    @property
    def running(self) -> bool:
        return self.client.poll() is None

    def wait(self, timeout: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.client.wait(timeout)

    def stop(self) -> float | None:
        """Interrupt the client (it then reports) and end the server."""
        for proc, sig in ((self.client, signal.SIGINT), (self.server, signal.SIGKILL)):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(sig)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.achieved is None:
            self.achieved = self._achieved()
        return self.achieved

    def _achieved(self) -> float | None:
        """What the receiver got, or (an interrupted client knows only that)
        what the client sent."""
        try:
            end = json.loads(self.output.read_text())["end"]
            for total in (end.get("sum_received"), end["sum_sent"]):
                if total and total["bytes"] and total["seconds"]:
                    return float(total["bytes"]) / float(total["seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None

    def error(self) -> str:
        try:
            return str(json.loads(self.output.read_text()).get("error", "no error reported"))
        except (OSError, ValueError):
            return "no output"
