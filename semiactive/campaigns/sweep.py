"""``semiactive experiment sweep``: the SAS paper's experiments 1, 2 and 3.

For every mode (AS, UB, and SAS at each batch size) and repetition: run the
cluster with the protected stages set to that mode, kill the target node
(node-2 by default) at a fixed time, check the sink against the reference,
and record bandwidth overhead (backup bytes / main bytes into the protected
stage, definition 1), detection time, recovery time (definition 2) and the
sink's output gap. Writes ``sweep.csv`` and prints a table of means. The
coordinator does not re-protect during these runs, as in the paper.

Experiment 3 repeats the sweep under background network load: for each
level of ``network_loads`` (bytes/s; 0 is the plain run on loopback) the
nodes run in a :class:`semiactive.launcher.netlab.NetworkLab`, and an iperf3 flow at
that rate runs through every run from the node feeding the killed stage to
the stage's other replica, on the links of the main edge, the backup edge
and the replay after the failure. The levels take turns run by run.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import itertools
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from semiactive import config, topology
from semiactive.config import ConfigError
from semiactive.launcher.cluster import run_cluster
from semiactive.launcher.faults import Fault, FaultKind
from semiactive.launcher.manifest import Campaign
from semiactive.launcher.measurements import RunReport
from semiactive.launcher.netlab import NetworkLab
from semiactive.oracle.verify import check_run


@dataclass
class Trial:
    network_load_bytes_per_s: float
    mode: str
    batch_size: int | None
    repeat: int
    identical: bool
    overhead: float | None
    detection_ms: float | None
    recovery_ms: float | None
    sink_gap_ms: float | None
    backup_bytes: int
    main_bytes: int
    achieved_load_bytes_per_s: float | None = None  # what iperf3 really sent


def variant(base: dict[str, Any], mode: str, batch: int | None) -> dict[str, Any]:
    """The config with every protected stage switched to ``mode``."""
    cfg: dict[str, Any] = yaml.safe_load(yaml.safe_dump(base))
    protected = [s for s in cfg.get("stages", []) if s.get("ha", {}).get("mode", "none") != "none"]
    if not protected:
        raise ConfigError("the config protects no stage (give one stage an ha: section)")
    for stage in protected:
        stage["ha"]["mode"] = mode
        if batch is not None:
            stage["ha"]["batch_size"] = batch
    return cfg


def settings(modes: list[str], batch_sizes: list[int]) -> list[tuple[str, int | None]]:
    out: list[tuple[str, int | None]] = []
    for mode in modes:
        if mode == "sas":
            out += [("sas", b) for b in batch_sizes]
        elif mode in ("as", "ub"):
            out.append((mode, None))
        else:
            raise ConfigError(f"--modes: unknown mode {mode!r} (as, ub, sas)")
    return out


def load_path(topo: topology.Topology, node: str) -> tuple[str, str]:
    """Where experiment 3's load flows when ``node`` is killed: from the
    primary feeding its stage to the stage's other replica."""
    stage = topo.stage_of(node)
    if stage is None or len(stage.replicas) < 2 or not stage.inputs:
        raise ConfigError(f"--network-load: {node} is not a replica of a protected stage with an input")
    other = next(r for r in stage.replicas if r != node)
    return topo.stages[stage.inputs[0].producer].primary, other


def run_sweep(
    config_path: str,
    *,
    modes: list[str],
    batch_sizes: list[int],
    repeat: int,
    kill: str,
    duration: float,
    out_dir: Path,
    network_loads: Sequence[float] = (0.0,),
    tags: dict[str, str] | None = None,
) -> int:
    """``tags``: labels for the report job, in every run's manifest."""
    base = yaml.safe_load(Path(config_path).read_text())
    node, _, at = kill.partition("@")
    if not at:
        raise ConfigError(f"--kill {kill!r}: expected NODE@SECONDS")
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = settings(modes, batch_sizes)
    configs: dict[tuple[str, int | None], tuple[Path, topology.Topology]] = {}
    for mode, batch in plan:
        cfg_path = out_dir / f"config-{mode}{batch or ''}.yaml"
        cfg_path.write_text(yaml.safe_dump(variant(base, mode, batch), sort_keys=False))
        topo = topology.resolve(config.load(cfg_path))
        if node not in topo.nodes:
            raise ConfigError(f"--kill {kill!r}: no node named {node!r}")
        configs[mode, batch] = cfg_path, topo
    path = ("", "")
    if any(load > 0 for load in network_loads):
        path = load_path(topo, node)
        reason = NetworkLab.why_unavailable()
        if reason is not None:
            print(f"semiactive: --network-load: {reason}", file=sys.stderr)
            return 2
    params = {"config": config_path, "modes": modes, "batch_sizes": batch_sizes, "repeat": repeat}
    campaign = Campaign(out_dir, "sweep", params | {"kill": kill, "network_loads": list(network_loads)}, tags)
    trials: list[Trial] = []
    total = len(plan) * repeat * len(network_loads)
    started = time.monotonic()
    interrupted = False
    fault = Fault(node, float(at), FaultKind.KILL)
    try:
        with _network(network_loads, list(topo.nodes)) as lab:
            for (mode, batch), r, load in itertools.product(plan, range(repeat), network_loads):
                level = Level(fault, duration, load, path, lab if load else None)
                cfg_path, run_topo = configs[mode, batch]
                label = f"{mode}{batch or ''}-{r}" + (f"-load{load / 1e6:g}MBps" if load else "")
                run_dir = out_dir / f"run-{label}"
                trial = _run(level, (mode, batch, r), cfg_path, run_topo, run_dir)
                trials.append(trial)
                setting = {"mode": mode, "batch_size": batch, "repeat": r, "network_load_bytes_per_s": load}
                campaign.add(run_dir, str(cfg_path), setting | {"kill": node, "kill_at_s": float(at)})
                done = len(trials)
                eta = (time.monotonic() - started) / done * (total - done)
                print(f"[{done}/{total}] {_describe(trial)}  (about {eta:.0f} s left)", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted: the sweep stops here", file=sys.stderr)
        interrupted = True
    _write_csv(out_dir / "sweep.csv", trials)
    print(table(trials))
    print(f"\nCSV: {out_dir / 'sweep.csv'}")
    if interrupted:
        return 130
    return 0 if all(t.identical for t in trials) else 1


def _network(
    loads: Sequence[float], nodes: list[str]
) -> contextlib.AbstractContextManager[NetworkLab | None]:
    """One lab for every loaded run: the levels take turns run by run, so
    that whatever else loads the machine meanwhile weighs on all alike."""
    return NetworkLab(nodes) if any(load > 0 for load in loads) else contextlib.nullcontext(None)


@dataclass(frozen=True)
class Level:
    """What every run of one load level shares: the fault, the duration,
    and ``load`` bytes/s of iperf3 along ``path`` in ``lab`` (none on loopback)."""

    fault: Fault
    duration: float
    load: float
    path: tuple[str, str]
    lab: NetworkLab | None


def _run(
    level: Level, setting: tuple[str, int | None, int], cfg_path: Path, topo: topology.Topology, run_dir: Path
) -> Trial:
    reports: list[RunReport] = []
    lab = level.lab
    traffic = lab.load(*level.path, level.load) if lab is not None else None
    try:
        code = asyncio.run(
            run_cluster(
                str(cfg_path),
                duration=level.duration,
                run_dir=run_dir,
                progress=False,
                faults=[level.fault],
                report_to=reports,
                reprotect=False,
                network=lab,
            )
        )
    finally:
        achieved = traffic.stop() if traffic is not None else None
    if reports and reports[0].interrupted:
        raise KeyboardInterrupt
    if lab is not None:
        record: dict[str, object] = {"bytes_per_s": level.load, "achieved_bytes_per_s": achieved}
        record |= {"link_rate_bit_s": lab.rate_bit_s, "from": level.path[0], "to": level.path[1]}
        (run_dir / "telemetry" / "network-load.json").write_text(json.dumps(record))
    checks = check_run(topo, run_dir)
    stage = topo.nodes[level.fault.node].stage
    return _trial(*setting, reports[0], checks, code, stage, level.load, achieved)


def _trial(
    mode: str,
    batch: int | None,
    repeat: int,
    report: RunReport,
    checks: list[Any],
    code: int,
    killed_stage: str | None,
    network_load: float = 0.0,
    achieved_load: float | None = None,
) -> Trial:
    """One run's figures. The bandwidth is that of the stage whose node was
    killed; a run counts as identical only if its cluster exited 0, its
    coordinator never failed, and every sink equals a non-empty reference."""
    bandwidth = next((b for b in report.bandwidth if b.stage == killed_stage), None)
    fault = report.faults[0] if report.faults else None
    return Trial(
        network_load_bytes_per_s=network_load,
        mode=mode,
        batch_size=batch,
        repeat=repeat,
        identical=code == 0
        and not (report.coordinator_errors or report.losses_noticed)
        and all(c.ok for c in checks),
        overhead=bandwidth.overhead if bandwidth else None,
        detection_ms=fault.detection_ms if fault else None,
        recovery_ms=fault.recovery_ms if fault else None,
        sink_gap_ms=fault.sink_gap_ms if fault else None,
        backup_bytes=bandwidth.backup_bytes if bandwidth else 0,
        main_bytes=bandwidth.main_bytes if bandwidth else 0,
        achieved_load_bytes_per_s=achieved_load,
    )


def _write_csv(path: Path, trials: list[Trial]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[f.name for f in fields(Trial)])
        writer.writeheader()
        for t in trials:
            writer.writerow(asdict(t))


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} ms"


def _load(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e6:g}MB/s" if bytes_per_s else "0"


def _label(mode: str, batch: int | None) -> str:
    return mode.upper() if batch is None else f"SAS B={batch}"


def _describe(t: Trial) -> str:
    load = ""
    if t.network_load_bytes_per_s:
        achieved = t.achieved_load_bytes_per_s
        sent = "-" if achieved is None else f"{achieved / 1e6:.1f}MB/s"
        load = f"load {_load(t.network_load_bytes_per_s)} (sent {sent}) "
    return (
        f"{load}{_label(t.mode, t.batch_size)} #{t.repeat}: overhead {_pct(t.overhead)}, "
        f"recovery {_ms(t.recovery_ms)}, identical {t.identical}"
    )


def table(trials: list[Trial]) -> str:
    """Means per load level (``network_load_bytes_per_s``), mode and batch size."""
    rows = ["load      mode       overhead   detection   recovery   sink gap   identical"]
    keys: list[tuple[float, str, int | None]] = []
    for t in trials:
        if (t.network_load_bytes_per_s, t.mode, t.batch_size) not in keys:
            keys.append((t.network_load_bytes_per_s, t.mode, t.batch_size))
    keys.sort(key=lambda key: key[0])
    for load, mode, batch in keys:
        group = [
            t for t in trials if (t.network_load_bytes_per_s, t.mode, t.batch_size) == (load, mode, batch)
        ]
        rows.append(
            f"{_load(load):<9} {_label(mode, batch):<10} {_pct(_mean([t.overhead for t in group])):>8}   "
            f"{_ms(_mean([t.detection_ms for t in group])):>9}   "
            f"{_ms(_mean([t.recovery_ms for t in group])):>8}   "
            f"{_ms(_mean([t.sink_gap_ms for t in group])):>8}   {all(t.identical for t in group)}"
        )
    return "\n".join(rows)
