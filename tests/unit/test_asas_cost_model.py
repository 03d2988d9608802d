"""A-SAS cost model: measurements, eq. 2, eq. 3 and the rows-per-round model."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import pytest

from semiactive.ha.cost_model import Costs, Measurements, estimated_bandwidth, estimated_recovery
from semiactive.ha.round_model import RoundModel

NO_COSTS = Costs(0.0, 0.0)


def measurements(
    b_send: float = 0.0,
    tuple_bytes: float = 44.0,
    rate: float = 1000.0,
    level1_delay: float = 0.3,
    primary: Costs = NO_COSTS,
    secondary: Costs | None = None,
) -> Measurements:
    return Measurements(b_send, tuple_bytes, rate, level1_delay, primary, secondary)


@pytest.mark.parametrize(
    ("b_send", "batch_size", "tuple_bytes", "expected"),
    [
        (10.0, 50, 44.0, 22_000.0),  # 10 batches/s x 50 rows x 44 bytes
        (1000.0, 1, 44.0, 44_000.0),  # AS: every row is a batch
        (2.5, 100, 40.0, 10_000.0),
        (0.0, 400, 44.0, 0.0),  # every batch cut by Level-1 before it filled
    ],
)
def test_eq2_bandwidth(b_send: float, batch_size: int, tuple_bytes: float, expected: float) -> None:
    m = measurements(b_send=b_send, tuple_bytes=tuple_bytes)
    assert estimated_bandwidth(m, batch_size) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("batch_size", "primary", "secondary", "expected"),
    [
        (100, Costs(0.0001, 0.0002), None, 0.03),  # 100 x (0.1 + 0.2) ms
        (1, Costs(0.0001, 0.0002), None, 0.0003),
        (50, Costs(0.0001, 0.0002), Costs(0.0001, 0.0009), 0.05),  # the secondary's costs win
        (50, Costs(0.0004, 0.0006), Costs(0.0, 0.0001), 0.005),  # ... also when they are lower
    ],
)
def test_eq3_recovery_uses_the_secondarys_costs_when_known(
    batch_size: int, primary: Costs, secondary: Costs | None, expected: float
) -> None:
    m = measurements(primary=primary, secondary=secondary)
    assert estimated_recovery(m, batch_size) == pytest.approx(expected)
    assert m.recovery_costs is (secondary if secondary is not None else primary)


def test_bandwidth_follows_measured_b_send_not_rate_over_b() -> None:
    # Same rate, same B, different measured B_send. If B_send were rate / B
    # both would give rate x tuple_bytes = 44 KB/s whatever B is.
    all_sent = measurements(b_send=1000.0 / 50, rate=1000.0)
    half_cut = measurements(b_send=10.0, rate=1000.0)
    none_sent = measurements(b_send=0.0, rate=1000.0)
    assert estimated_bandwidth(all_sent, 50) == pytest.approx(44_000.0)
    assert estimated_bandwidth(half_cut, 50) == pytest.approx(22_000.0)
    assert estimated_bandwidth(none_sent, 50) == 0.0


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    ("make", "label"),
    [
        (lambda v: measurements(b_send=v), "B_send"),
        (lambda v: measurements(tuple_bytes=v), "tuple_bytes"),
        (lambda v: measurements(rate=v), "input_rate_per_s"),
        (lambda v: measurements(level1_delay=v), "level1_delay_s"),
    ],
)
def test_measurements_reject_negative_and_non_finite_values(
    make: Callable[[float], Measurements], label: str, bad: float
) -> None:
    with pytest.raises(ValueError, match=label):
        make(bad)


@pytest.mark.parametrize("bad", [-0.001, math.nan, math.inf])
@pytest.mark.parametrize(("field", "label"), [("send_time_s", "S_time"), ("reprocess_time_s", "R_ptime")])
def test_costs_reject_negative_and_non_finite_values(field: str, label: str, bad: float) -> None:
    with pytest.raises(ValueError, match=label):
        dataclasses.replace(NO_COSTS, **{field: bad})


@pytest.mark.parametrize("estimate", [estimated_bandwidth, estimated_recovery])
def test_estimates_reject_a_batch_size_below_one(estimate: Callable[[Measurements, int], float]) -> None:
    with pytest.raises(ValueError, match="batch size"):
        estimate(measurements(), 0)


# -- the rows-per-round model (model tuner) ------------------------------------


@pytest.mark.parametrize(
    ("batch_size", "fraction"),
    [
        (1, 1.0),  # AS
        (50, 1.0),  # 5 full batches per round of 250
        (100, 0.8),  # 2 full batches, 50 rows cut
        (150, 0.6),
        (200, 0.8),
        (250, 1.0),
        (251, 0.0),  # never fills before the cut
        (400, 0.0),
    ],
)
def test_sent_fraction_without_jitter_counts_full_batches_per_round(batch_size: int, fraction: float) -> None:
    model = RoundModel(
        input_rate_per_s=1000.0, tuple_bytes=44.0, level1_delay_s=0.25, recovery_s_per_tuple=0.0, jitter=0.0
    )
    assert model.rows_per_round == pytest.approx(250.0)
    assert model.sent_fraction(batch_size) == pytest.approx(fraction)
    assert model.bandwidth(batch_size) == pytest.approx(44_000.0 * fraction)


@pytest.mark.parametrize(
    ("batch_size", "fraction"),
    [
        # n uniform in [225, 375]: E[floor(n / B)] x B / 300
        (100, 2.5 * 100 / 300),  # floor is 2 on [225, 300), 3 on [300, 375]
        (200, 1 * 200 / 300),  # floor is 1 throughout
        (300, 0.5 * 300 / 300),  # 1 on half the range, 0 on the other
        (375, 0.0),
        (376, 0.0),
    ],
)
def test_sent_fraction_averages_over_the_round_jitter(batch_size: int, fraction: float) -> None:
    model = RoundModel(1000.0, 44.0, 0.3, 0.0, jitter=0.25)
    assert model.sent_fraction(batch_size) == pytest.approx(fraction)
    assert model.never_sent_from == 376


@pytest.mark.parametrize(
    ("batch_size", "recovery"),
    [(1, 0.0002), (100, 0.02), (375, 0.075), (376, 0.075), (10_000, 0.075)],
)
def test_model_recovery_is_eq3_bounded_by_the_rows_since_the_cut(batch_size: int, recovery: float) -> None:
    model = RoundModel(1000.0, 44.0, 0.3, 0.0002, jitter=0.25)  # at most 375 rows since the cut
    assert model.recovery(batch_size) == pytest.approx(recovery)


def test_model_from_measurements_uses_the_recovery_costs_and_delay_scale() -> None:
    m = measurements(rate=500.0, level1_delay=0.2, primary=Costs(0.001, 0.001), secondary=Costs(0.0, 0.0005))
    model = RoundModel.from_measurements(m, jitter=0.0, delay_scale=2.0)
    assert model.rows_per_round == pytest.approx(200.0)
    assert model.recovery_s_per_tuple == pytest.approx(0.0005)


def test_model_with_no_rows_sends_nothing_beyond_as() -> None:
    model = RoundModel(0.0, 44.0, 0.3, 0.001)
    assert (model.sent_fraction(1), model.bandwidth(1), model.sent_fraction(5), model.recovery(5)) == (
        1.0,
        0.0,
        0.0,
        0.0,
    )


@pytest.mark.parametrize("jitter", [-0.1, 1.0, math.nan])
def test_model_rejects_a_jitter_outside_0_1(jitter: float) -> None:
    with pytest.raises(ValueError, match="jitter"):
        RoundModel(1000.0, 44.0, 0.3, 0.001, jitter)
