"""``semiactive experiment sweep``: seed 002's experiments 1 and 2.

For every mode (AS, UB, and SAS at each batch size) and repetition: run the
cluster with the protected stages set to that mode, kill the target node
(node-2 by default) at a fixed time, check the sink against the reference,
and record bandwidth overhead (backup bytes / main bytes into the protected
stage, definition 1), detection time, recovery time (definition 2) and the
sink's output gap. Writes ``sweep.csv`` and prints a table of means. The
coordinator does not re-protect during these runs, as in the paper.
"""

from __future__ import annotations

import asyncio
import csv
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from coordinator.faults import Fault, FaultKind
from coordinator.launcher import run_cluster
from coordinator.report import RunReport
from coordinator.verify import check_run
from semiactive import config, topology
from semiactive.config import ConfigError


@dataclass
class Trial:
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


def run_sweep(
    config_path: str,
    modes: list[str],
    batch_sizes: list[int],
    repeat: int,
    kill: str,
    duration: float,
    out_dir: Path,
) -> int:
    base = yaml.safe_load(Path(config_path).read_text())
    node, _, at = kill.partition("@")
    if not at:
        raise ConfigError(f"--kill {kill!r}: expected NODE@SECONDS")
    out_dir.mkdir(parents=True, exist_ok=True)
    trials: list[Trial] = []
    plan = settings(modes, batch_sizes)
    total = len(plan) * repeat
    started = time.monotonic()
    interrupted = False
    for mode, batch in plan:
        if interrupted:
            break
        cfg_path = out_dir / f"config-{mode}{batch or ''}.yaml"
        cfg_path.write_text(yaml.safe_dump(variant(base, mode, batch), sort_keys=False))
        topo = topology.resolve(config.load(cfg_path))
        if node not in topo.nodes:
            raise ConfigError(f"--kill {kill!r}: no node named {node!r}")
        for r in range(repeat):
            run_dir = out_dir / f"run-{mode}{batch or ''}-{r}"
            reports: list[RunReport] = []
            fault = Fault(node, float(at), FaultKind.KILL)
            try:
                code = asyncio.run(
                    run_cluster(
                        str(cfg_path),
                        duration,
                        run_dir,
                        [],
                        [],
                        progress=False,
                        faults=[fault],
                        report_to=reports,
                        reprotect=False,
                    )
                )
                if reports and reports[0].interrupted:
                    raise KeyboardInterrupt
                checks = check_run(topo, run_dir)
            except KeyboardInterrupt:
                print("interrupted: the sweep stops here", file=sys.stderr)
                interrupted = True
                break
            trial = _trial(mode, batch, r, reports[0], checks, code, topo.nodes[node].stage)
            trials.append(trial)
            done = len(trials)
            eta = (time.monotonic() - started) / done * (total - done)
            print(
                f"[{done}/{total}] {mode}{'' if batch is None else f' B={batch}'} #{r}: "
                f"overhead {_pct(trial.overhead)}, recovery {_ms(trial.recovery_ms)}, "
                f"identical {trial.identical}  (about {eta:.0f} s left)",
                file=sys.stderr,
            )
    _write_csv(out_dir / "sweep.csv", trials)
    print(table(trials))
    print(f"\nCSV: {out_dir / 'sweep.csv'}")
    if interrupted:
        return 130
    return 0 if all(t.identical for t in trials) else 1


def _trial(
    mode: str,
    batch: int | None,
    repeat: int,
    report: RunReport,
    checks: list[Any],
    code: int,
    killed_stage: str | None,
) -> Trial:
    """One run's figures. The bandwidth is that of the stage whose node was
    killed; a run counts as identical only if its cluster exited 0, its
    coordinator never failed, and every sink equals a non-empty reference."""
    bandwidth = next((b for b in report.bandwidth if b.stage == killed_stage), None)
    fault = report.faults[0] if report.faults else None
    return Trial(
        mode=mode,
        batch_size=batch,
        repeat=repeat,
        identical=code == 0 and not report.coordinator_errors and all(c.ok for c in checks),
        overhead=bandwidth.overhead if bandwidth else None,
        detection_ms=fault.detection_ms if fault else None,
        recovery_ms=fault.recovery_ms if fault else None,
        sink_gap_ms=fault.sink_gap_ms if fault else None,
        backup_bytes=bandwidth.backup_bytes if bandwidth else 0,
        main_bytes=bandwidth.main_bytes if bandwidth else 0,
    )


def _write_csv(path: Path, trials: list[Trial]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(asdict(trials[0])))
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


def table(trials: list[Trial]) -> str:
    rows = ["mode       overhead   detection   recovery   sink gap   identical"]
    keys: list[tuple[str, int | None]] = []
    for t in trials:
        if (t.mode, t.batch_size) not in keys:
            keys.append((t.mode, t.batch_size))
    for mode, batch in keys:
        group = [t for t in trials if (t.mode, t.batch_size) == (mode, batch)]
        label = mode.upper() if batch is None else f"SAS B={batch}"
        rows.append(
            f"{label:<10} {_pct(_mean([t.overhead for t in group])):>8}   "
            f"{_ms(_mean([t.detection_ms for t in group])):>9}   "
            f"{_ms(_mean([t.recovery_ms for t in group])):>8}   "
            f"{_ms(_mean([t.sink_gap_ms for t in group])):>8}   {all(t.identical for t in group)}"
        )
    return "\n".join(rows)
