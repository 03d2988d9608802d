"""``bench/recursion.py --campaign DIR`` on a tiny input: the campaign it
writes against docs/telemetry.md (``engine-<process>.jsonl``), and the
perf_event_open group that counts L1 data cache misses where the CPU has
counters (exercised here with software events, which every Linux kernel has)."""

from __future__ import annotations

import json
import mmap
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from semiactive.analytics.runs import discover
from tests.processes import bench_module

ROOT = Path(__file__).resolve().parents[2]
TUPLES = 1000
REPEAT = 2
SUBQUERIES = [1]
PER_TS = [1, 4]
# docs/telemetry.md, engine-<process>.jsonl: record fields and their types.
RECORD: dict[str, type | tuple[type, ...]] = {
    "t": float,
    "node": str,
    "form": str,
    "executor": str,
    "hb_bound": (int, type(None)),
    "subqueries": int,
    "per_ts": int,
    "tuples": int,
    "cpu_s": float,
    "wall_s": float,
    "tuples_per_s": float,
    "l1_dcache_misses": (int, type(None)),
    "l1_dcache_loads": (int, type(None)),
}
PARAMS = ("form", "executor", "hb_bound", "subqueries", "per_ts", "tuples")
CELLS = [("recursive", "dts", None), ("open", "dts", None), ("open", "dts-1ms", None)] + [
    ("open", "hb", bound) for bound in (10, 20, 100, 1000)
]


def _bench() -> ModuleType:
    return bench_module("recursion")


def _doc_section() -> str:
    text = (ROOT / "docs" / "telemetry.md").read_text()
    return text[text.index("## `engine-<process>.jsonl`") :]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("engine") / "campaign"
    argv = ["--tuples", str(TUPLES), "--repeat", str(REPEAT), "--campaign", str(directory)]
    argv += ["--subqueries", *map(str, SUBQUERIES), "--per-ts", *map(str, PER_TS)]
    assert _bench().main(argv) == 0
    return directory


def _json(path: Path) -> dict[str, Any]:
    value = json.loads(path.read_text())
    assert isinstance(value, dict)
    return value


def test_the_documented_fields_are_the_ones_checked() -> None:
    section = _doc_section()
    documented = set(re.findall(r"`([a-z_0-9]+)`", section))
    assert set(RECORD) <= documented
    assert set(PARAMS) <= documented


def test_the_campaign_manifest_lists_one_run_per_cell(campaign: Path) -> None:
    manifest = _json(campaign / "manifest.json")
    assert manifest["campaign"] == campaign.name
    assert manifest["kind"] == "engine"
    assert isinstance(manifest["created_unix"], float)
    assert isinstance(manifest["params"], dict)
    assert manifest["params"]["tuples"] == TUPLES and manifest["params"]["repeat"] == REPEAT
    assert "hb_bound" not in manifest["params"]  # a run's null hb_bound must not fall back to it
    runs = manifest["runs"]
    assert len(runs) == len(set(runs)) == len(CELLS) * len(SUBQUERIES) * len(PER_TS)
    assert sorted(runs) == sorted(p.name for p in campaign.iterdir() if p.is_dir())
    cells = set()
    for name in runs:
        run = _json(campaign / name / "manifest.json")
        assert run["run"] == name and run["campaign"] == campaign.name and run["kind"] == "engine"
        assert isinstance(run["created_unix"], float) and isinstance(run["config"], str)
        params = run["params"]
        assert tuple(params) == PARAMS
        assert params["tuples"] == TUPLES
        cells.add(tuple(params[k] for k in PARAMS))
    assert cells == {(*c, q, ts, TUPLES) for c in CELLS for q in SUBQUERIES for ts in PER_TS}


def test_every_run_has_one_record_per_repetition(campaign: Path) -> None:
    counted = set()
    for name in _json(campaign / "manifest.json")["runs"]:
        params = _json(campaign / name / "manifest.json")["params"]
        files = list((campaign / name / "telemetry").iterdir())
        assert [f.name for f in files] == ["engine-bench.jsonl"]
        records = [json.loads(line) for line in files[0].read_text().splitlines()]
        assert len(records) == REPEAT
        for record in records:
            assert list(record) == list(RECORD)
            for field, kind in RECORD.items():
                value = record[field]
                assert isinstance(value, kind) and not isinstance(value, bool), (name, field, value)
            assert record["node"] == "bench"
            assert {k: record[k] for k in PARAMS} == params
            assert record["form"] in ("recursive", "open")
            assert record["executor"] in ("dts", "dts-1ms", "hb")
            assert (record["hb_bound"] is not None) == (record["executor"] == "hb")
            assert record["cpu_s"] > 0 and record["wall_s"] > 0
            assert record["tuples_per_s"] == pytest.approx(TUPLES / record["cpu_s"])
            misses, loads = record["l1_dcache_misses"], record["l1_dcache_loads"]
            assert (misses is None) == (loads is None)
            counted.add(loads is not None)
            if loads is not None:
                assert 0 <= misses <= loads and loads > 0
        assert records[0]["t"] <= records[1]["t"]
    # Never counted where the manifest says the machine has no counters.
    hardware = _json(campaign / "manifest.json")["params"]["hardware_counters"]
    if hardware.startswith("unavailable"):
        assert counted == {False}


def test_the_report_finds_every_run(campaign: Path) -> None:
    runs = discover([campaign])
    assert len(runs) == len(CELLS) * len(SUBQUERIES) * len(PER_TS)
    for run in runs:
        assert run.kind == "engine" and run.campaign == campaign.name
        assert [f.name for f in run.files("engine")] == ["engine-bench.jsonl"]


def test_a_campaign_directory_in_use_is_refused(campaign: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        _bench().main(["--tuples", "10", "--campaign", str(campaign)])
    assert exit_.value.code == 2


def test_a_perf_event_group_counts_this_thread() -> None:
    bench = _bench()
    events = [
        (bench.PERF_TYPE_SOFTWARE, bench.PERF_COUNT_SW_TASK_CLOCK),
        (bench.PERF_TYPE_SOFTWARE, bench.PERF_COUNT_SW_PAGE_FAULTS),
    ]
    try:
        group = bench.PerfGroup(events)
    except OSError as e:
        pytest.skip(f"perf_event_open refused even software events here: {e}")
    try:
        # 2048 pages of a fresh anonymous mapping, each faulted in when
        # written. (A bytes object of that size may come from heap pages
        # already faulted in: glibc raises its mmap threshold after an
        # earlier test in this process frees a large block.)
        pages = 2048
        touched = mmap.mmap(-1, pages * mmap.PAGESIZE)
        group.start()
        for page in range(pages):
            touched[page * mmap.PAGESIZE] = 1
        counts = group.stop()
        touched.close()
        assert counts is not None
        nanoseconds, faults = counts
        assert nanoseconds > 0 and faults >= pages // 2
        group.start()
        again = group.stop()
        assert again is not None and again[1] < faults  # reset by start()
    finally:
        group.close()
    assert group.fds == []


def test_l1_counters_are_a_group_or_a_reason() -> None:
    group, how = _bench().l1_counters()
    if group is None:
        assert how.startswith("unavailable: ")
    else:
        group.close()
        assert "L1-dcache" in how
