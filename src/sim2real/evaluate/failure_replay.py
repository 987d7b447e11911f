"""Replay a recorded failure in simulation: does this policy fail again from there?

The robot's own stack runs, ROS-free, around a :class:`~sim2real.sim.world.SimWorld`:
the recorded conditions (failure.json ``conditions``; nominal where unknown), held in the
air if it was (``suspended``), the robot put in the recorded joint state (and base
orientation) ``lead_s`` before the event, the recorded goal or velocity command, the
policy through :class:`PolicySlot` exactly as policy_runtime runs it, and the safety
supervisor's checks (:class:`SupervisorCore`, the robot's safety config) deciding what
reaches the joints. The replay *fails again*
when the supervisor trips out of ACTIVE (hold, damp, e-stop), the policy's output is
not finite, or the base tilts past the collector's fall threshold.

What cannot be replayed is said in the result's ``notes`` (unknown conditions, no base
pose recorded, a start from rest instead of the recorded velocities).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sim2real.core.bags import read_bag
from sim2real.core.errors import InputError
from sim2real.core.failure_bundle import Bundle
from sim2real.core.failure_config import TriggerConfig
from sim2real.core.joint_command import JointTargets
from sim2real.core.policy_slot import PolicyRefused, PolicySlot
from sim2real.core.robot_inputs import RobotInputs
from sim2real.core.robot_profile import RobotProfile, load_profile
from sim2real.core.rotations import tilt_angle
from sim2real.core.safety_config import SafetyConfig, load_safety_config
from sim2real.core.supervisor import Mode, SupervisorCore, SupervisorInputs
from sim2real.core.units import NS_PER_S
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.engines import DEFAULT_ENGINE, ENGINES, make_world
from sim2real.sim.robot_models import ModelError, resolve_model


class ReplayError(InputError):
    """A bundle that cannot be replayed, with the reason and the fix."""


@dataclass
class ReplayResult:
    bundle: str
    policy: str
    seed: int
    failed: bool
    reason: str
    survived_s: float
    duration_s: float
    conditions: dict[str, Any]
    max_tilt_deg: float
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Start:
    joint_names: list[str]
    position: np.ndarray
    orientation: np.ndarray | None
    goal: np.ndarray | None
    cmd_vel: np.ndarray | None
    notes: list[str]


def identified_conditions(info: dict[str, Any]) -> dict[str, float] | None:
    """Condition values of an identified config in failure.json: its top level or its
    ``conditions`` mapping, keeping the names PhysicalConditions knows."""
    content = (info.get("identified_config") or {}).get("content")
    if not isinstance(content, dict):
        return None
    source = content.get("conditions") if isinstance(content.get("conditions"), dict) else content
    found = {
        k: float(v)
        for k, v in source.items()
        if k in PhysicalConditions.names() and isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    return found or None


def recorded_policy(bundle: Bundle) -> str | None:
    policy = bundle.info.get("policy") or {}
    return policy.get("path")


def _start_state(bundle: Bundle, start_ns: int) -> _Start:
    """The newest recorded state at or before ``start_ns`` (the oldest one if none is)."""
    latest: dict[str, Any] = {}
    for topic, t, msg in read_bag(bundle.path, ["/joint_states", "/imu/data", "/goal_pose", "/cmd_vel"]):
        if t <= start_ns or topic not in latest:
            latest[topic] = msg
    if "/joint_states" not in latest:
        raise ReplayError(
            f"{bundle.path} holds no /joint_states: there is no state to start from. "
            "Fix: buffer /joint_states in the failure config"
        )
    js = latest["/joint_states"]
    notes = ["starts at rest: joint velocities are not restored"]
    imu = latest.get("/imu/data")
    orientation = None
    if imu is not None:
        o = imu.orientation
        orientation = np.array([o.x, o.y, o.z, o.w])
    goal_msg, twist = latest.get("/goal_pose"), latest.get("/cmd_vel")
    goal = (
        None
        if goal_msg is None
        else np.array([goal_msg.pose.position.x, goal_msg.pose.position.y, goal_msg.pose.position.z])
    )
    cmd_vel = None if twist is None else np.array([twist.linear.x, twist.linear.y, twist.angular.z])
    return _Start(list(js.name), np.asarray(js.position, float), orientation, goal, cmd_vel, notes)


def _recorded_conditions(info: dict, conditions: dict[str, Any] | None, notes: list[str]) -> dict[str, Any]:
    """The conditions to replay under: given, else recorded, else identified (sysid), else nominal."""
    recorded = conditions if conditions is not None else info.get("conditions")
    if recorded is None:
        recorded = identified_conditions(info)
        if recorded is not None:
            notes.append("conditions from the identified config (sysid), not measured at the event")
    if recorded is None:
        notes.append("conditions unknown (no sim_robot, no identified config): nominal conditions")
        recorded = {}
    return recorded


def _recorded_engine(info: dict, notes: list[str]) -> tuple[str, str | None]:
    """(engine, robot model) the bundle was recorded on, where this version has them."""
    engine = info.get("engine") or DEFAULT_ENGINE
    if engine not in ENGINES:
        notes.append(f"recorded on engine {engine!r}, which this version lacks: replayed on {DEFAULT_ENGINE}")
        engine = DEFAULT_ENGINE
    elif engine != DEFAULT_ENGINE:
        notes.append(f"replayed on {engine}, the engine it was recorded on")
    model = info.get("model") if engine == "mujoco" else None
    if model:
        try:
            resolve_model(model)
            notes.append(f"on the robot model it was recorded with ({model})")
        except ModelError as exc:
            notes.append(f"recorded on robot model {model!r}, not available here ({exc}): replayed on the profile's")
            model = None
    return engine, model


def _started_policy(bundle: Bundle, profile: RobotProfile, policy_path: Path) -> PolicySlot:
    slot = PolicySlot(profile, [policy_path.parent])
    try:
        slot.start(policy_path)
    except PolicyRefused as exc:
        raise ReplayError(
            f"{bundle.name} was recorded on robot {profile.name!r} and cannot replay with this "
            f"policy: {exc}. Fix: give a policy trained for {profile.name!r} with --policy FILE, "
            "or leave --policy out to replay the recorded one"
        ) from None
    return slot


@dataclass
class _Outcome:
    failed: bool = False
    reason: str = ""
    max_tilt: float = 0.0
    survived: float = 0.0


def _run_from(
    world,
    profile: RobotProfile,
    safety: SafetyConfig,
    slot: PolicySlot,
    start: _Start,
    q0: np.ndarray,
    total_ticks: int,
) -> _Outcome:
    """Tick the policy behind a simulated supervisor (ACTIVE from the start, as the robot was) until
    ``total_ticks`` or the first failure: a non-finite action, a supervisor trip or a fall."""
    inputs = RobotInputs(profile)
    period = profile.policy_period
    supervisor = SupervisorCore(profile, safety, safety.command_period or period, simulated=True)
    sup_inputs = SupervisorInputs()
    fall_deg = TriggerConfig().fall_tilt_deg
    steps = max(1, round(period / profile.physics_period))
    world.reset(q0, base_orientation=start.orientation if not profile.fixed_base else None)
    world.command(q0)
    if start.goal is not None:
        inputs.set_goal(start.goal)
    outcome = _Outcome(survived=total_ticks * period)
    for tick in range(total_ticks):
        t = tick * period
        state = world.joint_state()
        inputs.set_joint_states(profile.joint_names, state.position, state.velocity, int(t * NS_PER_S))
        if start.cmd_vel is not None:
            inputs.set_velocity_command(*start.cmd_vel, now=t)
        sup_inputs.joint_position, sup_inputs.joint_velocity = state.position, state.velocity
        sup_inputs.joint_states_time = t
        if not profile.fixed_base:
            imu = world.imu()
            inputs.set_imu(imu.orientation, imu.angular_velocity)
            sup_inputs.base_orientation, sup_inputs.imu_time = np.asarray(imu.orientation), t
            outcome.max_tilt = max(outcome.max_tilt, math.degrees(tilt_angle(imu.orientation)))
        targets = slot.tick(inputs.signals(t))
        sup_inputs.policy_command = JointTargets.positions(targets)
        sup_inputs.policy_time = sup_inputs.policy_stamp = t
        if tick == 0:
            # The robot was running this policy: the supervisor is ACTIVE from the start.
            supervisor.resume_active(sup_inputs, t)
        decision = supervisor.tick(sup_inputs, t)
        if not np.all(np.isfinite(targets)):
            outcome.reason = "policy output not finite"
        elif decision.mode != Mode.ACTIVE:
            outcome.reason = f"supervisor {decision.mode.value}: {supervisor.last_trip}"
        elif fall_deg is not None and outcome.max_tilt > fall_deg:
            outcome.reason = f"fall: base tilt {outcome.max_tilt:.0f} deg"
        if outcome.reason:
            outcome.failed, outcome.survived = True, t
            return outcome
        command = decision.command
        if command is not None:
            world.command(command.position, command.velocity, command.effort)
        world.step(steps)
    return outcome


def replay_failure(
    bundle: Bundle,
    policy_path: str | Path | None = None,
    lead_s: float = 1.0,
    after_s: float | None = None,
    seed: int = 0,
    conditions: dict[str, Any] | None = None,
) -> ReplayResult:
    """Run ``policy_path`` (default: the recorded policy) from ``lead_s`` before the event
    until ``after_s`` after it (default: the bundle's post-event window + 1 s)."""
    info = bundle.info
    profile = load_profile(info.get("robot") or "go2")
    policy_path = policy_path or recorded_policy(bundle)
    if not policy_path or not Path(policy_path).is_file():
        raise ReplayError(
            f"{bundle.name}: the recorded policy {policy_path!r} is not on this machine. "
            "Fix: give one with --policy FILE"
        )
    policy_path = Path(policy_path).resolve()
    window = info.get("window", {})
    event_ns = int(info.get("time_ns", 0))
    lead_s = min(lead_s, (event_ns - window.get("start_ns", event_ns)) / NS_PER_S) if window else lead_s
    after_s = (window.get("post_event_s", 2.0) + 1.0) if after_s is None else after_s
    start = _start_state(bundle, event_ns - int(lead_s * NS_PER_S))
    notes = list(start.notes)
    recorded = _recorded_conditions(info, conditions, notes)
    world_conditions = PhysicalConditions(**recorded).validate()
    safety = load_safety_config(profile.name)
    slot = _started_policy(bundle, profile, policy_path)
    index = [start.joint_names.index(n) for n in profile.joint_names]
    q0 = np.clip(start.position[index], profile.lower_limits, profile.upper_limits)
    period = profile.policy_period
    total_ticks = int(round((lead_s + after_s) / period))
    suspended = info.get("suspended") is True and not profile.fixed_base
    if suspended:
        notes.append("the robot hung in the air (suspended), as recorded")
    engine, model = _recorded_engine(info, notes)
    if not profile.fixed_base and start.orientation is None:
        notes.append("no /imu/data recorded: the base starts upright")
    world = make_world(engine, profile, model=model, conditions=world_conditions, seed=seed, suspended=suspended)
    try:
        outcome = _run_from(world, profile, safety, slot, start, q0, total_ticks)
    finally:
        world.close()
    return ReplayResult(
        bundle=bundle.name,
        policy=str(policy_path),
        seed=seed,
        failed=outcome.failed,
        reason=outcome.reason or "no failure",
        survived_s=round(outcome.survived, 3),
        duration_s=round(total_ticks * period, 3),
        conditions=dict(recorded),
        max_tilt_deg=round(outcome.max_tilt, 1),
        notes=notes,
    )
