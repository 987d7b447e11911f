"""The stamp helpers every node ticks by."""
import pytest

from sim2real.nodes import stamps

PERIOD = 20_000_000  # ns, the Go2's policy period


def test_time_message_round_trip_is_exact():
    ns = 1_764_547_200_123_456_789
    assert stamps.to_ns(stamps.to_msg(ns)) == ns


@pytest.mark.parametrize("now, boundary", [
    (0, PERIOD),                    # on a boundary: that period's tick is this one, the next is one later
    (1, PERIOD),
    (PERIOD - 1, PERIOD),
    (PERIOD, 2 * PERIOD),
    (5 * PERIOD + 7_000_000, 6 * PERIOD),
])
def test_next_period_start_is_the_following_grid_point(now, boundary):
    assert stamps.next_period_start_ns(now, PERIOD) == boundary
