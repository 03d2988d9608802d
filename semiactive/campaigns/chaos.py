"""``semiactive chaos``: randomised failures, every run checked exactly.

The faults come from the nemesis (:mod:`semiactive.campaigns.nemesis`), a separate
process that knows only ``cluster.json``: the launcher is not told of them
and learns of each one by observing it, as of a real failure. (``--injector
launcher`` has the launcher inject them itself, as the campaigns before the
nemesis did, for comparison.) Each run kills or freezes (SIGSTOP, then SIGCONT) replicas of protected
stages at random moments: single faults, bursts a few milliseconds apart,
and a second failure in a neighbouring stage while the first one is still
recovering. Two faults on the same stage are at least ``SAME_STAGE_GAP_S``
apart: the stage is usually re-protected in between; when spares run out it
may not be, and the coordinator then rebuilds it from its producers'
retained logs (docs/ha.md, "Both replicas lost"). With ``both_replicas``
a quarter of the faults kill both replicas of a stage together (beyond the
single-failure model; off by default, so that a seed's plans stay those of
earlier campaigns). With ``ends`` about a third of the faults kill a source
or sink that is started again as itself (a file or generator source, a
table or NATS sink) instead. After each run the
sinks are compared with the failure-free reference; the summary counts lost,
duplicated and wrong rows, and the command fails if there is any.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from semiactive import config, topology
from semiactive.campaigns.nemesis import write_plan
from semiactive.config import ConfigError
from semiactive.launcher.cluster import run_cluster
from semiactive.launcher.faults import Fault, FaultKind
from semiactive.launcher.manifest import Campaign
from semiactive.launcher.measurements import RunReport
from semiactive.oracle.verify import check_run
from semiactive.topology import Topology

SAME_STAGE_GAP_S = 2.5
KILL = FaultKind.KILL
INJECTORS = ("nemesis", "launcher")


def restartable_ends(topo: Topology) -> list[str]:
    """The processes of the sources and sinks a kill does not stop: started
    again as themselves (a standby's too, which may be serving by then)."""
    out = []
    for stage in topo.stages.values():
        if (stage.source is not None and stage.source.restartable) or (
            stage.sink is not None and stage.sink.durable
        ):
            out.extend(stage.replicas)
    return out


def plan(
    rnd: random.Random, topo: Topology, duration: float, both_replicas: bool = False, ends: bool = False
) -> list[Fault]:
    protected = [s for s in topo.stages.values() if s.config is not None and s.config.ha.mode != "none"]
    if not protected:
        raise ConfigError("chaos needs at least one protected stage (an ha: section with a secondary)")
    end_nodes = restartable_ends(topo) if ends else []
    if ends and not end_nodes:
        raise ConfigError("--ends: no source or sink here is started again after a kill")
    order = [s.name for s in topo.stages.values() if s.role == "stage"]
    faults: list[Fault] = []
    last_on_stage: dict[str, float] = {}
    t = rnd.uniform(0.8, 1.5)
    for _ in range(rnd.randint(1, 3)):
        if end_nodes and rnd.random() < 0.35:
            end = rnd.choice(end_nodes)
            t = max(t, last_on_stage.get(end, -1e9) + SAME_STAGE_GAP_S)
            if t > duration - 1.0:
                break
            faults.append(Fault(end, round(t, 3), KILL))
            last_on_stage[end] = t
            t += rnd.uniform(0.3, 1.5)
            continue
        stage = rnd.choice(protected)
        if t - last_on_stage.get(stage.name, -1e9) < SAME_STAGE_GAP_S:
            t = last_on_stage[stage.name] + SAME_STAGE_GAP_S
        if t > duration - 1.0:
            break
        node = rnd.choice(stage.replicas)
        if both_replicas and rnd.random() < 0.25:
            gap = rnd.choice([0.0, 0.005, 0.05, 0.3])
            first, second = rnd.sample(stage.replicas, 2)
            faults += [Fault(first, round(t, 3), KILL), Fault(second, round(t + gap, 3), KILL)]
            last_on_stage[stage.name] = t + gap
            t += rnd.uniform(0.3, 1.5)
            continue
        if rnd.random() < 0.7:
            faults.append(Fault(node, round(t, 3), KILL))
        else:
            faults.append(Fault(node, round(t, 3), FaultKind.STOP, round(rnd.uniform(0.4, 1.5), 3)))
        last_on_stage[stage.name] = t
        pattern = rnd.random()
        neighbours = [n for n in protected if abs(order.index(n.name) - order.index(stage.name)) == 1]
        if pattern < 0.35 and neighbours:
            # A failure in a neighbouring stage during this one's recovery
            # (or a burst, when the gap is a few ms).
            other = rnd.choice(neighbours)
            if t - last_on_stage.get(other.name, -1e9) >= SAME_STAGE_GAP_S:
                gap = rnd.choice([0.005, 0.02, 0.05, 0.15, 0.3])
                faults.append(Fault(rnd.choice(other.replicas), round(t + gap, 3), KILL))
                last_on_stage[other.name] = t + gap
        t += rnd.uniform(0.3, 1.5)
    return faults


def run_chaos(
    config_path: str,
    *,
    runs: int,
    seed: int,
    duration: float,
    out_dir: Path,
    both_replicas: bool = False,
    ends: bool = False,
    injector: str = "nemesis",
    tags: dict[str, str] | None = None,
) -> int:
    """``tags``: labels for the report job, in every run's manifest."""
    if injector not in INJECTORS:
        raise ConfigError(f"--injector {injector!r}: expected one of {', '.join(INJECTORS)}")
    topo = topology.resolve(config.load(config_path))
    rnd = random.Random(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    params = {"config": str(Path(config_path).resolve()), "runs": runs, "seed": seed, "duration_s": duration}
    params |= {"both_replicas": both_replicas, "ends": ends, "injector": injector}
    campaign = Campaign(out_dir, "chaos", params, tags)
    lost = duplicated = wrong = failed = injected = crashed = 0
    recoveries: list[float] = []
    detections: list[float] = []
    started = time.monotonic()
    done = 0
    for i in range(runs):
        faults = plan(rnd, topo, duration, both_replicas, ends)
        # The directory's name is the run's name in a table or subject a
        # durable sink writes: one campaign's must not be another's.
        run_dir = out_dir / f"{out_dir.name}-{i:04d}"
        reports: list[RunReport] = []
        try:
            code = _one_run(config_path, duration, run_dir, faults, injector, reports)
            if reports and reports[0].interrupted:
                raise KeyboardInterrupt
            checks = check_run(topo, run_dir)
        except KeyboardInterrupt:
            print("interrupted: the campaign stops here", file=sys.stderr)
            break
        except Exception as exc:  # a run that cannot be judged is a failed run, not the campaign's end
            print(f"[{i + 1}/{runs}] FAILED: the run could not be judged: {exc!r}", file=sys.stderr)
            done += 1
            failed += 1
            continue
        done += 1
        faults_planned = [f.record() for f in faults]
        campaign.add(run_dir, config_path, {"seed": seed, "run_index": i, "faults": faults_planned})
        run_lost = sum(len(c.missing) for c in checks)
        run_dup = sum(len(c.duplicated) for c in checks)
        run_wrong = sum(len(c.wrong) + c.out_of_order for c in checks)
        lost, duplicated, wrong = lost + run_lost, duplicated + run_dup, wrong + run_wrong
        faults_seen = reports[0].faults if reports else []
        # An exit or freeze nobody injected is one of our processes failing on its own.
        run_crashed = sum(f.origin == "observed" for f in faults_seen)
        crashed += run_crashed
        errors = len(reports[0].coordinator_errors) + len(reports[0].losses_noticed) if reports else 0
        run_failed = bool(run_lost or run_dup or run_wrong or code or run_crashed or errors)
        failed += run_failed
        injected += len(faults_seen) - run_crashed
        for f in faults_seen:
            if f.recovery_ms is not None:
                recoveries.append(f.recovery_ms)
            if f.detection_ms is not None:
                detections.append(f.detection_ms)
        what = ", ".join(f.describe() for f in faults)
        verdict = "FAILED" if run_failed else "ok"
        eta = (time.monotonic() - started) / (i + 1) * (runs - i - 1)
        own = f", {run_crashed} exit(s) nobody injected" if run_crashed else ""
        own += f", {errors} coordinator error(s) or noticed loss(es)" if errors else ""
        print(
            f"[{i + 1}/{runs}] {what}: lost {run_lost}, duplicated {run_dup}, wrong {run_wrong}{own}, "
            f"exit {code} -> {verdict}  (about {eta:.0f} s left)",
            file=sys.stderr,
        )
    ran = f"{done}" if done == runs else f"{done} of {runs}"
    print(f"runs: {ran} ({injector}), faults injected: {injected}, failed runs: {failed}")
    print(f"exits and freezes nobody injected: {crashed}")
    print(f"lost: {lost}, duplicated: {duplicated}, wrong or out of order: {wrong}")
    print(f"detection: {_percentiles(detections)}")
    print(f"recovery after detection: {_percentiles(recoveries)}")
    if done < runs:
        return 130
    return 0 if not (lost or duplicated or wrong or failed) else 1


def _one_run(
    config_path: str,
    duration: float,
    run_dir: Path,
    faults: list[Fault],
    injector: str,
    reports: list[RunReport],
) -> int:
    """One run of the campaign; with the nemesis, the launcher gets no fault
    and a separate process injects them."""
    if injector == "launcher":
        return asyncio.run(
            run_cluster(
                config_path,
                duration=duration,
                run_dir=run_dir,
                progress=False,
                faults=faults,
                report_to=reports,
            )
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    plan_file = run_dir / "nemesis-plan.json"
    write_plan(plan_file, faults)
    with (run_dir / "nemesis.log").open("wb") as log:
        nemesis = subprocess.Popen(
            [sys.executable, "-m", "semiactive", "nemesis", str(run_dir), "--plan", str(plan_file)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        code = asyncio.run(
            run_cluster(config_path, duration=duration, run_dir=run_dir, progress=False, report_to=reports)
        )
    finally:
        ended = nemesis.poll() is not None
        if not ended:
            nemesis.terminate()  # resumes what it froze, then exits
        nemesis.wait(timeout=10)
    if ended and nemesis.returncode != 0:
        # Its faults were not injected: the run proved nothing.
        said = (run_dir / "nemesis.log").read_text(errors="replace").strip()
        print(f"the nemesis failed (exit {nemesis.returncode}): {said}", file=sys.stderr)
        return code or 1
    return code


def _percentiles(values: list[float]) -> str:
    if not values:
        return "-"
    data = sorted(values)
    p50 = statistics.median(data)
    p99 = data[min(len(data) - 1, int(0.99 * len(data)))]
    return f"p50 {p50:.1f} ms, p99 {p99:.1f} ms (n={len(data)})"
