"""The ``semiactive`` command line.

Bad input (config, query, arguments) prints one line naming the file and
the field or line/column, and exits with status 2, leaving no process behind.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from semiactive.config import ConfigError
from semiactive.errors import UserError
from semiactive.source_tree import BENCH

USAGE_ERROR = 2
COORDINATOR_ENV = "SEMIACTIVE_COORDINATOR"
DEFAULT_COORDINATOR = "127.0.0.1:7070"
TLS_DIR_ENV = "SEMIACTIVE_TLS_DIR"
BENCHMARKS = {"linear-road": "linear_road_cluster.py"}  # semiactive bench NAME -> bench/FILE
WINDOW_BOUNDS = ("closed", "half-open")  # node/cql/bounds.py; not imported: the CLI starts light


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="semiactive", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = p.add_subparsers(dest="command", required=True)

    cluster = sub.add_parser("cluster", help="run a whole cluster on this machine")
    csub = cluster.add_subparsers(dest="action", required=True)
    up = csub.add_parser("up", help="start every process of CONFIG on loopback, run, drain, stop")
    up.add_argument("config")
    up.add_argument("--duration", type=float, default=10.0, help="seconds the sources emit (default 10)")
    up.add_argument("--run-dir", type=Path, help="where cluster.json, sources/, sink/, logs/ go")
    up.add_argument("--kill", action="append", default=[], metavar="NODE@SECONDS", help="SIGKILL a node")
    up.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="NODE@SECONDS:DURATION",
        help="SIGSTOP a node, SIGCONT it DURATION seconds later",
    )
    up.add_argument("--quiet", action="store_true", help="no live progress line")
    check = csub.add_parser(
        "check", help="validate CONFIG (fields, queries, partitionings) without running it"
    )
    check.add_argument("config")

    node = sub.add_parser("node", help="run one node daemon (what a container runs)")
    node.add_argument("--config", required=True)
    node.add_argument("--name", required=True)
    node.add_argument("--endpoints", type=Path, help="JSON: node name -> {host, port, metrics_port}")
    node.add_argument("--run-dir", type=Path)
    node.add_argument("--start-now", action="store_true", help="sources start emitting at once")
    node.add_argument("--spare", action="store_true", help="start as a spare, whatever the config says")
    node.add_argument("--coordinator", metavar="HOST:PORT", help="report to this coordinator")
    _tls_dir_option(node)
    node.add_argument("--log-level", default=os.environ.get("SEMIACTIVE_LOG", "INFO"))

    coord = sub.add_parser("coordinator", help="run the coordinator (the control plane) of a cluster")
    coord.add_argument("--config", required=True)
    coord.add_argument("--listen", required=True, metavar="HOST:PORT")
    coord.add_argument("--endpoints", type=Path, help="JSON: node name -> {host, port} (else the config's)")
    coord.add_argument("--run-dir", type=Path, help="where its events go (telemetry/)")
    coord.add_argument(
        "--metrics-port", type=int, metavar="PORT", help="serve Prometheus metrics here (host of --listen)"
    )
    coord.add_argument(
        "--http", type=int, metavar="PORT", help="serve the live web page here (host of --listen; read-only)"
    )
    coord.add_argument(
        "--no-reprotect", action="store_true", help="converge views only; assign no new secondaries"
    )
    _tls_dir_option(coord)
    coord.add_argument("--log-level", default=os.environ.get("SEMIACTIVE_LOG", "INFO"))

    status = sub.add_parser("status", help="every stage and node of a running cluster, from its coordinator")
    where = status.add_mutually_exclusive_group()
    where.add_argument(
        "--coordinator", metavar="HOST:PORT", help=f"default ${COORDINATOR_ENV} or {DEFAULT_COORDINATOR}"
    )
    where.add_argument("--run-dir", type=Path, help="the coordinator of this `cluster up` run")
    status.add_argument("--json", action="store_true", help="machine-readable")
    _tls_dir_option(status, "admin's; default $SEMIACTIVE_TLS_DIR, or RUN_DIR/tls with --run-dir")

    migrate = sub.add_parser("migrate", help="move a running stage's primary to a spare node (no row lost)")
    migrate.add_argument("stage")
    migrate.add_argument("--to", dest="target", required=True, metavar="NODE", help="a spare node")
    where = migrate.add_mutually_exclusive_group()
    where.add_argument(
        "--coordinator", metavar="HOST:PORT", help=f"default ${COORDINATOR_ENV} or {DEFAULT_COORDINATOR}"
    )
    where.add_argument("--run-dir", type=Path, help="the coordinator of this `cluster up` run")
    migrate.add_argument(
        "--wait", type=float, default=30.0, metavar="S", help="follow it (0: return at once)"
    )
    _tls_dir_option(migrate, "admin's; default $SEMIACTIVE_TLS_DIR, or RUN_DIR/tls with --run-dir")

    health = sub.add_parser(
        "health", help="the gRPC health check of a node or coordinator: exit 0 when it is SERVING"
    )
    health.add_argument("address", metavar="HOST:PORT")
    health.add_argument("--peer", metavar="NAME", help="the name its certificate carries (default: HOST)")
    health.add_argument(
        "--as", dest="identity", metavar="NAME", help="the identity to present (default: the peer's own)"
    )
    health.add_argument("--timeout", type=float, default=2.0, help="seconds (default 2)")
    _tls_dir_option(health, "the identity's; default $SEMIACTIVE_TLS_DIR; none: an insecure cluster")

    start = sub.add_parser(
        "start", help="a deployed cluster: wait until every node serves, then start it (as the launcher does)"
    )
    drain = sub.add_parser(
        "drain", help="a deployed cluster: stop the sources, wait until every sink has its end of stream"
    )
    for deployed in (start, drain):
        deployed.add_argument("--config", required=True)
        deployed.add_argument(
            "--endpoints", type=Path, help="JSON: node name -> {host, port} (else the config's)"
        )
        deployed.add_argument(
            "--wait", type=float, default=120.0, help="seconds to wait for the nodes to serve (default 120)"
        )
        _tls_dir_option(deployed, "admin's; default $SEMIACTIVE_TLS_DIR")
    drain.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the sinks (default 60)"
    )

    verify = sub.add_parser(
        "verify", help="a run's sinks against the engine's reference and an independent SQLite oracle"
    )
    verify.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    verify.add_argument("--config", help="the run's configuration (default: the one cluster.json names)")
    verify.add_argument("--oracle-rows", type=int, help="source rows the oracle reads (default 5000)")

    certs = sub.add_parser("certs", help="mutual-TLS certificates of a cluster (a CA, one per identity)")
    tsub = certs.add_subparsers(dest="action", required=True)
    init = tsub.add_parser("init", help="a new CA and a certificate for every node, coordinator and admin")
    init.add_argument("dir", type=Path)
    init.add_argument("--config", required=True)
    init.add_argument("--days", type=float, default=365.0, help="validity (default 365)")
    issue = tsub.add_parser("issue", help="one more identity (e.g. ingest-NAME) from DIR's CA")
    issue.add_argument("dir", type=Path)
    issue.add_argument("name")
    issue.add_argument("--days", type=float, default=365.0)

    query = sub.add_parser("query", help="compile or run CQL here; add or remove MQO queries of a cluster")
    qsub = query.add_subparsers(dest="action", required=True)
    check = qsub.add_parser("check", help="parse, type-check and print the plan")
    check.add_argument("file")
    check.add_argument("--insert-delays", action="store_true", help="add <Now> on cycles without a delay")
    check.add_argument(
        "--show-code", action="store_true", help="also print the Python generated for each query"
    )
    bounds_help = "[Range T]: closed [ts, ts+T] (CQL, default) or half-open [ts, ts+T) (Stanford STREAM)"
    check.add_argument("--window-bounds", choices=WINDOW_BOUNDS, default="closed", help=bounds_help)
    check.add_argument(
        "--partition-by",
        action="append",
        metavar="STREAM=COL[,COL]",
        help="check that partitions routed by these columns (STREAM= : round-robin) keep the result",
    )
    for action, what in (
        ("add", "register MQO queries (a file, - for stdin)"),
        ("remove", "remove MQO queries"),
    ):
        reg = qsub.add_parser(action, help=f"{what} with a running cluster's registry")
        if action == "add":
            reg.add_argument("items", nargs=1, metavar="FILE")
        else:
            reg.add_argument("items", nargs="+", metavar="NAME")
        reg.add_argument("--run-dir", type=Path, help="a `cluster up` run directory (config, endpoints, TLS)")
        reg.add_argument("--config")
        reg.add_argument("--endpoints", type=Path, help="endpoints file (default: the config's endpoints)")
        reg.add_argument("--tls-dir", type=Path)
        reg.add_argument("--registry", help="the registry source (default: the only one)")
    run = qsub.add_parser("run", help="run over files, print a query's output as JSON Lines")
    run.add_argument("file")
    run.add_argument(
        "--stream", action="append", default=[], metavar="NAME=FILE", help="input file (CSV/JSONL)"
    )
    run.add_argument("--output", help="registered query to print (default: the last one)")
    run.add_argument(
        "--executor", choices=["dts", "hb"], default="dts", help="time-splitting (default) or heartbeats"
    )
    run.add_argument("--run-limit", type=int, default=100, help="HB: max consecutive runs of one operator")
    run.add_argument("--window-bounds", choices=WINDOW_BOUNDS, default="closed", help=bounds_help)

    mqo = sub.add_parser("mqo", help="seed 003: many continuous queries, shared (embedded)")
    msub = mqo.add_subparsers(dest="action", required=True)
    mrun = msub.add_parser("run", help="run MASTER/WINDOW SIZE queries over files with shared window joins")
    mrun.add_argument("queries", help="file of CREATE ... statements, or - for standard input")
    mrun.add_argument(
        "--stream", action="append", default=[], metavar="NAME=FILE", help="CSV/JSONL, ts column"
    )
    mrun.add_argument("--clock", action="append", default=[], metavar="NAME=PERIOD[+PHASE]", help="ms")
    mrun.add_argument("--method", choices=["dynamic", "static", "single", "none"], default="dynamic")
    mrun.add_argument("--theta", type=float, default=0.5, help="similarity threshold (default 0.5)")
    mrun.add_argument(
        "--unit", type=int, default=1000, help="ticks per unit of the statistics (default 1000)"
    )
    mrun.add_argument("--log-period", type=int, default=10_000, help="ticks of arrival log (default 10000)")
    mrun.add_argument("--recluster-every", type=int, metavar="TICKS", help="dynamic: check similarity")
    mrun.add_argument("--recluster-at", type=int, action="append", default=[], metavar="TICKS")
    mrun.add_argument("--patience", type=int, default=1, help="checks below theta before re-clustering")
    mrun.add_argument("--add", action="append", default=[], metavar="TICKS:FILE", help="register later")
    mrun.add_argument("--remove", action="append", default=[], metavar="TICKS:NAME")
    mrun.add_argument("--out", type=Path, required=True)

    placement = sub.add_parser("placement", help="seed 004: network-aware operator placement")
    psub = placement.add_subparsers(dest="action", required=True)
    solve = psub.add_parser("solve", help="place a plan's operators on a topology, minimising network usage")
    solve.add_argument(
        "--topology", required=True, metavar="topohub:KEY|FILE", help="e.g. topohub:topozoo/Abilene"
    )
    solve.add_argument("--plan", required=True, metavar="PLAN.yaml", help="operators, pins, edges with rates")
    solve.add_argument(
        "--method",
        choices=["exact", "search", "relaxation", "sink", "sources"],
        default="exact",
        help="exact (default: tree DP, or an ILP for shared plans), search (relaxation + local search), "
        "relaxation (Pietzuch), sink, sources",
    )
    solve.add_argument("--json", action="store_true", help="one JSON object on standard output")

    experiment = sub.add_parser("experiment", help="the seeds' experiments (002: sweep, asas; 003: mqo)")
    esub = experiment.add_subparsers(dest="action", required=True)
    sweep = esub.add_parser("sweep", help="overhead and recovery time per mode and batch size (exp. 1-3)")
    sweep.add_argument("config")
    sweep.add_argument("--modes", default="as,ub,sas")
    sweep.add_argument("--batch-sizes", default="1,50,100,150,200,250,300,350,400,450,500")
    sweep.add_argument("--repeat", type=int, default=1)
    sweep.add_argument("--kill", default="node-2@6", metavar="NODE@SECONDS", help="default node-2@6")
    sweep.add_argument("--duration", type=float, default=8.0, help="seconds of each run (default 8)")
    sweep.add_argument("--out", type=Path, help="directory for runs and sweep.csv")
    _add_tag(sweep)
    sweep.add_argument(
        "--network-load",
        default="0",
        metavar="RATE,...",
        help="exp. 3: sweep once per level of iperf3 load, e.g. 40MB/s,60MB/s, nodes in network "
        "namespaces (0, the default: no load, on loopback)",
    )

    asas = esub.add_parser("asas", help="Adaptive SAS under a rate or cost step (exp. 4, 5)")
    asas.add_argument("--scenario", required=True, choices=["rate", "cost"])
    asas.add_argument("--modes", default="asas,as,ub")
    asas.add_argument("--tuner", default="both", choices=["algorithm3", "model", "both"])
    asas.add_argument("--kill-times", default="1,5,10,15,20,25,30", metavar="S,...", help="node-2 killed")
    asas.add_argument("--repeat", type=int, default=1)
    asas.add_argument("--duration", type=float, default=30.0, help="seconds of the run without kill")
    asas.add_argument("--step-at", type=float, metavar="S", help="move the rate or cost step (default 10 s)")
    asas.add_argument("--out", type=Path, help="directory for runs, bandwidth.csv and recovery.csv")
    _add_tag(asas)

    emqo = esub.add_parser("mqo", help="seed 003's experiment: 300 queries, a pattern change (Figs. 10-13)")
    emqo.add_argument("--queries", type=int, default=300, help="random queries from Fig. 10's template")
    emqo.add_argument("--units", type=int, default=40, help="units of event time (default 40)")
    emqo.add_argument("--methods", default="dynamic,static,single,none")
    emqo.add_argument("--theta", type=float, default=0.6)
    emqo.add_argument("--recluster-at-unit", type=int, default=20, help="dynamic: forced re-clustering")
    emqo.add_argument("--seed", type=int, default=1)
    emqo.add_argument("--repeat", type=int, default=1, help="runs per method (median per unit)")
    emqo.add_argument("--out", type=Path, help="directory for data, runs, table and plot")

    chaos = sub.add_parser("chaos", help="randomised kills and freezes, each run checked exactly")
    chaos.add_argument("config")
    chaos.add_argument("--runs", type=int, default=10)
    chaos.add_argument("--seed", type=int, default=1)
    chaos.add_argument("--duration", type=float, default=5.0, help="seconds of each run (default 5)")
    chaos.add_argument("--out", type=Path, help="directory for the runs")
    _add_tag(chaos)
    chaos.add_argument(
        "--both-replicas",
        action="store_true",
        help="also kill both replicas of a stage together (a spare rebuilds it)",
    )
    chaos.add_argument(
        "--injector",
        choices=["nemesis", "launcher"],
        default="nemesis",
        help="who sends the signals: a separate nemesis process (default) or the launcher itself",
    )

    nemesis = sub.add_parser(
        "nemesis", help="inject faults into a running cluster from outside (knows only cluster.json)"
    )
    nemesis.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory of `cluster up`")
    nemesis.add_argument(
        "--kill",
        action="append",
        default=[],
        metavar="NODE@SECONDS",
        help="SIGKILL NODE (or `launcher`) SECONDS after the run's start",
    )
    nemesis.add_argument(
        "--stop", action="append", default=[], metavar="NODE@SECONDS:DURATION", help="SIGSTOP, then SIGCONT"
    )
    nemesis.add_argument("--plan", type=Path, help="JSON list of faults (node, kind, at, duration)")

    simulate = sub.add_parser(
        "simulate",
        help="the real node and coordinator code on virtual time, under seeded fault schedules",
    )
    simulate.add_argument("config", nargs="?", default="examples/sim-chain.yaml")
    simulate.add_argument("--seeds", type=int, default=100, help="how many seeds (default 100)")
    simulate.add_argument("--first-seed", type=int, default=0)
    simulate.add_argument("--seed", type=int, help="run only this seed, printing its schedule")
    simulate.add_argument("--faults", type=int, default=3, help="fault episodes per run (default 3)")
    simulate.add_argument("--duration", type=float, default=2.0, help="virtual seconds of input (default 2)")
    simulate.add_argument("--keep", type=Path, metavar="DIR", help="with --seed: keep the run's files in DIR")
    simulate.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="processes running seeds (default: one per CPU)",
    )

    report = sub.add_parser(
        "report", help="the Spark job over runs' telemetry: Parquet tables, report.md, the papers' figures"
    )
    report.add_argument("inputs", nargs="+", type=Path, metavar="RUN_DIR_OR_CAMPAIGN_DIR")
    report.add_argument(
        "--master",
        help="Spark master: local[N] (default local[2]), spark://HOST:PORT, sc://HOST:PORT (Spark Connect)",
    )
    report.add_argument("--out", type=Path, help="output directory (default: INPUT/report, or report-<time>)")

    demo = sub.add_parser("demo", help="the paper's chain (seed 002 Fig. 3) for a short run, verified")
    demo.add_argument("--duration", type=float, default=8.0)
    demo.add_argument("--run-dir", type=Path)
    bench = sub.add_parser(
        "bench", help="a benchmark of the source tree's bench/ (linear-road: on a cluster)"
    )
    bench.add_argument("name", choices=sorted(BENCHMARKS), help="which benchmark")
    bench.add_argument("options", nargs=argparse.REMAINDER, help="its options (NAME --help lists them)")
    return p


def _bench(name: str, options: list[str]) -> int:
    """Runs bench/FILE.py of the source tree this package is in, as a child
    (benchmarks are scripts beside the packages, not installed with them)."""
    script = BENCH / BENCHMARKS[name]
    if not script.is_file():
        raise UserError(f"{script} is missing: benchmarks run from a source checkout")
    return subprocess.call([sys.executable, str(script), *options])


def _tls_dir_option(parser: argparse.ArgumentParser, whose: str = "default $SEMIACTIVE_TLS_DIR") -> None:
    parser.add_argument(
        "--tls-dir",
        type=Path,
        default=os.environ.get(TLS_DIR_ENV) or None,
        help=f"CA, certificate and key of this process ({whose}); not needed with `insecure: true`",
    )


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _add_tag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label every run's manifest carries, for the report (e.g. operator=aggregate)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "simulate" and argv is None:
        from semiactive.simulation.campaign import exact_hash_seed

        exact_hash_seed(sys.argv[1:])
    # SIGTERM (a supervisor, a container stop) ends a command like Ctrl-C.
    signal.signal(signal.SIGTERM, _terminate)
    try:
        return _dispatch(args)
    except UserError as exc:
        print(f"semiactive: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "node":
        from semiactive.node.service.main import run_node

        return run_node(
            args.config,
            name=args.name,
            endpoints=args.endpoints,
            run_dir=args.run_dir,
            start_now=args.start_now,
            log_level=args.log_level,
            spare=args.spare,
            coordinator=args.coordinator,
            tls_dir=args.tls_dir,
        )
    if args.command == "coordinator":
        from semiactive.coordinator.service import run_coordinator

        return run_coordinator(
            args.config,
            listen=args.listen,
            endpoints=args.endpoints,
            run_dir=args.run_dir,
            reprotect=not args.no_reprotect,
            log_level=args.log_level,
            tls_dir=args.tls_dir,
            metrics_port=args.metrics_port,
            http_port=args.http,
        )
    if args.command == "status":
        from semiactive.admin.status import show_status

        address = args.coordinator or os.environ.get(COORDINATOR_ENV, DEFAULT_COORDINATOR)
        return show_status(address, run_dir=args.run_dir, as_json=args.json, tls_dir=args.tls_dir)
    if args.command == "migrate":
        from semiactive.admin.migrate import migrate

        address = args.coordinator or os.environ.get(COORDINATOR_ENV, DEFAULT_COORDINATOR)
        return migrate(
            address,
            run_dir=args.run_dir,
            stage=args.stage,
            target=args.target,
            wait_s=args.wait,
            tls_dir=args.tls_dir,
        )
    if args.command == "health":
        from semiactive.runtime.health import health_main

        return health_main(
            args.address, tls_dir=args.tls_dir, peer=args.peer, identity=args.identity, timeout=args.timeout
        )
    if args.command == "start":
        from semiactive.admin.deployment import run_start

        return run_start(args.config, endpoints=args.endpoints, tls_dir=args.tls_dir, wait_s=args.wait)
    if args.command == "drain":
        from semiactive.admin.deployment import run_drain

        return run_drain(
            args.config,
            endpoints=args.endpoints,
            tls_dir=args.tls_dir,
            wait_s=args.wait,
            drain_s=args.timeout,
        )
    if args.command == "verify":
        from semiactive.oracle.verify import main as verify_main

        options = ["--config", args.config] if args.config else []
        options += ["--oracle-rows", str(args.oracle_rows)] if args.oracle_rows else []
        return verify_main([str(args.run_dir), *options])
    if args.command == "certs":
        from semiactive.admin.certificates import issue_certs

        if args.action == "init":
            return issue_certs("init", args.dir, config=args.config, days=args.days)
        return issue_certs("issue", args.dir, name=args.name, days=args.days)
    if args.command == "query" and args.action in ("add", "remove"):
        from semiactive.admin.registration import run_registration

        return run_registration(
            args.action,
            args.items,
            config=args.config,
            run_dir=args.run_dir,
            endpoints=args.endpoints,
            tls_dir=args.tls_dir,
            registry=args.registry,
        )
    if args.command == "query":
        from semiactive.embedded import query as embedded

        if args.action == "check":
            keys = embedded.parse_partition_by(args.partition_by) if args.partition_by else None
            text = embedded.check(
                args.file,
                insert_delays=args.insert_delays,
                show_code=args.show_code,
                window_bounds=args.window_bounds,
                partition_by=keys,
            )
            print(text)
            return 0
        return embedded.run(
            args.file,
            args.stream,
            output=args.output,
            executor=args.executor,
            run_limit=args.run_limit,
            window_bounds=args.window_bounds,
        )
    if args.command == "mqo":
        from semiactive.embedded import mqo as mqo_runner

        return mqo_runner.main(
            args.queries,
            stream_specs=args.stream,
            clock_specs=args.clock,
            method=args.method,
            out=args.out,
            theta=args.theta,
            unit=args.unit,
            log_period=args.log_period,
            recluster_every=args.recluster_every,
            recluster_at=args.recluster_at,
            patience=args.patience,
            add=args.add,
            remove=args.remove,
        )
    if args.command == "placement":
        from semiactive.cli import placement as placement_cli

        return placement_cli.main(args.topology, args.plan, args.method, args.json)
    if args.command == "cluster" and args.action == "check":
        from semiactive import config as config_mod
        from semiactive.topology import describe, resolve

        print(describe(resolve(config_mod.load(args.config))))
        return 0
    if args.command == "cluster":
        from semiactive.launcher.cluster import run_cluster

        return asyncio.run(
            run_cluster(
                args.config,
                duration=args.duration,
                run_dir=args.run_dir,
                kills=args.kill,
                stops=args.stop,
                progress=not args.quiet,
            )
        )
    if args.command in ("experiment", "chaos"):
        from semiactive.launcher.manifest import parse_tags
    if args.command == "experiment" and args.action == "mqo":
        from semiactive.campaigns.mqo import run_mqo_experiment

        out = args.out or Path("runs") / f"mqo-{time.strftime('%Y%m%d-%H%M%S')}"
        methods = [m.strip().lower() for m in args.methods.split(",") if m.strip()]
        return run_mqo_experiment(
            out,
            queries=args.queries,
            units=args.units,
            methods=methods,
            theta=args.theta,
            recluster_at_unit=args.recluster_at_unit,
            seed=args.seed,
            repeat=args.repeat,
        )
    if args.command == "experiment" and args.action == "asas":
        from semiactive.campaigns.asas import parse_times, run_asas_experiment

        out = args.out or Path("runs") / f"asas-{time.strftime('%Y%m%d-%H%M%S')}"
        modes = [m.strip().lower() for m in args.modes.split(",") if m.strip()]
        return run_asas_experiment(
            args.scenario,
            modes=modes,
            tuner=args.tuner,
            kill_times=parse_times(args.kill_times),
            repeat=args.repeat,
            duration=args.duration,
            step_at=args.step_at,
            out_dir=out,
            tags=parse_tags(args.tag),
        )
    if args.command == "experiment":
        from semiactive.campaigns.sweep import run_sweep

        out = args.out or Path("runs") / f"sweep-{time.strftime('%Y%m%d-%H%M%S')}"
        modes = [m.strip().lower() for m in args.modes.split(",") if m.strip()]
        sizes = _ints(args.batch_sizes, "--batch-sizes")
        loads = _loads(args.network_load)
        tags = parse_tags(args.tag)
        return run_sweep(
            args.config,
            modes=modes,
            batch_sizes=sizes,
            repeat=args.repeat,
            kill=args.kill,
            duration=args.duration,
            out_dir=out,
            network_loads=loads,
            tags=tags,
        )
    if args.command == "chaos":
        from semiactive.campaigns.chaos import run_chaos

        out = args.out or Path("runs") / f"chaos-{time.strftime('%Y%m%d-%H%M%S')}"
        tags = parse_tags(args.tag)
        return run_chaos(
            args.config,
            runs=args.runs,
            seed=args.seed,
            duration=args.duration,
            out_dir=out,
            both_replicas=args.both_replicas,
            injector=args.injector,
            tags=tags,
        )
    if args.command == "nemesis":
        from semiactive.campaigns.nemesis import NemesisError, run_nemesis

        try:
            return run_nemesis(args.run_dir, kills=args.kill, stops=args.stop, plan_file=args.plan)
        except NemesisError as exc:
            print(f"semiactive nemesis: {exc}", file=sys.stderr)
            return 1
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "report":
        return _report(args)
    if args.command == "demo":
        from semiactive.launcher.demo import run_demo

        return run_demo(duration=args.duration, run_dir=args.run_dir)
    if args.command == "bench":
        return _bench(args.name, args.options)
    raise AssertionError(args.command)


def _report(args: argparse.Namespace) -> int:
    """``semiactive report``; pyspark and matplotlib are the ``report`` extra."""
    try:
        from semiactive.analytics.report_job import run_report
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("pyspark", "py4j", "matplotlib"):
            raise
        print(f"semiactive report: needs {exc.name}: pip install 'semiactive[report]'", file=sys.stderr)
        return USAGE_ERROR
    inputs: list[Path] = args.inputs
    out = args.out or (
        inputs[0] / "report" if len(inputs) == 1 else Path(f"report-{time.strftime('%Y%m%d-%H%M%S')}")
    )
    run_report(inputs, out, master=args.master)
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from semiactive import config as config_mod
    from semiactive.simulation.campaign import replay_command, run_campaign, run_seed
    from semiactive.topology import resolve

    topology = resolve(config_mod.load(args.config))
    if args.seed is not None:
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
        outcome = run_seed(
            topology, args.seed, faults=args.faults, duration_s=args.duration, keep_dir=args.keep
        )
        print(outcome.summary())
        for check in outcome.checks:
            print(f"  {check.describe()}")
        return 0 if outcome.ok else 1
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    print(f"simulate {args.config}: seeds {seeds.start}-{seeds.stop - 1}, {args.faults} faults per run")
    result = run_campaign(
        args.config,
        seeds,
        faults=args.faults,
        duration_s=args.duration,
        progress=print,
        workers=args.workers,
    )
    print(
        f"{result.runs} runs, {len(result.failures)} failed, {result.wall_s:.1f} s "
        f"({result.runs_per_s:.1f} runs/s, {result.virtual_s:.0f} virtual s, "
        f"{result.delivered:,} rows delivered)"
    )
    for outcome in result.failures:
        print(f"replay: {replay_command(args.config, outcome.seed, args.faults, args.duration)}")
    return 1 if result.failures else 0


def _loads(text: str) -> list[float]:
    """``--network-load``: bandwidths such as ``40MB/s``; ``0`` is no load."""
    from semiactive.config import parse_bytes_per_s

    try:
        loads = [
            0.0 if v.strip() == "0" else parse_bytes_per_s(v.strip()) for v in text.split(",") if v.strip()
        ]
    except ValueError as exc:
        raise ConfigError(f"--network-load {text!r}: {exc}") from None
    return loads or [0.0]


def _ints(text: str, option: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{option} {text!r}: expected comma-separated integers") from None
    if not values or min(values) < 1:
        raise ConfigError(f"{option} {text!r}: give positive integers")
    return values


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main())
