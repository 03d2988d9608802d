"""From a configuration to a deployment: stages, streams, edges, processes.

Every source, stage and sink is a *stage* (a source has no input edge, a sink
no output edge). A stage consumes the streams its CQL reads and produces one
stream, its output query; an *edge* joins the producer of a stream to each
consumer. Stages are compiled in dependency order, so a stage's input schemas
are its producers' output schemas. Everything a user can get wrong is
reported as a :class:`~semiactive.config.ConfigError` naming file, line and
field (and, for CQL, the line and column inside the query).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semiactive.config import ClusterConfig, ConfigError, LoadedConfig, SinkConfig, SourceConfig, StageConfig
from semiactive.ha.stage import HaMode
from semiactive.mqo.clocks import ClockError, daily_clock, parse_clock
from semiactive.mqo.executor import Method, MqoError, SharedExecutor
from semiactive.mqo.query import QueryFile, parse_query_file
from semiactive.mqo.stage import MAX_QUERY_NAME, MqoStageSpec, output_columns
from semiactive.node.cql import CqlError, compile_program, parse, plan
from semiactive.node.cql import ast as cql_ast
from semiactive.node.cql.partitioning import PartitioningError, check_partitioning
from semiactive.node.cql.retention import lasting_state
from semiactive.node.engine.elements import VALUES, Element
from semiactive.node.sections.codec import wire_size
from semiactive.node.sections.partitions import InputRouting, PartitionSpec, key_positions
from semiactive.placement.network import Network, NetworkError, load_network

_TYPES = {"integer": plan.INTEGER, "int": plan.INTEGER, "float": plan.FLOAT, "byte": plan.BYTE}


def column_type(text: str) -> plan.SqlType:
    text = text.strip().lower()
    if text in _TYPES:
        return _TYPES[text]
    match = re.fullmatch(r"char\(\s*(\d+)\s*\)", text)
    if not match:
        raise ValueError(f"unknown type {text!r}")
    return plan.char(int(match.group(1)))


@dataclass(frozen=True)
class Edge:
    """``producer -> consumer`` carrying ``stream``. ``index`` orders a
    consumer's inputs (the merge order of ha-protocol.md)."""

    producer: str
    consumer: str
    stream: str
    schema: plan.Schema
    kind: plan.Kind
    index: int
    # The consumer is a partition of a partitioned stage: the producer
    # routes this edge's rows (node/sections/partitions.py).
    partition: PartitionSpec | None = field(default=None, compare=False)

    @property
    def id(self) -> str:
        return f"{self.producer}->{self.consumer}"

    @property
    def routing(self) -> InputRouting | None:
        """How rows are split on this edge; None: every row goes whole."""
        if self.partition is None:
            return None
        routing = self.partition.routing_of(self.stream)
        return None if routing.broadcast else routing

    def owned(self, rows: Sequence[Element], first_seq: int | None = None) -> list[bool] | None:
        """Per row, whether the consumer's partition owns it (None: all);
        ``first_seq``: the rows' seqs, when their element says lineage."""
        routing = self.routing
        if routing is None:
            return None
        assert self.partition is not None
        return routing.owned(rows, self.partition.index, self.partition.count, first_seq)


@dataclass
class Stage:
    name: str
    role: str  # source, stage, sink
    primary: str  # node (process) name
    secondary: str | None = None
    output: str | None = None  # stream name
    schema: plan.Schema | None = None
    kind: plan.Kind = plan.Kind.STREAM
    program: plan.Program | None = None
    mqo: MqoStageSpec | None = None  # instead of a program: the MQO paper's shared execution
    query_text: str = ""
    query_file: str = ""
    inputs: list[Edge] = field(default_factory=list)
    outputs: list[Edge] = field(default_factory=list)
    source: SourceConfig | None = None
    sink: SinkConfig | None = None
    config: StageConfig | None = None
    # One partition of a partitioned stage (its configured name: config.name).
    partition: PartitionSpec | None = None

    @property
    def replicas(self) -> list[str]:
        return [self.primary] + ([self.secondary] if self.secondary else [])

    # What ha/ reads (semiactive.ha.stage.StageSpec).

    @property
    def ha_mode(self) -> HaMode:
        return HaMode(self.config.ha.mode) if self.config is not None else HaMode.NONE

    @property
    def ha_batch_size(self) -> int:
        if self.config is None:
            return 1
        ha = self.config.ha
        return ha.initial_batch_size if ha.mode == "asas" else ha.batch_size

    @property
    def cost_ms(self) -> float:
        return self.config.cost_ms if self.config is not None else 0.0

    @property
    def cost_schedule(self) -> list[tuple[float, float]]:
        if self.config is None:
            return []
        return [(p.at_s, p.cost_ms) for p in self.config.cost_schedule]


class NodeRole(enum.StrEnum):
    """What a node process is. A replica's role changes at run time (a
    secondary takes over, a fenced primary becomes a spare, a spare is
    assigned); this is what it starts as."""

    SOURCE = "source"
    PRIMARY = "primary"
    SECONDARY = "secondary"
    SINK = "sink"
    SPARE = "spare"


@dataclass(frozen=True)
class SiteMap:
    """The network and each node's site on it."""

    network: Network
    sites: dict[str, str]

    def latency_s(self, a: str, b: str) -> float:
        net = self.network
        return float(net.latency_ms[net.index[self.sites[a]], net.index[self.sites[b]]]) / 1000


@dataclass(frozen=True)
class NodeInfo:
    name: str
    role: NodeRole
    stage: str | None


@dataclass
class Topology:
    config: ClusterConfig
    path: str
    stages: dict[str, Stage]
    nodes: dict[str, NodeInfo]
    streams: dict[str, str]  # stream -> producing stage
    edges: list[Edge]
    network: SiteMap | None = None  # the placement paper: where the nodes stand

    def latency_s(self, a: str, b: str) -> float:
        """One-way latency between two nodes' sites (0 without a network)."""
        return self.network.latency_s(a, b) if self.network is not None else 0.0

    def stage_of(self, node: str) -> Stage | None:
        info = self.nodes[node]
        return self.stages[info.stage] if info.stage else None


def source_schema(src: SourceConfig) -> plan.Schema:
    """The configured columns; a synthetic source whose ``tuple_bytes``
    exceeds them gets a filler column ``pad char(n)`` making up the rest."""
    cols = [plan.Column(name, column_type(t), src.stream) for name, t in src.schema_.items()]
    schema = plan.Schema(tuple(cols))
    missing = src.tuple_bytes - wire_size(schema)
    if src.kind == "synthetic" and "pad" not in src.schema_ and missing > 0:
        schema = plan.Schema((*cols, plan.Column("pad", plan.char(missing), src.stream)))
    return schema


def _external_names(program: cql_ast.Program) -> list[str]:
    """Names the program reads in FROM but does not register as a query, in
    order of first use: its inputs from sources and other stages (a program
    may also declare them, as it would to run embedded)."""
    own = {s.name for s in program.statements if isinstance(s, cql_ast.RegisterQuery)}
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, cql_ast.FromName) and node.name not in own and node.name not in found:
            found.append(node.name)
        if dataclasses.is_dataclass(node):
            for f in dataclasses.fields(node):
                walk(getattr(node, f.name))
        elif isinstance(node, tuple | list):
            for item in node:
                walk(item)

    walk(program)
    return found


class _Resolver:
    def __init__(self, loaded: LoadedConfig) -> None:
        self.loaded = loaded
        self.cfg = loaded.model
        self.stages: dict[str, Stage] = {}
        self.nodes: dict[str, NodeInfo] = {}
        self.streams: dict[str, str] = {}
        self.producers: dict[str, list[str]] = {}  # stream -> stages (partitions) producing it
        self.schemas: dict[str, tuple[plan.Schema, plan.Kind]] = {}

    def error(self, message: str, *where: Any) -> ConfigError:
        return self.loaded.error(message, *where)

    def add_node(self, name: str, role: NodeRole, stage: str | None, *where: Any) -> None:
        if name in self.nodes:
            raise self.error(f"node name {name!r} is used twice", *where)
        self.nodes[name] = NodeInfo(name, role, stage)

    def add_stage(self, stage: Stage, *where: Any) -> None:
        if stage.name in self.stages:
            raise self.error(f"stage name {stage.name!r} is used twice", *where)
        self.stages[stage.name] = stage

    def add_stream(self, name: str, producer: str, schema: plan.Schema, kind: plan.Kind, *where: Any) -> None:
        if name in self.streams:
            raise self.error(
                f"stream {name!r} is produced by both {self.streams[name]} and {producer}", *where
            )
        self.streams[name] = producer
        self.producers[name] = [producer]
        self.schemas[name] = (schema, kind)

    def run(self) -> Topology:
        cfg = self.cfg
        for i, src in enumerate(cfg.sources):
            try:
                schema = source_schema(src)
            except ValueError as exc:
                raise self.error(str(exc), "sources", i, "schema") from None
            if src.kind == "synthetic" and src.tuple_bytes < wire_size(schema):
                raise self.error(
                    f"tuple_bytes {src.tuple_bytes} is smaller than the schema's {wire_size(schema)} bytes",
                    "sources",
                    i,
                    "tuple_bytes",
                )
            if src.kind == "file" and src.path and not Path(src.path).is_absolute():
                # Like query_file: relative to the configuration file.
                src = src.model_copy(update={"path": str(self.loaded.path.parent / src.path)})
            standby = src.ha.secondary if src.ha is not None else None
            stage = Stage(src.name, "source", src.name, standby, output=src.stream, schema=schema, source=src)
            self.add_stage(stage, "sources", i, "name")
            self.add_node(src.name, NodeRole.SOURCE, src.name, "sources", i, "name")
            if standby is not None:
                self.add_node(standby, NodeRole.SOURCE, src.name, "sources", i, "ha", "secondary")
            self.add_stream(src.stream, src.name, schema, plan.Kind.STREAM, "sources", i, "stream")
        parsed = self._parse_stages()
        self._compile_stages(parsed)
        for i, st in enumerate(cfg.stages):
            if st.mqo is not None:
                self._compile_mqo(i, st)
        for i, sink in enumerate(cfg.sinks):
            if sink.input not in self.streams:
                raise self.error(
                    f"unknown stream {sink.input!r}; known: {', '.join(sorted(self.streams))}",
                    "sinks",
                    i,
                    "input",
                )
            if sink.split_by is not None:
                schema = self.schemas[sink.input][0]
                column = next((c for c in schema.columns if c.name == sink.split_by), None)
                if column is None or not column.type.is_text:
                    raise self.error(
                        f"stream {sink.input} has no text column {sink.split_by!r} to split by",
                        "sinks",
                        i,
                        "split_by",
                    )
            standby = sink.ha.secondary if sink.ha is not None else None
            self.add_stage(Stage(sink.name, "sink", sink.name, standby, sink=sink), "sinks", i, "name")
            self.add_node(sink.name, NodeRole.SINK, sink.name, "sinks", i, "name")
            if standby is not None:
                self.add_node(standby, NodeRole.SINK, sink.name, "sinks", i, "ha", "secondary")
        for i, spare in enumerate(cfg.spares):
            self.add_node(spare, NodeRole.SPARE, None, "spares", i)
        edges = self._edges()
        for i, sink in enumerate(cfg.sinks):
            if sink.durable and len(self.stages[sink.name].inputs) > 1:
                # Its progress is one seq: that of a single input edge.
                raise self.error(
                    f"a {sink.kind} sink reads a stream of one producer; {sink.input} comes from a "
                    "partitioned stage (add an unpartitioned stage in between)",
                    "sinks",
                    i,
                    "input",
                )
        for name in cfg.endpoints:
            if name not in self.nodes:
                raise self.error(f"endpoint for unknown node {name!r}", "endpoints", name)
        network = self._network() if cfg.network is not None else None
        return Topology(cfg, str(self.loaded.path), self.stages, self.nodes, self.streams, edges, network)

    def _network(self) -> SiteMap:
        net_cfg = self.cfg.network
        assert net_cfg is not None
        for i, st in enumerate(self.cfg.stages):
            if st.partitions > 1:
                # Placement and migration move whole stages (the placement paper).
                raise self.error(
                    "a partitioned stage cannot be placed on a network yet", "stages", i, "partitions"
                )
        spec = net_cfg.topology
        if not spec.startswith("topohub:") and not Path(spec).is_absolute():
            spec = str(self.loaded.path.parent / spec)
        try:
            network = load_network(spec)
        except NetworkError as exc:
            raise self.error(str(exc), "network", "topology") from None
        sites: dict[str, str] = {}
        for node, site in net_cfg.sites.items():
            if node not in self.nodes:
                raise self.error(f"no node {node!r} in this cluster", "network", "sites", node)
            found = network.find(site)  # by name or by id; known by its name from here on
            if found is None:
                raise self.error(network.not_found(site), "network", "sites", node)
            sites[node] = network.nodes[found]
        missing = [n for n in self.nodes if n not in net_cfg.sites]
        if missing:
            raise self.error(f"no site for {', '.join(sorted(missing))}", "network", "sites")
        return SiteMap(network, sites)

    def _parse_stages(self) -> list[tuple[int, StageConfig, cql_ast.Program, str, str]]:
        out = []
        for i, st in enumerate(self.cfg.stages):
            if st.mqo is not None:
                continue
            if st.query_file is not None:
                try:
                    text = self.loaded.read_relative(st.query_file)
                except OSError as exc:
                    raise self.error(
                        f"cannot read {st.query_file}: {exc.strerror}", "stages", i, "query_file"
                    ) from None
                file = str(self.loaded.path.parent / st.query_file)
            else:
                text = st.query or ""
                file = str(self.loaded.path)
            try:
                tree = parse(text, file)
            except CqlError as exc:
                raise self._cql_error(exc, i, st) from None
            out.append((i, st, tree, text, file))
        return out

    def _compile_mqo(self, i: int, st: StageConfig) -> None:
        """An MQO stage (the MQO paper): its queries, input streams, clocks and
        output schema (``query``, then the columns every query selects)."""
        cfg = st.mqo
        assert cfg is not None and st.output is not None
        where: tuple[Any, ...] = (
            "stages",
            i,
            "mqo",
            "queries" if cfg.queries is not None else "queries_file",
        )
        if cfg.queries_file is not None:
            try:
                text = self.loaded.read_relative(cfg.queries_file)
            except (OSError, UnicodeDecodeError) as exc:
                raise self.error(f"cannot read {cfg.queries_file}: {exc}", *where) from None
            file = str(self.loaded.path.parent / cfg.queries_file)
        else:
            text, file = cfg.queries or "", str(self.loaded.path)
        try:
            query_file = parse_query_file(text, file)
            self._check_mqo_declarations(query_file)
        except CqlError as exc:
            if cfg.queries_file is not None:
                raise ConfigError(str(exc), "", None, "") from None
            start = self.loaded.text_start(*where)
            if start is not None:  # a block scalar: the error's own line in the YAML file
                message = f"{exc.message} (column {exc.column})"
                line = start + exc.line - 1
                raise ConfigError(message, str(self.loaded.path), line, f"stages[{i}].mqo.queries") from None
            raise self.error(
                f"{exc.message} (queries line {exc.line}, column {exc.column})", *where
            ) from None
        queries = list(query_file.queries)
        if not queries:
            raise self.error("no CREATE statement", *where)
        try:
            clocks = dict(query_file.clocks)
            for clock in map(parse_clock, cfg.clocks):
                if clocks.get(clock.name, clock) != clock:
                    raise ClockError(
                        f"clock {clock.name} is declared in the queries (REGISTER CLOCK) "
                        "with another period or phase"
                    )
                clocks[clock.name] = clock
        except ClockError as exc:
            raise self.error(str(exc), "stages", i, "mqo", "clocks") from None
        schemas: dict[str, tuple[str, ...]] = {}
        types: dict[tuple[str, str], plan.SqlType] = {}
        for q in queries:
            for name in (*q.sources, *q.masters):
                if name in clocks or name in schemas:
                    continue
                if name not in self.schemas:
                    daily = daily_clock(name) if name in q.masters else None
                    if daily is None:
                        known = ", ".join(sorted(self.schemas))
                        raise self.error(f"query {q.name}: no stream {name!r} (known: {known})", *where)
                    clocks[name] = daily
                    continue
                schema, kind = self.schemas[name]
                if kind is not plan.Kind.STREAM:
                    raise self.error(f"query {q.name}: {name!r} is a relation; MQO reads streams", *where)
                schemas[name] = schema.names
                types[(name, "ts")] = plan.INTEGER
                types.update({(name, c.name): c.type for c in schema.columns})
        if cfg.registry is not None:
            producer = self.stages.get(self.streams.get(cfg.registry, ""))
            if producer is None or producer.source is None or producer.source.kind != "registry":
                raise self.error(
                    f"{cfg.registry!r} is no stream of a registry source (kind: registry)",
                    "stages",
                    i,
                    "mqo",
                    "registry",
                )
            if cfg.registry in schemas:
                raise self.error(f"queries read the registry stream {cfg.registry!r}", *where)
        spec = MqoStageSpec(
            tuple(queries),
            schemas,
            (),
            clocks,
            Method(cfg.method),
            cfg.theta,
            cfg.log_period_ms,
            cfg.recluster_every_ms,
            cfg.patience,
            cfg.registry,
        )
        try:
            columns = output_columns(queries, schemas)
            SharedExecutor(queries, schemas, clocks)  # unknown columns and masters, named
        except MqoError as exc:
            raise self.error(str(exc), *where) from None
        spec = dataclasses.replace(spec, columns=columns)
        schema = plan.Schema(
            (
                plan.Column("query", plan.char(MAX_QUERY_NAME)),
                *(plan.Column(str(c), types[(c.source, c.name)]) for c in columns),
            )
        )
        assert st.output is not None
        self._add_query_stage(i, st, st.output, schema, plan.Kind.STREAM, "output", text, file, mqo=spec)

    def _check_mqo_declarations(self, query_file: QueryFile) -> None:
        """A stream the queries declare (REGISTER STREAM) is a stream of the
        cluster, and each declared column is one of its columns, of that type
        (it may have others: a synthetic source's pad)."""
        for name, declared in query_file.streams.items():
            problem = ""
            if name not in self.schemas:
                problem = f"{name}: no such stream in this cluster (known: {', '.join(sorted(self.schemas))})"
            elif self.schemas[name][1] is not plan.Kind.STREAM:
                problem = f"{name} is a relation; MQO reads streams"
            else:
                types = {c.name: c.type for c in self.schemas[name][0].columns}
                for column in declared.columns:
                    if column.name not in types:
                        problem = f"{name}.{column.name}: the stream {name} has no column {column.name!r}"
                    elif types[column.name] != column.type:
                        actual = types[column.name]
                        problem = f"{name}.{column.name} is declared {column.type}; the stream's is {actual}"
                    if problem:
                        break
            if problem:
                raise CqlError(problem, declared.line, declared.column, query_file.file)

    def _cql_error(self, exc: CqlError, i: int, st: StageConfig) -> ConfigError:
        """Position a CQL error in the YAML file when the query is inline."""
        if st.query_file is not None:
            return ConfigError(str(exc), "", None, "")
        line = self.loaded.text_start("stages", i, "query")
        if line is not None:
            return ConfigError(
                f"{exc.message} (query line {exc.line}, column {exc.column})",
                str(self.loaded.path),
                line + exc.line - 1,
                f"stages[{i}].query",
            )
        return self.error(f"{exc.message} (query line {exc.line}, column {exc.column})", "stages", i, "query")

    def _compile_stages(self, parsed: list[tuple[int, StageConfig, cql_ast.Program, str, str]]) -> None:
        outputs: dict[str, str] = {}  # stream -> stage, for stages not compiled yet
        for i, st, tree, _, _ in parsed:
            queries = [s.name for s in tree.statements if isinstance(s, cql_ast.RegisterQuery)]
            if not queries:
                raise self.error(
                    "the query registers no query (add REGISTER QUERY or a SELECT)", "stages", i, "query"
                )
            output = st.output or queries[-1]
            if output not in queries:
                raise self.error(
                    f"output {output!r} is not a registered query of this stage", "stages", i, "output"
                )
            outputs[output] = st.name
        pending = list(parsed)
        while pending:
            progress = False
            for item in list(pending):
                i, st, tree, text, file = item
                needs = _external_names(tree)
                waiting = [n for n in needs if n not in self.schemas and n in outputs]
                if waiting:
                    continue
                self._compile_one(i, st, tree, text, file, needs, outputs)
                pending.remove(item)
                progress = True
            if not progress:
                names = [st.name for _, st, *_ in pending]
                i = pending[0][0]
                raise self.error(
                    "stages " + ", ".join(names) + " read each other's output in a cycle; a cycle must stay "
                    "inside one stage (recursive queries with a delay) in this version",
                    "stages",
                    i,
                    "query",
                )

    def _compile_one(
        self,
        i: int,
        st: StageConfig,
        tree: cql_ast.Program,
        text: str,
        file: str,
        needs: list[str],
        outputs: dict[str, str],
    ) -> None:
        inputs = {}
        for statement in (s for s in tree.statements if isinstance(s, cql_ast.RegisterInput)):
            if statement.name in needs and statement.name not in self.schemas:
                raise self.error(
                    f"stage {st.name}: it declares the input {statement.name!r} (query line "
                    f"{statement.line}), but no source or stage produces it",
                    "stages",
                    i,
                    "query",
                )
        for name in needs:
            if name in self.schemas:
                schema, kind = self.schemas[name]
                inputs[name] = plan.InputDecl(name, kind, schema)
        try:
            program = compile_program(text, inputs=inputs, file=file, window_bounds=self.cfg.window_bounds)
        except CqlError as exc:
            raise self._cql_error(exc, i, st) from None
        output = st.output or program.last_query
        root = program.query(output)
        specs = self._partitions(i, st, program, output, inputs) if st.partitions > 1 else [None]
        for spec in specs:
            self._add_query_stage(
                i, st, output, root.schema, root.kind, "query", text, file, program=program, partition=spec
            )
        del outputs[output]

    def _partitions(
        self, i: int, st: StageConfig, program: plan.Program, output: str, inputs: dict[str, plan.InputDecl]
    ) -> list[PartitionSpec]:
        """Each partition's spec, once the partitioning is known to keep the
        program's result (else a located error)."""
        given = st.partition_by
        keys: dict[str, tuple[str, ...]]
        if given is None:  # streams dealt round-robin, relations to every partition
            keys = {name: () for name, decl in inputs.items() if decl.kind is plan.Kind.STREAM}
        elif isinstance(given, list):  # by these columns where an input has them all
            keys = {
                name: tuple(given) for name, decl in inputs.items() if set(given) <= set(decl.schema.names)
            }
            if not keys:
                where = ("stages", i, "partition_by")
                raise self.error(f"stage {st.name}: no input has the columns {', '.join(given)}", *where)
        else:
            keys = {name: tuple(cols) for name, cols in given.items()}
        try:
            check_partitioning(program, output, keys)
        except PartitioningError as exc:
            field_ = "partition_by" if given else "partitions"
            raise self.error(f"stage {st.name}: {exc}", "stages", i, field_) from None
        modulo = st.partition_routing == "modulo"
        if modulo:
            for name, cols in keys.items():
                column = inputs[name].schema.columns[list(inputs[name].schema.names).index(cols[0])]
                if column.type.name is not plan.TypeName.INTEGER:
                    raise self.error(
                        f"stage {st.name}: partition_routing: modulo needs an integer key; "
                        f"{name}.{cols[0]} is {column.type.name.value}",
                        "stages",
                        i,
                        "partition_routing",
                    )
        routing = {
            name: InputRouting(key_positions(cols, inputs[name].schema.names), modulo=modulo)
            for name, cols in keys.items()
        }
        return [PartitionSpec(j, st.partitions, routing) for j in range(st.partitions)]

    def _add_query_stage(
        self,
        i: int,
        st: StageConfig,
        output: str,
        schema: plan.Schema,
        kind: plan.Kind,
        output_field: str,
        text: str,
        file: str,
        program: plan.Program | None = None,
        mqo: MqoStageSpec | None = None,
        partition: PartitionSpec | None = None,
    ) -> None:
        """Register a compiled stage (or one partition of it), its nodes and
        its output stream; ``output_field`` is where a duplicate output
        stream is reported."""
        j = partition.index if partition is not None else 0
        secondary = None
        if st.ha.mode != "none":
            secondary = st.ha.secondaries[j] if st.ha.secondaries is not None else st.ha.secondary
        name = f"{st.name}.p{j}" if partition is not None else st.name
        stage = Stage(
            name,
            "stage",
            st.partition_nodes[j],
            secondary=secondary,
            output=output,
            schema=schema,
            kind=kind,
            program=program,
            mqo=mqo,
            query_text=text,
            query_file=file,
            config=st,
            partition=partition,
        )
        self.add_stage(stage, "stages", i, "name")
        where: tuple[Any, ...] = ("nodes", j) if partition is not None else ("node",)
        self.add_node(stage.primary, NodeRole.PRIMARY, name, "stages", i, *where)
        if stage.secondary:
            where = ("ha", "secondaries", j) if partition is not None else ("ha", "secondary")
            self.add_node(stage.secondary, NodeRole.SECONDARY, name, "stages", i, *where)
        if j == 0:
            self.add_stream(output, name, schema, kind, "stages", i, output_field)
        else:
            self.producers[output].append(name)

    def _edges(self) -> list[Edge]:
        edges: list[Edge] = []
        for stage in self.stages.values():
            if stage.role == "stage" and stage.mqo is not None:
                names = stage.mqo.inputs
            elif stage.role == "stage":
                assert stage.program is not None
                names = [n for n in stage.program.scans if n in self.streams]
            elif stage.role == "sink":
                assert stage.sink is not None
                names = [stage.sink.input]
            else:
                continue
            index = 0
            for stream in names:
                schema, kind = self.schemas[stream]
                # A partitioned producer: one edge per partition, merged by
                # the consumer in partition order.
                for producer in self.producers[stream]:
                    edge = Edge(producer, stage.name, stream, schema, kind, index, stage.partition)
                    stage.inputs.append(edge)
                    self.stages[edge.producer].outputs.append(edge)
                    edges.append(edge)
                    index += 1
        return edges


def resolve(loaded: LoadedConfig) -> Topology:
    return _Resolver(loaded).run()


def describe(topology: Topology) -> str:
    """``cluster check``: each stage (partitions with their nodes and keys),
    then the edges."""
    lines = [f"{topology.config.name}: {topology.path} is valid"]
    for stage in topology.stages.values():
        nodes = " + ".join(stage.replicas)
        what = f"  {stage.role:<6} {stage.name:<24} on {nodes}"
        if stage.output is not None:
            what += f" -> {stage.output}"
        if stage.partition is not None:
            part = stage.partition
            what += f"  (partition {part.index + 1} of {part.count}: {_routing_text(stage)})"
        lines.append(what)
    lines.append(f"  {len(topology.edges)} edges: " + ", ".join(e.id for e in topology.edges))
    lines += [f"  {note}" for note in retention_notes(topology)]
    return "\n".join(lines)


def programs_fingerprint(topology: Topology) -> str:
    """A digest of every stage's program (text, output, partitioning,
    window bounds): two processes that compute different digests would run
    different programs as replicas of one stage."""
    parts: list[str] = [topology.config.window_bounds]
    for stage in topology.stages.values():
        if stage.role == "stage":
            partition = None if stage.partition is None else repr(stage.partition)
            mqo = None if stage.mqo is None else repr(stage.mqo)
            parts.append(repr((stage.name, stage.query_text, stage.output, partition, mqo)))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def retention_notes(topology: Topology) -> list[str]:
    """A note per stage whose state keeps some rows for the whole run
    (node/cql/retention.py): its producers then retain their whole output,
    which ``queue_rows`` bounds."""
    notes = []
    seen: set[int] = set()
    for stage in topology.stages.values():
        program = stage.program
        if program is None or stage.output is None or id(program) in seen:
            continue
        seen.add(id(program))
        lasting = lasting_state(program, stage.output)
        if lasting and not topology.config.snapshot_rows:
            name = stage.name.rsplit(".p", 1)[0] if stage.partition is not None else stage.name
            notes.append(
                f"note: stage {name} keeps rows for the whole run ({'; '.join(lasting)}): its Level-1 cut "
                "stops at the first of them, so its producers retain all they send it from there on, up to "
                f"queue_rows ({topology.config.queue_rows}) rows each, and then wait; set snapshot_rows to "
                'let the cut move on (docs/ha.md, "Retention and state snapshots")'
            )
    return notes


def _routing_text(stage: Stage) -> str:
    assert stage.partition is not None
    routed = []
    for edge in stage.inputs:
        routing = stage.partition.routing_of(edge.stream)
        if routing.broadcast:
            continue
        keys = [edge.schema.names[p - VALUES] for p in routing.key_positions]
        routed.append(f"{edge.stream} by {', '.join(keys)}" if keys else f"{edge.stream} round-robin")
    return "; ".join(dict.fromkeys(routed)) or "every input whole"
