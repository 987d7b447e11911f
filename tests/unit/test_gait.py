"""The gait clock's schedules (sim2real.core.gait)."""

import numpy as np
import pytest

from sim2real.core.gait import GaitClock

TROT = [0.0, 0.5, 0.5, 0.0]


@pytest.mark.parametrize(
    "phase,stance,lift",
    [
        (0.0, [True, False, False, True], [0.0, 0.0, 0.0, 0.0]),  # FR, RL at lift-off
        (0.25, [True, False, False, True], [0.0, 1.0, 1.0, 0.0]),  # FR, RL at mid-swing
        (0.625, [False, True, True, False], [0.5, 0.0, 0.0, 0.5]),  # FL, RR a quarter into swing
        (0.875, [False, True, True, False], [0.5, 0.0, 0.0, 0.5]),  # and three quarters
    ],
)
def test_trot_stance_and_swing_lift(phase, stance, lift):
    clock = GaitClock(2.0, 0.02, phase=phase)
    assert clock.stance(TROT, 0.5).tolist() == stance
    np.testing.assert_allclose(clock.swing_lift(TROT, 0.5), lift, atol=1e-12)


def test_no_swing_when_every_foot_stands_the_whole_cycle():
    assert not GaitClock(2.0, 0.02, phase=0.3).swing_lift(TROT, 1.0).any()
