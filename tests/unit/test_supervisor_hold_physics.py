"""The supervisor's stops of a real (PyBullet) Go2 whose policy stops mid-trot (sim2real.evaluate.hold_trial).

How well the robot stays up depends on the policy's gait (benchmarks/supervisor_hold.py
compares the stops over 20 per command); what is checked here: the supervisor trips on the
policy_stale deadline first; the shipped config (config/safety/go2.yaml) lays a trot whose
policy went silent down upright, at 0.5 and 1.0 m/s; a hold (the response of the other policy faults)
keeps the trot at 0.5 m/s, stopped at these phases of the stride, from rolling over (the trunk
ends within the base_tilt limit, at which the supervisor would damp instead, and the base off
the ground).
"""

import pytest

from sim2real.core.safety_config import load_safety_config
from sim2real.evaluate.hold_trial import silent_policy_held, stop_mid_trot

SHIPPED = load_safety_config("go2")
TILT_LIMIT = SHIPPED.checks["base_tilt"]["max_angle"]


def holding(**changes):
    return silent_policy_held(SHIPPED, **changes)


@pytest.mark.parametrize(
    "seed, walk_steps, command", [(2, 114, (0.5, 0.0, 0.0)), (3, 121, (1.0, 0.0, 0.0)), (4, 128, (1.0, 0.0, 0.0))]
)
def test_a_go2_whose_policy_goes_silent_mid_trot_lies_down_upright(seed, walk_steps, command):
    """Held instead, the trot stopped at 1.0 m/s pitched over in 20 of 20 stops
    (benchmarks/supervisor_hold.py); the category-1 stop lays it down upright and slowly."""
    outcome = stop_mid_trot(seed, walk_steps, command=command)
    assert outcome.trips[0].startswith("ACTIVE -> DAMPING: policy_stale"), outcome.trips
    assert not outcome.bad(), outcome


@pytest.mark.parametrize("seed, walk_steps", [(2, 114), (3, 121), (4, 128), (5, 135), (6, 142)])
def test_a_go2_stopped_mid_trot_is_held_without_rolling_over(seed, walk_steps):
    outcome = stop_mid_trot(seed, walk_steps, holding())
    assert outcome.trips[0].startswith("ACTIVE -> TAKEOVER: policy_stale"), outcome.trips
    assert outcome.final_tilt < TILT_LIMIT, f"the trunk ended tilted {outcome.final_tilt:.2f} rad"
    assert outcome.final_height > 0.08, f"the base ended at {outcome.final_height:.2f} m"


@pytest.mark.parametrize("seed, walk_steps", [(2, 114), (3, 121), (4, 128), (5, 135), (6, 142)])
def test_a_last_targets_hold_that_lets_the_trunk_past_the_tilt_limit_is_damped(seed, walk_steps):
    """hold_pose: last lets the shipped trot roll at some of
    these stops (benchmarks/supervisor_hold.py); wherever the trunk passes the base_tilt limit
    the supervisor must go on from its hold to damping, and only there."""
    outcome = stop_mid_trot(seed, walk_steps, holding(hold_pose="last"))
    assert outcome.trips[0].startswith("ACTIVE -> TAKEOVER: policy_stale"), outcome.trips
    damped = any(trip.startswith("TAKEOVER -> DAMPING: base_tilt") for trip in outcome.trips[1:])
    assert damped == (outcome.worst_tilt > TILT_LIMIT), (outcome.worst_tilt, outcome.trips)


@pytest.mark.parametrize("stop", ["damp", "estop"])
@pytest.mark.parametrize(
    "seed, walk_steps, command",
    [(2, 114, (0.5, 0.0, 0.0)), (3, 121, (1.0, 0.0, 0.0)), (4, 128, (-0.5, 0.0, 0.0)), (5, 135, (0.5, 0.0, 0.6))],
)
def test_a_go2_damped_mid_trot_lies_down_instead_of_dropping(stop, seed, walk_steps, command):
    """Damped at once (targets = measured positions), the trot dropped onto its belly at 1.3 m/s;
    the category-1 stop lowers it to damp_pose first, upright."""
    outcome = stop_mid_trot(seed, walk_steps, command=command, stop=stop)
    assert outcome.trips[0].startswith(f"ACTIVE -> {'DAMPING' if stop == 'damp' else 'ESTOP'}"), outcome.trips
    assert outcome.final_tilt < 0.5, f"the trunk ended tilted {outcome.final_tilt:.2f} rad"
    assert outcome.impact_speed < 0.6, f"the trunk reached the ground at {outcome.impact_speed:.2f} m/s"
