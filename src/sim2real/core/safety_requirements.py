"""What a safety config must keep for a robot: checked when the supervisor starts.

Two levels:

- Always (sim or hardware): the config must fit the robot. ``position_limit.margin`` must leave
  every joint a range that holds its stand pose (a margin of 10 rad would send targets outside
  the joint limits).
- On hardware (not ``simulated``): every check a robot of this kind relies on is present, enabled,
  no looser than :data:`HARDWARE_BOUNDS` and no milder than its minimum response. A YAML that
  removes or weakens one is refused with the file, field and fix unless it says
  ``allow_weakened: true`` (then the supervisor starts and logs each weakening).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim2real.core.robot_profile import RobotProfile
from sim2real.core.safety_config import Response, SafetyConfig, SafetyConfigError


@dataclass(frozen=True)
class Requirement:
    minimum_response: Response
    bounds: tuple[tuple[str, float], ...] = ()  # (threshold, loosest value hardware accepts)
    floating_base_only: bool = False
    rate_limited_only: bool = False  # only for a profile with acceleration or jerk limits


# The loosest settings a hardware run accepts. Deadlines: 4-10x the shipped ones, past which a
# fault goes unseen for a large part of a stride. Factors: 2x a joint's rated limit. Tilt: past
# 1.2 rad a quadruped is falling, not leaning.
HARDWARE_BOUNDS: dict[str, Requirement] = {
    "joint_states_stale": Requirement(Response.DAMP, (("deadline", 0.2),)),
    "imu_stale": Requirement(Response.DAMP, (("deadline", 0.2),), floating_base_only=True),
    "policy_stale": Requirement(Response.HOLD, (("deadline", 0.5),)),
    "non_finite_command": Requirement(Response.HOLD),
    "position_limit": Requirement(Response.CLAMP),
    "target_step": Requirement(Response.CLAMP, (("max_step", 0.5),)),
    "velocity_limit": Requirement(Response.DAMP, (("factor", 2.0),)),
    "torque_limit": Requirement(Response.DAMP, (("factor", 2.0),)),
    "command_limit": Requirement(Response.HOLD, (("factor", 1.0),)),
    "target_rate": Requirement(Response.CLAMP, (("factor", 1.0),), rate_limited_only=True),
    "base_tilt": Requirement(Response.DAMP, (("max_angle", 1.2),), floating_base_only=True),
    "deadman": Requirement(Response.HOLD, (("deadline", 1.0),)),
    "sole_writer": Requirement(Response.DAMP),
}
MAX_HARDWARE_STANDBY_DEADLINE = 1.0  # s a standing robot may go without a sensor before it damps


def weakenings(config: SafetyConfig, profile: RobotProfile) -> list[tuple[str, str, str]]:
    """(field, problem, fix) for each way ``config`` is weaker than hardware needs."""
    found = []
    for name, need in HARDWARE_BOUNDS.items():
        if need.floating_base_only and profile.fixed_base:
            continue
        if need.rate_limited_only and not profile.rate_limited:
            continue
        check = config.checks.get(name)
        if check is None:
            found.append((f"checks.{name}", "missing", f"add it (see config/safety/{_example(profile)}.yaml)"))
            continue
        if not check.enabled:
            found.append((f"checks.{name}.enabled", "false", "enable it"))
        if check.response < need.minimum_response:
            found.append(
                (
                    f"checks.{name}.response",
                    f"{check.response.name.lower()} is milder than {need.minimum_response.name.lower()}",
                    f"use {need.minimum_response.name.lower()} or a more severe response",
                )
            )
        for threshold, loosest in need.bounds:
            if check[threshold] > loosest:
                found.append(
                    (
                        f"checks.{name}.{threshold}",
                        f"{check[threshold]:g} is looser than {loosest:g}",
                        f"use at most {loosest:g}",
                    )
                )
    if "deadman" not in config.buttons:  # with no button to hold, the deadman check means nothing
        found.append(("joystick.deadman", "missing", "give the deadman its button (see config/safety/go2.yaml)"))
    if config.standby_deadline > MAX_HARDWARE_STANDBY_DEADLINE:
        found.append(
            (
                "standby_deadline",
                f"{config.standby_deadline:g} s is looser than {MAX_HARDWARE_STANDBY_DEADLINE:g} s",
                f"use at most {MAX_HARDWARE_STANDBY_DEADLINE:g} s",
            )
        )
    return found


def check_config_for(config: SafetyConfig, profile: RobotProfile, simulated: bool) -> list[str]:
    """Raise SafetyConfigError when ``config`` cannot supervise ``profile``; return the
    weakenings a hardware run accepts because the config says ``allow_weakened: true``."""
    source = config.source or "<safety config>"
    limit = config.checks.get("position_limit")
    if limit is not None:
        margin = limit["margin"]
        low, high = profile.lower_limits + margin, profile.upper_limits - margin
        outside = [
            name
            for name, lo, hi, stand in zip(profile.joint_names, low, high, profile.default_positions)
            if not lo <= stand <= hi
        ]
        if outside:
            room = float(
                np.min(
                    np.minimum(
                        profile.default_positions - profile.lower_limits,
                        profile.upper_limits - profile.default_positions,
                    )
                )
            )
            raise SafetyConfigError(
                source,
                "checks.position_limit.margin",
                f"{margin:g} rad leaves no room for the stand pose of {outside}",
                f"use at most {room:.3f} rad (the stand pose's distance to the nearest limit)",
            )
    if config.damp_pose:
        names = set(profile.joint_names)
        wrong = sorted(set(config.damp_pose) ^ names)
        if wrong:
            raise SafetyConfigError(
                source,
                "damp_pose",
                f"must name every joint of {profile.name!r} and no other; differs on {wrong}",
                f"use the profile's joints: {profile.joint_names}",
            )
        outside = [j.name for j in profile.joints if not j.lower <= config.damp_pose[j.name] <= j.upper]
        if outside:
            raise SafetyConfigError(
                source,
                "damp_pose",
                f"outside the joint limits for {outside}",
                "choose a pose within the profile's limits",
            )
    if simulated:
        return []
    found = weakenings(config, profile)
    if found and not config.allow_weakened:
        field, problem, fix = found[0]
        more = f" (and {len(found) - 1} more: {', '.join(f for f, _, _ in found[1:])})" if len(found) > 1 else ""
        raise SafetyConfigError(
            source,
            field,
            f"{problem}: weaker than a real robot needs{more}",
            f"{fix}; or, for a test rig you watch, write allow_weakened: true",
        )
    return [f"{field}: {problem}" for field, problem, _ in found]


def _example(profile: RobotProfile) -> str:
    return "panda" if profile.fixed_base else "go2"
