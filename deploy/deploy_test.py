"""``make deploy-test``: docker-compose.yml really run, with podman.

These machines have no Docker engine and reach no image registry; Debian's
podman runs containers as root with the settings of deploy/containers.conf,
and podman-compose runs the compose file. Phases, each timed:

  setup       podman, runc, debootstrap, netavark, iptables from Debian when missing (as root)
  wheels      the project and its dependencies as wheels (``pip wheel``, no extras: no Spark)
  base        Debian images by debootstrap and ``podman import``, kept between runs: one
              with Python for deploy/Dockerfile's BASE, one with Debian's prometheus
  build       deploy/Dockerfile on that base
  init        ``compose run --rm init``: a certificate directory per identity, the run directory
  up          ``compose up -d`` of every service but grafana (no registry, no Debian package)
  healthy     every container's compose health check passes (run by ``podman healthcheck
              run``: podman 4.3 without systemd runs no health timers, and podman-compose
              waits for ``service_healthy`` only from podman 4.6 on)
  streaming   the ``start`` service started the cluster and the sink receives rows
  failover    ``podman kill`` of node-2's container, select-2's primary: node-4 is the
              primary at the next epoch, and the coordinator re-protects select-2
  replace     ``podman start`` of that container: its node is back, as a spare
  drain       ``compose run --rm admin drain``: the source stops, the sink gets its end of stream
  verify      ``semiactive verify``: the sink is exactly the reference, nothing lost or twice
  prometheus  every target (the coordinator, every node) up and serving semiactive_* series
  down        ``compose down -v`` and whatever it left, always (also on failure, Ctrl-C)

``--probe`` only says whether podman can run here (installing what is
missing when root): exit 0 if so, else 3 with the reason (``.ci/run``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
CONTAINERS_CONF = ROOT / "deploy" / "containers.conf"
COMPOSE_FILE = ROOT / "docker-compose.yml"
CLUSTER = ROOT / "deploy" / "cluster.yaml"
CONFIG_IN_CONTAINER = "/etc/semiactive/cluster.yaml"  # docker-compose.yml mounts CLUSTER there
PROMETHEUS_CONFIG = ROOT / "deploy" / "prometheus.yml"
WORK = ROOT / "runs" / "deploy-test"  # wheels, state (tls, run), logs

PROJECT = "semiactive-deploy-test"
SUITE = "bookworm"  # the Debian release the images are made of
BASE_IMAGE = f"localhost/semiactive-base:{SUITE}"
PROMETHEUS_IMAGE = f"localhost/semiactive-prometheus:{SUITE}"
IMAGE = "localhost/semiactive:deploy-test"
LEFT_OUT = {"grafana": "no image registry is reachable here and Grafana has no Debian package"}
PRIMARY, SECONDARY, STAGE = "node-2", "node-4", "select-2"  # deploy/cluster.yaml
COORDINATOR_METRICS_PORT = 9100  # docker-compose.yml: the coordinator's --metrics-port
PACKAGES = {  # command -> Debian package
    "podman": "podman",
    "runc": "runc",
    "debootstrap": "debootstrap",
    "iptables": "iptables",
    "/usr/lib/podman/netavark": "netavark",
    "/usr/lib/podman/aardvark-dns": "aardvark-dns",
}
BASE_PACKAGES = {BASE_IMAGE: "python3,python3-venv", PROMETHEUS_IMAGE: "prometheus"}
NOBODY = 65534  # the prometheus service's user (docker-compose.yml)
SLIMMED = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "var/cache/apt/archives")

T = TypeVar("T")


class DeployTestError(RuntimeError):
    pass


def say(text: str) -> None:
    print(f"deploy-test: {text}", flush=True)


# -- pure parts (tests/unit/test_deploy_test.py) ------------------------------------------------


def missing_tools(exists: Callable[[str], bool]) -> list[str]:
    """The Debian packages whose command is missing."""
    return [package for tool, package in PACKAGES.items() if not exists(tool)]


def expected_targets(cluster: dict[str, Any]) -> set[str]:
    """What Prometheus must scrape: every node's metrics endpoint of the
    cluster config, and the coordinator's."""
    endpoints: dict[str, dict[str, Any]] = cluster.get("endpoints", {})
    targets = {f"{ep['host']}:{ep['metrics_port']}" for ep in endpoints.values() if ep.get("metrics_port")}
    return targets | {f"coordinator:{COORDINATOR_METRICS_PORT}"}


def targets_up(reply: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """From Prometheus's /api/v1/targets, by scraped address (host:port):
    the targets up with their ``instance`` label, and why the others are not."""
    up: dict[str, str] = {}
    down: dict[str, str] = {}
    for target in reply["data"]["activeTargets"]:
        address = urllib.parse.urlsplit(target["scrapeUrl"]).netloc
        if target["health"] == "up":
            up[address] = target["labels"]["instance"]
        else:
            down[address] = target.get("lastError") or target["health"]
    return up, down


def stage_state(state: dict[str, Any], stage: str) -> dict[str, Any]:
    """One stage of ``semiactive status --json``; absent fields are their defaults."""
    for s in state.get("stages", []):
        if s.get("stage") == stage:
            return {"primary": "", "secondary": "", "epoch": 0, "protected": False, **s}
    raise DeployTestError(f"no stage {stage} in the coordinator's state")


def node_role(state: dict[str, Any], node: str) -> tuple[str, str]:
    """(role, liveness) of a node in ``semiactive status --json``."""
    for n in state.get("nodes", []):
        if n.get("name") == node:
            return n.get("role", ""), n.get("liveness", "")
    return "", ""


# -- running commands --------------------------------------------------------------------------


@dataclass
class Run:
    """The environment and logs of one deploy test."""

    logs: Path
    env: dict[str, str]
    timings: list[tuple[str, float]] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)

    def sh(self, cmd: Sequence[str | Path], log: str, check: bool = True, timeout: float = 600) -> str:
        """Run ``cmd``; its output is appended to logs/<log>.log and returned."""
        args = [str(c) for c in cmd]
        with (self.logs / f"{log}.log").open("a") as out:
            out.write(f"$ {' '.join(args)}\n")
            done = subprocess.run(
                args, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout
            )
            text = done.stdout.decode(errors="replace")
            out.write(text)
        if check and done.returncode != 0:
            tail = "\n".join(text.strip().splitlines()[-15:])
            raise DeployTestError(f"{args[0]} {' '.join(args[1:3])} ... exited {done.returncode}:\n{tail}")
        return text

    def podman(self, *args: str | Path, log: str = "podman", check: bool = True) -> str:
        return self.sh(["podman", *args], log, check)

    def compose(self, *args: str, log: str = "compose", check: bool = True) -> str:
        cmd: list[str | Path] = [sys.executable, "-m", "podman_compose", "-f", COMPOSE_FILE, "-p", PROJECT]
        return self.sh([*cmd, *args], log, check)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        say(f"{name} ...")
        started = time.monotonic()
        try:
            yield
        finally:
            took = time.monotonic() - started
            self.timings.append((name, took))
            say(f"{name}: {took:.1f} s")

    def passed(self, check: str) -> None:
        self.checks.append(check)
        say(f"  ok: {check}")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, every: float = 0.5) -> T:
    """Poll ``probe`` until it returns something other than None."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise DeployTestError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# -- phases ------------------------------------------------------------------------------------


def setup(run: Run) -> None:
    """Debian's podman and what it needs, when missing (as root)."""
    missing = missing_tools(lambda tool: Path(tool).exists() if "/" in tool else bool(shutil.which(tool)))
    if not missing:
        return
    if os.geteuid() != 0:
        raise DeployTestError(f"missing {', '.join(missing)} and not root: apt-get install them")
    say(f"installing {', '.join(missing)} from Debian")
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    env = dict(run.env, DEBIAN_FRONTEND="noninteractive")
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        run.sh(["apt-get", "update", "-q"], "apt")
        run.sh(install, "apt")


def probe(run: Run) -> str | None:
    """Why podman cannot run containers here (None: it can)."""
    try:
        setup(run)
    except (DeployTestError, OSError) as exc:
        return str(exc)
    # A container of the host's own root (an overlay: nothing is written
    # to it): runtime, cgroups and ulimits as deploy/containers.conf says.
    cmd = ["podman", "run", "--rm", "--network=none", "--rootfs", "/:O", "/bin/true"]
    ran = subprocess.run(cmd, env=run.env, capture_output=True, text=True)
    if ran.returncode != 0:
        return f"{' '.join(cmd)} failed: {ran.stderr.strip()[-300:]}"
    return None


def wheels(run: Run, wheelhouse: Path) -> None:
    """The node image's Python packages: the project without extras."""
    run.sh([sys.executable, "-m", "pip", "wheel", "-q", "-w", wheelhouse, ROOT], "wheels")
    if any(wheelhouse.glob("pyspark-*")):
        raise DeployTestError(f"{wheelhouse} holds pyspark: the node image must not")


def base_images(run: Run) -> None:
    """Debian rootfs by debootstrap, imported as images, once: both in parallel."""
    wanted = [name for name in BASE_PACKAGES if not podman_ok(run, "image", "exists", name)]
    if not wanted:
        say(f"  cached: {', '.join(BASE_PACKAGES)}")
        return
    with tempfile.TemporaryDirectory(prefix="semiactive-rootfs-", dir="/var/tmp") as tmp:
        mirror = [os.environ["DEBOOTSTRAP_MIRROR"]] if os.environ.get("DEBOOTSTRAP_MIRROR") else []

        def make(name: str) -> None:
            rootfs = Path(tmp) / name.rsplit("/", 1)[-1].replace(":", "-")
            cmd: list[str | Path] = ["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES[name]}"]
            began = time.monotonic()
            run.sh([*cmd, SUITE, rootfs, *mirror], f"debootstrap-{rootfs.name}")
            bootstrapped = time.monotonic()
            for path in SLIMMED:
                shutil.rmtree(rootfs / path, ignore_errors=True)
            if name == PROMETHEUS_IMAGE:
                (rootfs / "prometheus").mkdir()
                os.chown(rootfs / "prometheus", NOBODY, NOBODY)
            tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
            try:
                imported = subprocess.run(
                    ["podman", "import", "-q", "-", name], stdin=tar.stdout, env=run.env, capture_output=True
                )
            finally:
                assert tar.stdout is not None
                tar.stdout.close()
                tar.wait()
            if imported.returncode != 0:
                raise DeployTestError(f"podman import {name}: {imported.stderr.decode()[-300:]}")
            shutil.rmtree(rootfs, ignore_errors=True)
            took = bootstrapped - began, time.monotonic() - bootstrapped
            say(f"  made {name}: debootstrap {took[0]:.1f} s, import {took[1]:.1f} s")

        with ThreadPoolExecutor(len(wanted)) as pool:
            for future in [pool.submit(make, name) for name in wanted]:
                future.result()


def image_id(run: Run, name: str) -> str | None:
    if not podman_ok(run, "image", "exists", name):
        return None
    return run.podman("image", "inspect", "--format", "{{.Id}}", name).strip()


def podman_ok(run: Run, *args: str) -> bool:
    """Whether ``podman ARGS`` succeeds (``image exists``, ``network exists``)."""
    return subprocess.run(["podman", *args], env=run.env, capture_output=True).returncode == 0


def container(run: Run, service: str) -> str:
    """The container of a compose service."""
    names = run.podman(
        "ps", "-a", "--format", "{{.Names}}",
        "--filter", f"label=io.podman.compose.project={PROJECT}",
        "--filter", f"label=io.podman.compose.service={service}",
    ).split()  # fmt: skip
    if len(names) != 1:
        raise DeployTestError(f"expected one container of {service}, found {names or 'none'}")
    return names[0]


def healthy(run: Run, services: list[str], timeout: float = 120.0) -> None:
    """Run every service's compose health check until each passed once."""
    pending = {s: container(run, s) for s in services}
    started = time.monotonic()
    deadline = started + timeout
    last: dict[str, str] = {}

    def check(name: str) -> bool:
        result = subprocess.run(["podman", "healthcheck", "run", name], env=run.env, capture_output=True)
        last[name] = (result.stdout + result.stderr).decode(errors="replace").strip()[-200:]
        return result.returncode == 0

    with ThreadPoolExecutor(len(pending)) as pool:
        while pending:
            answers = dict(zip(pending, pool.map(check, pending.values()), strict=True))
            for service, ok in answers.items():
                if ok:
                    del pending[service]
                    say(f"  {service} healthy after {time.monotonic() - started:.1f} s")
            if pending and time.monotonic() > deadline:
                why = "; ".join(f"{s}: {last.get(c, '?')}" for s, c in pending.items())
                raise DeployTestError(f"not healthy after {timeout:g} s: {why}")
            if pending:
                time.sleep(1)


def sink_rows(run_dir: Path) -> int:
    path = run_dir / "sink" / "sink.jsonl"
    if not path.exists():
        return 0
    with path.open("rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def cluster_state(port: int, tls: Path) -> dict[str, Any] | None:
    """``semiactive status --json`` from the host, as admin (None: no answer)."""
    import grpc
    from google.protobuf.json_format import MessageToDict

    from semiactive.admin.status import cluster_state as ask
    from semiactive.runtime.tls import ADMIN, Security

    try:
        state = asyncio.run(ask(f"127.0.0.1:{port}", Security.load(tls, ADMIN)))
    except grpc.aio.AioRpcError:
        return None
    doc: dict[str, Any] = MessageToDict(state, always_print_fields_with_no_presence=True)
    return doc


def prometheus_get(port: int, path: str, **params: str) -> dict[str, Any]:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}{query}", timeout=5) as reply:
        doc: dict[str, Any] = json.loads(reply.read())
        return doc


def container_state(run: Run, name: str) -> tuple[str, int]:
    status, code = run.podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name).split()
    return status, int(code)


# -- the test ----------------------------------------------------------------------------------


@dataclass
class Deployment:
    """The running compose project: where to reach it, what it wrote."""

    run: Run
    state: Path
    coordinator_port: int
    prometheus_port: int

    @property
    def run_dir(self) -> Path:
        return self.state / "run"

    def cluster_state(self) -> dict[str, Any] | None:
        return cluster_state(self.coordinator_port, self.state / "tls" / "admin")

    def stage(self) -> dict[str, Any] | None:
        doc = self.cluster_state()
        return stage_state(doc, STAGE) if doc else None

    def start_log(self) -> str:
        return self.run.podman("logs", container(self.run, "start"), log="start")


def services() -> tuple[list[str], list[str]]:
    """The services ``up`` starts (all but profiled and left-out ones),
    and those of them with a health check."""
    import yaml

    declared: dict[str, dict[str, Any]] = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    up = [name for name, s in declared.items() if name not in LEFT_OUT and not s.get("profiles")]
    return up, [name for name in up if "healthcheck" in declared[name]]


def configured_roles() -> dict[str, str]:
    from semiactive import config, topology

    return {name: info.role.value for name, info in topology.resolve(config.load(CLUSTER)).nodes.items()}


def build(run: Run) -> None:
    with run.phase("wheels"):
        wheels(run, WORK / "wheels")
    with run.phase("base"):
        base_images(run)
    with run.phase("build"):
        wheelhouse = (WORK / "wheels").relative_to(ROOT)
        before = image_id(run, IMAGE)
        run.podman(
            "build", "-f", ROOT / "deploy" / "Dockerfile", "-t", IMAGE,
            "--build-arg", f"BASE={BASE_IMAGE}", "--build-arg", f"WHEELS={wheelhouse}", ROOT,
            log="build",
        )  # fmt: skip
        if before is not None and before != image_id(run, IMAGE):
            run.podman("rmi", before, check=False)  # the previous build, now untagged


def bring_up(d: Deployment) -> None:
    run = d.run
    up, checked = services()
    with run.phase("init"):
        run.compose("--profile", "setup", "run", "--rm", "init")
    with run.phase("up"):
        for service, why in LEFT_OUT.items():
            say(f"  {service} left out: {why}")
        run.compose("up", "-d", *up)
    with run.phase("healthy"):
        healthy(run, checked)
        run.passed(f"{len(checked)} containers healthy: {', '.join(checked)}")
    with run.phase("streaming"):
        wait_for("rows at the sink", lambda: sink_rows(d.run_dir) >= 1000 or None, 60)
        run.passed(f"the start service started the cluster; the sink received {sink_rows(d.run_dir):,} rows")
        roles = configured_roles()

        def as_configured() -> bool | None:
            doc = d.cluster_state()
            return True if doc and all(node_role(doc, n) == (r, "up") for n, r in roles.items()) else None

        wait_for("every node up in the role the config gives it", as_configured, 30)
        run.passed(f"all {len(roles)} nodes up in their configured roles")


def failover(d: Deployment) -> int:
    """Kill the protected primary's container; its secondary takes over and
    the coordinator re-protects the stage. The sink's rows at the kill."""
    run = d.run
    before = wait_for("the coordinator's view of the cluster", d.stage, 30)
    if (before["primary"], before["secondary"], before["protected"]) != (PRIMARY, SECONDARY, True):
        raise DeployTestError(f"{STAGE} before the kill: {before}")
    rows = sink_rows(d.run_dir)
    killed_at = time.monotonic()
    run.podman("kill", container(run, PRIMARY))

    def taken_over() -> dict[str, Any] | None:
        s = d.stage()
        return s if s and s["primary"] == SECONDARY and int(s["epoch"]) > int(before["epoch"]) else None

    after = wait_for(f"{SECONDARY} to take {STAGE} over", taken_over, 30, every=0.1)
    took = time.monotonic() - killed_at
    run.passed(f"{SECONDARY} primary of {STAGE} at epoch {after['epoch']}, {took:.1f} s after `podman kill`")

    def reprotected() -> dict[str, Any] | None:
        s = d.stage()
        return s if s and s["protected"] and s["secondary"] not in ("", PRIMARY) else None

    again = wait_for(f"{STAGE} re-protected", reprotected, 30, every=0.1)
    took = time.monotonic() - killed_at
    run.passed(f"{STAGE} re-protected by {again['secondary']}, {took:.1f} s after the kill")
    return rows


def replace(d: Deployment) -> None:
    """Start the killed container again: its node comes back as a spare."""
    d.run.podman("start", container(d.run, PRIMARY))

    def spare() -> bool | None:
        doc = d.cluster_state()
        return True if doc and node_role(doc, PRIMARY) == ("spare", "up") else None

    wait_for(f"{PRIMARY} back as a spare", spare, 60)
    healthy(d.run, [PRIMARY], 60)
    d.run.passed(f"{PRIMARY}'s container started again: its node is back, as a spare, healthy")


def drain(d: Deployment) -> None:
    """The operator's drain, from the admin tools service."""
    start = container(d.run, "start")
    if container_state(d.run, start) != ("exited", 0):
        raise DeployTestError(f"the start service: {container_state(d.run, start)}: {d.start_log()[-300:]}")
    command = ["drain", f"--config={CONFIG_IN_CONTAINER}"]
    out = d.run.compose("--profile", "tools", "run", "--rm", "admin", *command)
    lines = [line for line in out.splitlines() if line.startswith("semiactive drain: ")]
    if not lines or "drained" not in lines[-1]:
        raise DeployTestError(f"drain: {lines[-3:]}")
    d.run.passed(lines[-1].removeprefix("semiactive drain: "))


def verify(d: Deployment, rows_at_kill: int) -> None:
    rows = sink_rows(d.run_dir)
    if rows <= rows_at_kill:
        raise DeployTestError(
            f"no row reached the sink after the kill ({rows_at_kill:,} before, {rows:,} in all)"
        )
    out = d.run.sh([sys.executable, "-m", "semiactive", "verify", d.run_dir, "--config", CLUSTER], "verify")
    for line in out.strip().splitlines():
        say(f"  {line}")
    d.run.passed(
        f"the sink is exactly the reference: {rows:,} rows ({rows - rows_at_kill:,} after the kill), "
        "none lost, none twice"
    )


def scraped(d: Deployment) -> None:
    """Prometheus scraped every target, and each serves semiactive_* series."""
    import yaml

    expected = expected_targets(yaml.safe_load(CLUSTER.read_text()))

    def all_up() -> dict[str, str] | None:
        up, _ = targets_up(prometheus_get(d.prometheus_port, "/api/v1/targets"))
        return up if expected <= up.keys() else None

    try:
        up = wait_for("every Prometheus target up", all_up, 60, every=1)
    except DeployTestError:
        _, down = targets_up(prometheus_get(d.prometheus_port, "/api/v1/targets"))
        raise DeployTestError(f"Prometheus targets not up: {down}") from None
    query = 'count by (instance) ({__name__=~"semiactive_.+"})'
    series = prometheus_get(d.prometheus_port, "/api/v1/query", query=query)
    serving = {r["metric"]["instance"] for r in series["data"]["result"]}
    silent = sorted(a for a in expected if up[a] not in serving)
    if silent:
        raise DeployTestError(f"no semiactive_* series from {silent}")
    d.run.passed(f"Prometheus scraped all {len(expected)} targets, each with semiactive_* series")


def deploy_test(d: Deployment) -> None:
    build(d.run)
    bring_up(d)
    with d.run.phase("failover"):
        rows_at_kill = failover(d)
    with d.run.phase("replace"):
        replace(d)
    with d.run.phase("drain"):
        drain(d)
    with d.run.phase("verify"):
        verify(d, rows_at_kill)
    with d.run.phase("prometheus"):
        scraped(d)


def save_logs(run: Run) -> None:
    names = run.podman(
        "ps",
        "-a",
        "--format",
        "{{.Names}}",
        "--filter",
        f"label=io.podman.compose.project={PROJECT}",
        check=False,
    ).split()
    for name in names:
        (run.logs / f"container-{name}.log").write_text(
            run.podman("logs", name, log="podman-logs", check=False)
        )


def down(run: Run) -> None:
    """``compose down -v``, then whatever of this project is left."""
    run.compose("down", "-v", "-t", "5", check=False)
    label = f"label=io.podman.compose.project={PROJECT}"
    leftovers = {
        "container": run.podman("ps", "-aq", "--filter", label, check=False).split(),
        "volume": run.podman("volume", "ls", "-q", "--filter", label, check=False).split(),
        "network": [n for n in [f"{PROJECT}_default"] if podman_ok(run, "network", "exists", n)],
    }
    for kind, names in leftovers.items():
        if names:
            say(f"  removing what compose down left: {kind} {', '.join(names)}")
            run.podman(kind, "rm", "-f", *names, check=False)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--probe", action="store_true", help="only say whether podman can run here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    env = dict(os.environ, CONTAINERS_CONF=str(CONTAINERS_CONF))
    WORK.mkdir(parents=True, exist_ok=True)
    logs = WORK / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()
    if args.probe:
        why = probe(Run(logs, env))
        if why is not None:
            print(f"deploy-test cannot run here: {why}")
            return 3
        return 0
    if not PROMETHEUS_CONFIG.exists():
        say(f"{PROMETHEUS_CONFIG.relative_to(ROOT)} is missing")
        return 1
    state = WORK / "state"
    shutil.rmtree(state, ignore_errors=True)
    for sub in ("tls", "run"):
        (state / sub).mkdir(parents=True)
    coordinator_port, prometheus_port = free_port(), free_port()
    env.update(
        SEMIACTIVE_STATE=str(state),
        SEMIACTIVE_IMAGE=IMAGE,
        PROMETHEUS_IMAGE=PROMETHEUS_IMAGE,
        SEMIACTIVE_COORDINATOR_PORT=str(coordinator_port),
        PROMETHEUS_PORT=str(prometheus_port),
    )
    run = Run(logs, env)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)  # also when started with SIGINT ignored
    started = time.monotonic()
    failure: str | None = None
    try:
        with run.phase("setup"):
            setup(run)
        down(run)  # what an interrupted run may have left
        deploy_test(Deployment(run, state, coordinator_port, prometheus_port))
    except DeployTestError as exc:
        failure = str(exc)
    except KeyboardInterrupt:
        failure = "interrupted"
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the clean-up is not interrupted
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with run.phase("down"):
            save_logs(run)
            down(run)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    say("timings: " + ", ".join(f"{name} {took:.1f} s" for name, took in run.timings))
    say(f"total {time.monotonic() - started:.1f} s; logs in {logs.relative_to(ROOT)}")
    if failure is not None:
        say(f"FAILED: {failure}")
        print(f"deploy-test: {len(run.checks)} passed, 1 failed")
        return 1
    print(f"deploy-test: {len(run.checks)} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
