"""A-SAS tuners: Algorithm 3 as written, the model tuner, and both on a plant."""

from __future__ import annotations

import itertools
import math
import random
from collections import deque
from collections.abc import Callable

import pytest

from semiactive.ha.algorithm3 import Algorithm3Tuner
from semiactive.ha.cost_model import Costs, Measurements
from semiactive.ha.model_tuner import ModelTuner
from semiactive.ha.round_model import RoundModel
from semiactive.ha.tuning import BatchSizeTuner, Branch, Decision, Priority

# -- Algorithm 3 -------------------------------------------------------------
# Numbers exact in binary, so "equal to the limit" is exactly equal:
# BW* = B_send x B x 8 bytes against 1024 B/s; R* = B x 2^-10 s against 128 x 2^-10 s.
TUPLE_BYTES = 8.0
BW_MAX = 1024.0
PER_TUPLE = 2.0**-10  # S_time + R_ptime, ~1 ms
R_MAX = 128 * PER_TUPLE  # 0.125 s


def alg3_measurements(b_send: float, per_tuple: float = PER_TUPLE) -> Measurements:
    costs = Costs(per_tuple / 2, per_tuple / 2)
    return Measurements(b_send, TUPLE_BYTES, 1000.0, 0.3, costs, costs)


def alg3(
    batch_size: int, priority: Priority = Priority.RECOVERY, max_batch_size: int = 10_000
) -> Algorithm3Tuner:
    return Algorithm3Tuner(
        BW_MAX, R_MAX, priority, step=5, initial_batch_size=batch_size, max_batch_size=max_batch_size
    )


@pytest.mark.parametrize(
    ("batch_size", "b_send", "priority", "expected", "branch"),
    [
        # lines 8-9: both hold -> keep
        (50, 1.0, Priority.RECOVERY, 50, Branch.BOTH_HOLD),  # BW 400, R 50/128
        # lines 2-3: only BW over -> + step
        (50, 3.0, Priority.RECOVERY, 55, Branch.BANDWIDTH_OVER),  # BW 1200
        # lines 4-5: only R over -> - step
        (150, 0.0, Priority.RECOVERY, 145, Branch.RECOVERY_OVER),  # R 150/128
        # lines 6-7: both over -> the priority decides
        (150, 1.0, Priority.RECOVERY, 145, Branch.BOTH_OVER),  # BW 1200, R 150/128
        (150, 1.0, Priority.BANDWIDTH, 155, Branch.BOTH_OVER),
        # equality holds: a limit is an inclusive maximum
        (256, 0.5, Priority.RECOVERY, 251, Branch.RECOVERY_OVER),  # BW == 1024, R 256/128
        (128, 2.0, Priority.RECOVERY, 133, Branch.BANDWIDTH_OVER),  # R == limit, BW 2048
        (128, 1.0, Priority.RECOVERY, 128, Branch.BOTH_HOLD),  # BW == 1024, R == limit
        (128, 1.0, Priority.BANDWIDTH, 128, Branch.BOTH_HOLD),
    ],
)
def test_algorithm3_branches(
    batch_size: int, b_send: float, priority: Priority, expected: int, branch: Branch
) -> None:
    tuner = alg3(batch_size, priority)
    m = alg3_measurements(b_send)
    decision = tuner.next(m)
    assert (decision.batch_size, decision.branch, tuner.batch_size) == (expected, branch, expected)
    assert decision.previous_batch_size == batch_size
    assert decision.bandwidth_bytes_per_s == pytest.approx(b_send * batch_size * TUPLE_BYTES)
    assert decision.recovery_s == pytest.approx(batch_size * PER_TUPLE)
    assert decision.changed == (expected != batch_size)


@pytest.mark.parametrize(
    ("batch_size", "b_send", "per_tuple", "max_batch_size", "expected", "branch"),
    [
        (3, 0.0, 0.5, 10_000, 1, Branch.RECOVERY_OVER),  # 3 - 5 -> never below 1
        (1, 0.0, 0.5, 10_000, 1, Branch.RECOVERY_OVER),  # at 1 it stays at 1
        (1, 200.0, 0.5, 10_000, 1, Branch.BOTH_OVER),  # both over, recovery first, still 1
        (50, 3.0, PER_TUPLE, 52, 52, Branch.BANDWIDTH_OVER),  # 50 + 5 -> clipped to the max
        (52, 3.0, PER_TUPLE, 52, 52, Branch.BANDWIDTH_OVER),  # at the max it stays
    ],
)
def test_algorithm3_keeps_b_within_1_and_the_maximum(
    batch_size: int, b_send: float, per_tuple: float, max_batch_size: int, expected: int, branch: Branch
) -> None:
    tuner = alg3(batch_size, max_batch_size=max_batch_size)
    decision = tuner.next(alg3_measurements(b_send, per_tuple))
    assert (decision.batch_size, decision.branch) == (expected, branch)


def test_algorithm3_stopping_is_per_round_not_for_good() -> None:
    tuner = alg3(50)
    assert tuner.next(alg3_measurements(1.0)).branch is Branch.BOTH_HOLD
    assert tuner.next(alg3_measurements(1.0)).branch is Branch.BOTH_HOLD
    assert tuner.next(alg3_measurements(4.0)).batch_size == 55  # the stream changed: adjust again


def test_algorithm3_sees_rows_cut_by_level1_only_through_measured_b_send() -> None:
    # B = 400 at 1000 rows/s: every batch is cut by Level-1 before it fills,
    # B_send = 0, BW* = 0: both hold. Were B_send taken as rate / B, BW*
    # would be rate x bytes = 8000 B/s whatever B, and B would keep growing.
    cut = Measurements(0.0, TUPLE_BYTES, 1000.0, 0.3, Costs(0.0, 0.0))
    as_if_rate_over_b = Measurements(1000.0 / 400, TUPLE_BYTES, 1000.0, 0.3, Costs(0.0, 0.0))
    assert alg3(400).next(cut).branch is Branch.BOTH_HOLD
    assert alg3(400).next(as_if_rate_over_b).branch is Branch.BANDWIDTH_OVER


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Algorithm3Tuner(30_000.0, 0.08, step=0), "step"),
        (lambda: Algorithm3Tuner(30_000.0, 0.08, initial_batch_size=0), "initial_batch_size"),
        (
            lambda: Algorithm3Tuner(30_000.0, 0.08, initial_batch_size=11, max_batch_size=10),
            "initial_batch_size",
        ),
        (lambda: Algorithm3Tuner(30_000.0, 0.08, max_batch_size=0), "max_batch_size"),
        (lambda: Algorithm3Tuner(0.0, 0.08), "bw_max"),
        (lambda: Algorithm3Tuner(math.nan, 0.08), "bw_max"),
        (lambda: Algorithm3Tuner(30_000.0, -1.0), "recovery_max"),
        (lambda: Algorithm3Tuner(30_000.0, math.inf), "recovery_max"),
        (lambda: ModelTuner(30_000.0, 0.08, hysteresis=-0.1), "hysteresis"),
        (lambda: ModelTuner(30_000.0, 0.08, hysteresis=1.0), "hysteresis"),
        (lambda: ModelTuner(30_000.0, 0.08, jitter=1.0), "jitter"),
        (lambda: ModelTuner(30_000.0, 0.08, settle_intervals=0), "settle_intervals"),
        (lambda: ModelTuner(30_000.0, 0.08, grid=3), "grid"),
        (lambda: ModelTuner(30_000.0, 0.08, max_batch_size=0), "max_batch_size"),
        (lambda: ModelTuner(-5.0, 0.08), "bw_max"),
    ],
)
def test_tuners_reject_bad_settings(make: Callable[[], BatchSizeTuner], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


# -- the model tuner -----------------------------------------------------------
# Seed 002's experiment 4 after the rate step: 1000 rows/s of 44 bytes, a
# Level-1 delay of 0.3 s (n = 300 rows per round), 0.22 ms per row to recover.


def exp4(
    rate: float = 1000.0, per_tuple: float = 0.00022, delay: float = 0.3, b_send: float = 0.0
) -> Measurements:
    costs = Costs(0.00002, per_tuple - 0.00002)
    return Measurements(b_send, 44.0, rate, delay, costs, costs)


def test_model_tuner_jumps_to_a_b_predicted_to_satisfy_both_and_then_holds() -> None:
    tuner = ModelTuner(30_000.0, 0.08, Priority.RECOVERY)
    first = tuner.next(exp4())
    assert first.branch is Branch.TO_FEASIBLE and first.previous_batch_size == 1
    assert first.bandwidth_bytes_per_s == pytest.approx(44_000.0)  # at B = 1 (AS), over
    assert first.predicted_bandwidth_bytes_per_s is not None and first.predicted_recovery_s is not None
    assert first.predicted_bandwidth_bytes_per_s <= 30_000.0 and first.predicted_recovery_s <= 0.08
    # The most room to the nearer limit: well inside both, not on an edge.
    model = tuner.model(exp4())
    room = min(1 - model.bandwidth(first.batch_size) / 30_000, 1 - model.recovery(first.batch_size) / 0.08)
    assert room > 0.15
    brute_force = max(
        min(1 - model.bandwidth(b) / 30_000, 1 - model.recovery(b) / 0.08)
        for b in range(1, model.never_sent_from + 1)
    )
    assert room == pytest.approx(brute_force, abs=0.01)
    # Same or slightly different measurements: no move.
    for m in (exp4(), exp4(rate=1030.0), exp4(per_tuple=0.00023), exp4(delay=0.29)):
        again = tuner.next(m)
        assert (again.branch, again.batch_size) == (Branch.HOLD, first.batch_size)


def test_model_tuner_holds_a_comfortable_b_even_if_another_is_better() -> None:
    tuner = ModelTuner(30_000.0, 0.08, Priority.RECOVERY, initial_batch_size=1)
    decision = tuner.next(exp4(rate=100.0))  # B = 1: 4.4 KB/s, 0.2 ms: room 0.85
    assert (decision.branch, decision.batch_size) == (Branch.HOLD, 1)


def test_model_tuner_leaves_a_b_close_to_a_limit_for_a_materially_better_one() -> None:
    # B = 360: R = 79.2 ms, 1% under the limit; the best B has ~20% room.
    tuner = ModelTuner(30_000.0, 0.08, Priority.RECOVERY, initial_batch_size=360)
    decision = tuner.next(exp4())
    assert decision.branch is Branch.TO_FEASIBLE and decision.batch_size < 330


# Experiment 5 after its change: 500 rows/s, ~1 ms per row to recover, 10 KB/s:
# no B satisfies both (R <= 100 ms needs B <= 95, BW <= 10 KB/s needs B >= 155).
def exp5() -> Measurements:
    costs = Costs(0.00005, 0.001)
    return Measurements(0.0, 44.0, 500.0, 0.3, costs, costs)


def test_model_tuner_by_priority_recovery_takes_the_least_bandwidth_within_recovery() -> None:
    tuner = ModelTuner(10_000.0, 0.1, Priority.RECOVERY)
    decision = tuner.next(exp5())
    model = tuner.model(exp5())
    within = [b for b in range(1, 200) if model.recovery(b) <= 0.1]
    assert decision.branch is Branch.BY_PRIORITY
    assert decision.batch_size in within
    assert model.bandwidth(decision.batch_size) == pytest.approx(min(model.bandwidth(b) for b in within))
    assert tuner.next(exp5()).batch_size == decision.batch_size  # and stays


def test_model_tuner_by_priority_bandwidth_takes_the_least_recovery_within_bandwidth() -> None:
    tuner = ModelTuner(10_000.0, 0.1, Priority.BANDWIDTH)
    decision = tuner.next(exp5())
    model = tuner.model(exp5())
    assert decision.branch is Branch.BY_PRIORITY
    assert model.bandwidth(decision.batch_size) <= 10_000.0 < model.bandwidth(decision.batch_size - 1)
    assert all(model.bandwidth(b) > 10_000.0 for b in range(1, decision.batch_size))


def test_model_tuner_respects_the_maximum_batch_size() -> None:
    tuner = ModelTuner(30_000.0, 0.08, Priority.RECOVERY, max_batch_size=150)
    decision = tuner.next(exp4())
    assert decision.batch_size <= 150 and decision.branch is Branch.BY_PRIORITY  # nothing <= 150 fits BW


def test_model_tuner_stretches_the_delay_when_measured_bandwidth_stays_over() -> None:
    tuner = ModelTuner(30_000.0, 0.08, Priority.RECOVERY, initial_batch_size=1, settle_intervals=3)
    b = tuner.next(exp4()).batch_size  # the model's choice, say it is wrong:
    over = exp4(b_send=40_000.0 / (b * 44.0))  # eq. 2 says 40 KB/s at this B
    for _ in range(2):
        assert (tuner.next(over).batch_size, tuner.delay_scale) == (b, 1.0)  # B_send may still be settling
    corrected = tuner.next(over)
    assert tuner.delay_scale > 1.0 and corrected.batch_size > b
    assert corrected.bandwidth_bytes_per_s > 30_000.0  # the corrected model now agrees with eq. 2
    tuner.next(exp4(rate=3000.0))  # a new regime (3x the rows per round): the stretch is forgotten
    assert tuner.delay_scale == 1.0


# -- both tuners on a plant ----------------------------------------------------
# The plant: each 10 ms interval one Level-1 round of n ~ U(0.75, 1.25) x
# rate x 0.3 s rows, of which B x floor(n / B) reach the secondary (the
# step-shaped behaviour of docs/asas.md). The tuners see what a node would
# measure: B_send and the rate averaged over the last 250 ms, the Level-1
# delay +-5% and S_time, R_ptime +-10% per interval.

INTERVALS_BEFORE_STEP = 100
INTERVALS_AFTER_STEP = 300
WINDOW = 25
PLANT_DELAY = 0.3
PLANT_COSTS = Costs(0.00002, 0.0002)


def plant_satisfies(batch_size: int, rate: float) -> bool:
    """The plant's bandwidth and recovery at B, averaged over its random
    rounds (the model with j = 0.25), are within 30 KB/s and 80 ms."""
    expected = RoundModel(rate, 44.0, PLANT_DELAY, PLANT_COSTS.per_tuple_s)
    return expected.bandwidth(batch_size) <= 30_000.0 and expected.recovery(batch_size) <= 0.08


def run_plant(tuner: BatchSizeTuner, seed: int) -> list[Decision]:
    rng = random.Random(seed)
    batches_per_s: deque[float] = deque(maxlen=WINDOW)
    rates: deque[float] = deque(maxlen=WINDOW)
    decisions = []
    for interval in range(INTERVALS_BEFORE_STEP + INTERVALS_AFTER_STEP):
        rate = 100.0 if interval < INTERVALS_BEFORE_STEP else 1000.0
        b = tuner.batch_size
        rows = rate * PLANT_DELAY * rng.uniform(0.75, 1.25)
        sent = rows if b == 1 else b * math.floor(rows / b)  # rows in full batches this round
        batches_per_s.append(rate * sent / rows / b)  # B_send under this interval's B
        rates.append(rate)
        secondary = Costs(
            PLANT_COSTS.send_time_s * rng.uniform(0.9, 1.1),
            PLANT_COSTS.reprocess_time_s * rng.uniform(0.9, 1.1),
        )
        m = Measurements(
            sum(batches_per_s) / len(batches_per_s),
            44.0,
            sum(rates) / len(rates),
            PLANT_DELAY * rng.uniform(0.95, 1.05),
            PLANT_COSTS,
            secondary,
        )
        decisions.append(tuner.next(m))
    return decisions[INTERVALS_BEFORE_STEP:]


def converged_at(decisions: list[Decision]) -> int:
    return next(i for i, d in enumerate(decisions) if plant_satisfies(d.batch_size, 1000.0))


def direction_changes(sizes: list[int]) -> int:
    moves = [1 if b > a else -1 for a, b in itertools.pairwise(sizes) if b != a]
    return sum(1 for a, b in itertools.pairwise(moves) if a != b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_after_a_rate_step_the_model_tuner_converges_sooner_and_oscillates_less(seed: int) -> None:
    paper = run_plant(Algorithm3Tuner(30_000.0, 0.08, Priority.RECOVERY, step=5), seed)
    model = run_plant(ModelTuner(30_000.0, 0.08, Priority.RECOVERY), seed)
    assert converged_at(model) < converged_at(paper)
    paper_sizes = [d.batch_size for d in paper[converged_at(paper) :]]
    model_sizes = [d.batch_size for d in model[converged_at(model) :]]
    assert direction_changes(model_sizes) < direction_changes(paper_sizes)
    assert plant_satisfies(model_sizes[-1], 1000.0)


def test_when_no_b_satisfies_both_algorithm3_alternates_and_the_model_tuner_holds() -> None:
    # Seed 002's experiment 5: "BW oscillates around its bound".
    paper = Algorithm3Tuner(10_000.0, 0.1, Priority.RECOVERY, step=5, initial_batch_size=95)
    model = ModelTuner(10_000.0, 0.1, Priority.RECOVERY, initial_batch_size=95)
    paper_sizes, model_sizes = [], []
    for _ in range(100):
        rows = 500.0 * 0.3
        b = paper.batch_size
        m = Measurements(500.0 * b * math.floor(rows / b) / rows / b, 44.0, 500.0, 0.3, Costs(0.00005, 0.001))
        paper_sizes.append(paper.next(m).batch_size)
        model_sizes.append(model.next(exp5()).batch_size)
    assert direction_changes(paper_sizes) > 50
    assert direction_changes(model_sizes) == 0
