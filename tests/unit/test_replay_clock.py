"""The replay clock: when a file's rows are due under a speed that changes
with the data's time, and back from wall time to the data's time."""

from __future__ import annotations

import random

import pytest

from semiactive.node.connectors.replay_clock import ReplayClock, parse_speed


def test_one_speed_divides_the_data_offset() -> None:
    clock = ReplayClock(1.25)
    assert clock.wall_ms(10_000) == 8_000
    assert clock.data_ms(8_000) == 10_000
    assert clock.describe() == "1.25x"


def test_each_step_holds_from_its_data_offset_on() -> None:
    clock = parse_speed("2.5,1200:1.6,3600:1")
    assert clock.wall_ms(1_200_000) == pytest.approx(480_000)
    assert clock.wall_ms(3_600_000) == pytest.approx(480_000 + 1_500_000)
    assert clock.wall_ms(3_700_000) == pytest.approx(480_000 + 1_500_000 + 100_000)
    assert clock.data_ms(480_000 + 800_000) == pytest.approx(1_200_000 + 1_280_000)
    assert clock.describe() == "2.5x, 1.6x from 1200 s, 1x from 3600 s"


def test_wall_and_data_offsets_are_inverse_and_both_increase() -> None:
    rng = random.Random(7)
    for _ in range(50):
        steps, at = [], 0.0
        for _ in range(rng.randrange(4)):
            at += rng.uniform(1, 5_000)
            steps.append((at, rng.uniform(0.1, 10)))
        clock = ReplayClock(rng.uniform(0.1, 10), steps)
        points = sorted(rng.uniform(0, 25_000) for _ in range(40))
        walls = [clock.wall_ms(p) for p in points]
        assert walls == sorted(walls)
        for p, w in zip(points, walls, strict=True):
            assert clock.data_ms(w) == pytest.approx(p, abs=1e-6)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("fast", "bad speed 'fast'"),
        ("2,100", "bad speed"),
        ("2,100:0", "every speed must be > 0"),
        ("0", "every speed must be > 0"),
        ("2,100:1,50:1", "increasing data offsets"),
        ("2,0:1", "increasing data offsets"),
    ],
)
def test_a_bad_speed_is_refused_with_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_speed(text)
