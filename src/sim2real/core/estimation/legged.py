"""The quadruped's linear Kalman filter over base position and velocity, the accelerometer's bias
and the foot positions,
its contact detector and its divergence monitor (the package docstring says how)."""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from sim2real.core.estimation.config import ContactConfig, EstimationConfig
from sim2real.core.estimation.samples import ImuSample, require_finite
from sim2real.core.kinematics import Kinematics
from sim2real.core.robot_profile import RobotProfile
from sim2real.core.rotations import quat_to_matrix, unit_orientation

GRAVITY = np.array([0.0, 0.0, -9.81])
# The state: base position (0:3), base velocity (3:6), the accelerometer's bias (6:9), the feet.
BIAS = slice(6, 9)
FEET = 9


class ContactDetector:
    """Which feet stand, from joint efforts (with hysteresis) or from a gait clock."""

    def __init__(self, config: ContactConfig, num_feet: int):
        self.config = config
        if config.source == "gait" and len(config.gait_offsets) != num_feet:
            raise ValueError(
                f"contact.gait_offsets has {len(config.gait_offsets)} entries for {num_feet} feet; "
                "give one phase offset per foot, in the profile's foot order"
            )
        self.contact = np.ones(num_feet, dtype=bool)  # a robot starts standing
        self.force = np.zeros(num_feet)

    def update(
        self,
        t: float,
        rotation: np.ndarray,
        jacobians: np.ndarray,
        effort: Optional[np.ndarray],
        leg_joints: Sequence[np.ndarray],
        foot_speed: Optional[np.ndarray] = None,
    ) -> np.ndarray:
        """``jacobians``: (feet, 3, n) in the base frame; ``leg_joints``: each foot's joint indices;
        ``foot_speed``: each foot's speed in the world (m/s), for ``landing_speed``."""
        c = self.config
        if c.source == "gait":
            phase = (t / c.gait_period + np.asarray(c.gait_offsets)) % 1.0
            self.contact = phase < c.gait_duty
            return self.contact
        if effort is None:
            return self.contact  # no effort reported: keep the last decision
        legs = np.asarray(leg_joints)
        # Static balance of each leg: tau + J^T f = 0, f the ground's force on the foot.
        # [foot, j, :] = column legs[foot, j] of that foot's Jacobian: each leg's J^T, (feet, 3, 3).
        leg_jacobians_t = jacobians[np.arange(len(legs))[:, None], :, legs]
        try:
            force = -np.linalg.solve(leg_jacobians_t, effort[legs][..., None])[..., 0]
        except np.linalg.LinAlgError:
            return self.contact  # a singular (fully stretched) leg: keep the last decision
        vertical = force @ rotation[2]
        self.force = vertical
        lands = ~self.contact & (vertical > c.on_force)
        if c.landing_speed > 0 and foot_speed is not None and self.contact.sum() >= 2:
            # A foot's speed is the filter's velocity plus the leg's: with fewer than two feet
            # down (a robot lifted, a fall) that velocity may be off by more than the limit, and
            # gating on it would keep every foot from landing again.
            lands &= foot_speed < c.landing_speed
        if c.still_speed > 0 and foot_speed is not None:
            lands |= ~self.contact & (vertical > c.off_force) & (foot_speed < c.still_speed)
        lifts = self.contact & (vertical < c.off_force)
        self.contact = (self.contact | lands) & ~lifts
        return self.contact


# ------------------------------------------------------------------------------- divergence
class DivergenceMonitor:
    """Window-mean NIS per degree of freedom against a bound, plus sanity of state and covariance."""

    def __init__(self, window_s: float, bound: float, hold_s: float, max_velocity_std: float):
        self.window_s, self.bound, self.hold_s, self.max_velocity_std = window_s, bound, hold_s, max_velocity_std
        self._samples: collections.deque[tuple[float, float, int]] = collections.deque()
        self._sum, self._dof = 0.0, 0
        self.mean_nis = 0.0
        self.peak_nis = 0.0
        self.reason = ""
        self.diverged_until = -math.inf
        self.events = 0

    def add(self, t: float, nis: float, dof: int, state: np.ndarray, velocity_cov: np.ndarray) -> None:
        self._samples.append((t, nis, dof))
        self._sum += nis
        self._dof += dof
        while self._samples and self._samples[0][0] < t - self.window_s:
            _, old, old_dof = self._samples.popleft()
            self._sum -= old
            self._dof -= old_dof
        self.mean_nis = self._sum / self._dof if self._dof else 0.0
        self.peak_nis = max(self.peak_nis, self.mean_nis)
        reason = ""
        if not np.all(np.isfinite(state)):
            reason = "state is not finite"
        elif math.sqrt(max(float(np.max(np.diag(velocity_cov))), 0.0)) > self.max_velocity_std:
            reason = f"velocity std above {self.max_velocity_std} m/s (no foot in contact for too long?)"
        elif self.mean_nis > self.bound:
            reason = (
                f"innovation NIS {self.mean_nis:.1f} per dof over {self.window_s:.2f} s above bound "
                f"{self.bound:.1f} (a foot slipping, or contact misdetected)"
            )
        if reason:
            if t > self.diverged_until:
                self.events += 1
            self.reason = reason
            self.diverged_until = t + self.hold_s

    def diverged(self, t: float) -> bool:
        return t <= self.diverged_until


# ------------------------------------------------------------------------------ quadruped


@dataclass
class BaseEstimate:
    stamp: float
    position: np.ndarray  # world, m
    velocity: np.ndarray  # world, m/s
    orientation: np.ndarray  # xyzw, from the IMU
    angular_velocity: np.ndarray  # body, rad/s
    feet: np.ndarray  # (feet, 3) world, m
    contact: np.ndarray  # (feet,) bool
    covariance: np.ndarray  # (21, 21): position, velocity, accelerometer bias, feet

    @property
    def velocity_body(self) -> np.ndarray:
        return quat_to_matrix(self.orientation).T @ self.velocity


class LegKalmanFilter:
    """Base position and velocity (world frame) and foot positions from IMU + leg kinematics.

    Call :meth:`step` once per IMU sample with the newest joint state; it returns the
    estimate at the IMU stamp. The IMU frame is taken to be the base frame (true of the
    reference robots; see ``imu_link`` in the profile).
    """

    def __init__(self, profile: RobotProfile, config: EstimationConfig, initial_position: Sequence[float] = (0.0, 0.0)):
        if profile.kind != "quadruped" or not profile.foot_links:
            raise ValueError(
                f"LegKalmanFilter: robot {profile.name!r} is not a quadruped with foot_links; "
                "use ArmEstimator for an arm"
            )
        self.profile = profile
        self.config = config
        self.kinematics = Kinematics(profile)
        self.num_feet = len(profile.foot_links)
        self.contact_detector = ContactDetector(config.contact, self.num_feet)
        self._feet = [self.kinematics.frame_id(link) for link in profile.foot_links]
        self.leg_joints = self._leg_joints()
        n = FEET + 3 * self.num_feet
        self.x = np.zeros(n)
        self.P = np.eye(n)
        self._initial_xy = np.asarray(initial_position, dtype=float)[:2]
        self._t: Optional[float] = None
        self.divergence = DivergenceMonitor(
            config.divergence_window, config.divergence_nis, config.divergence_hold, config.max_velocity_std
        )
        # Measurement model: per foot, relative position (3), base velocity (3), height (1).
        self._rows_per_foot = 7 if config.ground_height is not None else 6
        rows = self._rows_per_foot * self.num_feet
        H = np.zeros((rows, n))
        for foot in range(self.num_feet):
            r = self._rows_per_foot * foot
            f = FEET + 3 * foot
            H[r : r + 3, 0:3] = -np.eye(3)
            H[r : r + 3, f : f + 3] = np.eye(3)
            H[r + 3 : r + 6, 3:6] = np.eye(3)
            if self._rows_per_foot == 7:
                H[r + 6, f + 2] = 1.0
        self.H = H
        self._identity = np.eye(n)
        # Per-step constants (the filter runs at the IMU rate: numpy's helpers cost more than the math).
        self._state_diagonal = np.diag_indices(n)
        self._innovation_diagonal = np.diag_indices(rows)
        # a x (0, 0, r) for each row a of a matrix: a @ skew((0, 0, r)).
        radius = config.foot_radius  # not r: that is the row index (an int) above
        self._roll = np.array([[0.0, -radius, 0.0], [radius, 0.0, 0.0], [0.0, 0.0, 0.0]])
        # Each foot's 3x3 base-velocity block of the innovation covariance (rows r+3..r+6).
        block = self._rows_per_foot * np.arange(self.num_feet)[:, None] + 3 + np.arange(3)[None, :]
        self._velocity_rows = block[:, :, None].repeat(3, axis=2)
        self._velocity_cols = block[:, None, :].repeat(3, axis=1)
        self.last_nis = 0.0
        self.updates = 0

    def _leg_joints(self) -> list[np.ndarray]:
        """Joint indices that move each foot, from the Jacobian's sparsity at the default pose."""
        _, jacobians = self.kinematics.foot_jacobians(self.profile.default_positions)
        legs = [np.flatnonzero(np.any(np.abs(j) > 1e-9, axis=0)) for j in jacobians]
        for foot, joints in zip(self.profile.foot_links, legs):
            if len(joints) != 3:
                raise ValueError(
                    f"LegKalmanFilter: foot {foot!r} moves with {len(joints)} joints; effort-based "
                    "contact needs three joints per leg (use contact source: gait)"
                )
        return legs

    def reset(self, rotation: np.ndarray, feet_body: np.ndarray) -> None:
        """Start standing still: the feet on the ground, the base above them at the given x, y."""
        feet_rel = feet_body @ rotation.T
        c = self.config
        feet_rel[:, 2] -= c.foot_radius
        height = (c.ground_height if c.ground_height is not None else 0.0) - float(np.mean(feet_rel[:, 2]))
        position = np.array([*self._initial_xy, height])
        self.x[:] = 0.0
        self.x[0:3] = position
        self.x[FEET:] = (position + feet_rel).ravel()
        bias = c.accelerometer_bias_prior**2
        self.P = np.diag([1e-4] * 3 + [1e-2] * 3 + [bias] * 3 + [1e-3] * 3 * self.num_feet)

    def step(
        self,
        t: float,
        orientation: Sequence[float],
        angular_velocity: Sequence[float],
        linear_acceleration: Sequence[float],
        joint_position: Sequence[float],
        joint_velocity: Sequence[float],
        joint_effort: Optional[Sequence[float]] = None,
    ) -> BaseEstimate:
        """One IMU sample at time ``t`` (s) with the newest joint state (profile order, SI).
        ValueError, the state untouched, for a sample with a NaN or infinite value: folded in,
        one would make the state NaN for good."""
        require_finite(
            t=t,
            orientation=orientation,
            angular_velocity=angular_velocity,
            linear_acceleration=linear_acceleration,
            joint_position=joint_position,
            joint_velocity=joint_velocity,
            joint_effort=joint_effort,
        )
        sample = ImuSample(
            t,
            unit_orientation(orientation),
            np.asarray(angular_velocity, dtype=float),
            np.asarray(linear_acceleration, dtype=float),
        )
        return self._advance((sample,), joint_position, joint_velocity, joint_effort)

    def step_batch(
        self,
        samples: Sequence["ImuSample"],
        joint_position: Sequence[float],
        joint_velocity: Sequence[float],
        joint_effort: Optional[Sequence[float]] = None,
    ) -> BaseEstimate:
        """The IMU samples since the last call (checked with :func:`imu_sample`, in the order
        they came) with the newest joint state: each sample's acceleration integrates the base
        over its own interval, then the covariance is propagated and the legs update the filter
        once, at the newest sample. Four of five leg updates given up on a 500 Hz IMU in batches
        of five, for most of the filter's CPU (benchmarks/estimation.py compares the two on one
        trot; docs/results.md). One sample: :meth:`step`.
        ValueError, the state untouched, for no samples or a non-finite joint state."""
        if not samples:
            raise ValueError("step_batch needs at least one IMU sample")
        require_finite(joint_position=joint_position, joint_velocity=joint_velocity, joint_effort=joint_effort)
        return self._advance(samples, joint_position, joint_velocity, joint_effort)

    def _advance(self, samples: Sequence["ImuSample"], joint_position, joint_velocity, joint_effort) -> BaseEstimate:
        newest = samples[-1]
        t, q_xyzw, omega = newest.t, newest.orientation, newest.angular_velocity
        R = quat_to_matrix(q_xyzw)
        dq = np.asarray(joint_velocity, dtype=float)
        feet_body, jacobians = self.kinematics.frame_jacobians(joint_position, self._feet, angular=True)
        effort = None if joint_effort is None or len(joint_effort) == 0 else np.asarray(joint_effort, dtype=float)
        if self._t is None:
            self.reset(R, feet_body)
            self._t = samples[0].t
        # A rolling foot sphere: its contact point travels at w_foot x (0, 0, radius) while the
        # material point touching the ground stands. Over a stance the leg pitches by a net angle,
        # so without this the trot's velocity was biased by 0.04 m/s and its position by 5 %.
        rolling = ((omega + jacobians[:, 3:] @ dq) @ R.T) @ self._roll
        elapsed = 0.0
        x = self.x
        for sample in samples:
            dt = sample.t - self._t
            self._t = sample.t
            if dt > 0:  # a repeated or earlier stamp adds no time
                R_sample = R if sample is newest else quat_to_matrix(sample.orientation)
                acceleration = R_sample @ (sample.linear_acceleration - x[BIAS]) + GRAVITY
                x[0:3] += x[3:6] * dt + 0.5 * acceleration * dt * dt
                x[3:6] += acceleration * dt
                elapsed += dt
        # Each foot's velocity relative to the base, in the world frame (omega x r + J dq): the
        # legs' measurement of the base velocity, and with it each foot's own speed.
        skew = np.array([[0.0, -omega[2], omega[1]], [omega[2], 0.0, -omega[0]], [-omega[1], omega[0], 0.0]])
        relative_velocity = (feet_body @ skew.T + jacobians[:, :3] @ dq) @ R.T
        # Contact after the prediction: a landing foot's speed is judged on this step's velocity.
        foot_speed = None
        contact_config = self.config.contact
        if (contact_config.landing_speed > 0 or contact_config.still_speed > 0) and contact_config.source == "effort":
            foot_speed = np.linalg.norm(x[3:6] + relative_velocity, axis=1)
        contact = self.contact_detector.update(t, R, jacobians[:, :3], effort, self.leg_joints, foot_speed).copy()
        if elapsed > 0:
            self._propagate(elapsed, contact, rolling, R)
        self._update(t, R, relative_velocity, feet_body, jacobians, contact, rolling)
        return BaseEstimate(
            t,
            self.x[0:3].copy(),
            self.x[3:6].copy(),
            q_xyzw.copy(),
            omega.copy(),
            self.x[FEET:].reshape(-1, 3).copy(),
            contact,
            self.P.copy(),
        )

    def _sensor_velocity_noise(self, R: np.ndarray, feet_body: np.ndarray, jacobians: np.ndarray) -> np.ndarray:
        """Per foot, the covariance its base-velocity measurement takes from the encoders'
        velocity noise (J dq: sigma^2 J J^T) and the gyro's (omega x r: sigma^2 [r]x [r]x^T),
        in the world frame. A Go2 leg's Jacobian turns 0.75 rad/s of encoder noise into about
        0.2 m/s at the foot; foot_velocity_noise alone (0.08 m/s) would trust the legs over the
        IMU. The gyro's noise is common to all feet; its cross-foot terms are left out."""
        c = self.config
        legs = R @ jacobians[:, :3]  # (feet, 3, joints)
        cov = c.joint_velocity_noise**2 * (legs @ legs.transpose(0, 2, 1))
        if c.gyro_noise > 0:
            # [r]x [r]x^T = |r|^2 I - r r^T, written out: the products of the skew matrices cost
            # more than the rest of the update (it runs once per leg update).
            r = feet_body @ R.T  # lever arms in the world frame
            square = r * r
            arm = -(r[:, :, None] * r[:, None, :])
            arm[:, 0, 0] = square[:, 1] + square[:, 2]
            arm[:, 1, 1] = square[:, 0] + square[:, 2]
            arm[:, 2, 2] = square[:, 0] + square[:, 1]
            cov += c.gyro_noise**2 * arm
        return cov

    def _propagate(self, dt: float, contact: np.ndarray, rolling: np.ndarray, R: np.ndarray) -> None:
        """The feet over ``dt`` and the covariance: P = F P F^T + Q. Over a batch, one F and Q for
        its whole span: F = I + dt * d position / d velocity composes exactly; the velocity's
        dependence on the bias (-R dt) takes the newest sample's R, and the position's on it
        (second order in dt) and Q's cross terms between the samples are left out."""
        c = self.config
        x, P = self.x, self.P
        x[FEET:] += (rolling * contact[:, None]).ravel() * dt
        # P = F P F^T with F = I + dt * (d position / d velocity), written out.
        P[0:3, :] += dt * P[3:6, :]
        P[:, 0:3] += dt * P[:, 3:6]
        if c.accelerometer_bias_prior > 0 or c.accelerometer_bias_noise > 0:
            # ... and the velocity's dependence on the bias, d velocity / d bias = -R dt.
            coupling = -dt * R
            P[3:6, :] += coupling @ P[BIAS, :]
            P[:, 3:6] += P[:, BIAS] @ coupling.T
        q = np.empty(len(x))
        q[0:3] = c.position_noise**2 * dt
        q[3:6] = c.accelerometer_noise**2 * dt
        q[BIAS] = c.accelerometer_bias_noise**2 * dt
        feet = np.where(contact, c.foot_stance_noise, c.foot_swing_noise) ** 2 * dt
        q[FEET:] = np.repeat(feet, 3)
        P[self._state_diagonal] += q

    def _update(
        self,
        t: float,
        R: np.ndarray,
        relative_velocity: np.ndarray,
        feet_body: np.ndarray,
        jacobians: np.ndarray,
        contact: np.ndarray,
        rolling: np.ndarray,
    ) -> None:
        """``relative_velocity``: each foot's velocity relative to the base, world frame."""
        c = self.config
        k = self._rows_per_foot
        z = np.empty((self.num_feet, k))
        # A standing foot is still: the base moves at minus the foot's velocity relative to it.
        z[:, 3:6] = rolling - relative_velocity
        # The foot state is the contact point, a radius below the foot sphere's centre.
        z[:, 0:3] = feet_body @ R.T
        z[:, 2] -= c.foot_radius
        inflation = np.where(contact, 1.0, c.swing_inflation)[:, None]
        noise = np.empty((self.num_feet, k))
        noise[:, 0:3] = c.foot_position_noise**2
        noise[:, 3:6] = c.foot_velocity_noise**2 * inflation
        if k == 7:
            z[:, 6] = c.ground_height
            noise[:, 6] = c.foot_height_noise**2 * inflation[:, 0]
        H, P = self.H, self.P
        y = z.ravel() - H @ self.x
        PHt = P @ H.T
        S = H @ PHt
        S[self._innovation_diagonal] += noise.ravel()
        if c.joint_velocity_noise > 0 or c.gyro_noise > 0:
            S[self._velocity_rows, self._velocity_cols] += (
                self._sensor_velocity_noise(R, feet_body, jacobians) * (inflation[:, :, None])
            )
        S_inv = np.linalg.inv(S)
        K = PHt @ S_inv
        self.x += K @ y
        P -= K @ PHt.T
        self.P = 0.5 * (P + P.T)
        # NIS per degree of freedom of the feet that stand; a swing foot's rows, with their
        # inflated variance, add next to nothing to y^T S^-1 y and are not counted as dof.
        dof = int(contact.sum()) * k
        nis = float(y @ S_inv @ y) if dof else 0.0
        self.last_nis = nis / dof if dof else 0.0
        self.updates += 1
        self.divergence.add(t, nis, dof, self.x, self.P[3:6, 3:6])


# ------------------------------------------------------------------------------------- arm
