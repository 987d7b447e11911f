"""The supervisor's hold on a real (PyBullet) Go2 whose policy stops mid-trot (sim2real.hold_trial)."""
import dataclasses

import pytest

from sim2real.core.safety_config import load_safety_config
from sim2real.hold_trial import stop_mid_trot


@pytest.mark.parametrize("seed, walk_steps", [(2, 114), (3, 121), (4, 128), (5, 135), (6, 142)])
def test_a_go2_stopped_mid_trot_is_held_and_ends_level(seed, walk_steps):
    outcome = stop_mid_trot(seed, walk_steps)  # config/safety/go2.yaml: hold_pose last
    assert "policy_stale" in outcome.trip
    assert outcome.final_tilt < 0.5, f"the trunk ended tilted {outcome.final_tilt:.2f} rad"
    assert outcome.final_height > 0.12, f"the base ended at {outcome.final_height:.2f} m"


def test_a_stand_pose_hold_moves_the_go2_to_its_stand_pose():
    config = dataclasses.replace(load_safety_config("go2"), hold_pose="stand")
    outcome = stop_mid_trot(5, 135, config)
    assert "policy_stale" in outcome.trip
    assert outcome.final_tilt < 0.5 and outcome.final_height > 0.12
