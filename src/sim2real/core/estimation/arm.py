"""The arm's estimator: joint position, velocity and acceleration from a constant-acceleration
Kalman filter per joint, and the end effector's pose and twist from pinocchio."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from sim2real.core.estimation.config import EstimationConfig
from sim2real.core.estimation.samples import require_finite
from sim2real.core.kinematics import Kinematics
from sim2real.core.robot_profile import RobotProfile


@dataclass
class ArmEstimate:
    stamp: float
    joint_position: np.ndarray
    joint_velocity: np.ndarray
    joint_acceleration: np.ndarray
    ee_position: np.ndarray  # base frame, m
    ee_rotation: np.ndarray  # base frame, 3x3
    ee_linear_velocity: np.ndarray  # base frame, m/s
    ee_angular_velocity: np.ndarray  # base frame, rad/s


class ArmEstimator:
    """Per joint a constant-acceleration Kalman filter over (q, dq, ddq), measured (q, dq).

    Every joint shares the noise model, so one 3x3 covariance serves them all and a step
    costs a few small matrix products whatever the number of joints.
    """

    def __init__(self, profile: RobotProfile, config: EstimationConfig):
        if profile.end_effector_link is None:
            raise ValueError(f"ArmEstimator: robot {profile.name!r} has no end_effector_link")
        self.profile = profile
        self.config = config
        self.kinematics = Kinematics(profile)
        self.x: Optional[np.ndarray] = None  # (3, n): q, dq, ddq
        self.P = np.diag([config.joint_position_noise**2, config.joint_velocity_noise**2, 1.0])
        self._t: Optional[float] = None
        self._R = np.diag([config.joint_position_noise**2, config.joint_velocity_noise**2])

    def step(self, t: float, joint_position: Sequence[float], joint_velocity: Sequence[float]) -> ArmEstimate:
        self.filter(t, joint_position, joint_velocity)
        return self.estimate()

    def filter(self, t: float, joint_position: Sequence[float], joint_velocity: Sequence[float]) -> None:
        """Fold in one joint state (cheap: the per-sample part of :meth:`step`). ValueError, the
        state untouched, for a sample with a NaN or infinite value."""
        require_finite(t=t, joint_position=joint_position, joint_velocity=joint_velocity)
        q = np.asarray(joint_position, dtype=float)
        dq = np.asarray(joint_velocity, dtype=float)
        if self.x is None:
            self.x = np.vstack([q, dq, np.zeros_like(q)])
            self._t = t
        assert self._t is not None  # set with x
        dt = t - self._t
        self._t = t
        if dt > 0:
            F = np.array([[1.0, dt, 0.5 * dt * dt], [0.0, 1.0, dt], [0.0, 0.0, 1.0]])
            # White jerk noise integrated over the step (the usual discrete Wiener-acceleration model).
            j = self.config.joint_jerk_noise**2
            Q = j * np.array(
                [[dt**5 / 20, dt**4 / 8, dt**3 / 6], [dt**4 / 8, dt**3 / 3, dt**2 / 2], [dt**3 / 6, dt**2 / 2, dt]]
            )
            self.x = F @ self.x
            self.P = F @ self.P @ F.T + Q
        S = self.P[:2, :2] + self._R
        K = self.P[:, :2] @ np.linalg.inv(S)
        self.x = self.x + K @ (np.vstack([q, dq]) - self.x[:2])
        self.P = (np.eye(3) - K @ np.eye(2, 3)) @ self.P

    def estimate(self) -> ArmEstimate:
        """The filtered joints and the end effector's pose and twist (pinocchio) at the last sample."""
        assert self.x is not None and self._t is not None, "estimate() before the first sample (filter())"
        q_f, dq_f, ddq_f = self.x
        position, rotation = self.kinematics.end_effector_pose(q_f)
        _, jacobian = self.kinematics.end_effector_jacobian(q_f)
        twist = jacobian @ dq_f
        return ArmEstimate(self._t, q_f.copy(), dq_f.copy(), ddq_f.copy(), position, rotation, twist[:3], twist[3:])
