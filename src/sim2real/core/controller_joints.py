"""The joint order of a ros2_control forward_command_controller, ROS-free.

A forward_command_controller (e.g. ``position_controllers/JointGroupPositionController``)
takes a ``std_msgs/Float64MultiArray`` whose i-th value is for the i-th entry of its
``joints`` parameter; the array carries no names. Our ``/joint_commands`` carry names
in any order. This maps one onto the other and refuses, before anything moves, a
controller whose joints are not exactly the profile's: a missing joint would never be
commanded and an unknown one would get another joint's target.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from sim2real.core.errors import InputError


class ControllerJointsError(InputError):
    """The controller's joints do not match the robot profile; the message lists the difference."""


class ControllerJointOrder:
    """Reorders targets from profile joint order to the controller's ``joints`` order."""

    def __init__(self, profile_joints: Sequence[str], controller_joints: Sequence[str] = ()):
        self.profile_joints = list(profile_joints)
        self.controller_joints = list(controller_joints) or list(self.profile_joints)
        missing = [j for j in self.profile_joints if j not in self.controller_joints]
        unknown = [j for j in self.controller_joints if j not in self.profile_joints]
        repeated = sorted({j for j in self.controller_joints if self.controller_joints.count(j) > 1})
        problems = []
        if missing:
            problems.append(f"missing profile joints {missing}")
        if unknown:
            problems.append(f"joints the profile does not have {unknown}")
        if repeated:
            problems.append(f"repeated joints {repeated}")
        if problems:
            raise ControllerJointsError(
                f"controller_joints {self.controller_joints} do not match the robot's joints "
                f"{self.profile_joints}: {'; '.join(problems)}. Fix: set controller_joints to the "
                f"`joints` list of the controller's YAML, and make it name every joint of the profile once"
            )
        self._index = np.array([self.profile_joints.index(j) for j in self.controller_joints], dtype=int)

    def to_controller(self, values_in_profile_order: Sequence[float]) -> list[float]:
        """The Float64MultiArray ``data`` for targets given in profile joint order."""
        values = np.asarray(values_in_profile_order, dtype=float)
        if values.shape != (len(self.profile_joints),):
            raise ValueError(f"expected {len(self.profile_joints)} values in profile order, got {values.shape}")
        return values[self._index].tolist()


def parse_joint_list(text: str) -> list[str]:
    """``"a, b ,c"`` or ``"[a, b, c]"`` (a launch argument) -> ``["a", "b", "c"]``; ``""`` -> ``[]``."""
    stripped = text.strip().strip("[]")
    return [name.strip().strip("'\"") for name in stripped.split(",") if name.strip()]
