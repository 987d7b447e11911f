"""The robot's newest inputs, assembled into :class:`RobotSignals` for a policy tick.

A node hands every message it receives to a :class:`RobotInputs` (joint states, IMU,
state estimate, velocity command, goal) and asks it for :meth:`RobotInputs.signals`
once per tick. Each signal has one source, named after its topic, so that a policy
which cannot run yet is told *why* in the operator's terms
(``policy needs base_lin_vel: no /state_estimate received``) instead of being fed a
made-up value. The one deliberate default is the velocity command: with no fresh
``/cmd_vel`` it is zero (stand still), the command a walking policy is trained to
answer by standing, and the only safe meaning of "nobody is steering".

Three signals belong to each policy, not to the robot: ``last_action`` (its own previous
action), ``default_joint_position`` (the pose it was trained around) and ``gait_phase``
(its own gait clock, core/gait.py). The policy slot fills them per policy, so two policies running side by side during a cross-fade
never see each other's actions.

Not thread-safe: the setters and :meth:`signals` are meant for one control thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from sim2real.core.joint_state_order import JointStateOrder
from sim2real.core.observation import VOCABULARY, ObservationSpec, RobotSignals
from sim2real.core.robot_profile import RobotProfile
from sim2real.core.rotations import unit_orientation

if TYPE_CHECKING:  # imported where first used: pinocchio only loads for arms
    from sim2real.core.kinematics import Kinematics

# Where each robot signal comes from, as the operator would look for it.
SOURCES = {
    "joint_position": "/joint_states",
    "joint_velocity": "/joint_states velocity",
    "base_orientation": "/imu/data",
    "base_angular_velocity": "/imu/data",
    "base_linear_velocity": "/state_estimate",
    "velocity_command": "/cmd_vel",
    "goal_position": "/goal_pose",
    "end_effector_position": "/joint_states (for forward kinematics)",
}
PER_POLICY = ("last_action", "default_joint_position", "gait_phase")
CMD_VEL_TIMEOUT_S = 0.5  # teleop tools repeat /cmd_vel at >= 10 Hz; silence this long means nobody steers
# The estimator publishes every 10 ms (its batch period; per IMU sample in lockstep): silent this long, it has stopped (crashed,
# killed), and its last velocity would be fed to the policy as if current. Counted as missing
# (the policy waits and the supervisor holds); long enough that a busy machine's stall is not.
STATE_ESTIMATE_TIMEOUT_S = 0.25


def missing_inputs(spec: ObservationSpec, signals: RobotSignals) -> list[str]:
    """Why ``signals`` cannot fill ``spec`` (empty: it can), one line per observation term. A
    signal holding NaN or inf counts as missing: fed to the policy, it would come back as its
    next ``last_action`` and poison every later tick."""
    # Every tick: one check over all the signals the spec reads; the reasons only when it fails.
    values = [getattr(signals, name) for name in spec.signals_needed() if name not in PER_POLICY]
    if all(value is not None for value in values) and np.isfinite(np.concatenate([np.ravel(v) for v in values])).all():
        return []
    reasons = []
    for term in spec.terms:
        names = [name for name in VOCABULARY[term.name].signals if name not in PER_POLICY]
        absent = [name for name in names if getattr(signals, name) is None]
        invalid = [name for name in names if name not in absent and not np.all(np.isfinite(getattr(signals, name)))]
        sources = list(dict.fromkeys(SOURCES[name] for name in absent))
        if sources:
            reasons.append(f"policy needs {term.name}: no {' and no '.join(sources)} received")
        bad = list(dict.fromkeys(SOURCES[name] for name in invalid))
        if bad:
            reasons.append(
                f"policy needs {term.name}: the newest {' and '.join(bad)} has NaN or infinite values "
                "(the driver's; the policy waits for a valid one)"
            )
    return reasons


def unbuildable_terms(spec: ObservationSpec, profile: RobotProfile) -> list[str]:
    """Observation terms this robot can never supply, whatever arrives (empty: all can be built)."""
    never = {}
    if profile.end_effector_link is None:
        never["end_effector_position"] = f"robot {profile.name!r} has no end_effector_link for forward kinematics"
    if profile.fixed_base:
        reason = f"robot {profile.name!r} has a fixed base: it publishes no /imu/data and has no /state_estimate"
        for name in ("base_orientation", "base_angular_velocity", "base_linear_velocity"):
            never[name] = reason
    problems = []
    for term in spec.terms:
        definition = VOCABULARY[term.name]
        for name in definition.signals:
            if name in never:
                problems.append(f"observation term {term.name!r} cannot be built: {never[name]}")
                break
        else:
            if definition.per_joint and term.size != profile.num_joints:
                problems.append(
                    f"observation term {term.name!r} has {term.size} values, robot "
                    f"{profile.name!r} has {profile.num_joints} joints"
                )
    return problems


class RobotInputs:
    """Newest value of each robot input, in profile joint order and SI units."""

    def __init__(self, profile: RobotProfile, cmd_vel_timeout: float = CMD_VEL_TIMEOUT_S):
        self.profile = profile
        self.cmd_vel_timeout = cmd_vel_timeout
        self._order = JointStateOrder(profile.joint_names, profile.name)
        self._position: Optional[Sequence[float]] = None
        self._velocity: Optional[Sequence[float]] = None
        self.joint_states_stamp_ns: Optional[int] = None
        self._orientation: Optional[np.ndarray] = None
        self._angular_velocity: Optional[np.ndarray] = None
        self._linear_velocity: Optional[Sequence[float]] = None
        self._linear_velocity_time: Optional[float] = None
        self._command = np.zeros(3)
        self._command_time: Optional[float] = None
        self._goal: Optional[np.ndarray] = None
        self._kinematics: Optional[Kinematics] = None  # built on first use: pinocchio only loads for arms

    # -- messages in ------------------------------------------------------------------------
    def set_joint_states(
        self, names: Sequence[str], position: Sequence[float], velocity: Sequence[float], stamp_ns: int
    ) -> None:
        """A /joint_states message; raises ValueError (and keeps the previous state) if it
        lacks a joint of the profile or its arrays do not match its names."""
        self._order.index_of(names, position, velocity)  # the order's index follows the names
        # Stored raw: this runs at the sensing rate, the conversion only once per tick.
        self._position = position
        self._velocity = velocity if len(velocity) else None
        self.joint_states_stamp_ns = int(stamp_ns)

    def in_profile_order(self, values: Sequence[float]) -> np.ndarray:
        """A /joint_states array (the last message's name order) in profile joint order."""
        return np.asarray(values, dtype=float)[self._order.index]

    def set_imu(self, orientation_xyzw: Sequence[float], angular_velocity: Sequence[float]) -> None:
        """An /imu/data sample; raises ValueError (and keeps the previous sample) when the
        orientation is no unit quaternion or the rates are not finite. A nearly unit one is
        normalised."""
        orientation = unit_orientation(orientation_xyzw)
        rates = np.asarray(angular_velocity, dtype=float)
        if rates.shape != (3,) or not np.all(np.isfinite(rates)):
            raise ValueError(f"/imu/data angular velocity {rates.tolist()} is not three finite numbers; sample refused")
        self._orientation = orientation
        self._angular_velocity = rates

    def set_state_estimate(self, linear_velocity_body: Sequence[float], now: Optional[float] = None) -> None:
        """Base linear velocity in the body frame (nav_msgs/Odometry twist, child frame);
        ``now``: when it arrived (node time, s), after which it counts for
        STATE_ESTIMATE_TIMEOUT_S (None: for ever, as in replays fed one state per tick)."""
        self._linear_velocity = linear_velocity_body
        self._linear_velocity_time = now

    def set_velocity_command(self, vx: float, vy: float, yaw_rate: float, now: float) -> None:
        """A /cmd_vel; raises ValueError (and keeps the previous command, which times out as
        usual) if it is not finite: a NaN command would silence the policy, not steer it."""
        command = np.array([vx, vy, yaw_rate], dtype=float)
        if not np.all(np.isfinite(command)):
            raise ValueError(
                f"/cmd_vel with non-finite values (vx, vy, yaw rate) = {command.tolist()} ignored; "
                "the previous command goes on until it times out"
            )
        self._command = command
        self._command_time = now

    def set_goal(self, position: Sequence[float], frame_id: str = "") -> None:
        """The arm's target position; only the base frame is accepted (there is no tf here)."""
        if frame_id not in ("", self.profile.base_link):
            raise ValueError(
                f"/goal_pose in frame {frame_id!r} ignored: give it in the base frame "
                f"{self.profile.base_link!r} (or leave frame_id empty)"
            )
        goal = np.array(position, dtype=float)
        if goal.shape != (3,) or not np.all(np.isfinite(goal)):
            raise ValueError(
                f"/goal_pose position {goal.tolist()} ignored: it is not three finite numbers; the previous goal stays"
            )
        self._goal = goal

    # -- signals out --------------------------------------------------------------------------
    def signals(self, now: float) -> RobotSignals:
        """Everything available now (fields never received are None), new arrays each call, so a
        returned snapshot stays valid after later messages."""
        s = RobotSignals()
        if self._position is not None:
            s.joint_position = np.asarray(self._position, dtype=float)[self._order.index]
            if self._velocity is not None:
                s.joint_velocity = np.asarray(self._velocity, dtype=float)[self._order.index]
            if self.profile.end_effector_link is not None:
                if self._kinematics is None:
                    from sim2real.core.kinematics import Kinematics

                    self._kinematics = Kinematics(self.profile)
                s.end_effector_position = self._kinematics.end_effector_position(s.joint_position)
        if self._orientation is not None:
            s.base_orientation = np.array(self._orientation, dtype=float)
            s.base_angular_velocity = np.array(self._angular_velocity, dtype=float)
        if self._linear_velocity is not None and (
            self._linear_velocity_time is None or now - self._linear_velocity_time <= STATE_ESTIMATE_TIMEOUT_S
        ):
            s.base_linear_velocity = np.array(self._linear_velocity, dtype=float)
        fresh = self._command_time is not None and now - self._command_time <= self.cmd_vel_timeout
        s.velocity_command = self._command.copy() if fresh else np.zeros(3)
        if self._goal is not None:
            s.goal_position = self._goal.copy()
        return s

    def missing(self, spec: ObservationSpec, now: float) -> list[str]:
        return missing_inputs(spec, self.signals(now))
