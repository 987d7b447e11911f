"""The joint torques a legged robot needs to stand still in its stand pose (gravity feed-forward).

A quadruped's position gains are the policy's (the Go2's kp 20 N*m/rad), soft enough that its
stand sags under its own weight: the rear calves carry ~8 N*m, 0.4 rad short of the stand pose,
and a robot 20 % heavier with 15 % weaker motors sags 0.76 rad (trunk 0.20 m instead of 0.33 m).
The supervisor's stand (STANDBY, and a takeover from STANDBY) therefore sends these torques as the
command's feed-forward effort, part of the hardware contract, so the PD gains only correct the
difference: the robot stands where the stand pose says, without stiffer gains than the profile's.

Static balance, from the profile's URDF with the trunk level and all feet on flat ground: the ground
pushes each foot up with ``f_i`` (vertical only), the forces carry the whole weight with no
moment about the centre of mass (three equations for four feet: the least-norm solution), and
the joints hold ``tau = g(q) - sum_i J_i(q)^T f_i``, with ``g`` the legs' own gravity torques and
``J_i`` foot i's Jacobian (base fixed: a joint's rows of the floating-base equations are the same).
"""

from __future__ import annotations

import numpy as np

from sim2real.core.kinematics import Kinematics
from sim2real.core.robot_profile import RobotProfile


def standing_efforts(profile: RobotProfile) -> np.ndarray:
    """Per joint (profile order), the torque in N*m that holds the stand pose (the profile's
    default positions) with the trunk level and every foot on the ground."""
    if len(profile.foot_links) < 3:
        raise ValueError(
            f"stand effort: robot {profile.name!r} has {len(profile.foot_links)} foot links; a standing "
            "robot needs at least 3 (foot_links in its profile); for another robot write stand_effort: none "
            "in its safety config"
        )
    kinematics = Kinematics(profile)
    q = profile.default_positions
    feet, jacobians = kinematics.foot_jacobians(q)  # the trunk level: base frame = world axes
    gravity = kinematics.gravity_torques(q)
    mass, centre = kinematics.centre_of_mass(q)
    # Vertical foot forces: they carry the weight, with no moment about the centre of mass.
    balance = np.vstack([np.ones(len(feet)), feet[:, 0] - centre[0], feet[:, 1] - centre[1]])
    forces = np.linalg.lstsq(balance, np.array([mass * kinematics.gravity, 0.0, 0.0]), rcond=None)[0]
    if np.any(forces <= 0.0):
        raise ValueError(
            f"stand effort: robot {profile.name!r} does not stand on its feet in its stand pose (foot "
            f"forces {np.round(forces, 1).tolist()} N): its centre of mass is outside the feet; check the "
            "profile's default_positions and foot_links, or write stand_effort: none in its safety config"
        )
    contact = sum(jacobians[i][2] * forces[i] for i in range(len(feet)))
    return gravity - contact
