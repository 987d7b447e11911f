"""A MuJoCo world holding one robot under named physical conditions: the second engine.

:class:`MujocoWorld` has :class:`~sim2real.sim.world.SimWorld`'s interface (reset, command,
damp, step, the sensing calls, the named conditions), so everything that runs on a world
(the ``sim_robot`` node with ``engine: mujoco``, the task envs, evaluation) runs on either
engine. It is a second opinion, not a copy: contacts, integration, joint losses and the
IMU are MuJoCo's own, so a policy that only works through a PyBullet quirk shows it here.

What is shared with SimWorld, because it stands for the robot and not the simulator: the
actuator model (:class:`~sim2real.sim.actuator.Actuator`: PD per physics step, torque
limits, motor strength, latency, battery sag, damping mode), the robot controller's gravity
compensation, sensor noise, pushes, and the terrain draw (the same seed gives the same
height field in both engines).

What MuJoCo does its own way:

- joint friction and damping are MuJoCo's dry friction (``frictionloss``, a constraint)
  and implicit viscous damping, not the actuator's smoothed Coulomb term;
- armature is MuJoCo's rotor inertia (``dof_armature``), exact about each joint axis;
- the IMU is a site with MuJoCo's gyro, accelerometer and frame-orientation sensors;
- contacts are soft (MuJoCo's default solver parameters), robot-ground only (no
  self-collision, as in SimWorld); the ground's friction wins every contact (priority);
- joint speed is clamped at the profile's velocity limits after each step, as Bullet's
  solver clamps it in SimWorld (the real motors and controller stop there).

Model: the profile's URDF with a free joint added to the base (a floating-base robot), or
any URDF or MJCF given as ``model`` whose joint names match the profile's. Frames and units
are SimWorld's: base pose and velocity of the base link frame, world z up, quaternions
(x, y, z, w), joint arrays in the profile's joint order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

import mujoco
import numpy as np

from sim2real.core.robot_profile import RobotProfile
from sim2real.sim.actuator import Actuator
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.gravity_compensation import GravityCompensation
from sim2real.sim.robot_models import resolve_model
from sim2real.sim.world import SUSPENSION_CLEARANCE, TERRAIN_CELL, TERRAIN_SIZE, draw_terrain
from sim2real.sim.world_base import GRAVITY, ImuReading, JointState, WorldBase, as_quaternion, as_vector3

# Collision bits: robot geoms collide with the ground only (SimWorld loads without self-collision).
_ROBOT_BITS, _GROUND_BITS = 2, 1
_IMU_SITE = "sim2real_imu"
_PARKED_Z = -100.0  # where the unused height field waits, far below the plane
# The height field's elevation at compile time, which sizes its bounding volume: the largest
# terrain_roughness (half the elevation) the world takes without recompiling.
MAX_ROUGHNESS = 0.5


class MujocoWorld(WorldBase):
    """One robot in one MuJoCo model, driven in torque mode by an :class:`Actuator`.

    Time advances only in :meth:`step`, by whole physics periods. After :meth:`reset`
    the actuator holds the reset pose with the profile's gains. Same seed and same
    sequence of calls give bitwise identical results.
    """

    engine = "mujoco"

    def __init__(
        self,
        profile: RobotProfile,
        conditions: PhysicalConditions | None = None,
        seed: int = 0,
        gravity_compensation: bool | None = None,
        physics_period: float | None = None,
        suspended: bool = False,
        model: str | Path | None = None,
    ):
        """Arguments as :class:`~sim2real.sim.world.SimWorld`'s; ``model``: a model to load
        instead of the profile's (``mujoco_model`` in the profile, else its URDF): a URDF or
        MJCF path, or a packaged model such as ``example-robot-data:go2``
        (:mod:`sim2real.sim.robot_models`), with the profile's joint names."""
        super().__init__(profile, conditions, seed, gravity_compensation, physics_period, suspended)
        model = model or profile.mujoco_model
        self.model_spec = str(model) if model else "profile"
        self.model_path = resolve_model(model) if model else Path(profile.urdf)
        self._heights: np.ndarray | None = None
        self._ground_top = 0.0
        self._model, self._data = self._compile()
        self._index_model()
        self._actuator = Actuator(profile.effort_limits, self._dt, profile.damping_kd, kp=profile.kp, kd=profile.kd)
        self._gravity = (
            GravityCompensation(profile.urdf, profile.joint_names).torque if self.gravity_compensation else None
        )
        self._velocity_limits = np.asarray(profile.velocity_limits, dtype=float)
        self._stale = True
        m = self._model
        # The model's own values, to which the conditions are relative or added (a model may
        # bring its own rotor inertia, damping and friction).
        self._nominal = {
            "mass": m.body_mass.copy(),
            "inertia": m.body_inertia.copy(),
            "armature": m.dof_armature[self._dadr].copy(),
            "damping": m.dof_damping[self._dadr].copy(),
            "frictionloss": m.dof_frictionloss[self._dadr].copy(),
        }
        self._scratch = mujoco.MjData(m)  # mj_setConst's workspace: it overwrites the state it is given
        self._apply_all()
        self.reset()

    # ------------------------------------------------------------------ loading
    def _compile(self) -> tuple[mujoco.MjModel, mujoco.MjData]:
        try:
            spec = mujoco.MjSpec.from_file(str(self.model_path))
        except Exception as exc:  # MuJoCo raises ValueError with the parser's message
            raise ValueError(
                f"{self.model_path}: MuJoCo cannot load this model ({exc}). Fix: give a valid "
                "URDF or MJCF whose joints carry the profile's names"
            ) from None
        return self._compiled(spec)

    def _compiled(self, spec: mujoco.MjSpec) -> tuple[mujoco.MjModel, mujoco.MjData]:
        profile = self.profile
        spec.compiler.fusestatic = False  # keep the IMU and foot links as bodies
        spec.compiler.discardvisual = True
        spec.option.timestep = self._dt
        spec.option.gravity = (0.0, 0.0, -GRAVITY)
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
        # Elliptic friction cones with a high impedance ratio: MuJoCo's advice against the
        # slow creep of a soft contact under steady tangential load (pyramidal cones let a
        # standing Go2's feet slide apart, 6 cm in 8 s).
        spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
        spec.option.impratio = 100.0
        root = spec.worldbody.first_body()
        if root is None:
            raise ValueError(f"{self.model_path}: the model has no body under the world")
        has_free = any(j.type == mujoco.mjtJoint.mjJNT_FREE for j in root.joints)
        if has_free and (profile.fixed_base or self.suspended):
            raise ValueError(
                f"{self.model_path}: the model's base has its own free joint, so it cannot be "
                f"{'suspended' if self.suspended else 'bolted down'} here. Fix: give a model whose root "
                "body has no joint (the world adds the free joint when the robot needs one)"
            )
        if not profile.fixed_base and not self.suspended and not has_free:
            root.add_freejoint()
        root.pos = (0.0, 0.0, profile.spawn_height)
        for geom in spec.geoms:
            if geom.contype or geom.conaffinity:  # a visual-only geom (both 0) stays out of contacts
                geom.contype, geom.conaffinity = _ROBOT_BITS, _GROUND_BITS
        imu_body = spec.body(profile.imu_link)
        if imu_body is None:
            raise ValueError(
                f"{self.model_path}: no body {profile.imu_link!r} (the profile's imu_link); "
                "MuJoCo keeps a URDF's links as bodies here, so check the link name"
            )
        imu_body.add_site(name=_IMU_SITE)
        for kind, name in (
            (mujoco.mjtSensor.mjSENS_FRAMEQUAT, "imu_quat"),
            (mujoco.mjtSensor.mjSENS_GYRO, "imu_gyro"),
            (mujoco.mjtSensor.mjSENS_ACCELEROMETER, "imu_accel"),
        ):
            spec.add_sensor(name=name, type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=_IMU_SITE)
        ground = dict(
            contype=_GROUND_BITS,
            conaffinity=_ROBOT_BITS,
            priority=1,
            friction=[self._conditions.ground_friction, 0.005, 0.0001],
        )
        spec.worldbody.add_geom(name="ground_plane", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 1], **ground)
        points = int(round(TERRAIN_SIZE / TERRAIN_CELL)) + 1
        half = TERRAIN_SIZE / 2
        # Elevation 2 x MAX_ROUGHNESS at compile time: the bounding volume stays large enough for
        # any roughness set later by rescaling hfield_size in place.
        spec.add_hfield(
            name="terrain",
            size=[half, half, 2.0 * MAX_ROUGHNESS, 0.1],
            nrow=points,
            ncol=points,
            userdata=[0.0] * (points * points),
        )
        spec.worldbody.add_geom(
            name="ground_terrain",
            type=mujoco.mjtGeom.mjGEOM_HFIELD,
            hfieldname="terrain",
            pos=[0, 0, _PARKED_Z],
            **ground,
        )
        try:
            model = spec.compile()
        except Exception as exc:  # a mesh file missing, a bad inertia: MuJoCo's message says which
            raise ValueError(
                f"{self.model_path}: MuJoCo cannot compile this model ({exc}). Fix: the model's "
                "files (meshes) must be where it says"
            ) from None
        return model, mujoco.MjData(model)

    def _index_model(self) -> None:
        m, profile = self._model, self.profile
        missing = [name for name in profile.joint_names if mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name) < 0]
        if missing:
            raise ValueError(
                f"{self.model_path}: joints {missing} of profile {profile.name!r} not in the model. Fix: "
                "give a model whose joints carry the profile's names (or rename them in a copy)"
            )
        joints = [m.joint(name) for name in profile.joint_names]
        self._qadr = np.array([int(j.qposadr[0]) for j in joints])
        self._dadr = np.array([int(j.dofadr[0]) for j in joints])
        self._n = len(joints)
        self._root = 1  # the world's first child: the base
        free = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
        self._free_q = int(m.jnt_qposadr[free[0]]) if free else None
        self._link_ids = {m.body(i).name: i for i in range(1, m.nbody)}
        absent = [name for name in profile.foot_links if name not in self._link_ids]
        if absent:
            raise ValueError(
                f"{self.model_path}: no bodies {absent} (the profile's foot_links): contacts are read "
                "per foot body. Fix: give a model with a body per foot named as in the profile"
            )
        self._foot_bodies = [self._link_ids[name] for name in profile.foot_links]
        self._plane = m.geom("ground_plane").id
        self._terrain = m.geom("ground_terrain").id
        self._hfield = m.hfield("terrain").id
        self._sensor = {name: int(m.sensor(name).adr[0]) for name in ("imu_quat", "imu_gyro", "imu_accel")}

    # -------------------------------------------------------------- conditions
    def _check_condition(self, name: str, value) -> None:
        super()._check_condition(name, value)
        if name == "terrain_roughness" and value is not None and value > MAX_ROUGHNESS:
            raise ValueError(
                f"condition 'terrain_roughness' {value} m: the MuJoCo world takes at most "
                f"{MAX_ROUGHNESS} m. Fix: a lower roughness, or the pybullet engine"
            )

    def _apply_conditions(self, names: list[str]) -> None:
        self._apply_all(terrain="terrain_roughness" in names, inertia=bool({"mass_scale", "armature"} & set(names)))

    def _apply_all(self, terrain: bool = True, inertia: bool = True) -> None:
        """Bring the model to the conditions; the robot's state (pose, velocities, time) is kept."""
        m, c, nominal = self._model, self._conditions, self._nominal
        m.geom_friction[[self._plane, self._terrain], 0] = c.ground_friction
        m.dof_frictionloss[self._dadr] = nominal["frictionloss"] + c.joint_friction
        m.dof_damping[self._dadr] = nominal["damping"] + c.joint_damping
        self._actuator.strength = c.motor_strength
        self._actuator.latency = c.latency
        self._actuator.torque_scale = self._battery_torque_scale()
        if terrain:
            self._build_terrain(c.terrain_roughness)
        if inertia:
            m.body_mass[:] = nominal["mass"] * c.mass_scale
            m.body_inertia[:] = nominal["inertia"] * c.mass_scale
            m.dof_armature[self._dadr] = nominal["armature"] + c.armature
            # Constants that depend on the inertia (the solver's scaling); on scratch data, because
            # mj_setConst puts the data it is given at the model's reference pose.
            mujoco.mj_setConst(m, self._scratch)
        self._stale = True

    def _build_terrain(self, roughness: float) -> None:
        m = self._model
        if roughness <= 0:
            m.geom_pos[self._terrain] = (0.0, 0.0, _PARKED_Z)
            m.geom_pos[self._plane] = (0.0, 0.0, 0.0)
            self._heights, self._ground_top = None, 0.0
            return
        heights = draw_terrain(self._terrain_rng, roughness)
        # MuJoCo scales the field's [0, 1] data by the elevation and puts 0 at the geom's z;
        # rows run along y, as in ``heights[y, x]``.
        m.hfield_size[self._hfield, 2] = 2.0 * roughness
        m.hfield_data[:] = ((heights + roughness) / (2.0 * roughness)).ravel()
        m.geom_pos[self._terrain] = (0.0, 0.0, -roughness)
        m.geom_pos[self._plane] = (0.0, 0.0, -roughness)
        self._heights, self._ground_top = heights, roughness

    # --------------------------------------------------------------- lifecycle
    @property
    def model(self) -> mujoco.MjModel:
        """The MuJoCo model (for inspection; prefer the world's methods)."""
        return self._model

    @property
    def data(self) -> mujoco.MjData:
        return self._data

    @property
    def terrain_heights(self) -> np.ndarray | None:
        return None if self._heights is None else self._heights.copy()

    def reset(
        self,
        joint_positions: Sequence[float] | None = None,
        base_position: Sequence[float] | None = None,
        base_orientation: Sequence[float] | None = None,
        joint_velocities: Sequence[float] | None = None,
    ) -> None:
        """As :meth:`SimWorld.reset <sim2real.sim.world.SimWorld.reset>`."""
        m, d = self._model, self._data
        q = self.profile.default_positions if joint_positions is None else joint_positions
        self._actuator.reset(q)
        q = np.array(q, dtype=float)
        velocities = np.zeros(len(q)) if joint_velocities is None else np.asarray(joint_velocities, dtype=float)
        if velocities.shape != q.shape or not np.all(np.isfinite(velocities)):
            raise ValueError(f"joint_velocities: expected {len(q)} finite numbers, got {joint_velocities!r}")
        if base_position is None:
            lift = 0.0 if self.profile.fixed_base else self._ground_top
            lift += SUSPENSION_CLEARANCE if self.suspended else 0.0
            base_position = (0.0, 0.0, self.profile.spawn_height + lift)
        position = as_vector3(base_position, "base_position")
        orientation = np.array((0.0, 0.0, 0.0, 1.0) if base_orientation is None else as_quaternion(base_orientation))
        wxyz = np.roll(orientation, 1)
        mujoco.mj_resetData(m, d)
        if self._free_q is not None:
            d.qpos[self._free_q : self._free_q + 3] = position
            d.qpos[self._free_q + 3 : self._free_q + 7] = wxyz
        else:
            m.body_pos[self._root] = position
            m.body_quat[self._root] = wxyz
        d.qpos[self._qadr] = q
        d.qvel[self._dadr] = velocities
        self._push_steps = 0
        d.xfrc_applied[:] = 0.0
        mujoco.mj_forward(m, d)
        self._stale = False

    # ---------------------------------------------------------------- control
    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics periods."""
        if not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"step count must be an integer >= 0, got {n!r}")
        m, d = self._model, self._data
        qadr, dadr = self._qadr, self._dadr
        compute, gravity = self._actuator.compute, self._gravity
        limit, negative_limit = self._velocity_limits, -self._velocity_limits
        for _ in range(n):
            q, dq = d.qpos[qadr], d.qvel[dadr]
            d.qfrc_applied[dadr] = compute(q, dq, None if gravity is None else gravity(q))
            if self._push_steps:
                self._push_steps -= 1
                d.xfrc_applied[self._root, :3] = self._push_force
            else:
                d.xfrc_applied[self._root, :3] = 0.0
            mujoco.mj_step(m, d)
            dq = d.qvel[dadr]
            if (dq > limit).any() or (dq < negative_limit).any():
                # As Bullet does: the clamped speed is also the one the position integrates.
                clamped = np.clip(dq, negative_limit, limit)
                over = clamped != dq
                d.qpos[qadr[over]] = q[over] + self._dt * clamped[over]
                d.qvel[dadr] = clamped
        if n:
            self._stale = True

    def _forward(self) -> None:
        """Bring positions, contacts and sensors up to the state mj_step left (it computes
        them before integrating)."""
        if self._stale:
            mujoco.mj_forward(self._model, self._data)
            self._stale = False

    # ---------------------------------------------------------------- sensing
    def true_joint_state(self) -> JointState:
        d = self._data
        return JointState(d.qpos[self._qadr].copy(), d.qvel[self._dadr].copy(), self._actuator.motor_torque.copy())

    def imu(self) -> ImuReading:
        """MuJoCo's IMU-site sensors: orientation, gyro and accelerometer (proper
        acceleration, +9.81 m/s^2 up at rest), in the IMU link's frame, with noise."""
        self._forward()
        data, adr = self._data.sensordata, self._sensor
        quat = data[adr["imu_quat"] : adr["imu_quat"] + 4]
        gyro = data[adr["imu_gyro"] : adr["imu_gyro"] + 3].copy()
        accel = data[adr["imu_accel"] : adr["imu_accel"] + 3].copy()
        self._imu_noise(gyro, accel)
        return ImuReading(np.roll(quat, -1), gyro, accel)

    def base_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Ground truth (position m, orientation xyzw) of the base link frame in the world."""
        self._forward()
        d = self._data
        return d.xpos[self._root].copy(), np.roll(d.xquat[self._root], -1)

    def base_pose_and_velocity(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        position, orientation = self.base_pose()
        velocity = np.zeros(6)
        mujoco.mj_objectVelocity(self._model, self._data, mujoco.mjtObj.mjOBJ_BODY, self._root, velocity, 0)
        return position, orientation, velocity[3:], velocity[:3]

    def base_velocity(self) -> tuple[np.ndarray, np.ndarray]:
        """Ground truth (linear m/s, angular rad/s) of the base link frame, both in world axes."""
        return self.base_pose_and_velocity()[2:]

    # -------------------------------------------------------- links and contacts
    @property
    def link_ids(self) -> dict[str, int]:
        """Link (body) name -> id, as :meth:`ground_contacts` and :meth:`link_positions` use."""
        return dict(self._link_ids)

    def ground_contacts(self) -> Iterator[tuple[int, float]]:
        """(link id, normal force N) of each contact point between the robot and the ground."""
        self._forward()
        m, d = self._model, self._data
        ground = (self._plane, self._terrain)
        wrench = np.zeros(6)
        for i in range(d.ncon):
            contact = d.contact[i]
            if contact.geom1 in ground:
                other = contact.geom2
            elif contact.geom2 in ground:
                other = contact.geom1
            else:
                continue
            mujoco.mj_contactForce(m, d, i, wrench)
            yield int(m.geom_bodyid[other]), float(wrench[0])

    def link_positions(self, links: Sequence[int]) -> np.ndarray:
        """World positions (m) of the link frames' origins, one row per link id."""
        self._forward()
        return self._data.xpos[list(links)].copy()

    def collision_sphere_radius(self, link: int) -> float:
        """The radius of the link's sphere collision shape (0: it has none)."""
        m = self._model
        for geom in range(m.ngeom):
            if m.geom_bodyid[geom] == link and m.geom_type[geom] == mujoco.mjtGeom.mjGEOM_SPHERE:
                return float(m.geom_size[geom, 0])
        return 0.0

    def foot_contacts(self) -> np.ndarray:
        """Whether each of ``profile.foot_links`` touches the ground, in that order."""
        touching = {link for link, _ in self.ground_contacts()}
        return np.array([foot in touching for foot in self._foot_bodies], dtype=bool)

    def foot_normal_forces(self) -> np.ndarray:
        """Ground normal force on each of ``profile.foot_links``, N, in that order."""
        forces = dict.fromkeys(self._foot_bodies, 0.0)
        for link, force in self.ground_contacts():
            if link in forces:
                forces[link] += force
        return np.array([forces[foot] for foot in self._foot_bodies])

    def total_mass(self) -> float:
        """Sum of the robot's body masses as MuJoCo simulates them, kg."""
        return float(self._model.body_mass[1:].sum())
