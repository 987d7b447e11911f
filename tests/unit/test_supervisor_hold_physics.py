"""The supervisor's hold on a real (PyBullet) Go2 whose policy stops mid-trot (sim2real.hold_trial).

How well the robot stays up depends on the policy's gait (benchmarks/supervisor_hold.py
compares the holds over 40 stops); what is checked here: the supervisor trips on the
policy_stale deadline first, and the shipped hold (config/safety/go2.yaml) keeps the shipped
policy's trot, stopped at these phases of the stride, from rolling over (the trunk ends within
the base_tilt limit, at which the supervisor would damp instead, and the base off the ground).
"""
import pytest

from sim2real.core.safety_config import load_safety_config
from sim2real.hold_trial import stop_mid_trot

TILT_LIMIT = load_safety_config("go2").checks["base_tilt"]["max_angle"]


@pytest.mark.parametrize("seed, walk_steps", [(2, 114), (3, 121), (4, 128), (5, 135), (6, 142)])
def test_a_go2_stopped_mid_trot_is_held_without_rolling_over(seed, walk_steps):
    outcome = stop_mid_trot(seed, walk_steps)
    assert outcome.trips[0].startswith("ACTIVE -> TAKEOVER: policy_stale"), outcome.trips
    assert outcome.final_tilt < TILT_LIMIT, f"the trunk ended tilted {outcome.final_tilt:.2f} rad"
    assert outcome.final_height > 0.08, f"the base ended at {outcome.final_height:.2f} m"
