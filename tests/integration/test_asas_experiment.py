"""``semiactive experiment asas`` (experiments 4 and 5): the per-second
bandwidth and settling figures from byte samples, and a short real run of
the command end to end (rate step moved to 2 s, one kill)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from semiactive import config
from semiactive.campaigns.asas import (
    Sample,
    Setting,
    load_scenario,
    per_second,
    read_samples,
    reversals,
    seconds_over,
    settle_time,
    variant,
)
from semiactive.config import ConfigError
from tests.processes import assert_no_processes, semiactive

EDGE = "select-1->select-2"


def _samples(rates: list[float], batch: int | None = 5, every: float = 0.5) -> list[Sample]:
    """Samples every ``every`` s from t = 0, the backup rate constant
    within each interval."""
    out, total = [Sample(0.0, 0.0, batch)], 0.0
    for i, rate in enumerate(rates, start=1):
        total += rate * every
        out.append(Sample(i * every, total, batch))
    return out


def test_per_second_interpolates_between_samples_and_reports_the_b_in_force() -> None:
    samples = _samples([1000, 3000, 2000, 2000])
    samples[3:] = [Sample(s.t, s.backup_bytes, 300) for s in samples[3:]]
    rows = per_second(samples, 3)
    # second 2 is not covered (samples end at 2.0): left out.
    assert [(k, round(rate), b) for k, rate, b in rows] == [(0, 2000, 5), (1, 2000, 300)]


def test_per_second_skips_seconds_covered_less_than_half_and_scales_partial_ones() -> None:
    samples = [Sample(0.3, 0.0, 1), Sample(0.8, 500.0, 1), Sample(1.4, 1100.0, 1)]
    rows = per_second(samples, 2)
    assert [(k, round(rate)) for k, rate, _ in rows] == [(0, 1000)]  # [0.3, 1) covers 0.7 s


def test_settle_time_is_the_end_of_the_last_interval_over_the_limit() -> None:
    # step at 1.0; over in [1.0, 1.5] and again in [2.0, 2.5], then under.
    samples = _samples([100, 100, 900, 100, 900, 100, 100])
    assert settle_time(samples, 1.0, 500) == pytest.approx(1.5)
    assert seconds_over(samples, 1.0, 500) == pytest.approx(1.0)
    assert settle_time(_samples([100, 100, 100, 100]), 1.0, 500) == 0.0
    assert settle_time(_samples([100, 100, 900, 900]), 1.0, 500) is None  # over at the end
    # An interval straddling the step counts from the step.
    assert settle_time(_samples([100, 900, 100]), 0.7, 500) == pytest.approx(0.3)
    assert seconds_over(_samples([100, 900, 100]), 0.7, 500) == pytest.approx(0.3)


def test_reversals_count_direction_changes_of_b() -> None:
    assert reversals([1, 150, 300, 300, 290]) == 1
    assert reversals([95, 100, 95, 100, 95]) == 3
    assert reversals([1, 5, 10]) == 0
    assert reversals([]) == 0


def test_read_samples_takes_the_edge_backup_channel_and_skips_torn_lines(tmp_path: Path) -> None:
    path = tmp_path / "edges-node-1.jsonl"

    def sample(t: float, edge: str, direction: str, backup: int, batch: int) -> dict[str, object]:
        return {"t": t, "edge": edge, "direction": direction, "backup_bytes": backup, "batch_size": batch}

    lines = [
        sample(100.5, EDGE, "out", 400, 7),
        sample(100.5, "other->x", "out", 5, 1),
        sample(100.5, EDGE, "in", 0, 0),
        sample(101.0, EDGE, "out", 0, 0),
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"t": 101.5, "ed')
    assert read_samples(path, 100.0, EDGE) == [Sample(0.5, 400.0, 7), Sample(1.0, 0.0, None)]


def test_scenarios_and_variants_are_valid_configs(tmp_path: Path) -> None:
    rate = load_scenario("rate", None)
    assert (rate.step_at_s, rate.bw_max, rate.recovery_max_ms) == (10.0, 30_000.0, 80.0)
    cost = load_scenario("cost", 2.5)
    assert (cost.step_at_s, cost.bw_max, cost.recovery_max_ms) == (2.5, 20_000.0, 100.0)
    stage = next(s for s in cost.config["stages"] if s["node"] == "node-2")
    assert stage["cost_schedule"] == [{"at_s": 2.5, "cost_ms": 1.0}]
    assert load_scenario("rate", 3).config["sources"][0]["rate"][1] == {"at_s": 3, "tuples_per_s": 1000}
    for setting in (Setting("asas", "algorithm3"), Setting("as"), Setting("ub")):
        path = tmp_path / f"{setting.mode}.yaml"
        path.write_text(json.dumps(variant(cost.config, setting)))
        ha = next(s for s in config.load(path).model.stages if s.node == "node-2").ha
        assert ha.mode == setting.mode and ha.secondary == "node-4"
        assert setting.mode != "asas" or ha.tuner == "algorithm3"
    with pytest.raises(ConfigError):
        load_scenario("latency", None)


@pytest.mark.slow
def test_the_experiment_writes_both_csvs_and_every_run_is_identical(tmp_path: Path) -> None:
    out = tmp_path / "exp"
    result = semiactive(
        *("experiment", "asas", "--scenario", "rate", "--modes", "asas", "--tuner", "model"),
        *("--kill-times", "3", "--repeat", "1", "--duration", "6", "--step-at", "2", "--out", str(out)),
        timeout=150,
    )
    assert_no_processes(str(out))
    assert result.returncode == 0, result.stderr
    with (out / "bandwidth.csv").open() as handle:
        bandwidth = list(csv.DictReader(handle))
    assert list(bandwidth[0]) == ["mode", "tuner", "repeat", "second", "backup_bytes_per_s", "batch_size"]
    assert [int(r["second"]) for r in bandwidth] == list(range(len(bandwidth)))
    assert len(bandwidth) >= 5
    assert {(r["mode"], r["tuner"], r["repeat"]) for r in bandwidth} == {("asas", "model", "0")}
    # AS before the step (B = 1), B raised by the tuner after it.
    assert bandwidth[0]["batch_size"] == "1" and int(bandwidth[-1]["batch_size"]) > 1
    with (out / "recovery.csv").open() as handle:
        (recovery,) = list(csv.DictReader(handle))
    assert list(recovery) == [
        "mode",
        "tuner",
        "repeat",
        "kill_at_s",
        "detection_ms",
        "recovery_ms",
        "identical",
    ]
    assert (recovery["mode"], recovery["kill_at_s"], recovery["identical"]) == ("asas", "3.0", "True")
    assert float(recovery["recovery_ms"]) > 0
    assert "recovery per kill time" in result.stdout and "asas/model" in result.stdout
    assert "[2/2]" in result.stderr and "left)" in result.stderr
