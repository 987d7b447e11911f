"""Forward kinematics of a robot profile's URDF, in the robot's base frame (pinocchio).

The training envs and the ROS policy runtime both compute end-effector (arm) and foot
(quadruped) positions here, from joint positions alone: the base's pose in the world
does not enter, so an arm's goal and a foot's position mean the same thing in
simulation and on hardware. The URDF is parsed once per process and shared; each
:class:`Kinematics` owns its pinocchio ``Data`` (not thread-safe across threads).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np

from sim2real.core.robot_profile import RobotProfile


@lru_cache(maxsize=None)
def _model(urdf: str):
    import pinocchio as pin

    # No root joint: the URDF's root link (the base) is the fixed reference frame, which
    # is exactly "positions in the base frame".
    return pin.buildModelFromUrdf(urdf)


class Kinematics:
    """Positions of named links in the base frame, for joint positions in profile order."""

    def __init__(self, profile: RobotProfile):
        import pinocchio as pin

        self._pin = pin
        self.profile = profile
        self._model = _model(str(profile.urdf))
        self._data = self._model.createData()
        model = self._model
        index = []
        for name in profile.joint_names:
            if not model.existJointName(name):
                raise ValueError(f"kinematics: joint {name!r} of profile {profile.name!r} is not in {profile.urdf}")
            joint = model.joints[model.getJointId(name)]
            if joint.nq != 1:
                raise ValueError(
                    f"kinematics: joint {name!r} has {joint.nq} coordinates; only single-axis joints are supported"
                )
            index.append(joint.idx_q)
        if len(index) != model.nq:
            raise ValueError(
                f"kinematics: {profile.urdf} has {model.nq} joint coordinates, the profile names {len(index)}"
            )
        # Profile order is URDF order, which pinocchio usually keeps: skip the scatter then.
        self._index = None if index == list(range(model.nq)) else np.array(index)
        self._q = np.zeros(model.nq)
        self._base = self._frame_id(profile.base_link)
        if model.frames[self._base].parentJoint != 0:
            raise ValueError(f"kinematics: base link {profile.base_link!r} is not the root of {profile.urdf}")
        # The root link's frame is fixed to pinocchio's world; it is the identity unless
        # the URDF offsets it, and then every position is brought back into it.
        base = model.frames[self._base].placement
        self._base_rotation = np.array(base.rotation)
        self._base_translation = np.array(base.translation)
        self._base_is_world = bool(np.allclose(self._base_rotation, np.eye(3)) and not self._base_translation.any())
        self._ee = None if profile.end_effector_link is None else self._frame_id(profile.end_effector_link)
        self._feet = [self._frame_id(link) for link in profile.foot_links]

    def _set_q(self, q: Sequence[float] | np.ndarray) -> None:
        """Joint positions in profile order into pinocchio's configuration vector."""
        if self._index is None:
            self._q[:] = q
        else:
            self._q[self._index] = q

    def _frame_id(self, link: str) -> int:
        if not self._model.existFrame(link):
            raise ValueError(f"kinematics: link {link!r} is not in {self.profile.urdf}")
        return self._model.getFrameId(link)

    def frame_id(self, link: str) -> int:
        return self._frame_id(link)

    def positions(self, q: Sequence[float] | np.ndarray, frames: Sequence[int]) -> np.ndarray:
        """(len(frames), 3) positions in the base frame, m; frames from :meth:`frame_id`."""
        pin, model, data = self._pin, self._model, self._data
        self._set_q(q)
        pin.forwardKinematics(model, data, self._q)
        out = np.empty((len(frames), 3))
        for row, frame in enumerate(frames):
            out[row] = pin.updateFramePlacement(model, data, frame).translation
        if not self._base_is_world:
            out = (out - self._base_translation) @ self._base_rotation
        return out

    def end_effector_position(self, q: Sequence[float] | np.ndarray) -> np.ndarray:
        """Position (3,) of ``profile.end_effector_link`` in the base frame, m."""
        if self._ee is None:
            raise ValueError(f"kinematics: robot {self.profile.name!r} has no end_effector_link")
        return self.positions(q, (self._ee,))[0]

    def foot_positions(self, q: Sequence[float] | np.ndarray) -> np.ndarray:
        """(number of feet, 3) positions of ``profile.foot_links`` in the base frame, m."""
        if not self._feet:
            raise ValueError(f"kinematics: robot {self.profile.name!r} has no foot_links")
        return self.positions(q, self._feet)

    def frame_jacobians(
        self, q: Sequence[float] | np.ndarray, frames: Sequence[int], angular: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """Positions (k, 3) and Jacobians (k, 3, n) of ``frames`` in the base frame, columns in
        profile joint order: a frame's velocity relative to the base is ``J @ dq``. With
        ``angular`` the Jacobians are (k, 6, n), linear rows then angular rows. The state
        estimator needs positions and Jacobians per IMU sample: one pinocchio pass gives both."""
        pin, model, data = self._pin, self._model, self._data
        self._set_q(q)
        pin.computeJointJacobians(model, data, self._q)  # runs forward kinematics too
        positions = np.empty((len(frames), 3))
        rows = 6 if angular else 3
        jacobians = np.empty((len(frames), rows, model.nv))
        world_aligned = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        for row, frame in enumerate(frames):
            positions[row] = pin.updateFramePlacement(model, data, frame).translation
            jacobians[row] = pin.getFrameJacobian(model, data, frame, world_aligned)[:rows]
        if self._index is not None:
            jacobians = jacobians[:, :, self._index]
        if not self._base_is_world:
            positions = (positions - self._base_translation) @ self._base_rotation
            rotate = self._base_rotation.T
            jacobians[:, :3] = np.einsum("ij,kjn->kin", rotate, jacobians[:, :3])
            if angular:
                jacobians[:, 3:] = np.einsum("ij,kjn->kin", rotate, jacobians[:, 3:])
        return positions, jacobians

    def foot_jacobians(self, q: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Foot positions (feet, 3) and Jacobians (feet, 3, n) in the base frame; see :meth:`frame_jacobians`."""
        if not self._feet:
            raise ValueError(f"kinematics: robot {self.profile.name!r} has no foot_links")
        return self.frame_jacobians(q, self._feet)

    def end_effector_jacobian(self, q: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """End-effector position (3,) and Jacobian (6, n: linear, angular) in the base frame."""
        if self._ee is None:
            raise ValueError(f"kinematics: robot {self.profile.name!r} has no end_effector_link")
        positions, jacobians = self.frame_jacobians(q, (self._ee,), angular=True)
        return positions[0], jacobians[0]

    def end_effector_pose(self, q: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """End-effector position (3,) and rotation matrix (3, 3) in the base frame."""
        if self._ee is None:
            raise ValueError(f"kinematics: robot {self.profile.name!r} has no end_effector_link")
        position = self.positions(q, (self._ee,))[0]  # also leaves the frame's placement in self._data
        rotation = np.array(self._data.oMf[self._ee].rotation)
        if not self._base_is_world:
            rotation = self._base_rotation.T @ rotation
        return position, rotation

    def centre_of_mass(self, q: Sequence[float] | np.ndarray) -> tuple[float, np.ndarray]:
        """The whole robot's mass (kg) and centre of mass (3,) in the base frame at ``q``."""
        pin, model, data = self._pin, self._model, self._data
        self._set_q(q)
        pin.centerOfMass(model, data, self._q)
        # Without a root joint the root link's inertia belongs to the universe (joint 0) and is
        # not in data.mass[0], which sums the moving subtrees only.
        root = model.inertias[0]
        mass = float(root.mass + data.mass[0])
        centre = (root.mass * np.asarray(root.lever) + data.mass[0] * np.asarray(data.com[0])) / mass
        if not self._base_is_world:
            centre = (centre - self._base_translation) @ self._base_rotation
        return mass, centre

    def gravity_torques(self, q: Sequence[float] | np.ndarray) -> np.ndarray:
        """Joint torques (profile order, N*m) that hold the limbs against gravity with the base
        held fixed and level (gravity along the base frame's -z, pinocchio's standard 9.81 m/s^2)."""
        pin, model, data = self._pin, self._model, self._data
        if not self._base_is_world:
            raise ValueError(
                f"kinematics: {self.profile.urdf}'s root link frame is offset from its origin, so gravity along "
                "it is not level; give the profile a URDF whose root link is the trunk at the origin, or write "
                "stand_effort: none in the robot's safety config"
            )
        self._set_q(q)
        torques = np.array(pin.computeGeneralizedGravity(model, data, self._q))
        return torques if self._index is None else torques[self._index]

    @property
    def gravity(self) -> float:
        """The magnitude of gravity the model uses, m/s^2."""
        return float(np.linalg.norm(self._model.gravity.linear))

    def mass_matrix(self, q: Sequence[float] | np.ndarray) -> np.ndarray:
        """Joint-space inertia (n, n) at ``q`` with the base held fixed, profile joint order."""
        pin, model, data = self._pin, self._model, self._data
        self._set_q(q)
        M = pin.crba(model, data, self._q)
        M = np.triu(M) + np.triu(M, 1).T  # pinocchio fills the upper triangle only
        if self._index is not None:
            M = M[np.ix_(self._index, self._index)]
        return M
