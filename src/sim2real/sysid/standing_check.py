"""Will a standing quadruped stay up under a planned excitation? Played in simulation first.

A sysid excitation streams joint targets around the stand pose; on a robot standing on its
feet, too large a motion (or every joint at once) tips it over, and the bag then records a
fall instead of the robot. :func:`check_standing` plays the plan on the nominal simulated
robot, exactly as the recording commands it (targets on the policy period, the profile's
PD), and reports the largest base tilt and the lowest trunk height against margins; the
recorder refuses a plan that leaves them, with what to change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim2real.core.robot_profile import RobotProfile
from sim2real.core.rotations import tilt_angle
from sim2real.sysid.excitation import Excitation

MAX_TILT_DEG = 20.0  # a trunk tilted further is close to losing a foot's contact
MIN_HEIGHT_FRACTION = 0.75  # of the trunk's settled stand height
SETTLE_S = 1.0  # stand before the excitation starts


@dataclass(frozen=True)
class StandingCheck:
    max_tilt_deg: float
    min_height: float  # m, trunk
    stand_height: float  # m, trunk after settling in the stand pose
    worst_time: float  # s into the excitation of the largest tilt
    ok: bool
    reason: str  # '' when ok

    def summary(self) -> str:
        return (
            f"base tilt up to {self.max_tilt_deg:.1f} deg (limit {MAX_TILT_DEG:g}), trunk down to "
            f"{self.min_height:.3f} m of {self.stand_height:.3f} m standing (limit "
            f"{MIN_HEIGHT_FRACTION:.0%})"
        )


def check_standing(profile: RobotProfile, excitation: Excitation, conditions=None) -> StandingCheck:
    """Play ``excitation`` on the simulated ``profile`` standing on the ground, under
    ``conditions`` (PhysicalConditions; None: nominal, what a real robot is assumed to be)."""
    from sim2real.sim.world import SimWorld

    world = SimWorld(profile, conditions, seed=0)
    try:
        world.reset()
        substeps = round(profile.policy_period / profile.physics_period)
        settle_steps = round(SETTLE_S / profile.policy_period)
        for _ in range(settle_steps):
            world.command(profile.default_positions)
            world.step(substeps)
        stand_height = float(world.base_pose()[0][2])
        worst_tilt, lowest, worst_time = 0.0, stand_height, 0.0
        steps = int(math.ceil(excitation.duration / profile.policy_period)) + 1
        for k in range(steps):
            t = k * profile.policy_period
            q, dq = excitation.sample(t)
            world.command(q, dq)
            world.step(substeps)
            position, orientation = world.base_pose()
            tilt = math.degrees(tilt_angle(orientation))
            if not math.isfinite(tilt):
                tilt = 180.0  # no orientation left to read: counted as a fall
            if tilt > worst_tilt:
                worst_time = t
            worst_tilt, lowest = max(worst_tilt, tilt), min(lowest, float(position[2]))
    finally:
        world.close()
    too_tilted = worst_tilt > MAX_TILT_DEG
    too_low = lowest < MIN_HEIGHT_FRACTION * stand_height
    reason = ""
    if too_tilted or too_low:
        reason = (
            f"the planned excitation would not keep the standing {profile.name} up in simulation: "
            f"{'base tilt ' + format(worst_tilt, '.0f') + ' deg' if too_tilted else ''}"
            f"{' and ' if too_tilted and too_low else ''}"
            f"{'trunk at ' + format(lowest, '.3f') + ' m' if too_low else ''} around "
            f"{worst_time:.1f} s into it ({_margins()}). Fix: excite one leg at a time (--legs 1, launch: "
            f"legs:=1), lower the amplitude (--amplitude, launch: amplitude:=; now "
            f"{float(np.max(excitation.amplitude)):.2f} rad), or hang the robot on a stand (--suspended, "
            "launch: suspended:=true)"
        )
    return StandingCheck(
        round(worst_tilt, 2), round(lowest, 4), round(stand_height, 4), round(worst_time, 3), not reason, reason
    )


def require_standing(
    profile: RobotProfile, excitation: Excitation, suspended: bool, conditions=None
) -> StandingCheck | None:
    """The check every recorder runs first: None for an arm or a robot on a stand (nothing to
    tip over), the passed check for a standing robot, ValueError with the reason otherwise."""
    if profile.fixed_base or suspended:
        return None
    standing = check_standing(profile, excitation, conditions)
    if not standing.ok:
        raise ValueError(standing.reason)
    return standing


def _margins() -> str:
    return f"limits: tilt {MAX_TILT_DEG:g} deg, trunk above {MIN_HEIGHT_FRACTION:.0%} of its stand height"
