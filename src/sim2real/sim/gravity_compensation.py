"""The gravity compensation that a robot's own controller adds to every torque command.

Arms such as the Franka Panda compensate gravity inside their joint controller: a
command's feed-forward torque is on top of the gravity torque, computed by the robot
from its *nominal* model and the measured joint positions, without communication delay.
A simulator that left it out would teach a policy to hold the arm up itself, and that
policy would then fight the real robot's compensation.

The model here is the URDF's nominal one on purpose: when ``mass_scale`` changes the
simulated links, the controller's model stays wrong by that much, as on hardware.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np


class GravityCompensation:
    """tau_g(q) of a fixed-base robot from its URDF, for joints given in ``joint_names`` order."""

    def __init__(self, urdf: str | Path, joint_names: Sequence[str]):
        import pinocchio as pin  # only robots that compensate gravity need it

        self._pin = pin
        self._model = pin.buildModelFromUrdf(str(urdf))
        self._data = self._model.createData()
        q_index, v_index = [], []
        for name in joint_names:
            if not self._model.existJointName(name):
                raise ValueError(f"gravity compensation: joint {name!r} is not in {urdf}")
            joint = self._model.joints[self._model.getJointId(name)]
            if joint.nq != 1 or joint.nv != 1:
                raise ValueError(
                    f"gravity compensation: joint {name!r} is not a single-axis joint "
                    "(revolute or prismatic with limits); it is not supported"
                )
            q_index.append(joint.idx_q)
            v_index.append(joint.idx_v)
        if len(q_index) != self._model.nq:
            raise ValueError(
                f"gravity compensation: {urdf} has {self._model.nq} joint coordinates but "
                f"{len(q_index)} joints were named; a fixed-base robot whose joints are all "
                "actuated is required"
            )
        identity = list(range(len(q_index)))
        # Profile order is URDF order for a chain, so usually no reordering is needed per step.
        self._q_index = None if q_index == identity else np.array(q_index)
        self._v_index = None if v_index == identity else np.array(v_index)
        self._q = np.zeros(self._model.nq)

    def torque(self, q: np.ndarray) -> np.ndarray:
        """Joint torques that hold the robot still against gravity at positions ``q``, N*m."""
        if self._q_index is None:
            g = self._pin.computeGeneralizedGravity(self._model, self._data, q)
        else:
            self._q[self._q_index] = q
            g = self._pin.computeGeneralizedGravity(self._model, self._data, self._q)
        return g if self._v_index is None else g[self._v_index]
