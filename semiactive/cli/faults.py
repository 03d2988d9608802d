"""Commands that inject faults: ``chaos`` (randomised campaigns, each run
checked), ``nemesis`` (into a running cluster, from outside) and
``simulate`` (seeded schedules on virtual time)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from semiactive.cli.common import dated_dir, tag_option

if TYPE_CHECKING:
    from semiactive.cli.common import Subcommands


def register(sub: Subcommands) -> None:
    chaos = sub.add_parser("chaos", help="randomised kills and freezes, each run checked exactly")
    chaos.add_argument("config")
    chaos.add_argument("--runs", type=int, default=10)
    chaos.add_argument("--seed", type=int, default=1)
    chaos.add_argument("--duration", type=float, default=5.0, help="seconds of each run (default 5)")
    chaos.add_argument("--out", type=Path, help="directory for the runs")
    tag_option(chaos)
    chaos.add_argument(
        "--both-replicas",
        action="store_true",
        help="also kill both replicas of a stage together (a spare rebuilds it)",
    )
    chaos.add_argument(
        "--ends",
        action="store_true",
        help="also kill sources and sinks that are started again as themselves (file, "
        "generator, Kafka and NATS sources; table, NATS and Kafka sinks)",
    )
    chaos.add_argument(
        "--injector",
        choices=["nemesis", "launcher"],
        default="nemesis",
        help="who sends the signals: a separate nemesis process (default) or the launcher itself",
    )
    chaos.set_defaults(func=_chaos)

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
    nemesis.set_defaults(func=_nemesis)

    # main() re-executes `simulate` with an exact hash seed before its handler runs.
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
    simulate.set_defaults(func=_simulate)


def _chaos(args: argparse.Namespace) -> int:
    from semiactive.campaigns.chaos import run_chaos
    from semiactive.launcher.manifest import parse_tags

    out = args.out or dated_dir("chaos")
    tags = parse_tags(args.tag)
    return run_chaos(
        args.config,
        runs=args.runs,
        seed=args.seed,
        duration=args.duration,
        out_dir=out,
        both_replicas=args.both_replicas,
        ends=args.ends,
        injector=args.injector,
        tags=tags,
    )


def _nemesis(args: argparse.Namespace) -> int:
    from semiactive.campaigns.nemesis import NemesisError, run_nemesis

    try:
        return run_nemesis(args.run_dir, kills=args.kill, stops=args.stop, plan_file=args.plan)
    except NemesisError as exc:
        print(f"semiactive nemesis: {exc}", file=sys.stderr)
        return 1


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
