"""The cluster configuration: one typed, validated model loaded from YAML.

Errors name the file, the line and the field (``paper-chain.yaml:14:
stages[1].ha.batch_size: Input should be greater than or equal to 1``), so
a user can jump to the mistake. Semantic checks that need the whole file
(unique names, streams that exist, CQL that compiles) happen in
:mod:`semiactive.topology` and report the same way.
"""

from __future__ import annotations

import difflib
import itertools
import re
import types as types_module
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from semiactive.errors import UserError

NAME = r"^[A-Za-z_][A-Za-z0-9_.-]*$"
# A registry source (kind: registry) carries MQO registrations: ``semiactive
# query add/remove`` push them; an MQO stage reading the stream applies them.
REGISTRY_SCHEMA = {"action": "char(8)", "name": "char(64)", "text": "char(4000)"}
IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"
TYPE = r"^(integer|int|float|byte|char\(\s*[1-9][0-9]*\s*\))$"


class ConfigError(UserError):
    """A configuration problem, located in its file."""

    def __init__(self, message: str, file: str = "", line: int | None = None, field: str = "") -> None:
        self.message = message
        self.file = file
        self.line = line
        self.field = field
        where = file + (f":{line}" if line is not None else "")
        parts = [p for p in (where, field) if p]
        super().__init__(": ".join([*parts, message]))


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_M = TypeVar("_M", bound=BaseModel)


class RatePhase(_Model):
    """From ``at_s`` seconds on, emit ``tuples_per_s``."""

    at_s: Annotated[float, Field(ge=0)] = 0.0
    tuples_per_s: Annotated[float, Field(gt=0)]


class SpeedStep(_Model):
    """A file source's replay speed from ``from_s`` seconds of data after
    its first row on."""

    from_s: Annotated[float, Field(gt=0)]
    speed: Annotated[float, Field(gt=0)]


KAFKA_TOPIC = r"^[A-Za-z0-9._-]{1,249}$"


class KafkaSourceConfig(_Model):
    """Where a ``kind: kafka`` source reads: every partition of ``topic``
    at ``bootstrap`` (docs/connectors.md). ``group`` is the consumer group
    whose committed offsets follow what the cluster no longer needs; a first
    start reads from them, else from ``start``."""

    bootstrap: Annotated[str, Field(pattern=r"^[^\s,]+:[0-9]+(,[^\s,]+:[0-9]+)*$")]  # host:port[,...]
    topic: Annotated[str, Field(pattern=KAFKA_TOPIC)]
    group: Annotated[str, Field(min_length=1, max_length=255)]
    start: Literal["earliest", "latest"] = "earliest"
    # Rejected messages go here (the message and its reason); default <topic>.dead.
    dead_topic: Annotated[str | None, Field(pattern=KAFKA_TOPIC)] = None
    # Seconds a source waits for the broker when it starts (an unreachable
    # one is then a one-line error); once running it waits as long as it takes.
    connect_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 10.0

    @property
    def dead_letters(self) -> str:
        return self.dead_topic or f"{self.topic}.dead"


NATS_FILTER = r"^([A-Za-z0-9_-]+|\*)(\.([A-Za-z0-9_-]+|\*))*(\.>)?$|^>$"


class NatsSourceConfig(_Model):
    """Where a ``kind: nats`` source reads: the messages of ``subject``
    (wildcards allowed) in the JetStream stream ``stream`` at ``url``
    (docs/connectors.md). ``durable`` is the consumer whose acknowledgements
    follow what the cluster no longer needs; a first start reads after
    them, else from ``start``."""

    url: Annotated[str, Field(pattern=r"^(nats|tls)://[^\s]+$")]
    stream: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
    subject: Annotated[
        str, Field(pattern=r"^([A-Za-z0-9_-]+|\*)(\.([A-Za-z0-9_-]+|\*))*(\.>)?$|^>$", max_length=255)
    ]
    durable: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
    start: Literal["earliest", "latest"] = "earliest"
    # Rejected messages are published here (default <durable>.dead), into a
    # stream <stream>_DEAD created if no stream takes the subject.
    dead_subject: Annotated[str | None, Field(pattern=r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")] = None
    connect_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 10.0

    @property
    def dead_letters(self) -> str:
        return self.dead_subject or f"{self.durable}.dead"


class StandbyConfig(_Model):
    """A source's or sink's standby process: it waits, started and
    connected, and serves the moment the serving one dies
    (node/service/roles/serving_lock.py)."""

    secondary: Annotated[str, Field(pattern=NAME)]


class SourceConfig(_Model):
    """A process that produces one stream.

    ``synthetic``: seeded pseudo-random tuples on a rate schedule; ``file``:
    replay of a CSV or JSON Lines file with a ``ts`` column; ``ingest``: a
    gRPC endpoint external producers push to; ``kafka``, ``nats``: the
    messages of a Kafka topic or a NATS JetStream subject."""

    name: Annotated[str, Field(pattern=NAME)]
    stream: Annotated[str, Field(pattern=IDENT)]
    kind: Literal["synthetic", "file", "ingest", "registry", "kafka", "nats"] = "synthetic"
    kafka: KafkaSourceConfig | None = None
    nats: NatsSourceConfig | None = None
    format: Literal["json", "csv"] = "json"  # of a broker message
    # Bounded out-of-orderness of a broker source, in event-time ms: a row
    # is held until rows this much later have arrived, then emitted in ts
    # order; one later than that is rejected as late.
    max_delay_ms: Annotated[int, Field(ge=0, le=3_600_000)] = 0
    schema_: Annotated[dict[str, Annotated[str, Field(pattern=TYPE)]], Field(alias="schema")] = Field(
        default_factory=lambda: {"id": "integer", "val": "integer"}
    )
    tuple_bytes: Annotated[int, Field(ge=8)] = 44
    rate: list[RatePhase] = Field(default_factory=lambda: [RatePhase(tuples_per_s=1000)])
    seed: int = 1
    log: bool = True
    path: str | None = None
    speed: Annotated[float, Field(gt=0)] = 1.0
    speed_steps: list[SpeedStep] = Field(default_factory=list)
    ha: StandbyConfig | None = None

    @field_validator("schema_")
    @classmethod
    def _columns(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("a source needs at least one column")
        for column in value:
            if not re.match(IDENT, column) or column in ("ts", "seq", "op"):
                raise ValueError(f"bad column name {column!r} (ts, seq and op are reserved)")
        return value

    @field_validator("rate")
    @classmethod
    def _schedule(cls, value: list[RatePhase]) -> list[RatePhase]:
        if not value:
            raise ValueError("give at least one rate phase")
        starts = [p.at_s for p in value]
        if starts != sorted(starts) or starts[0] != 0:
            raise ValueError("phases must start at at_s 0 and be in increasing at_s order")
        return value

    @field_validator("speed_steps")
    @classmethod
    def _speed_steps(cls, value: list[SpeedStep]) -> list[SpeedStep]:
        starts = [step.from_s for step in value]
        if any(b <= a for a, b in itertools.pairwise(starts)):
            raise ValueError("steps must be in increasing from_s order")
        return value

    @model_validator(mode="before")
    @classmethod
    def _registry_schema(cls, data: Any) -> Any:
        """A registry source's columns are fixed (the MQO registrations)."""
        if isinstance(data, dict) and data.get("kind") == "registry":
            if "schema" in data:
                raise ValueError("a registry source has a fixed schema (action, name, text): remove schema")
            data = {**data, "schema": dict(REGISTRY_SCHEMA)}
        return data

    @model_validator(mode="after")
    def _file(self) -> SourceConfig:
        if self.kind == "file" and not self.path:
            raise ValueError("a file source needs a path")
        if self.kind == "kafka" and self.kafka is None:
            raise ValueError("a kafka source needs kafka: {bootstrap: ..., topic: ..., group: ...}")
        if self.kind != "kafka" and self.kafka is not None:
            raise ValueError(f"kafka: given for a source of kind {self.kind} (write kind: kafka)")
        if self.kind == "nats" and self.nats is None:
            raise ValueError("a nats source needs nats: {url: ..., stream: ..., subject: ..., durable: ...}")
        if self.kind != "nats" and self.nats is not None:
            raise ValueError(f"nats: given for a source of kind {self.kind} (write kind: nats)")
        if self.kind not in ("kafka", "nats"):
            for field in ("format", "max_delay_ms"):
                if field in self.model_fields_set:
                    raise ValueError(f"{field}: only a broker source (kind: kafka or nats) has it")
        if self.ha is not None and not self.restartable:
            raise ValueError(
                f"a source of kind {self.kind} cannot have a standby: "
                "its rows come from outside and die with it"
            )
        if self.ha is not None and self.ha.secondary == self.name:
            raise ValueError("ha.secondary names the source itself: name another process")
        return self

    @property
    def restartable(self) -> bool:
        """Started again after a kill, it loses and repeats nothing: it
        generates the same rows in every incarnation (an ingest or registry
        source's rows come from outside and die with it; a broker source's
        stay in the broker)."""
        return self.kind in ("synthetic", "file", "kafka", "nats")


RATE_UNITS = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(B|KB|MB|GB|KiB|MiB|GiB)/s\s*$")


def parse_bytes_per_s(value: object) -> float:
    """A bandwidth in bytes per second: a number, or text such as
    ``30KB/s`` (SI: 30,000 bytes/s, as in the SAS paper's figures) or ``1MiB/s``."""
    if isinstance(value, bool):
        raise ValueError(f"not a bandwidth: {value!r}")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str) and (match := _RATE.match(value)):
        number = float(match.group(1)) * RATE_UNITS[match.group(2)]
    else:
        units = ", ".join(f"{u}/s" for u in RATE_UNITS)
        raise ValueError(f"not a bandwidth: {value!r} (write e.g. 30KB/s; units {units})")
    if not 0 < number < float("inf"):
        raise ValueError(f"a bandwidth must be > 0, got {value!r}")
    return number


BytesPerSecond = Annotated[float, BeforeValidator(parse_bytes_per_s)]

# Fields that only mean something under mode asas.
_ASAS_ONLY = ("bw_max", "recovery_max_ms", "priority", "step", "interval_ms", "initial_batch_size", "tuner")


class HaConfig(_Model):
    """How a stage is protected (the SAS paper). ``batch_size`` applies to sas;
    ``asas`` (Adaptive SAS) tunes B at run time to keep the backup bandwidth
    under ``bw_max`` and the estimated recovery under ``recovery_max_ms``
    (docs/asas.md)."""

    mode: Literal["none", "as", "ub", "sas", "asas"] = "none"
    batch_size: Annotated[int, Field(ge=1)] = 100
    secondary: Annotated[str | None, Field(pattern=NAME)] = None
    # A partitioned stage: one secondary per partition, in partition order.
    secondaries: list[Annotated[str, Field(pattern=NAME)]] | None = None
    bw_max: BytesPerSecond | None = None
    recovery_max_ms: Annotated[float | None, Field(gt=0, allow_inf_nan=False)] = None
    priority: Literal["recovery", "bandwidth"] = "recovery"
    step: Annotated[int, Field(ge=1)] = 5
    interval_ms: Annotated[int, Field(ge=5, le=10_000)] = 10
    initial_batch_size: Annotated[int, Field(ge=1)] = 1
    max_batch_size: Annotated[int, Field(ge=1)] = 100_000
    tuner: Literal["algorithm3", "model"] = "model"
    window_ms: Annotated[int, Field(ge=10, le=60_000)] = 250

    @model_validator(mode="after")
    def _secondary(self) -> HaConfig:
        if self.secondary and self.secondaries:
            raise ValueError("give secondary (one stage) or secondaries (a partitioned stage), not both")
        if self.mode != "none" and not (self.secondary or self.secondaries):
            raise ValueError(f"ha mode {self.mode} needs a secondary node")
        if self.mode == "asas":
            if self.bw_max is None or self.recovery_max_ms is None:
                raise ValueError("ha mode asas needs bw_max (e.g. 30KB/s) and recovery_max_ms")
            if self.initial_batch_size > self.max_batch_size:
                raise ValueError("initial_batch_size must be <= max_batch_size")
        else:
            given = [f for f in _ASAS_ONLY if f in self.model_fields_set]
            if given:
                raise ValueError(f"{', '.join(given)} only apply to ha mode asas (mode is {self.mode})")
        return self


class CostPhase(_Model):
    """From event time ``at_s`` on, the stage burns ``cost_ms`` per input row."""

    at_s: Annotated[float, Field(ge=0)]
    cost_ms: Annotated[float, Field(ge=0, le=1000)]


class MqoConfig(_Model):
    """Seed 003: many MASTER / WINDOW SIZE queries run with shared window
    joins, re-clustered as arrival patterns change (docs/mqo.md). Give the
    queries inline or in a file (relative to this file)."""

    queries: str | None = None
    queries_file: str | None = None
    method: Literal["dynamic", "static", "single", "none"] = "dynamic"
    theta: Annotated[float, Field(gt=0, le=1)] = 0.5
    log_period_ms: Annotated[int, Field(ge=1)] = 10_000
    recluster_every_ms: Annotated[int | None, Field(ge=1)] = None
    patience: Annotated[int, Field(ge=1)] = 1
    clocks: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*=\d+(\+\d+)?$")]] = Field(
        default_factory=list
    )
    # A stream of a registry source: queries added and removed while running.
    registry: Annotated[str | None, Field(pattern=IDENT)] = None

    @model_validator(mode="after")
    def _one_source(self) -> MqoConfig:
        if (self.queries is None) == (self.queries_file is None):
            raise ValueError("give exactly one of queries and queries_file")
        return self


PartitionKeys = list[Annotated[str, Field(pattern=IDENT)]]


class StageConfig(_Model):
    """One operator partition: a CQL program run by a primary process (and,
    when protected, a secondary). The stage's output stream is its output
    query (default: the last registered one).

    With ``partitions: N`` the program runs as N operator partitions on
    ``nodes`` (one each, protected each by its own of ``ha.secondaries``).
    ``partition_by`` says how producers split the inputs: a list of columns
    for every input, or per input stream (an input not named goes whole to
    every partition); without it, rows are dealt round-robin. A partitioning
    that could change the result is refused (docs/partitioning.md).
    ``partition_routing: modulo`` sends a row to partition ``key mod N`` (one
    integer column per input) instead of by its key's hash: a few dense
    keys (expressways 0..N-1) then land one per partition, where a hash puts
    some together and leaves others idle."""

    name: Annotated[str, Field(pattern=NAME)]
    node: Annotated[str | None, Field(pattern=NAME)] = None
    partitions: Annotated[int, Field(ge=1, le=64)] = 1
    nodes: list[Annotated[str, Field(pattern=NAME)]] | None = None
    partition_by: PartitionKeys | dict[Annotated[str, Field(pattern=IDENT)], PartitionKeys] | None = None
    partition_routing: Literal["hash", "modulo"] = "hash"
    query: str | None = None
    query_file: str | None = None
    mqo: MqoConfig | None = None
    output: Annotated[str | None, Field(pattern=IDENT)] = None
    cost_ms: Annotated[float, Field(ge=0, le=1000)] = 0.0
    cost_schedule: list[CostPhase] = Field(default_factory=list)
    ha: HaConfig = Field(default_factory=HaConfig)

    @model_validator(mode="after")
    def _one_query(self) -> StageConfig:
        if sum(x is not None for x in (self.query, self.query_file, self.mqo)) != 1:
            raise ValueError("give exactly one of query, query_file and mqo")
        self._check_partitions()
        if self.mqo is not None and self.output is None:
            raise ValueError("an mqo stage needs output: the name of the stream of its queries' results")
        starts = [p.at_s for p in self.cost_schedule]
        if starts != sorted(starts):
            raise ValueError("cost_schedule phases must be in increasing at_s order")
        return self

    def _check_partitions(self) -> None:
        n = self.partitions
        if n == 1:
            extra = [f for f in ("nodes", "partition_by") if getattr(self, f) is not None]
            if self.partition_routing != "hash":
                extra.append("partition_routing")
            if self.ha.secondaries is not None:
                extra.append("ha.secondaries")
            if extra:
                raise ValueError(
                    f"{', '.join(extra)} only apply to a partitioned stage (partitions: 2 or more)"
                )
            if self.node is None:
                raise ValueError("a stage needs a node")
            return
        if self.node is not None:
            raise ValueError(f"a stage of {n} partitions runs on nodes (a list of {n}), not node")
        if self.nodes is None or len(self.nodes) != n:
            raise ValueError(f"partitions: {n} needs nodes: a list of {n} node names")
        if self.mqo is not None:
            raise ValueError("an mqo stage cannot be partitioned")
        if self.ha.mode != "none":
            if self.ha.secondary is not None or self.ha.secondaries is None or len(self.ha.secondaries) != n:
                raise ValueError(
                    f"a protected stage of {n} partitions needs ha.secondaries: a list of {n} nodes"
                )
        elif self.ha.secondaries is not None:
            raise ValueError("ha.secondaries without an ha mode")
        if isinstance(self.partition_by, list) and not self.partition_by:
            raise ValueError("partition_by: give at least one column (or leave it out for round-robin)")
        if self.partition_routing == "modulo":
            given = self.partition_by
            columns = [given] if isinstance(given, list) else list((given or {}).values())
            if not columns or any(len(c) != 1 for c in columns):
                raise ValueError("partition_routing: modulo needs partition_by: one integer column per input")

    @property
    def partition_nodes(self) -> list[str]:
        """The primary node of each partition (one for an unpartitioned stage)."""
        if self.nodes is not None:
            return list(self.nodes)
        assert self.node is not None
        return [self.node]


class PostgresSinkConfig(_Model):
    """Where a ``kind: postgres`` sink writes: a table of ``dsn``'s
    database, created if absent (docs/connectors.md)."""

    dsn: Annotated[str, Field(min_length=1)]  # postgresql://user@host:port/database
    table: Annotated[str, Field(pattern=IDENT, max_length=63)]
    # Seconds a sink waits for the database when it starts (an unreachable
    # one is then a one-line error); once running it waits as long as it takes.
    connect_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 10.0


class NatsSinkConfig(_Model):
    """Where a ``kind: nats`` sink publishes: ``subject`` of the JetStream
    stream ``stream`` at ``url``, created (file storage) if absent
    (docs/connectors.md)."""

    url: Annotated[str, Field(pattern=r"^(nats|tls)://[^\s]+$")]  # nats://host:port
    stream: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
    subject: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$", max_length=255)]
    connect_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 10.0


class KafkaSinkConfig(_Model):
    """Where a ``kind: kafka`` sink writes: partition 0 of ``topic`` at
    ``bootstrap``, created (one partition) if absent (docs/connectors.md)."""

    bootstrap: Annotated[str, Field(pattern=r"^[^\s,]+:[0-9]+(,[^\s,]+:[0-9]+)*$")]
    topic: Annotated[str, Field(pattern=KAFKA_TOPIC)]
    connect_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 10.0


class SinkConfig(_Model):
    """A process that receives one stream and writes it: as JSON Lines into
    the run directory (``kind: file``), into a PostgreSQL table
    (``kind: postgres``) or a NATS JetStream subject (``kind: nats``), the
    last two exactly once across kills of the sink."""

    name: Annotated[str, Field(pattern=NAME)]
    input: Annotated[str, Field(pattern=IDENT)]
    kind: Literal["file", "postgres", "nats", "kafka"] = "file"
    postgres: PostgresSinkConfig | None = None
    nats: NatsSinkConfig | None = None
    kafka: KafkaSinkConfig | None = None
    # Also write one file per value of this text column (an MQO stage's
    # ``query``): sink/<name>/<value>.jsonl.
    split_by: Annotated[str | None, Field(pattern=IDENT)] = None
    ha: StandbyConfig | None = None

    @model_validator(mode="after")
    def _target(self) -> SinkConfig:
        if self.kind == "postgres" and self.postgres is None:
            raise ValueError("a postgres sink needs postgres: {dsn: ..., table: ...}")
        if self.kind != "postgres" and self.postgres is not None:
            raise ValueError(f"postgres: given for a sink of kind {self.kind} (write kind: postgres)")
        if self.kind == "nats" and self.nats is None:
            raise ValueError("a nats sink needs nats: {url: ..., stream: ..., subject: ...}")
        if self.kind != "nats" and self.nats is not None:
            raise ValueError(f"nats: given for a sink of kind {self.kind} (write kind: nats)")
        if self.kind == "kafka" and self.kafka is None:
            raise ValueError("a kafka sink needs kafka: {bootstrap: ..., topic: ...}")
        if self.kind != "kafka" and self.kafka is not None:
            raise ValueError(f"kafka: given for a sink of kind {self.kind} (write kind: kafka)")
        if self.kind != "file" and self.split_by is not None:
            raise ValueError("split_by writes files: only a file sink has it")
        if self.ha is not None and not self.durable:
            raise ValueError(
                "a file sink cannot have a standby: what it wrote dies with its process "
                "(kind postgres, nats or kafka can)"
            )
        if self.ha is not None and self.ha.secondary == self.name:
            raise ValueError("ha.secondary names the sink itself: name another process")
        return self

    @property
    def durable(self) -> bool:
        """Whether what it wrote survives its process: a restarted sink then
        goes on from there, losing and repeating nothing."""
        return self.kind in ("postgres", "nats", "kafka")


def _node_reference(value: object) -> object:
    """A topology node by name or id: an id written as a YAML number (``0``)
    is the id ``"0"``."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


# A node of a topology: its name or its id (semiactive/placement/network.py).
TopologyNode = Annotated[str, BeforeValidator(_node_reference)]


class NetworkConfig(_Model):
    """Seed 004: the wide-area network the nodes stand on. Every node is
    at a site of ``topology``; frames between two nodes are delayed by the
    latency of the shortest path between their sites (``delay``); the
    coordinator measures each edge's rate, computes the network usage and,
    every ``replace_every_s``, moves a stage to a spare at a better site
    when that lowers the usage by at least ``min_gain`` (a fraction)."""

    topology: Annotated[str, Field(min_length=1)]  # topohub:KEY or a node-link JSON file
    sites: dict[str, TopologyNode]  # node -> topology node (name or id)
    delay: bool = True
    replace_every_s: Annotated[float, Field(ge=0)] = 0.0  # 0: no re-placement
    min_gain: Annotated[float, Field(ge=0, lt=1)] = 0.1
    rate_window_s: Annotated[float, Field(gt=0, le=60)] = 2.0


class Endpoint(_Model):
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65535)]
    metrics_port: Annotated[int | None, Field(ge=1, le=65535)] = None


class ClusterConfig(_Model):
    name: Annotated[str, Field(pattern=NAME)] = "cluster"
    # Debugging only: no TLS, no authentication (semiactive/runtime/tls.py).
    insecure: bool = False
    heartbeat_ms: Annotated[int, Field(ge=10)] = 250
    failure_timeout_ms: Annotated[int | None, Field(ge=10)] = None
    ack_interval_ms: Annotated[int, Field(ge=5)] = 250
    batch_rows: Annotated[int, Field(ge=1, le=65536)] = 8192
    # A frame costs hundreds of microseconds of gRPC at each end: 2 ms lets
    # rows that come that soon after a frame share the next one (a lone row
    # still goes at once). bench/cluster_throughput.py: 1,000 tuples/s p50
    # 116-261 ms at 0, 9-11 ms at 2.
    linger_ms: Annotated[float, Field(ge=0)] = 2.0
    # The same while a sender is busy (its last frame held 256 rows or more,
    # BUSY_FRAME_ROWS): fewer, larger frames where rows are plenty, with no
    # wait added where they are few. The paper chain sustains 300,000
    # tuples/s with 10, 200,000 with 2 ms frames throughout
    # (docs/configuration.md).
    busy_linger_ms: Annotated[float, Field(ge=0)] = 10.0
    # A row waits at most this long for its backup batch (B rows) to fill;
    # 0: until it fills, as the paper's Algorithm 1. On a sparse edge of a
    # multi-input stage the secondary otherwise waits for B of its rows.
    backup_max_delay_ms: Annotated[float, Field(ge=0)] = 0.0
    # A stage of selections and projections over one stream runs on record
    # blocks (numpy), with no Python tuple per row (docs/columnar.md); false
    # keeps every stage on rows, for comparison.
    columnar_stages: bool = True
    # [Range T] in every stage's CQL: CQL's closed [ts, ts+T] or STREAM's half-open [ts, ts+T).
    window_bounds: Literal["closed", "half-open"] = "closed"
    connect_timeout_ms: Annotated[int, Field(ge=100)] = 10_000
    queue_rows: Annotated[int, Field(ge=64)] = 50_000
    # When the rows a stage's Level-1 cut keeps reach this many, the stage
    # snapshots its operator state so that the cut can move past them (a
    # program that keeps some row for the whole run). 0: never.
    snapshot_rows: Annotated[int, Field(ge=0)] = 0
    # 0: no periodic samples (events are always written).
    telemetry_interval_ms: Annotated[int, Field(ge=0, le=60_000)] = 250
    sources: list[SourceConfig] = Field(default_factory=list)
    stages: list[StageConfig] = Field(default_factory=list)
    sinks: list[SinkConfig] = Field(default_factory=list)
    spares: list[Annotated[str, Field(pattern=NAME)]] = Field(default_factory=list)
    endpoints: dict[str, Endpoint] = Field(default_factory=dict)
    network: NetworkConfig | None = None

    @model_validator(mode="after")
    def _snapshot_before_full(self) -> ClusterConfig:
        if self.snapshot_rows >= self.queue_rows:
            raise ValueError(
                f"snapshot_rows ({self.snapshot_rows}) must be below queue_rows ({self.queue_rows}): "
                "a full output log stalls before any snapshot is taken"
            )
        return self

    @property
    def timeout_ms(self) -> int:
        """Missed-heartbeat deadline: two heartbeat intervals unless set."""
        return self.failure_timeout_ms or 2 * self.heartbeat_ms


class LoadedConfig:
    """A validated config with where it came from, for located errors."""

    def __init__(
        self, model: ClusterConfig, path: Path, lines: dict[tuple[Any, ...], tuple[int, int]]
    ) -> None:
        self.model = model
        self.path = path
        self._lines = lines

    def locate(self, *field: Any) -> tuple[int | None, int]:
        """1-based line and 0-based column of a field (or its closest parent)."""
        key = tuple(field)
        while key:
            if key in self._lines:
                line, col = self._lines[key]
                return line + 1, col
            key = key[:-1]
        return None, 0

    def text_start(self, *field: Any) -> int | None:
        """1-based line where a block-scalar field's text starts (``|``), or
        None when the field is not written as a block."""
        pos = self._lines.get((*field, "#text"))
        return pos[0] + 1 if pos else None

    def error(self, message: str, *field: Any) -> ConfigError:
        line, _ = self.locate(*field)
        return ConfigError(message, str(self.path), line, _dotted(field))

    def read_relative(self, name: str) -> str:
        return (self.path.parent / name).read_text()


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _positions(node: yaml.Node, prefix: tuple[Any, ...], out: dict[tuple[Any, ...], tuple[int, int]]) -> None:
    out[prefix] = (node.start_mark.line, node.start_mark.column)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            out[(*prefix, key.value)] = (value.start_mark.line, value.start_mark.column)
            _positions(value, (*prefix, key.value), out)
            out[(*prefix, key.value)] = (key.start_mark.line, key.start_mark.column)
            if isinstance(value, yaml.ScalarNode) and value.style in ("|", ">"):
                # Block scalars (queries): remember where the text starts.
                out[(*prefix, key.value, "#text")] = (value.start_mark.line + 1, value.start_mark.column)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _positions(item, (*prefix, i), out)


def read_yaml(
    path: str | Path, what: str = "config"
) -> tuple[dict[str, Any], dict[tuple[Any, ...], tuple[int, int]]]:
    """A YAML mapping and where each field of it is (for located errors)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the {what}: {exc.strerror or exc}", str(path)) from exc
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(f"malformed YAML: {exc.problem or exc}", str(path), line) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"malformed YAML: {exc}", str(path)) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"the {what} must be a mapping at the top level", str(path), 1)
    lines: dict[tuple[Any, ...], tuple[int, int]] = {}
    if node is not None:
        _positions(node, (), lines)
    return data, lines


def locate_field(lines: dict[tuple[Any, ...], tuple[int, int]], *field: Any) -> int | None:
    """1-based line of a field (or its closest parent) in ``lines``."""
    key = tuple(field)
    while key:
        if key in lines:
            return lines[key][0] + 1
        key = key[:-1]
    return None


def validate_model(
    cls: type[_M], data: dict[str, Any], path: str | Path, lines: dict[tuple[Any, ...], tuple[int, int]]
) -> _M:
    """``cls`` from ``data``; the first error located by file, line and field."""
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # An unknown field first: a misspelt one (streem) also makes the
        # field meant (stream) missing, and that is not the mistake to show.
        first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        loc = tuple("schema" if p == "schema_" else p for p in first["loc"])
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            message = f"unknown field {loc[-1]!r}"
            close = difflib.get_close_matches(str(loc[-1]), _field_names(cls, first["loc"][:-1]), n=1)
            if close:
                message += f" (did you mean {close[0]!r}?)"
        raise ConfigError(message, str(path), locate_field(lines, *loc), _dotted(loc)) from exc


def _field_names(cls: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The field names (as written in YAML) of the model at ``loc`` inside
    ``cls``; empty when ``loc`` leads to no model."""
    types: list[Any] = [cls]
    for part in loc:
        following: list[Any] = []
        for tp in _alternatives(types):
            if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
                for name, info in tp.model_fields.items():
                    if part in (name, info.alias):
                        following.append(info.annotation)
            elif typing.get_origin(tp) is list and isinstance(part, int):
                following += typing.get_args(tp)[:1]
            elif typing.get_origin(tp) is dict and isinstance(part, str):
                following += typing.get_args(tp)[1:2]
        types = following
    return [
        info.alias or name
        for tp in _alternatives(types)
        if isinstance(tp, type) and issubclass(tp, BaseModel)
        for name, info in tp.model_fields.items()
    ]


def _alternatives(types: list[Any]) -> list[Any]:
    """``types`` with Annotated unwrapped and unions (optional fields) spread."""
    out: list[Any] = []
    pending = list(types)
    while pending:
        tp = pending.pop(0)
        origin = typing.get_origin(tp)
        if origin is Annotated:
            pending.insert(0, typing.get_args(tp)[0])
        elif origin in (typing.Union, types_module.UnionType):
            pending[:0] = typing.get_args(tp)
        else:
            out.append(tp)
    return out


def load(path: str | Path) -> LoadedConfig:
    data, lines = read_yaml(path)
    return LoadedConfig(validate_model(ClusterConfig, data, path, lines), Path(path), lines)
