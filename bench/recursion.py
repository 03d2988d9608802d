"""Seed 001, Figs. 8 and 10 on semiactive's engine: the Fig. 7 query (running
averages per id through nested loops) over N input tuples, with 1, 2 and 4
sub-queries, timestamps all distinct or 4 tuples per timestamp.

    python bench/recursion.py [--tuples 2000000] [--subqueries 1 2 4] [--per-ts 1 4] [--campaign DIR]

Columns (input tuples per second of CPU time of this process, so that other
load on the machine skews the figures less; best of --repeat runs):

- ``recursive DTS``: examples/fig7-N.cql, the loops closed. A recursive
  program runs one instant per slice (its cut delays are 1 ms): the strict
  per-timestamp DTS of the paper.
- ``open DTS``: examples/fig7-N-open.cql, the loops opened, each fed-back
  stream replaced by a DUMMY input carrying the series the recursive run fed
  back (recorded during that run), so every operator does the same work
  (section 4.1). Our DTS runs an acyclic program in one wide slice per
  advance (each operator still finishes instant t before t+1 internally);
- ``open DTS 1ms``: the same with ``max_slice_ms=1``, strict per-timestamp
  DTS as in the paper's Fig. 8 (the fair comparison with the paper);
- ``HB 10`` ... ``HB 1000``: the open form on the heartbeat executor, with
  that bound on one operator's consecutive run (Fig. 8's x axis).

Inputs are pushed in batches of --batch tuples with a watermark after each
(DUMMY tuples up to the same watermark). Tuples/s counts the N tuples of
``input`` only (as the paper does), although the open form also reads the
DUMMY tuples. Every run's output (all_avg_delay) is checked to be the
recursive run's. The goals of issue 4 are evaluated at the end.

``--campaign DIR`` also writes DIR as a campaign of kind ``engine`` for the
report job (docs/telemetry.md, ``engine-<process>.jsonl``): ``manifest.json``
listing the runs, and one run directory per cell, i.e. per (form, executor,
HB bound, sub-queries, tuples per timestamp), named like
``open-hb100-q2-ts4``, with its ``manifest.json`` (``params``: ``form``,
``executor``, ``hb_bound``, ``subqueries``, ``per_ts``, ``tuples``) and
``telemetry/engine-bench.jsonl``, one record per repetition (written once
the cell's output has been checked). DIR must not exist or be empty.

Seed 001's Fig. 9 (L1 data cache miss rate) needs the CPU's performance
counters: with ``--campaign`` every repetition counts L1 data cache read
accesses and misses of the timed loop (the same interval as its CPU time),
the events ``perf stat -e L1-dcache-loads,L1-dcache-load-misses`` counts,
through ``perf_event_open(2)`` in this process (the system call ``perf``
itself makes, so ``perf`` need not be installed). Where the machine exposes
no hardware counters, as in most virtual machines (no
``/sys/bus/event_source/devices/cpu``; the system call fails with ENOENT
and ``perf stat`` says ``<not supported>``), ``l1_dcache_misses`` and
``l1_dcache_loads`` are null, the campaign's manifest says why
(``params.hardware_counters``), and so does the output. They are never
estimated.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import os
import platform
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from semiactive.launcher.manifest import Campaign
from semiactive.node.cql import compile_program
from semiactive.node.cql.examples import fig7, fig7_open
from semiactive.node.engine.elements import Element
from semiactive.node.engine.engine import Engine
from semiactive.node.engine.heartbeat import HeartbeatEngine

RUN_LIMITS = (10, 20, 100, 1000)
SETTLE_MS = 5  # Fig. 7's loops settle within 3 ms of the last input
ROOT = Path(__file__).resolve().parents[1]

Runner = Engine | HeartbeatEngine

# -- hardware counters: perf_event_open(2) --------------------------------------------------

PERF_TYPE_SOFTWARE = 1
PERF_TYPE_HW_CACHE = 3
# PERF_TYPE_HW_CACHE config: cache | operation << 8 | result << 16.
L1D_READ_ACCESS = 0 | 0 << 8 | 0 << 16  # L1D, read, access: perf's L1-dcache-loads
L1D_READ_MISS = 0 | 0 << 8 | 1 << 16  # L1D, read, miss: perf's L1-dcache-load-misses
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_COUNT_SW_PAGE_FAULTS = 2
_SYSCALL = {"x86_64": 298, "amd64": 298, "aarch64": 241, "arm64": 241, "riscv64": 241}
_ATTR_SIZE = 64  # PERF_ATTR_SIZE_VER0: type, size, config, ..., bp_addr
_DISABLED, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6
# PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_GROUP
_READ_FORMAT = 1 | 2 | 8
_IOC_ENABLE, _IOC_DISABLE, _IOC_RESET, _IOC_FLAG_GROUP = 0x2400, 0x2401, 0x2403, 1


class PerfGroup:
    """A group of perf events counting the calling thread (the engine runs
    in it alone), scheduled together so that their ratios hold even when the
    kernel multiplexes them; counts are scaled by enabled / running time as
    ``perf stat`` does. Raises :class:`OSError` when the kernel refuses an
    event (ENOENT or EOPNOTSUPP: no such counter on this machine)."""

    def __init__(self, events: Sequence[tuple[int, int]]) -> None:
        number = _SYSCALL.get(platform.machine().lower())
        if number is None or not sys.platform.startswith("linux"):
            raise OSError(errno.ENOSYS, f"perf_event_open: not known on {sys.platform} {platform.machine()}")
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._syscall = number
        self.fds: list[int] = []
        try:
            try:
                self._open(events, _EXCLUDE_HV)
            except PermissionError:  # perf_event_paranoid >= 2 and not root: user space only
                self._open(events, _EXCLUDE_HV | _EXCLUDE_KERNEL)
        except BaseException:
            self.close()
            raise

    def _open(self, events: Sequence[tuple[int, int]], exclude: int) -> None:
        self.close()
        for kind, config in events:
            leader = self.fds[0] if self.fds else -1
            flags = exclude | (_DISABLED if leader == -1 else 0)
            attr = struct.pack("=IIQQQQQIIQ", kind, _ATTR_SIZE, config, 0, 0, _READ_FORMAT, flags, 0, 0, 0)
            buffer = ctypes.create_string_buffer(attr, _ATTR_SIZE)
            fd = self._libc.syscall(
                ctypes.c_long(self._syscall),
                buffer,
                ctypes.c_long(0),  # pid: this thread
                ctypes.c_long(-1),  # cpu: any
                ctypes.c_long(leader),
                ctypes.c_ulong(0),
            )
            if fd < 0:
                code = ctypes.get_errno()
                raise OSError(code, f"perf_event_open(type {kind}, config {config:#x}): {os.strerror(code)}")
            self.fds.append(fd)

    def _ioctl(self, request: int) -> None:
        if self._libc.ioctl(
            ctypes.c_int(self.fds[0]), ctypes.c_ulong(request), ctypes.c_ulong(_IOC_FLAG_GROUP)
        ):
            code = ctypes.get_errno()
            raise OSError(code, f"perf event ioctl {request:#x}: {os.strerror(code)}")

    def start(self) -> None:
        self._ioctl(_IOC_RESET)
        self._ioctl(_IOC_ENABLE)

    def stop(self) -> list[int] | None:
        """The counts since :meth:`start`, in the order of the events; None
        if the kernel never scheduled the group."""
        self._ioctl(_IOC_DISABLE)
        n = len(self.fds)
        data = os.read(self.fds[0], 8 * (3 + n))
        nr, enabled, running, *values = struct.unpack(f"={3 + n}Q", data)
        if nr != n or running == 0:
            return None
        return [round(v * enabled / running) if running < enabled else v for v in values]

    def close(self) -> None:
        for fd in reversed(self.fds):
            os.close(fd)
        self.fds = []


def l1_counters() -> tuple[PerfGroup | None, str]:
    """L1 data cache read (misses, accesses), or None and why not."""
    try:
        return PerfGroup([(PERF_TYPE_HW_CACHE, L1D_READ_MISS), (PERF_TYPE_HW_CACHE, L1D_READ_ACCESS)]), (
            "perf_event_open: L1-dcache-load-misses, L1-dcache-loads"
        )
    except OSError as e:
        name = errno.errorcode.get(e.errno or 0, str(e.errno))
        why = f"unavailable: {e.strerror} ({name})"
        if not Path("/sys/bus/event_source/devices/cpu").exists():
            why += "; the kernel exposes no CPU PMU (/sys/bus/event_source/devices/cpu), as in most VMs"
        return None, why


# -- the benchmark ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One repetition of one cell: the timed loop's CPU and wall seconds and
    its L1 data cache read (misses, loads), None without counters."""

    t: float
    cpu_s: float
    wall_s: float
    l1: tuple[int, int] | None


def make_input(n: int, per_ts: int) -> list[Element]:
    """The paper's data: id = 0..3 repeating, val counting up from 1."""
    return [(i // per_ts, i + 1, 1, i % 4, i // 4 + 1) for i in range(n)]


def _values(elements: list[Element]) -> list[tuple[Any, ...]]:
    return [(e[0], *e[3:]) for e in elements]


def feed(
    engine: Runner,
    inputs: dict[str, list[Element]],
    n_input: int,
    batch: int,
    end: int,
    counters: PerfGroup | None = None,
) -> tuple[Sample, dict[str, list[Element]]]:
    """Push ``input`` in batches (other inputs up to the same watermark),
    advance after each, then to ``end``. Returns the timed loop's sample
    (CPU seconds, wall seconds, ``counters``' counts) and the outputs."""
    main = inputs["input"]
    cuts = [main[min(i + batch, n_input) - 1][0] for i in range(0, n_input, batch)] + [end]
    plan: list[tuple[dict[str, list[Element]], int]] = []
    start = dict.fromkeys(inputs, 0)
    for cut in cuts:
        pushes = {}
        for name, rows in inputs.items():
            i = start[name]
            j = i
            while j < len(rows) and rows[j][0] <= cut:
                j += 1
            pushes[name] = rows[i:j]
            start[name] = j
        plan.append((pushes, cut))
    outputs: dict[str, list[Element]] = {}
    wall = time.perf_counter()
    started = time.process_time()
    if counters is not None:
        counters.start()
    for pushes, cut in plan:
        for name, rows in pushes.items():
            engine.push(name, rows)
        for name, out in engine.advance(cut).items():
            outputs.setdefault(name, []).extend(out)
    counts = counters.stop() if counters is not None else None
    cpu_s = time.process_time() - started
    wall_s = time.perf_counter() - wall
    l1 = (counts[0], counts[1]) if counts is not None else None
    return Sample(time.time(), cpu_s, wall_s, l1), outputs


def repetitions(
    repeat: int, run: Callable[[], tuple[Sample, dict[str, list[Element]]]]
) -> tuple[list[Sample], dict[str, list[Element]]]:
    """Every repetition's sample and the first one's outputs."""
    samples, outputs = [], None
    for _ in range(repeat):
        sample, out = run()
        samples.append(sample)
        if outputs is None:
            outputs = out
    assert outputs is not None, "--repeat must be at least 1"
    return samples, outputs


Cells = Callable[[str, int, int, int, list[Sample]], None]
"""Told (column, sub-queries, tuples per timestamp, tuples, samples) of
every column once its output has been checked."""


def measure(
    n: int,
    subqueries: int,
    per_ts: int,
    batch: int,
    repeat: int,
    counters: PerfGroup | None = None,
    cells: Cells | None = None,
) -> dict[str, float]:
    """Input tuples/s for every column of one row of the table (best of
    ``repeat``); ``cells`` is told every repetition of every column."""
    rows = make_input(n, per_ts)
    end = rows[-1][0] + SETTLE_MS
    fed_back = ["all_avg_delay", *(f"avg_delay_{i}" for i in range(subqueries))]
    recursive = compile_program(fig7(subqueries))

    def closed() -> tuple[Sample, dict[str, list[Element]]]:
        engine = Engine(recursive, fed_back)
        sample, out = feed(engine, {"input": rows}, n, batch, end, counters)
        assert engine.next_event() is None, "the loops did not settle"
        return sample, out

    samples, series = repetitions(repeat, closed)
    rates = {"recursive DTS": n / min(s.cpu_s for s in samples)}
    if cells is not None:
        cells("recursive DTS", subqueries, per_ts, n, samples)
    expected = _values(series["all_avg_delay"])
    inputs = {"input": rows, "dummy_all": series["all_avg_delay"]}
    inputs.update({f"dummy_{i}": series[f"avg_delay_{i}"] for i in range(subqueries)})
    opened = compile_program(fig7_open(subqueries))
    runners: dict[str, Callable[[], Runner]] = {
        "open DTS": lambda: Engine(opened, ["all_avg_delay"]),
        "open DTS 1ms": lambda: Engine(opened, ["all_avg_delay"], max_slice_ms=1),
    }
    for limit in RUN_LIMITS:
        runners[f"HB {limit}"] = lambda limit=limit: HeartbeatEngine(
            opened, ["all_avg_delay"], run_limit=limit
        )  # type: ignore[misc]
    for column, make in runners.items():
        samples, out = repetitions(
            repeat,
            lambda make=make: feed(make(), inputs, n, batch, end, counters),  # type: ignore[misc]
        )
        assert _values(out["all_avg_delay"]) == expected, f"{column}: output differs from the recursive run"
        rates[column] = n / min(s.cpu_s for s in samples)
        if cells is not None:
            cells(column, subqueries, per_ts, n, samples)
    return rates


# -- the campaign (docs/telemetry.md, engine-<process>.jsonl) ----------------------------------

NODE = "bench"


def cell(column: str) -> tuple[str, str, int | None]:
    """A column of the table as (form, executor, hb_bound)."""
    if column == "recursive DTS":
        return "recursive", "dts", None
    if column == "open DTS":
        return "open", "dts", None
    if column == "open DTS 1ms":
        return "open", "dts-1ms", None
    if column.startswith("HB "):
        return "open", "hb", int(column.removeprefix("HB "))
    raise ValueError(f"unknown column {column!r}")


class EngineCampaign:
    """A campaign directory of kind ``engine``: a run directory per cell,
    its records written once, and the campaign's manifest rewritten after
    each cell (an interrupted campaign describes what it has)."""

    def __init__(self, directory: Path, params: dict[str, Any]) -> None:
        self.campaign = Campaign(directory, "engine", params)
        self.directory = directory

    def add(self, column: str, subqueries: int, per_ts: int, tuples: int, samples: list[Sample]) -> None:
        form, executor, hb_bound = cell(column)
        name = f"{form}-{executor}{hb_bound or ''}-q{subqueries}-ts{per_ts}"
        run = self.directory / name
        params = {
            "form": form,
            "executor": executor,
            "hb_bound": hb_bound,
            "subqueries": subqueries,
            "per_ts": per_ts,
            "tuples": tuples,
        }
        records = [
            {
                "t": s.t,
                "node": NODE,
                **params,
                "cpu_s": s.cpu_s,
                "wall_s": s.wall_s,
                "tuples_per_s": tuples / s.cpu_s,
                "l1_dcache_misses": s.l1[0] if s.l1 is not None else None,
                "l1_dcache_loads": s.l1[1] if s.l1 is not None else None,
            }
            for s in samples
        ]
        (run / "telemetry").mkdir(parents=True, exist_ok=True)
        (run / "telemetry" / f"engine-{NODE}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in records)
        )
        suffix = "" if form == "recursive" else "-open"
        config = f"examples/fig7-{subqueries}{suffix}.cql"
        if not (ROOT / config).is_file():
            config = (
                f"semiactive.node.cql.examples.{'fig7' if form == 'recursive' else 'fig7_open'}({subqueries})"
            )
        self.campaign.add(run, config, params)


# -- the table --------------------------------------------------------------------------------


def _machine() -> str:
    cpu = subprocess.run(
        ["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True
    ).stdout.strip()
    return f"{platform.machine()} {cpu}; python {platform.python_version()}"


def _verdict(value: float, bound: float, text: str) -> str:
    return f"{text} ({'met' if value >= bound else 'NOT met'}: >= {bound:,})"


def goals(table: dict[tuple[int, int], dict[str, float]]) -> list[str]:
    """Issue 4's goals, checked against the measured table."""
    lines = []
    for (subqueries, per_ts), rates in sorted(table.items()):
        hb = max(v for k, v in rates.items() if k.startswith("HB"))
        where = f"{subqueries} sub-quer{'y' if subqueries == 1 else 'ies'}, {per_ts}/ts"
        for column in ("open DTS", "open DTS 1ms"):
            ratio = rates[column] / hb
            lines.append(_verdict(ratio, 0.9, f"{where}: {column} / best HB = {ratio:.2f}"))
        ratio = rates["recursive DTS"] / rates["open DTS 1ms"]
        lines.append(_verdict(ratio, 0.9, f"{where}: recursive DTS / open DTS 1ms = {ratio:.2f}"))
    if (1, 4) in table:
        rate = table[(1, 4)]["recursive DTS"]
        lines.append(_verdict(rate, 250_000, f"1 sub-query, 4/ts: recursive DTS {rate:,.0f} tuples/s"))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tuples", type=int, default=2_000_000, help="input tuples per run (default 2,000,000)"
    )
    parser.add_argument("--subqueries", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--per-ts", type=int, nargs="+", default=[1, 4], help="tuples per timestamp")
    parser.add_argument("--batch", type=int, default=10_000, help="input tuples per push and watermark")
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell; the best counts")
    parser.add_argument(
        "--campaign",
        type=Path,
        metavar="DIR",
        help="also write an engine campaign for the report job (docs/telemetry.md): "
        "a run directory per cell, a record per repetition, L1 data cache counts where the CPU has them",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.tuples < 1 or args.batch < 1:
        parser.error("--repeat, --tuples and --batch must be at least 1")
    if args.campaign is not None and args.campaign.exists() and any(args.campaign.iterdir()):
        parser.error(f"--campaign {args.campaign}: exists and is not empty (its runs would mix with these)")
    machine = _machine()
    print(f"machine: {machine}")
    counters: PerfGroup | None = None
    campaign: EngineCampaign | None = None
    if args.campaign is not None:
        counters, how = l1_counters()
        params = {
            "tuples": args.tuples,
            "subqueries": args.subqueries,
            "per_ts": args.per_ts,
            "batch": args.batch,
            "repeat": args.repeat,
            "machine": machine,
            "hardware_counters": how,
        }
        campaign = EngineCampaign(args.campaign, params)
        print(f"campaign: {args.campaign}; L1 data cache counters: {how}")
    print(f"Fig. 7, {args.tuples:,} input tuples, batches of {args.batch:,}; input tuples/s (CPU time)")
    columns = ["recursive DTS", "open DTS", "open DTS 1ms", *(f"HB {limit}" for limit in RUN_LIMITS)]
    print(f"{'sub-queries':>11} {'ts':>9} " + " ".join(f"{c:>13}" for c in columns))
    table: dict[tuple[int, int], dict[str, float]] = {}
    cells = campaign.add if campaign is not None else None
    try:
        for subqueries in args.subqueries:
            for per_ts in args.per_ts:
                rates = measure(args.tuples, subqueries, per_ts, args.batch, args.repeat, counters, cells)
                table[(subqueries, per_ts)] = rates
                label = "distinct" if per_ts == 1 else f"{per_ts} per ts"
                print(
                    f"{subqueries:>11} {label:>9} " + " ".join(f"{rates[c]:>13,.0f}" for c in columns),
                    flush=True,
                )
    finally:
        if counters is not None:
            counters.close()
    print()
    print("\n".join(goals(table)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
