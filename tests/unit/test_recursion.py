"""Recursive continuous queries (the recursive CQL paper): delays, the delay rule and DTS
execution of the paper's examples, with results worked out by hand.

Time is integer ms and epsilon (``<Now>``) is 1 ms: a tuple that passes a
``<Now>`` delay at t is seen by the loop at t + 1.
"""

from __future__ import annotations

from typing import Any

import pytest

from semiactive.node.cql import CqlError, compile_program, plan
from semiactive.node.cql.examples import FIG1, FIG1_DELAYED
from tests.unit.engine_harness import run

# -- Fig. 1: automated trading ------------------------------------------------------------

STOCKS: list[tuple[int, ...]] = [(0, 1, 0, 0), (0, 2, 0, 0), (0, 3, 0, 0), (0, 4, 0, 0), (0, 5, 100, 90)]
"""stock_stream (ts, id, num, price): we hold none of stocks 1-4 and 100
shares of stock 5, so stock 5 is never bought."""

MARKET = [(5, 1, 520), (10, 1, 480), (11, 2, 450), (12, 3, 300), (13, 5, 10), (14, 4, 60), (20, 1, 470)]
"""market (ts, stock_id, price), every tick at its own instant."""


def trading(market: list[tuple[int, int, int]], money: int, output: str, delay: str = "<Now>") -> list[Any]:
    inputs: dict[str, list[tuple[int, ...]]] = {
        "market": list(market),
        "initial_resource": [(0, money)],
        "stock_stream": STOCKS,
    }
    return run(FIG1_DELAYED.replace("<Now>", delay), inputs, output=output, end=40)


def test_trading_orders_only_what_the_money_pays_for() -> None:
    # initial_resource 1,000,000 at t=0 reaches resource_stream through the
    # delay at t=1; [Rows 1] makes it the money from t=1 on.
    #   t=5  stock 1 at 520: not below 500, no order.
    #   t=10 stock 1 at 480: 1,000,000 > 480,000: order; money 520,000 from t=11.
    #   t=11 stock 2 at 450: the tick sees 520,000 > 450,000: order; 70,000 from t=12.
    #   t=12 stock 3 at 300: 70,000 > 300,000 is false: no order (with the
    #        money of t=10 or t=11 it would have been ordered: the paper's bug).
    #   t=13 stock 5 at 10: we hold 100 shares of it, no order.
    #   t=14 stock 4 at 60: 70,000 > 60,000: order; 10,000 from t=15.
    #   t=20 stock 1 at 470: 10,000 > 470,000 is false.
    assert trading(MARKET, 1_000_000, "buy_event") == [
        (10, 1, 1000, 480),
        (11, 2, 1000, 450),
        (14, 4, 1000, 60),
    ]
    assert trading(MARKET, 1_000_000, "resource_stream") == [
        (1, 1_000_000),
        (11, 520_000),
        (12, 70_000),
        (15, 10_000),
    ]
    # The money as a relation: each order's cost leaves it 1 ms later.
    assert trading(MARKET, 1_000_000, "resource") == [
        (1, "+", 1_000_000),
        (11, "+", 520_000),
        (11, "-", 1_000_000),
        (12, "+", 70_000),
        (12, "-", 520_000),
        (15, "+", 10_000),
        (15, "-", 70_000),
    ]


def test_no_order_exceeds_the_money_of_its_instant() -> None:
    orders = trading(MARKET, 1_000_000, "buy_event")
    money = dict(trading(MARKET, 1_000_000, "resource_stream"))
    spent = 0
    for ts, _, num, price in orders:
        balance = money[max(t for t in money if t <= ts)]
        assert balance == 1_000_000 - spent
        assert num * price < balance
        spent += num * price
    assert spent <= 1_000_000


def test_a_slow_feedback_loop_overspends() -> None:
    # The same loop with <5 ms> behaves like money fed back from outside with a
    # lag (section 2.1): until t=15 every tick sees 1,000,000, so stocks 1, 2,
    # 3 and 4 are all ordered, and each money row is computed from the stale
    # 1,000,000: 520,000 at 15, 550,000 at 16, 700,000 at 17, 940,000 at 19.
    # At t=20 stock 1 ticks again and 940,000 covers it: a fifth order.
    orders = trading(MARKET, 1_000_000, "buy_event", "<5 ms>")
    assert orders == [
        (10, 1, 1000, 480),
        (11, 2, 1000, 450),
        (12, 3, 1000, 300),
        (14, 4, 1000, 60),
        (20, 1, 1000, 470),
    ]
    assert sum(num * price for _, _, num, price in orders) == 1_760_000
    assert trading(MARKET, 1_000_000, "resource_stream", "<5 ms>") == [
        (5, 1_000_000),
        (15, 520_000),
        (16, 550_000),
        (17, 700_000),
        (19, 940_000),
        (25, 470_000),
    ]


TIE = [(10, 1, 480), (10, 2, 450), (12, 3, 100)]


def test_ticks_sharing_a_timestamp_see_the_same_money() -> None:
    # With 600,000, stocks 1 (480,000) and 2 (450,000) tick at the same
    # instant: both see 600,000 and both are ordered (930,000; DTS cannot
    # order within an instant). resource_stream gets one row per order,
    # 600,000 - 480,000 and 600,000 - 450,000, both at t=11; [Rows 1] keeps the
    # later one, 150,000, so at t=12 stock 3 (100,000) is ordered and the money
    # is 50,000 at t=13.
    assert trading(TIE, 600_000, "buy_event") == [(10, 1, 1000, 480), (10, 2, 1000, 450), (12, 3, 1000, 100)]
    assert trading(TIE, 600_000, "resource_stream") == [
        (1, 600_000),
        (11, 120_000),
        (11, 150_000),
        (13, 50_000),
    ]


def test_the_tie_break_is_the_arrival_order_within_the_instant() -> None:
    # Deterministic: the same inputs give the same result on every run; the
    # tick that arrived last within the instant decides the money (now the
    # order of stock 1: 600,000 - 480,000 = 120,000, then 20,000 after t=12).
    swapped = [TIE[1], TIE[0], TIE[2]]
    assert trading(swapped, 600_000, "resource_stream") == [
        (1, 600_000),
        (11, 150_000),
        (11, 120_000),
        (13, 20_000),
    ]
    assert trading(swapped, 600_000, "resource_stream") == trading(swapped, 600_000, "resource_stream")


# -- the delay rule ----------------------------------------------------------------------


def test_a_cycle_without_a_delay_is_rejected_naming_its_queries() -> None:
    with pytest.raises(CqlError) as info:
        compile_program(FIG1)
    assert "cycle without a delay operator through queries buy_event -> resource_stream" in str(info.value)


def test_now_makes_the_cycle_valid_and_insert_delays_puts_it_where_the_paper_does() -> None:
    explicit = compile_program(FIG1_DELAYED)
    inserted = compile_program(FIG1, insert_delays=True)
    for program in (explicit, inserted):
        delay = program.queries["resource_stream"]
        assert isinstance(delay, plan.Delay) and delay.delay_ms == plan.EPSILON_MS == 1


# -- delays move time by exactly d -------------------------------------------------------

COUNTDOWN = """
REGISTER STREAM s (n integer)
REGISTER QUERY loop AS
  ISTREAM(SELECT n FROM s [Now] UNION ALL SELECT n - 1 AS n FROM loop [Now] WHERE n > 0){delay}
"""


@pytest.mark.parametrize(("delay", "d"), [("<Now>", 1), ("<1 ms>", 1), ("<3 ms>", 3), ("<1 second>", 1000)])
def test_every_pass_through_a_delay_adds_exactly_d(delay: str, d: int) -> None:
    # n comes back d ms later as n - 1 until it reaches 0: 2 at t, 1 at t+d,
    # 0 at t+2d (the output of loop is the delay's: every row is d late).
    out = run(COUNTDOWN.format(delay=delay), {"s": [(10, 2), (11, 1)]}, end=10 + 3 * d + 5)
    expected = sorted([(10 + d, 2), (10 + 2 * d, 1), (10 + 3 * d, 0), (11 + d, 1), (11 + 2 * d, 0)])
    assert sorted(out) == expected


# -- query run ---------------------------------------------------------------------------


def test_query_run_lets_a_recursive_program_settle_after_its_last_input() -> None:
    from semiactive.embedded import query as embedded

    program = compile_program(COUNTDOWN.format(delay="<2 ms>"))
    out = embedded.execute(program, {"s": [(5, 1, 1, 2)]})
    # The last input is at 5, but its consequences come out at 7, 9 and 11.
    assert [(e[0], e[3]) for e in out] == [(7, 2), (9, 1), (11, 0)]
