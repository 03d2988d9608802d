"""``semiactive experiment sweep|asas|mqo``: the seeds' experiments
(002: sweep, asas; 003: mqo)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from semiactive.cli.common import dated_dir, names, tag_option
from semiactive.errors import UserError

if TYPE_CHECKING:
    from semiactive.cli.common import Subcommands


def register(sub: Subcommands) -> None:
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
    tag_option(sweep)
    sweep.add_argument(
        "--network-load",
        default="0",
        metavar="RATE,...",
        help="exp. 3: sweep once per level of iperf3 load, e.g. 40MB/s,60MB/s, nodes in network "
        "namespaces (0, the default: no load, on loopback)",
    )
    sweep.set_defaults(func=_sweep)

    asas = esub.add_parser("asas", help="Adaptive SAS under a rate or cost step (exp. 4, 5)")
    asas.add_argument("--scenario", required=True, choices=["rate", "cost"])
    asas.add_argument("--modes", default="asas,as,ub")
    asas.add_argument("--tuner", default="both", choices=["algorithm3", "model", "both"])
    asas.add_argument("--kill-times", default="1,5,10,15,20,25,30", metavar="S,...", help="node-2 killed")
    asas.add_argument("--repeat", type=int, default=1)
    asas.add_argument("--duration", type=float, default=30.0, help="seconds of the run without kill")
    asas.add_argument("--step-at", type=float, metavar="S", help="move the rate or cost step (default 10 s)")
    asas.add_argument("--out", type=Path, help="directory for runs, bandwidth.csv and recovery.csv")
    tag_option(asas)
    asas.set_defaults(func=_asas)

    emqo = esub.add_parser(
        "mqo", help="the MQO paper's experiment: 300 queries, a pattern change (Figs. 10-13)"
    )
    emqo.add_argument("--queries", type=int, default=300, help="random queries from Fig. 10's template")
    emqo.add_argument("--units", type=int, default=40, help="units of event time (default 40)")
    emqo.add_argument("--methods", default="dynamic,static,single,none")
    emqo.add_argument("--theta", type=float, default=0.6)
    emqo.add_argument("--recluster-at-unit", type=int, default=20, help="dynamic: forced re-clustering")
    emqo.add_argument("--seed", type=int, default=1)
    emqo.add_argument("--repeat", type=int, default=1, help="runs per method (median per unit)")
    emqo.add_argument("--out", type=Path, help="directory for data, runs, table and plot")
    emqo.set_defaults(func=_mqo)


def _sweep(args: argparse.Namespace) -> int:
    from semiactive.campaigns.sweep import run_sweep
    from semiactive.launcher.manifest import parse_tags

    out = args.out or dated_dir("sweep")
    modes = names(args.modes)
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


def _asas(args: argparse.Namespace) -> int:
    from semiactive.campaigns.asas import parse_times, run_asas_experiment
    from semiactive.launcher.manifest import parse_tags

    out = args.out or dated_dir("asas")
    return run_asas_experiment(
        args.scenario,
        modes=names(args.modes),
        tuner=args.tuner,
        kill_times=parse_times(args.kill_times),
        repeat=args.repeat,
        duration=args.duration,
        step_at=args.step_at,
        out_dir=out,
        tags=parse_tags(args.tag),
    )


def _mqo(args: argparse.Namespace) -> int:
    from semiactive.campaigns.mqo import run_mqo_experiment

    out = args.out or dated_dir("mqo")
    return run_mqo_experiment(
        out,
        queries=args.queries,
        units=args.units,
        methods=names(args.methods),
        theta=args.theta,
        recluster_at_unit=args.recluster_at_unit,
        seed=args.seed,
        repeat=args.repeat,
    )


def _loads(text: str) -> list[float]:
    """``--network-load``: bandwidths such as ``40MB/s``; ``0`` is no load."""
    from semiactive.config import parse_bytes_per_s

    try:
        loads = [
            0.0 if v.strip() == "0" else parse_bytes_per_s(v.strip()) for v in text.split(",") if v.strip()
        ]
    except ValueError as exc:
        raise UserError(f"--network-load {text!r}: {exc}") from None
    return loads or [0.0]


def _ints(text: str, option: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"{option} {text!r}: expected comma-separated integers") from None
    if not values or min(values) < 1:
        raise UserError(f"{option} {text!r}: give positive integers")
    return values
