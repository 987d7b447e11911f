"""A PyBullet world holding one robot under named physical conditions.

:class:`SimWorld` is the simulator that both training and the ``sim_robot`` node use;
it knows nothing of ROS or of tasks. Each world owns its own PyBullet DIRECT client
(never the module's default connection), so many worlds can live in one process.

Frames: ``base_pose``/``base_velocity`` and ``reset(base_position=...)`` refer to the
URDF frame of the base link (PyBullet itself reports the base's centre of mass), world
z up. Joint arrays are in the profile's joint order.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import pybullet as pb

from sim2real.core.robot_profile import RobotProfile
from sim2real.core.rotations import quat_to_matrix
from sim2real.sim.actuator import Actuator
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.gravity_compensation import GravityCompensation
from sim2real.sim.world_base import GRAVITY, ImuReading, JointState, WorldBase, as_quaternion, as_vector3

__all__ = [
    "GRAVITY",
    "ImuReading",
    "JointState",
    "SimWorld",
    "as_quaternion",
    "as_vector3",
    "draw_terrain",
    "height_at",
]
# Height-field patch centred at the origin: 0.1 m cells make bumps a Go2 foot (r = 0.022 m)
# can feel but not get trapped in; 16 m x 16 m covers any evaluation episode; the plane
# below the patch (at its lowest level) catches a robot that walks off it.
TERRAIN_CELL = 0.1
TERRAIN_SIZE = 16.0
# A suspended robot's trunk hangs this far above its standing height: the Go2's feet clear
# the ground by 0.25 m in the default pose and by 0.13 m with a leg straight down.
SUSPENSION_CLEARANCE = 0.25
# The gantry's force cap, in robot weights (Bullet's default cap is 500 N whatever the robot):
# it holds the robot and its swinging legs without giving way.
GANTRY_WEIGHTS = 10.0


def draw_terrain(rng: np.random.Generator, roughness: float) -> np.ndarray:
    """Height-field samples [y, x] in [-roughness, roughness] m, cell TERRAIN_CELL, centred at
    (0, 0): the one draw both engines make, so a seed gives the same ground in each."""
    points = int(round(TERRAIN_SIZE / TERRAIN_CELL)) + 1
    return rng.uniform(-roughness, roughness, size=(points, points))


def height_at(heights: np.ndarray | None, x: float, y: float) -> float:
    """The value of a per-vertex height array (``terrain_heights`` layout) at the vertex nearest
    (x, y), clamped to the patch (0: flat plane)."""
    if heights is None:
        return 0.0
    rows, cols = heights.shape
    ix = min(max(int(round(x / TERRAIN_CELL + (cols - 1) / 2.0)), 0), cols - 1)
    iy = min(max(int(round(y / TERRAIN_CELL + (rows - 1) / 2.0)), 0), rows - 1)
    return float(heights[iy, ix])


class _Ground:
    """The ground bodies of one client: an infinite plane, plus a height-field patch when rough.

    PyBullet never frees a removed height field (~18 MB each), so the patch is built once
    and its data replaced in place on later changes. Replacing keeps the shape's original
    height range, by which PyBullet centres it; two corner samples are therefore pinned at
    +-cap so the range, and with it the centring, never changes. A roughness above the cap
    needs a new shape (and leaks the old one): the cap grows geometrically so that happens
    rarely.
    """

    PARKED_Z = -100.0  # where an unused patch waits, far below the plane

    def __init__(self, client: int, rng: np.random.Generator):
        self._client = client
        self._rng = rng
        plane = pb.createCollisionShape(pb.GEOM_PLANE, physicsClientId=client)
        self.plane = pb.createMultiBody(0, plane, physicsClientId=client)
        self._field: int | None = None
        self._shape: int | None = None
        self._cap = 0.0
        self.heights: np.ndarray | None = None  # [y index, x index], m; None when flat
        self.top = 0.0  # highest ground point a robot can stand on, m

    @property
    def bodies(self) -> tuple[int, ...]:
        if self.heights is None:
            return (self.plane,)
        assert self._field is not None  # build() sets it with the heights
        return (self.plane, self._field)

    def build(self, roughness: float, friction: float) -> None:
        c = self._client
        if roughness <= 0:
            if self._field is not None:
                pb.resetBasePositionAndOrientation(self._field, (0, 0, self.PARKED_Z), (0, 0, 0, 1), physicsClientId=c)
            pb.resetBasePositionAndOrientation(self.plane, (0, 0, 0), (0, 0, 0, 1), physicsClientId=c)
            self.heights, self.top = None, 0.0
        else:
            heights = draw_terrain(self._rng, roughness)
            points = heights.shape[0]
            if self._field is None or roughness > self._cap:
                if self._field is not None:
                    pb.removeBody(self._field, physicsClientId=c)
                self._cap = max(roughness, 2.0 * self._cap)
                self._field = self._shape = None
            heights[0, 0], heights[0, 1] = -self._cap, self._cap
            # numHeightfieldRows counts points along x: PyBullet reads the data x-fastest.
            shape_args = dict(
                meshScale=[TERRAIN_CELL, TERRAIN_CELL, 1.0],
                heightfieldData=heights.ravel().tolist(),
                numHeightfieldRows=points,
                numHeightfieldColumns=points,
                physicsClientId=c,
            )
            if self._shape is None:
                self._shape = pb.createCollisionShape(pb.GEOM_HEIGHTFIELD, **shape_args)
                self._field = pb.createMultiBody(0, self._shape, physicsClientId=c)
            else:
                pb.createCollisionShape(pb.GEOM_HEIGHTFIELD, replaceHeightfieldIndex=self._shape, **shape_args)
            # Range [-cap, cap] is centred on 0, so world z equals the sampled height.
            pb.resetBasePositionAndOrientation(self._field, (0, 0, 0), (0, 0, 0, 1), physicsClientId=c)
            pb.resetBasePositionAndOrientation(self.plane, (0, 0, -roughness), (0, 0, 0, 1), physicsClientId=c)
            self.heights, self.top = heights, roughness
        self.set_friction(friction)

    def set_friction(self, friction: float) -> None:
        for body in self.bodies:
            pb.changeDynamics(body, -1, lateralFriction=friction, physicsClientId=self._client)


class SimWorld(WorldBase):
    """One robot in one PyBullet world, driven in torque mode by an :class:`Actuator`.

    Time advances only in :meth:`step`, by whole physics periods
    (``profile.physics_period``). After :meth:`reset` the actuator holds the reset
    pose with the profile's gains, as if that command had been active for long.
    Same seed and same sequence of calls give bitwise identical results.
    """

    engine = "pybullet"

    def __init__(
        self,
        profile: RobotProfile,
        conditions: PhysicalConditions | None = None,
        seed: int = 0,
        gravity_compensation: bool | None = None,
        physics_period: float | None = None,
        suspended: bool = False,
    ):
        """Arguments: see :class:`~sim2real.sim.world_base.WorldBase`."""
        super().__init__(profile, conditions, seed, gravity_compensation, physics_period, suspended)
        self._client = pb.connect(pb.DIRECT)
        if self._client < 0:
            raise RuntimeError("PyBullet could not open a DIRECT physics client")
        try:
            self._setup(self._terrain_rng)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ loading
    def _setup(self, terrain_rng: np.random.Generator) -> None:
        c, profile = self._client, self.profile
        pb.setGravity(0, 0, -GRAVITY, physicsClientId=c)
        pb.setPhysicsEngineParameter(
            fixedTimeStep=self._dt, numSubSteps=0, deterministicOverlappingPairs=1, physicsClientId=c
        )
        self._ground = _Ground(c, terrain_rng)
        self._robot = pb.loadURDF(
            str(profile.urdf),
            (0.0, 0.0, profile.spawn_height),
            (0, 0, 0, 1),
            useFixedBase=profile.fixed_base,
            # Without this flag PyBullet replaces the URDF inertia by one computed from
            # the collision shapes, which would silently change the robot.
            flags=pb.URDF_USE_INERTIA_FROM_FILE,
            physicsClientId=c,
        )
        # The gantry: a fixed joint between the trunk's centre of mass and the world, moved to
        # the base's pose at every reset.
        self._gantry = (
            pb.createConstraint(
                self._robot,
                -1,
                -1,
                -1,
                pb.JOINT_FIXED,
                (0, 0, 0),
                (0, 0, 0),
                (0, 0, profile.spawn_height),
                physicsClientId=c,
            )
            if self.suspended
            else None
        )
        joints, links = {}, {pb.getBodyInfo(self._robot, physicsClientId=c)[0].decode(): -1}
        for index in range(pb.getNumJoints(self._robot, physicsClientId=c)):
            info = pb.getJointInfo(self._robot, index, physicsClientId=c)
            joints[info[1].decode()] = index
            links[info[12].decode()] = index
        missing = [name for name in profile.joint_names if name not in joints]
        if missing:
            raise ValueError(f"{profile.urdf}: joints {missing} of profile {profile.name!r} not in the URDF")
        self._joint_ids = [joints[name] for name in profile.joint_names]
        self._links = links
        self._imu_id = links[profile.imu_link]
        self._foot_ids = [links[name] for name in profile.foot_links]
        self._n = len(self._joint_ids)

        # Nominal dynamics, read once, so mass_scale always scales from the URDF values.
        self._nominal = {}
        for link in sorted(links.values()):
            info = pb.getDynamicsInfo(self._robot, link, physicsClientId=c)
            self._nominal[link] = (info[0], tuple(info[2]))
        self._armature_weights = self._armature_weights_per_link()
        self._nominal_joint_inertia = self._mass_matrix_diagonal()
        base_info = pb.getDynamicsInfo(self._robot, -1, physicsClientId=c)
        self._base_inertial = (tuple(base_info[3]), tuple(base_info[4]))  # URDF base frame -> COM
        self._base_inertial_inv = pb.invertTransform(*self._base_inertial)

        # PyBullet starts every joint with a velocity motor that would fight the torques.
        pb.setJointMotorControlArray(
            self._robot, self._joint_ids, pb.VELOCITY_CONTROL, forces=[0.0] * self._n, physicsClientId=c
        )
        # Bullet multiplies the two bodies' coefficients: with the robot at 1 the contact
        # coefficient is exactly ground_friction.
        for link in links.values():
            pb.changeDynamics(self._robot, link, lateralFriction=1.0, physicsClientId=c)
        # Joints move no faster than the profile's velocity limits, as on the real robot (its
        # motors and controller stop there; the supervisor damps at 1.2x); Bullet clamps each joint's speed (default: 100 rad/s).
        # Without it the shipped reach policy learned to flick the Panda's wrist at 79 rad/s
        # (limit 2.61), which a real arm cannot do and the safety supervisor damps at once.
        for joint, limit in zip(self._joint_ids, profile.velocity_limits):
            pb.changeDynamics(self._robot, joint, maxJointVelocity=float(limit), physicsClientId=c)

        self._actuator = Actuator(profile.effort_limits, self._dt, profile.damping_kd, kp=profile.kp, kd=profile.kd)
        self._gravity = (
            GravityCompensation(profile.urdf, profile.joint_names).torque if self.gravity_compensation else None
        )
        self._q = np.zeros(self._n)
        self._dq = np.zeros(self._n)
        self._imu_velocity_before: tuple[float, ...] | None = None
        self._imu_on_base = self._rigid_offset_from_base(self._imu_id)
        # A bolted-down robot's IMU never accelerates: skip reading velocities for it.
        self._fixed_base = bool(self.profile.fixed_base)
        self._imu_at_com = self._imu_on_base is not None and max(map(abs, self._imu_on_base[0])) < 1e-9

        self._appliers = {
            "ground_friction": self._apply_ground_friction,
            "mass_scale": self._apply_inertia,
            "armature": self._apply_inertia,
            "motor_strength": self._apply_motor_strength,
            "latency": self._apply_latency,
            "terrain_roughness": self._apply_terrain,
            "battery_voltage": self._apply_battery,
            "joint_friction": self._apply_joint_losses,
            "joint_damping": self._apply_joint_losses,
        }
        self._ground.build(self._conditions.terrain_roughness, self._conditions.ground_friction)
        for name in PhysicalConditions.names():
            if name != "terrain_roughness":
                self._appliers.get(name, _ignore)()
        self.reset()

    # -------------------------------------------------------------- conditions
    def _apply_conditions(self, names: list[str]) -> None:
        # dict, not set: the order of PyBullet calls must not depend on object ids (determinism).
        appliers = dict.fromkeys(self._appliers.get(name, _ignore) for name in names)
        for apply in appliers:
            apply()

    def _apply_ground_friction(self) -> None:
        self._ground.set_friction(self._conditions.ground_friction)

    def _apply_inertia(self) -> None:
        scale, armature, c = self._conditions.mass_scale, self._conditions.armature, self._client
        for link, (mass, inertia) in self._nominal.items():
            if mass <= 0:  # a fixed base reports mass 0: it has no dynamics to scale
                continue
            diagonal = np.asarray(inertia) * scale
            if armature > 0 and link in self._armature_weights:
                diagonal = diagonal + armature * self._armature_weights[link]
            pb.changeDynamics(
                self._robot, link, mass=mass * scale, localInertiaDiagonal=diagonal.tolist(), physicsClientId=c
            )
        if self._gantry is not None:  # the gantry's cap follows the robot's weight
            pb.changeConstraint(self._gantry, maxForce=GANTRY_WEIGHTS * GRAVITY * self.total_mass(), physicsClientId=c)
        self._apply_joint_losses()

    def _armature_weights_per_link(self) -> dict[int, np.ndarray]:
        """Armature as link inertia. Bullet has no rotor-inertia term (it ignores a URDF's),
        so a joint's armature A is added to its child link's inertia about an axis through
        the link's centre of mass parallel to the joint axis: that raises the joint's own
        mass-matrix diagonal by exactly A (parallel-axis theorem), as a real rotor does.
        Bullet takes only a principal-axes diagonal, so A goes to the diagonal as
        A * b_k^2 / sum(b^4), b the joint axis in the principal frame: exact about the joint
        axis for any b, and plain ``+A`` on one component when the axis is a principal axis
        (every joint of the shipped URDFs). The approximation: the real rotor spins only
        about its own axis at N times the joint rate, so its inertia enters the parent
        joints' rows scaled by N, not whole as here; the effect is of order A, small next
        to the links' inertia about the parent joints."""
        c = self._client
        weights = {}
        for joint in self._joint_ids:
            axis = np.asarray(pb.getJointInfo(self._robot, joint, physicsClientId=c)[13], dtype=float)
            frame = pb.getDynamicsInfo(self._robot, joint, physicsClientId=c)[4]  # link -> principal axes
            b = np.asarray(pb.getMatrixFromQuaternion(frame), dtype=float).reshape(3, 3).T @ axis
            b /= np.linalg.norm(b)
            weights[joint] = b**2 / np.sum(b**4)
        return weights

    def _apply_motor_strength(self) -> None:
        self._actuator.strength = self._conditions.motor_strength

    def _apply_latency(self) -> None:
        self._actuator.latency = self._conditions.latency

    def _apply_battery(self) -> None:
        self._actuator.torque_scale = self._battery_torque_scale()

    def _apply_terrain(self) -> None:
        self._ground.build(self._conditions.terrain_roughness, self._conditions.ground_friction)

    def _apply_joint_losses(self) -> None:
        self._actuator.set_joint_losses(
            self._conditions.joint_friction, self._conditions.joint_damping, inertia=self._joint_inertia()
        )

    def _joint_inertia(self) -> np.ndarray:
        """Each joint's effective inertia (mass-matrix diagonal) in the default pose, under the
        current mass_scale and armature: every mass and inertia scales by mass_scale, and
        armature adds at least itself to each diagonal entry (a lower bound keeps the
        stability cap conservative)."""
        return self._nominal_joint_inertia * self._conditions.mass_scale + self._conditions.armature

    def _mass_matrix_diagonal(self) -> np.ndarray:
        # Only from the URDF's inertias: Bullet's calculateMassMatrix builds its model once,
        # ignores changeDynamics, and refuses a link inertia that armature made
        # non-physical for a rigid body (one axis above the sum of the other two).
        c = self._client
        movable = [
            i
            for i in range(pb.getNumJoints(self._robot, physicsClientId=c))
            if pb.getJointInfo(self._robot, i, physicsClientId=c)[2] != pb.JOINT_FIXED
        ]
        pose = dict(zip(self._joint_ids, self.profile.default_positions))
        matrix = np.array(
            pb.calculateMassMatrix(self._robot, [float(pose.get(i, 0.0)) for i in movable], physicsClientId=c)
        )
        offset = matrix.shape[0] - len(movable)  # 6 base coordinates on a floating base
        diagonal = {joint: matrix[offset + k, offset + k] for k, joint in enumerate(movable)}
        return np.array([max(diagonal[j], 1e-9) for j in self._joint_ids])

    def _rigid_offset_from_base(self, link: int) -> tuple | None:
        """The link's frame in the base's centre-of-mass frame, if only fixed joints lie
        between them (None otherwise). getLinkState with velocities costs ~20 us, the base
        queries ~2 us: this is what keeps the IMU off the step budget."""
        c = self._client
        if link < 0:
            return self._base_inertial_inv
        walker = link
        while walker >= 0:
            info = pb.getJointInfo(self._robot, walker, physicsClientId=c)
            if info[2] != pb.JOINT_FIXED:
                return None
            walker = info[16]
        com, com_orientation = pb.getBasePositionAndOrientation(self._robot, physicsClientId=c)
        state = pb.getLinkState(self._robot, link, computeForwardKinematics=1, physicsClientId=c)
        inverse = pb.invertTransform(com, com_orientation)
        return pb.multiplyTransforms(*inverse, state[4], state[5])

    # --------------------------------------------------------------- lifecycle
    @property
    def client(self) -> int:
        """The PyBullet physics client id (for inspection; prefer the world's methods)."""
        return self._client

    @property
    def robot(self) -> int:
        """The robot's PyBullet body id."""
        return self._robot

    @property
    def ground_bodies(self) -> tuple[int, ...]:
        return self._ground.bodies

    @property
    def terrain_heights(self) -> np.ndarray | None:
        """Height-field samples [y, x] in m (None on flat ground); cell TERRAIN_CELL, centred at
        (0, 0). Samples [0, 0] and [0, 1], a far corner, are pinned (see ``_Ground``)."""
        return None if self._ground.heights is None else self._ground.heights.copy()

    def reset(
        self,
        joint_positions: Sequence[float] | None = None,
        base_position: Sequence[float] | None = None,
        base_orientation: Sequence[float] | None = None,
        joint_velocities: Sequence[float] | None = None,
    ) -> None:
        """Put the robot at rest in a pose, clear time, pushes and commands in flight.

        ``joint_velocities`` (rad/s, default 0) starts the joints moving instead: replaying a
        recording from a state taken mid-motion (system identification) needs that.

        Defaults: the profile's default joint positions; the base at ``spawn_height``
        above the highest point of the ground (so it never starts inside the terrain),
        upright; a suspended robot ``SUSPENSION_CLEARANCE`` higher, held there.
        """
        c = self._client
        q = self.profile.default_positions if joint_positions is None else joint_positions
        self._actuator.reset(q)  # validates the length, and holds this pose from now on
        q = np.array(q, dtype=float)
        if base_position is None:
            lift = 0.0 if self.profile.fixed_base else self._ground.top
            lift += SUSPENSION_CLEARANCE if self.suspended else 0.0
            base_position = (0.0, 0.0, self.profile.spawn_height + lift)
        position = as_vector3(base_position, "base_position")
        orientation = (0.0, 0.0, 0.0, 1.0) if base_orientation is None else as_quaternion(base_orientation)
        com_position, com_orientation = pb.multiplyTransforms(position, orientation, *self._base_inertial)
        pb.resetBasePositionAndOrientation(self._robot, com_position, com_orientation, physicsClientId=c)
        if self._gantry is not None:
            pb.changeConstraint(
                self._gantry,
                jointChildPivot=com_position,
                jointChildFrameOrientation=com_orientation,
                physicsClientId=c,
            )
        pb.resetBaseVelocity(self._robot, (0, 0, 0), (0, 0, 0), physicsClientId=c)
        velocities = np.zeros(len(q)) if joint_velocities is None else np.asarray(joint_velocities, dtype=float)
        if velocities.shape != q.shape or not np.all(np.isfinite(velocities)):
            raise ValueError(f"joint_velocities: expected {len(q)} finite numbers, got {joint_velocities!r}")
        for joint, angle, speed in zip(self._joint_ids, q, velocities):
            pb.resetJointState(self._robot, joint, float(angle), float(speed), physicsClientId=c)
        self._push_steps = 0
        self._imu_velocity_before = None

    def close(self) -> None:
        client, self._client = getattr(self, "_client", -1), -1
        if client >= 0:
            try:
                pb.disconnect(physicsClientId=client)
            except pb.error:
                pass

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown may already have torn down pybullet
            pass

    # ---------------------------------------------------------------- control
    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics periods."""
        if not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"step count must be an integer >= 0, got {n!r}")
        c, robot, ids = self._client, self._robot, self._joint_ids
        q, dq = self._q, self._dq
        compute, gravity = self._actuator.compute, self._gravity
        get_states, set_torques = pb.getJointStates, pb.setJointMotorControlArray
        simulate, torque_mode = pb.stepSimulation, pb.TORQUE_CONTROL
        for i in range(n):
            states = get_states(robot, ids, physicsClientId=c)
            q[:] = [s[0] for s in states]
            dq[:] = [s[1] for s in states]
            tau = compute(q, dq, None if gravity is None else gravity(q))
            set_torques(robot, ids, torque_mode, forces=tau.tolist(), physicsClientId=c)
            if self._push_steps:
                self._push_steps -= 1
                com = pb.getBasePositionAndOrientation(robot, physicsClientId=c)[0]
                pb.applyExternalForce(robot, -1, self._push_force, com, pb.WORLD_FRAME, physicsClientId=c)
            if i == n - 1 and not self._fixed_base:
                # The IMU differentiates velocity over the last step only, so only the last
                # step of a batch pays for reading it.
                self._imu_velocity_before = (
                    pb.getBaseVelocity(robot, physicsClientId=c)[0] if self._imu_at_com else self._imu_kinematics()[2]
                )
            simulate(physicsClientId=c)

    # ---------------------------------------------------------------- sensing
    def true_joint_state(self) -> JointState:
        states = pb.getJointStates(self._robot, self._joint_ids, physicsClientId=self._client)
        return JointState(
            np.array([s[0] for s in states]), np.array([s[1] for s in states]), self._actuator.motor_torque.copy()
        )

    def imu(self) -> ImuReading:
        """IMU reading in the frame of ``profile.imu_link``, with the configured noise.

        Linear acceleration is the proper acceleration (what an accelerometer measures:
        +9.81 m/s^2 up at rest), from the IMU point's velocity change over the last
        physics step; zero motion is assumed before the first step after a reset.
        """
        orientation, angular, linear = self._imu_kinematics()
        rotation_t = quat_to_matrix(orientation).T
        before = self._imu_velocity_before
        acceleration = np.zeros(3) if before is None else np.subtract(linear, before) / self._dt
        acceleration[2] += GRAVITY
        gyro = rotation_t @ np.array(angular)
        accel = rotation_t @ acceleration
        self._imu_noise(gyro, accel)
        return ImuReading(np.array(orientation), gyro, accel)

    def _imu_kinematics(self) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
        """(orientation xyzw, angular velocity world, linear velocity world) of the IMU frame origin."""
        c, robot = self._client, self._robot
        if self._imu_on_base is not None:
            com, com_orientation = pb.getBasePositionAndOrientation(robot, physicsClientId=c)
            origin, orientation = pb.multiplyTransforms(com, com_orientation, *self._imu_on_base)
            v, w = pb.getBaseVelocity(robot, physicsClientId=c)
        else:
            link = pb.getLinkState(
                robot, self._imu_id, computeLinkVelocity=1, computeForwardKinematics=1, physicsClientId=c
            )
            com, origin, orientation, v, w = link[0], link[4], link[5], link[6], link[7]
        # PyBullet gives the centre-of-mass velocity; the sensor sits at the frame origin.
        return orientation, w, _add(v, _cross(w, _sub(origin, com)))

    def base_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Ground truth (position m, orientation xyzw) of the base link frame in the world."""
        com, orientation = pb.getBasePositionAndOrientation(self._robot, physicsClientId=self._client)
        position, orientation = pb.multiplyTransforms(com, orientation, *self._base_inertial_inv)
        return np.array(position), np.array(orientation)

    def base_pose_and_velocity(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`base_pose` and :meth:`base_velocity` from one read of the base (position,
        orientation, linear velocity, angular velocity)."""
        c = self._client
        com, orientation = pb.getBasePositionAndOrientation(self._robot, physicsClientId=c)
        origin, frame = pb.multiplyTransforms(com, orientation, *self._base_inertial_inv)
        v, w = pb.getBaseVelocity(self._robot, physicsClientId=c)
        return np.array(origin), np.array(frame), np.array(_add(v, _cross(w, _sub(origin, com)))), np.array(w)

    def base_velocity(self) -> tuple[np.ndarray, np.ndarray]:
        """Ground truth (linear m/s, angular rad/s) of the base link frame, both in world axes."""
        return self.base_pose_and_velocity()[2:]

    # -------------------------------------------------------- links and contacts
    @property
    def link_ids(self) -> dict[str, int]:
        """Link name -> id, as :meth:`ground_contacts` and :meth:`link_positions` use
        (PyBullet's link index; the base is -1)."""
        return dict(self._links)

    def ground_contacts(self) -> Iterator[tuple[int, float]]:
        """(link id, normal force N) of each contact point between the robot and the ground."""
        ground = self._ground.bodies
        for point in pb.getContactPoints(bodyA=self._robot, physicsClientId=self._client):
            if point[2] in ground:
                yield point[3], point[9]

    def link_positions(self, links: Sequence[int]) -> np.ndarray:
        """World positions (m) of the link frames' origins, one row per link id."""
        states = pb.getLinkStates(self._robot, list(links), physicsClientId=self._client)
        return np.array([state[4] for state in states])

    def collision_sphere_radius(self, link: int) -> float:
        """The radius of the link's sphere collision shape (0: it has none)."""
        shapes = pb.getCollisionShapeData(self._robot, link, physicsClientId=self._client)
        return float(shapes[0][3][0]) if shapes and shapes[0][2] == pb.GEOM_SPHERE else 0.0

    def foot_contacts(self) -> np.ndarray:
        """Whether each of ``profile.foot_links`` touches the ground, in that order."""
        ground = self._ground.bodies
        touching = {
            point[3]
            for point in pb.getContactPoints(bodyA=self._robot, physicsClientId=self._client)
            if point[2] in ground
        }
        return np.array([foot in touching for foot in self._foot_ids], dtype=bool)

    def foot_normal_forces(self) -> np.ndarray:
        """Ground normal force on each of ``profile.foot_links``, N, in that order (0: in the air)."""
        ground = self._ground.bodies
        forces = dict.fromkeys(self._foot_ids, 0.0)
        for point in pb.getContactPoints(bodyA=self._robot, physicsClientId=self._client):
            if point[2] in ground and point[3] in forces:
                forces[point[3]] += point[9]
        return np.array([forces[foot] for foot in self._foot_ids])

    def total_mass(self) -> float:
        """Sum of the robot's link masses as PyBullet simulates them, kg."""
        return float(
            sum(pb.getDynamicsInfo(self._robot, link, physicsClientId=self._client)[0] for link in self._links.values())
        )


def _ignore() -> None:
    """Conditions read at sensing time (noise) need nothing applied."""


def _add(a, b) -> tuple[float, float, float]:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def _sub(a, b) -> tuple[float, float, float]:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _cross(a, b) -> tuple[float, float, float]:
    # Plain floats: np.cross costs ~10 us on 3-vectors, more than the rest of the IMU read.
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])
