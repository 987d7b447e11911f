"""The stamp helpers every node ticks by."""

import pytest

from sim2real.nodes import stamps

PERIOD = 20_000_000  # ns, the Go2's policy period


def test_time_message_round_trip_is_exact():
    ns = 1_764_547_200_123_456_789
    assert stamps.to_ns(stamps.to_msg(ns)) == ns


@pytest.mark.parametrize(
    "now, boundary",
    [
        (0, PERIOD),  # on a boundary: that period's tick is this one, the next is one later
        (1, PERIOD),
        (PERIOD - 1, PERIOD),
        (PERIOD, 2 * PERIOD),
        (5 * PERIOD + 7_000_000, 6 * PERIOD),
    ],
)
def test_next_period_start_is_the_following_grid_point(now, boundary):
    assert stamps.next_period_start_ns(now, PERIOD) == boundary


@pytest.mark.parametrize(
    "now, next_tick, due",
    [
        (5 * PERIOD, 5 * PERIOD, True),  # on the boundary
        (5 * PERIOD - 1, 5 * PERIOD, False),  # this period already ticked
        (3 * PERIOD, 5 * PERIOD, False),  # up to two periods behind: jitter, reordered stamps
        (3 * PERIOD - 1, 5 * PERIOD, True),  # further back: a new time line (restart, clock stepped back)
        (0, 10**12, True),
    ],
)
def test_a_tick_is_due_past_the_boundary_or_after_a_jump_back(now, next_tick, due):
    assert stamps.tick_due(now, next_tick, PERIOD) is due


def test_repeated_stamps_are_reported_once_when_they_reach_the_limit():
    repeated = stamps.RepeatedStamps()
    seen = [repeated.stuck(0) for _ in range(stamps.RepeatedStamps.LIMIT + 50)]
    assert seen.count(True) == 1 and seen.index(True) == stamps.RepeatedStamps.LIMIT
    assert not any(repeated.stuck(k * PERIOD) for k in range(1, 500))  # moving stamps: never
