"""An open-loop joint-space trot for a quadruped: motion to test estimators on, not a controller.

There is no walking policy yet, and an estimator must still be shown to follow a robot
whose feet lift and land. :class:`Trot` gives, for a time, PD joint targets around the
profile's default pose: diagonal pairs (FL+RR, then FR+RL) alternate; a swinging leg
bends its knee to lift the foot and swings its thigh forward, a standing leg sweeps its
thigh back, which pushes the body forward. Nothing closes the loop: speed depends on
friction and gains, and the body sways. :func:`record_trot` runs it in a
:class:`SimWorld` and keeps, per sensing period, what the robot's sensors report and
what the simulator knows (the ground truth).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sim2real.core.robot_profile import RobotProfile
from sim2real.sim.world import SimWorld

# Leg order FL, FR, RL, RR: FL and RR swing together, then FR and RL.
TROT_OFFSETS = (0.0, 0.5, 0.5, 0.0)


@dataclass(frozen=True)
class Trot:
    period: float = 0.3  # s per gait cycle
    stride: float = 0.26  # rad: thigh sweep, front to back
    lift: float = 0.55  # rad: extra knee bend at mid swing
    duty: float = 0.5  # fraction of the cycle a foot stands
    ramp: float = 1.0  # s over which stride and lift grow from zero (no jolt at the start)

    def phases(self, t: float) -> np.ndarray:
        return (t / self.period + np.asarray(TROT_OFFSETS)) % 1.0

    def stance(self, t: float) -> np.ndarray:
        """Which feet the script means to stand at time t (the gait-phase contact model)."""
        return self.phases(t) < self.duty

    def targets(self, profile: RobotProfile, t: float) -> np.ndarray:
        scale = min(1.0, t / self.ramp) if self.ramp > 0 else 1.0
        q = profile.default_positions.copy()
        for leg, phase in enumerate(self.phases(t)):
            if phase < self.duty:  # stance: thigh from front (-) to back (+) pushes the body forward
                s = phase / self.duty
                thigh, knee = -0.5 + s, 0.0
            else:  # swing: back to front, knee bent most at mid swing
                s = (phase - self.duty) / (1.0 - self.duty)
                thigh, knee = 0.5 - s, math.sin(math.pi * s)
            q[3 * leg + 1] += scale * self.stride * thigh
            q[3 * leg + 2] -= scale * self.lift * knee
            q[3 * leg + 1] += scale * 0.5 * self.lift * knee  # the knee-up swing kicks back: the body trots backwards
        return q


@dataclass
class Recording:
    """Per sensing period: sensor readings (what a driver publishes) and the ground truth."""

    t: list = field(default_factory=list)
    joint_position: list = field(default_factory=list)
    joint_velocity: list = field(default_factory=list)
    joint_effort: list = field(default_factory=list)
    orientation: list = field(default_factory=list)
    gyro: list = field(default_factory=list)
    accel: list = field(default_factory=list)
    true_position: list = field(default_factory=list)
    true_velocity: list = field(default_factory=list)  # world frame
    true_contact: list = field(default_factory=list)  # any contact point with the ground
    true_force: list = field(default_factory=list)  # ground normal force per foot, N
    script_stance: list = field(default_factory=list)

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: np.asarray(v) for k, v in self.__dict__.items()}


def record_trot(
    world: SimWorld, duration: float, trot: Trot | None = None, stand: float = 0.5, events=None
) -> Recording:
    """Stand for ``stand`` s, then trot for the rest of ``duration``. ``events``: optional
    {time s: callable(world)} run once when the time is reached (a push, a slippery floor)."""
    trot = trot or Trot()
    profile = world.profile
    substeps = round(profile.sensing_period / profile.physics_period)
    steps = int(round(duration / profile.sensing_period))
    pending = dict(sorted((events or {}).items()))
    rec = Recording()
    for k in range(steps):
        t = k * profile.sensing_period
        for when in [w for w in pending if w <= t]:
            pending.pop(when)(world)
        gait_t = t - stand
        world.command(trot.targets(profile, gait_t) if gait_t > 0 else profile.default_positions)
        world.step(substeps)
        t += profile.sensing_period
        joints, imu = world.joint_state(), world.imu()
        position, _ = world.base_pose()
        linear, _ = world.base_velocity()
        rec.t.append(t)
        rec.joint_position.append(joints.position)
        rec.joint_velocity.append(joints.velocity)
        rec.joint_effort.append(joints.effort)
        rec.orientation.append(imu.orientation)
        rec.gyro.append(imu.angular_velocity)
        rec.accel.append(imu.linear_acceleration)
        rec.true_position.append(position)
        rec.true_velocity.append(linear)
        rec.true_contact.append(world.foot_contacts())
        rec.true_force.append(world.foot_normal_forces())
        rec.script_stance.append(trot.stance(gait_t) if gait_t > 0 else np.ones(4, dtype=bool))
    return rec


@dataclass
class EstimatorReplay:
    """A :class:`LegKalmanFilter` run over a recording, against the recording's ground truth."""

    position: np.ndarray  # (T, 3) estimated, world
    velocity: np.ndarray  # (T, 3) estimated, world
    contact: np.ndarray  # (T, feet) estimated
    diverged: np.ndarray  # (T,) divergence reported at that sample
    window_nis: np.ndarray  # (T,) window-mean NIS per dof
    seconds_per_step: float

    def metrics(
        self, recording: dict[str, np.ndarray], skip: float = 1.0, bearing_force: float = 25.0
    ) -> dict[str, float]:
        """Velocity RMSE (after ``skip`` s), position drift as % of the distance travelled, and how
        often the contact estimate agrees with "the foot bears more than ``bearing_force`` N"
        (a dragging swing foot touches the ground, but the filter must not trust it)."""
        t = recording["t"]
        rows = t >= t[0] + skip
        error = self.velocity[rows] - recording["true_velocity"][rows]
        truth = recording["true_position"]
        distance = float(np.linalg.norm(np.diff(truth[:, :2], axis=0), axis=1).sum())
        drift = float(np.linalg.norm((self.position[-1] - self.position[0])[:2] - (truth[-1] - truth[0])[:2]))
        return {
            "velocity_rmse_mps": float(np.sqrt((error**2).sum(axis=1).mean())),
            "distance_m": distance,
            "drift_m": drift,
            "drift_percent": 100.0 * drift / distance if distance > 0 else float("nan"),
            "contact_agreement": float((self.contact == (recording["true_force"] > bearing_force)).mean()),
            "mean_speed_mps": float(np.linalg.norm(recording["true_velocity"][rows, :2], axis=1).mean()),
        }


def replay_estimator(
    estimator, recording: dict[str, np.ndarray], gyro_bias=(0.0, 0.0, 0.0), accel_bias=(0.0, 0.0, 0.0), batch: int = 1
) -> EstimatorReplay:
    """Feed ``recording`` (``Recording.arrays()``) to ``estimator``, adding constant IMU biases
    (SimWorld's IMU has white noise only; a real IMU's bias is what the filter must bear).
    ``batch`` 1: sample by sample (:meth:`LegKalmanFilter.step`); more: that many IMU samples
    per :meth:`LegKalmanFilter.step_batch` with the batch's newest joint state, each row holding
    the newest estimate made by then (as a consumer of the published estimates sees it)."""
    import time

    from sim2real.core.estimation.samples import imu_sample

    if batch < 1:
        raise ValueError(f"batch={batch}: give 1 (sample by sample) or more IMU samples per filter update")
    gyro = recording["gyro"] + np.asarray(gyro_bias)
    accel = recording["accel"] + np.asarray(accel_bias)
    n = len(recording["t"])
    position, velocity = np.empty((n, 3)), np.empty((n, 3))
    contact = np.empty((n, estimator.num_feet), dtype=bool)
    diverged, nis = np.empty(n, dtype=bool), np.empty(n)
    start = time.perf_counter()
    e = None
    for k in range(n):
        t = float(recording["t"][k])
        if batch == 1:
            e = estimator.step(
                t,
                recording["orientation"][k],
                gyro[k],
                accel[k],
                recording["joint_position"][k],
                recording["joint_velocity"][k],
                recording["joint_effort"][k],
            )
        elif (k + 1) % batch == 0 or k == n - 1:
            first = k - (k % batch)
            samples = [
                imu_sample(float(recording["t"][i]), recording["orientation"][i], gyro[i], accel[i])
                for i in range(first, k + 1)
            ]
            e = estimator.step_batch(
                samples, recording["joint_position"][k], recording["joint_velocity"][k], recording["joint_effort"][k]
            )
        if e is not None:  # rows before the first batch are filled with its estimate below
            position[k], velocity[k], contact[k] = e.position, e.velocity, e.contact
        diverged[k] = estimator.divergence.diverged(t)
        nis[k] = estimator.divergence.mean_nis
    elapsed = time.perf_counter() - start
    first = min(batch, n) - 1  # the first estimate: drift is measured from it, as sample by sample
    position[:first], velocity[:first], contact[:first] = position[first], velocity[first], contact[first]
    return EstimatorReplay(position, velocity, contact, diverged, nis, elapsed / n * batch)
