"""What every world shares whatever its engine: the arguments, the named conditions and their
checks, the actuator's commands, pushes, sensor noise and the clock.

:class:`~sim2real.sim.world.SimWorld` (PyBullet) and
:class:`~sim2real.sim.mujoco_world.MujocoWorld` derive from :class:`WorldBase`; an engine
adds loading, stepping, applying conditions to its model, and reading its state.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import replace
from typing import NamedTuple, Sequence

import numpy as np

from sim2real.core.robot_profile import RobotProfile
from sim2real.sim.actuator import Actuator
from sim2real.sim.conditions import PhysicalConditions

GRAVITY = 9.81


class JointState(NamedTuple):
    position: np.ndarray  # rad
    velocity: np.ndarray  # rad/s
    effort: np.ndarray  # N*m, motor torque of the last physics step


class ImuReading(NamedTuple):
    orientation: np.ndarray  # (x, y, z, w), IMU frame in world
    angular_velocity: np.ndarray  # rad/s, IMU frame
    linear_acceleration: np.ndarray  # m/s^2, IMU frame, proper acceleration (+g up at rest)


class WorldBase(ABC):
    """One robot under named physical conditions, driven by an :class:`Actuator`.

    Subclasses set ``self._actuator`` and ``self._n`` while loading, and implement
    :meth:`_apply_conditions`, ``reset``, ``step`` and the sensing calls.
    """

    engine = ""
    _actuator: Actuator
    _n: int

    def __init__(
        self,
        profile: RobotProfile,
        conditions: PhysicalConditions | None,
        seed: int,
        gravity_compensation: bool | None,
        physics_period: float | None,
        suspended: bool,
    ):
        """``gravity_compensation``: emulate a robot controller that adds gravity torques to
        every command (see :mod:`sim2real.sim.gravity_compensation`). None takes the
        profile's ``gravity_compensation``.

        ``suspended``: hold a floating-base robot's trunk in the air, feet clear of the
        ground, as a gantry or a stand holds a real quadruped for joint checks. The base
        stays where ``reset`` puts it (by default ``SUSPENSION_CLEARANCE`` above its
        standing height) and the legs move freely."""
        self.profile = profile
        if suspended:
            profile.check_suspendable()
        self.suspended = bool(suspended)
        if gravity_compensation is None:
            gravity_compensation = profile.gravity_compensation
        if gravity_compensation and not profile.fixed_base:
            raise ValueError(
                f"gravity_compensation: robot {profile.name!r} has a floating base; "
                "only a fixed-base robot's controller can compensate gravity per joint"
            )
        self.gravity_compensation = bool(gravity_compensation)
        self._conditions = replace(conditions) if conditions is not None else PhysicalConditions()
        self._conditions.validate()
        for name in PhysicalConditions.names():
            self._check_condition(name, getattr(self._conditions, name))
        self.seed = int(seed)
        terrain_seed, noise_seed = np.random.SeedSequence(self.seed).spawn(2)
        self._terrain_rng = np.random.default_rng(terrain_seed)
        self._noise_rng = np.random.default_rng(noise_seed)
        # Training may step coarser than the driver (legged-gym style 5 ms); default: the profile's.
        self._dt = float(physics_period or profile.physics_period)
        self._push_force = (0.0, 0.0, 0.0)
        self._push_steps = 0

    # -------------------------------------------------------------- conditions
    @property
    def conditions(self) -> PhysicalConditions:
        """A copy of the conditions in effect (edit them through :meth:`set_condition`)."""
        return replace(self._conditions)

    @property
    def torque_limit_scale(self) -> float:
        """Fraction of the effort limits the motors have now (battery sag, capped at 1)."""
        return self._actuator.torque_scale

    def set_condition(self, name: str, value) -> None:
        self.set_conditions(**{name: value})

    def set_conditions(self, **values) -> None:
        """Set conditions by name; all are validated before any is applied.

        A terrain change rebuilds the ground under the robot where it stands: call
        ``reset`` afterwards to spawn it above the new ground.
        """
        checked = {}
        for name, value in values.items():
            if name not in PhysicalConditions.names():
                raise ValueError(f"unknown condition {name!r}; valid names: {', '.join(PhysicalConditions.names())}")
            checked[name] = PhysicalConditions.check(name, value)
            self._check_condition(name, checked[name])
        changed = {name: v for name, v in checked.items() if getattr(self._conditions, name) != v}
        for name, value in changed.items():
            setattr(self._conditions, name, value)
        if changed:
            self._apply_conditions(list(changed))

    @abstractmethod
    def _apply_conditions(self, names: list[str]) -> None:
        """Bring the engine's model to ``self._conditions`` for the conditions named."""

    def _check_condition(self, name: str, value) -> None:
        """ValueError for a valid condition value this world cannot take (nothing applied yet).
        Engines extend it with their own limits."""
        if name == "battery_voltage" and value is not None and self.profile.battery_nominal_voltage is None:
            raise ValueError(
                f"condition 'battery_voltage': robot {self.profile.name!r} has no "
                "battery_nominal_voltage in its profile; leave battery_voltage None"
            )

    def _battery_torque_scale(self) -> float:
        voltage, nominal = self._conditions.battery_voltage, self.profile.battery_nominal_voltage
        return 1.0 if voltage is None or nominal is None else voltage / nominal

    # --------------------------------------------------------------- lifecycle
    @property
    def physics_period(self) -> float:
        return self._dt

    @property
    def time(self) -> float:
        """Seconds of simulated time since the last reset."""
        return self._actuator.steps * self._dt

    def close(self) -> None:  # noqa: B027 - a default an engine may keep, not a required method
        """Release the engine's resources (nothing by default)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---------------------------------------------------------------- control
    def command(
        self,
        position: Sequence[float] | np.ndarray,
        velocity: Sequence[float] | np.ndarray | None = None,
        effort: Sequence[float] | np.ndarray | None = None,
        kp: Sequence[float] | np.ndarray | float | None = None,
        kd: Sequence[float] | np.ndarray | float | None = None,
    ) -> None:
        """PD command in profile joint order (rad, rad/s, N*m); kp/kd default to the profile's.

        Takes effect ``latency`` after the current time and ends damping mode then.
        """
        self._actuator.command(position, velocity, effort, kp, kd)

    def damp(self) -> None:
        """Damping mode (tau = -damping_kd * dq, the gain capped per joint where explicit
        integration could not follow it) from now until the next command takes effect."""
        self._actuator.damp()

    def apply_push(self, force: Sequence[float], duration: float) -> None:
        """Push the base's centre of mass with a world-frame force (N) for ``duration`` s."""
        vector = as_vector3(force, "force")
        try:
            seconds = float(duration)
        except (TypeError, ValueError):
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"push duration must be a finite number of seconds >= 0, got {duration!r}")
        self._push_force = vector
        self._push_steps = int(math.floor(seconds / self._dt + 0.5))

    # ---------------------------------------------------------------- sensing
    @abstractmethod
    def true_joint_state(self) -> JointState:
        """Joint position, velocity and motor torque now, without sensor noise."""

    def joint_state(self, true: JointState | None = None) -> JointState:
        """Joint readings as an encoder would give them: with the configured noise. ``true``:
        this instant's :meth:`true_joint_state` when the caller has read it already (a
        training step reads both; the noise goes on copies)."""
        state = (
            self.true_joint_state()
            if true is None
            else JointState(true.position.copy(), true.velocity.copy(), true.effort.copy())
        )
        conditions, rng = self._conditions, self._noise_rng
        position, velocity, _ = state
        if conditions.joint_position_noise > 0:
            position += rng.normal(0.0, conditions.joint_position_noise, self._n)
        if conditions.joint_velocity_noise > 0:
            velocity += rng.normal(0.0, conditions.joint_velocity_noise, self._n)
        return state

    def _imu_noise(self, gyro: np.ndarray, accel: np.ndarray) -> None:
        """Add the configured IMU noise to the readings, in place."""
        conditions, rng = self._conditions, self._noise_rng
        if conditions.gyro_noise > 0:
            gyro += rng.normal(0.0, conditions.gyro_noise, 3)
        if conditions.accelerometer_noise > 0:
            accel += rng.normal(0.0, conditions.accelerometer_noise, 3)


def as_vector3(value, name: str) -> tuple[float, float, float]:
    array = np.asarray(value, dtype=float)
    if array.shape != (3,) or not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: expected 3 finite numbers (x, y, z), got {value!r}")
    return float(array[0]), float(array[1]), float(array[2])


def as_quaternion(value) -> tuple[float, float, float, float]:
    array = np.asarray(value, dtype=float)
    norm = float(np.linalg.norm(array)) if array.shape == (4,) else 0.0
    if array.shape != (4,) or not math.isfinite(norm) or norm < 1e-6:
        raise ValueError(f"base_orientation: expected a quaternion (x, y, z, w), got {value!r}")
    unit = array / norm
    return float(unit[0]), float(unit[1]), float(unit[2]), float(unit[3])
