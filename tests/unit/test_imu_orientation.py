"""An IMU orientation is accepted or refused the same way by every node's core: the policy's
inputs, the state estimator and (tests/unit/test_supervisor_faults.py) the supervisor."""

import math

import numpy as np
import pytest

from sim2real.core.estimation.config import load_estimation_config
from sim2real.core.estimation.legged import LegKalmanFilter
from sim2real.core.robot_inputs import RobotInputs
from sim2real.core.robot_profile import load_profile
from sim2real.core.rotations import unit_orientation

GO2 = load_profile("go2")
ROLL_90 = [math.sin(math.pi / 4), 0.0, 0.0, math.cos(math.pi / 4)]
NO_ORIENTATIONS = [[0.0, 0.0, 0.0, 0.0], [math.nan, 0.0, 0.0, 1.0], [0.5 * v for v in ROLL_90]]


@pytest.mark.parametrize("orientation", NO_ORIENTATIONS)
def test_no_orientation_is_refused_by_name(orientation):
    with pytest.raises(ValueError, match=r"/imu/data orientation .* is not a unit quaternion"):
        unit_orientation(orientation)


def test_a_nearly_unit_quaternion_is_normalised():
    np.testing.assert_allclose(unit_orientation([0.0, 0.0, 0.0, 1.05]), [0.0, 0.0, 0.0, 1.0])


@pytest.mark.parametrize("orientation", NO_ORIENTATIONS)
def test_the_policy_inputs_refuse_it_and_keep_the_previous_sample(orientation):
    inputs = RobotInputs(GO2)
    inputs.set_imu([0.0, 0.0, 0.0, 1.0], [0.1, 0.0, 0.0])
    with pytest.raises(ValueError, match="not a unit quaternion"):
        inputs.set_imu(orientation, [0.0, 0.0, 0.0])
    signals = inputs.signals(0.0)
    np.testing.assert_allclose(signals.base_orientation, [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(signals.base_angular_velocity, [0.1, 0.0, 0.0])


@pytest.mark.parametrize("orientation", NO_ORIENTATIONS)
def test_the_state_estimator_refuses_it_and_its_state_is_untouched(orientation):
    estimator = LegKalmanFilter(GO2, load_estimation_config("go2"))
    args = ([0.0, 0.0, 0.0], [0.0, 0.0, 9.81], GO2.default_positions, np.zeros(12))
    first = estimator.step(0.0, [0.0, 0.0, 0.0, 1.0], *args)
    with pytest.raises(ValueError, match="refused"):
        estimator.step(0.002, orientation, *args)
    after = estimator.step(0.004, [0.0, 0.0, 0.0, 1.0], *args)
    assert np.all(np.isfinite(after.position)) and np.allclose(after.position, first.position, atol=1e-3)
