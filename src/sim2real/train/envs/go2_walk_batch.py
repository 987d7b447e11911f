"""The Go2 walk task for all the robots of one env worker, stepped together.

A :class:`~sim2real.train.envs.go2_walk.Go2WalkEnv` step spends about half its time outside
PyBullet's ``stepSimulation`` (``benchmarks/env_step_time.py``): the actuator model at every
physics step, the state's arithmetic, 15 reward terms and the observation, each a few numpy
calls on 3- or 12-vectors whose cost is the call, not the numbers. :class:`Go2WalkBatch` does
that arithmetic once for the N robots of a worker, on (N, 12) arrays, and keeps per robot only
what is per robot: its PyBullet calls (each robot keeps its own world, a PyBullet client of its
own) and its random draws.

Each robot is one :class:`Go2WalkEnv` (its *keeper*): the keeper resets its episode (every
draw of the randomization, the terrain, the command, the gait clock's start, as the single env
makes them) and draws during the episode from its own generators in the single env's order
(pushes, then the command resample; the world's sensor noise, joints then IMU). What feeds the
physics -- the actuator's latency queue, PD torque, limits and joint losses -- is the single
env's elementwise arithmetic in the same order, so a robot's torques, and with them its whole
trajectory, are bit for bit those of the single env given the same seed and actions. The
rewards and observations, computed over rows (a rotation by ``einsum`` rather than ``@``, an
``exp`` over an array rather than ``math.exp``), agree with the single env's to float64 rounding
(``tests/unit/test_go2_walk_batch.py`` holds the float32 values PPO sees within 1e-6).

What it does not take (a reward prior, another engine, a gravity-compensating controller, an
IMU not bolted to the base, an observation or reward term outside the walk task's) is refused (:class:`BatchRefused`) when the
batch is built or a robot pulled; :meth:`check_prior` refuses a prior, which the vector env
checks before a step (:class:`~sim2real.train.vec_env.BatchedEnvSlice` then steps the envs one
at a time).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any, Sequence

import numpy as np
import pybullet as pb

from sim2real.core.rotations import quat_to_matrices
from sim2real.sim.actuator import minus_joint_losses, pd_torque
from sim2real.sim.world import height_at
from sim2real.train.envs.go2_walk import (
    BODY_CONTACT_FORCE,
    FOOT_CONTACT_FORCE,
    PENALIZED_CONTACT_FORCE,
    STANDING_YAW_BELOW,
    Go2WalkEnv,
)

# Observation terms computed here over rows; a task config with another one is refused.
BATCHED_OBSERVATION_TERMS = (
    "base_ang_vel",
    "projected_gravity",
    "velocity_command",
    "joint_pos_rel",
    "joint_vel",
    "last_action",
    "base_lin_vel",
    "gait_clock",
)


class BatchRefused(ValueError):
    """The envs cannot be stepped as a batch; the message names why and the fix."""


class _SegmentMeans:
    """:class:`~sim2real.train.envs.go2_walk._SegmentMean` for N robots: the same sums, closed
    per robot with the same scalar arithmetic."""

    def __init__(self, n: int):
        self.sums = np.zeros((n, 3))
        self.counts = np.zeros(n, dtype=np.int64)
        self.total_xy = np.zeros(n)
        self.total_yaw = np.zeros(n)
        self.total_count = np.zeros(n, dtype=np.int64)

    def add(self, error: np.ndarray, rows: np.ndarray | None = None) -> None:
        """Add a step's (N, 3) error, to the robots in ``rows`` (bool, N) or to all."""
        if rows is None:
            self.sums += error
            self.counts += 1
        else:
            np.add(self.sums, error, out=self.sums, where=rows[:, None])
            self.counts += rows

    def close(self, i: int) -> None:
        n = int(self.counts[i])
        if n:
            mean = self.sums[i] / n
            self.total_xy[i] += n * math.hypot(mean[0], mean[1])
            self.total_yaw[i] += n * abs(mean[2])
            self.total_count[i] += n
        self.sums[i] = 0.0
        self.counts[i] = 0

    def clear(self, i: int) -> None:
        self.sums[i] = 0.0
        self.counts[i] = 0
        self.total_xy[i] = self.total_yaw[i] = 0.0
        self.total_count[i] = 0

    def result(self, i: int) -> tuple[float, float] | None:
        self.close(i)
        count = int(self.total_count[i])
        return None if not count else (float(self.total_xy[i]) / count, float(self.total_yaw[i]) / count)


class Go2WalkBatch:
    """N :class:`Go2WalkEnv` (the keepers, built alike) stepped as one: :meth:`step` takes (N, 12)
    actions and gives what N single-env steps give, row by row."""

    def __init__(self, envs: Sequence[Go2WalkEnv]):
        self.envs = list(envs)
        self.check(self.envs)
        first = self.envs[0]
        self.n = n = len(self.envs)
        joints = first.profile.num_joints
        feet = len(first.profile.foot_links)
        self.joints, self.feet = joints, feet
        self.decimation = first.decimation
        self.dt_policy = first.policy_period
        self._weights = [(name, weight) for name, weight, _ in first._reward_fns]
        self._reward_methods = [(weight, getattr(self, f"_reward_{name}")) for name, weight in self._weights]
        self.term_names = [name for name, _ in self._weights]
        if first._only_positive:
            self.term_names.append("positive_clip")
        if first._termination_weight != 0.0:
            self.term_names.append("termination")

        z = np.zeros
        self.action, self.previous_action, self.target = z((n, joints)), z((n, joints)), z((n, joints))
        # The actuators (sim2real.sim.actuator.Actuator), one row per robot.
        self.target_q, self.target_dq, self.feedforward = z((n, joints)), z((n, joints)), z((n, joints))
        self.kp, self.kd = z((n, joints)), z((n, joints))
        self.strength = np.ones((n, 1))
        self.cap, self.neg_cap = z((n, joints)), z((n, joints))
        self.viscous_gain, self.coulomb = z((n, joints)), z((n, joints))
        self.friction_velocity = np.ones((n, joints))
        self.has_losses = np.zeros(n, dtype=bool)
        self.delay = [0] * n
        self.now = [0] * n
        self.queues: list[deque] = [deque() for _ in range(n)]
        self.motor, self.joint_torque, self.scratch = z((n, joints)), z((n, joints)), z((n, joints))
        self.q, self.dq = z((n, joints)), z((n, joints))
        # The state read after a policy step.
        self.q_true, self.dq_true, self.dq_previous, self.tau = (
            z((n, joints)),
            z((n, joints)),
            z((n, joints)),
            z((n, joints)),
        )
        self.q_measured, self.dq_measured = z((n, joints)), z((n, joints))
        self.imu_orientation = z((n, 4))
        self.gyro = z((n, 3))
        self.v_body, self.w_body, self.gravity_body = z((n, 3)), z((n, 3)), z((n, 3))
        self.base_height = z(n)
        self.foot_force = z((n, feet))
        self.body_contact = np.zeros(n, dtype=bool)
        self.collisions = z(n)
        self.contact = np.zeros((n, feet), dtype=bool)
        self.last_contact = np.zeros((n, feet), dtype=bool)
        self.first_contact = np.zeros((n, feet), dtype=bool)
        self.air_time, self.touchdown_air = z((n, feet)), z((n, feet))
        # The episode.
        self.command = z((n, 3))
        self.speed = z(n)  # |command xy|, as the keeper computed it (math.hypot)
        self.phase = z(n)
        self.steps = np.zeros(n, dtype=np.int64)
        self.segment_steps = np.zeros(n, dtype=np.int64)
        self.returns = z(n)
        self.next_push = np.full(n, math.inf)
        self.noise = z((n, 4))  # joint position, joint velocity, gyro, accelerometer sigmas
        self._noisy_rows: list[int] = []
        self.privileged_conditions = z((n, len(first._privileged_conditions)))
        self.all_error, self.settled_error = _SegmentMeans(n), _SegmentMeans(n)

        self._worlds: list[Any] = [None] * n  # each robot's world, taken at its first pull
        self.unpulled = np.ones(n, dtype=bool)  # rows whose episode state is not the batch's yet
        self._draws = [-1] * n  # each keeper's command_draws as last synced
        self._resets = [-1] * n  # each keeper's resets at its last pull
        self._episode_constants()

    # ------------------------------------------------------------------ checks
    @staticmethod
    def check(envs: Sequence[Any]) -> None:
        """BatchRefused, saying why, unless every env is a Go2 walk task on PyBullet, built from
        one config, with no reward prior and only observation and reward terms computed here."""
        if not envs:
            raise BatchRefused("a batch needs at least one env")
        first = envs[0]
        for env in envs:
            if type(env) is not Go2WalkEnv:
                raise BatchRefused(f"the batched task is the Go2 walk (Go2WalkEnv), not {type(env).__name__}")
            if env.engine != "pybullet":
                raise BatchRefused(f"the batched task steps PyBullet worlds, not {env.engine!r} ones")
            if env.task_config != first.task_config or env.profile.name != first.profile.name:
                raise BatchRefused("the envs differ in robot or task config")
            Go2WalkBatch.check_prior(env)
        unknown = [name for name in first.observation_spec.names if name not in BATCHED_OBSERVATION_TERMS]
        unknown += [name for name, _, _ in first._reward_fns if not hasattr(Go2WalkBatch, f"_reward_{name}")]
        if unknown:
            raise BatchRefused(f"terms {unknown} are not computed by the batched task")

    @staticmethod
    def check_prior(env: Go2WalkEnv) -> None:
        if env._prior_terms:
            raise BatchRefused("the batched task adds no reward prior's terms")

    def _check_keepers(self) -> None:
        """Before a step: every row pulled, no keeper stepped or given a new world outside the
        batch (a ``run``, ``set_engine``), and a command set from outside (``set_fixed_command``)
        taken over as the single env takes it: its error segments closed."""
        if self.unpulled.any():
            rows = [int(i) for i in np.flatnonzero(self.unpulled)]
            raise RuntimeError(f"envs {rows} have no episode in the batch: reset them (and pull) before a step")
        for i, env in enumerate(self.envs):
            if env._steps or env._world is not self._worlds[i] or env.resets != self._resets[i]:
                raise RuntimeError(
                    f"env {i} was stepped, reset or rebuilt outside the batch (by a vector env run or call): "
                    "train with batched_envs: false to do that, or reset the batch (BatchedEnvSlice.reset)"
                )
            if env.command_draws != self._draws[i]:
                self._take_command(i)

    def _take_command(self, i: int) -> None:
        env = self.envs[i]
        self.command[i] = env._command
        self.speed[i] = env._command_speed
        self._draws[i] = env.command_draws
        self.all_error.close(i)
        self.settled_error.close(i)
        self.segment_steps[i] = 0

    def _episode_constants(self) -> None:
        first = self.envs[0]
        self.offset = first.action_offset
        self.soft_lower, self.soft_upper = first._soft_lower, first._soft_upper
        gait = first._gait
        self.gait_offsets = None if gait is None else np.asarray(gait["offsets"], dtype=float)
        self.gait_stance = None if gait is None else gait["stance"]
        self.clock_step = None if gait is None else float(gait["frequency"]) * float(first.policy_period)
        spec = first.observation_spec
        self.obs_slices = [
            (term.name, start, stop, term.scale) for term, (start, stop) in zip(spec.terms, spec._bounds)
        ]
        self.obs_size = spec.size

    # ------------------------------------------------------------------ episodes
    def pull(self, i: int) -> None:
        """Take robot ``i``'s state from its keeper, which has just reset its episode."""
        env = self.envs[i]
        if env.engine != "pybullet":
            raise BatchRefused(f"env {i} runs on {env.engine}: a batch steps PyBullet worlds")
        self._worlds[i] = world = env.world  # a seeded reset builds a new one
        if world._gravity is not None or world._imu_on_base is None:
            raise BatchRefused(
                f"{env.profile.name} has controller gravity compensation or an IMU not bolted to its base"
            )
        actuator = world._actuator
        self.action[i] = env._action
        self.previous_action[i] = env._previous_action
        self.target[i] = env._target
        self.target_q[i] = actuator._target_q
        self.target_dq[i] = actuator._target_dq
        self.feedforward[i] = actuator._feedforward
        self.kp[i], self.kd[i] = actuator._kp, actuator._kd
        self.strength[i, 0] = actuator._strength
        self.cap[i], self.neg_cap[i] = actuator._cap, actuator._neg_cap
        self.viscous_gain[i], self.coulomb[i] = actuator._viscous_gain, actuator._coulomb
        self.friction_velocity[i] = actuator._friction_velocity
        self.has_losses[i] = actuator._has_losses
        self.delay[i], self.now[i] = actuator._delay_steps, actuator._now
        self.queues[i] = deque(actuator._queue)
        self.q_true[i], self.dq_true[i] = env._q, env._dq
        self.tau[i] = env._tau
        self.air_time[i], self.touchdown_air[i] = 0.0, 0.0
        self.last_contact[i] = False
        self.phase[i] = 0.0 if env._clock is None else env._clock.phase
        self.steps[i] = 0
        self.segment_steps[i] = 0
        self.returns[i] = 0.0
        self.next_push[i] = math.inf if env._next_push is None else env._next_push
        c = world._conditions
        self.noise[i] = (c.joint_position_noise, c.joint_velocity_noise, c.gyro_noise, c.accelerometer_noise)
        self._noisy_rows = [int(k) for k in np.flatnonzero((self.noise > 0).any(axis=1))]
        self.privileged_conditions[i] = env._privileged_conditions
        self.all_error.clear(i)
        self.settled_error.clear(i)
        self._take_command(i)
        self.unpulled[i] = False
        self._resets[i] = env.resets

    # --------------------------------------------------------------------- step
    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict | None]]:
        """One policy step of every robot: (rewards (N,), terms (N, K) in :attr:`term_names`,
        terminated (N,), truncated (N,), per robot its ``info["episode"]`` or None). The
        observations of the step are :meth:`observe`'s, the privileged ones
        :meth:`privileged`'s; a robot whose episode ended must be reset (its keeper's
        ``reset``, then :meth:`pull`) before the next step."""
        a = np.asarray(actions, dtype=float)
        if a.shape != self.action.shape:
            raise ValueError(f"actions must have shape {self.action.shape}, got {np.shape(actions)}")
        if not np.all(np.isfinite(a)):
            bad = sorted({int(i) for i in np.argwhere(~np.isfinite(a))[:, 0]})
            raise ValueError(f"actions of envs {bad} contain non-finite values")
        self._check_keepers()
        first = self.envs[0]
        self.previous_action, self.action = self.action, self.previous_action
        first.action_targets(a, clipped=self.action, out=self.target)
        for i in range(self.n):
            self.queues[i].append((self.now[i], self.target[i].copy()))
            world = self._worlds[i]
            if world._dt * self.now[i] >= self.next_push[i]:
                env = self.envs[i]
                pushes = env.randomization.pushes
                world.apply_push(pushes.sample_force(env.np_random), pushes.duration)
                self.next_push[i] = self.now[i] * world._dt + pushes.sample_interval(env.np_random)
        reads = self._physics(self.decimation)
        self.steps += 1
        self._read_state(reads)
        return self._rewards_and_ends()

    def _physics(self, substeps: int) -> "_Reads":
        """The physics steps of a policy step, and the state read at its end (each robot's in the
        same pass over the worlds as its last physics step)."""
        worlds, q, dq, queues, now, delay = self._worlds, self.q, self.dq, self.queues, self.now, self.delay
        get_states, set_torques = pb.getJointStates, pb.setJointMotorControlArray
        simulate, torque_mode = pb.stepSimulation, pb.TORQUE_CONTROL
        motor, scratch, joint = self.motor, self.scratch, self.joint_torque
        losses = bool(self.has_losses.any())
        lossless = ~self.has_losses
        reads = _Reads(self.n, self.feet)
        # The joints as the last step's state read left them: nothing has moved since.
        np.copyto(q, self.q_true)
        np.copyto(dq, self.dq_true)
        for substep in range(substeps):
            for i, queue in enumerate(queues):
                if queue and queue[0][0] <= now[i] - delay[i]:
                    due, entry = now[i] - delay[i], None
                    while queue and queue[0][0] <= due:
                        entry = queue.popleft()
                    self.target_q[i] = entry[1]
            # Actuator.compute over rows: the same elementwise operations in the same order.
            pd_torque(self.target_q, q, self.target_dq, dq, self.kp, self.kd, self.feedforward, motor, scratch)
            motor *= self.strength  # x 1.0 leaves a number as it is, as Actuator's skipped multiply does
            np.minimum(motor, self.cap, out=motor)
            np.maximum(motor, self.neg_cap, out=motor)
            torque = motor
            if losses:
                minus_joint_losses(motor, dq, self.viscous_gain, self.friction_velocity, self.coulomb, joint, scratch)
                joint[lossless] = motor[lossless]
                torque = joint
            last = substep == substeps - 1
            for i, (world, row) in enumerate(zip(worlds, torque.tolist())):
                now[i] += 1
                c, robot = world._client, world._robot
                set_torques(robot, world._joint_ids, torque_mode, forces=row, physicsClientId=c)
                if world._push_steps:
                    world._push_steps -= 1
                    com = pb.getBasePositionAndOrientation(robot, physicsClientId=c)[0]
                    pb.applyExternalForce(robot, -1, world._push_force, com, pb.WORLD_FRAME, physicsClientId=c)
                simulate(physicsClientId=c)
                if last:
                    reads.read(i, world, self.envs[i])
                else:
                    states = get_states(robot, world._joint_ids, physicsClientId=c)
                    q[i] = [s[0] for s in states]
                    dq[i] = [s[1] for s in states]
        self.tau[:] = motor
        return reads

    def _read_state(self, reads: "_Reads") -> None:
        """Go2WalkEnv._read_state for every robot, from its PyBullet reads: the noise drawn per
        robot, the arithmetic over rows."""
        n, joints = self.n, self.joints
        self.dq_previous = self.dq_true
        self.q_true = np.array(reads.positions)
        self.dq_true = np.array(reads.velocities)
        self.q_measured = self.q_true.copy()
        self.dq_measured = self.dq_true.copy()
        gyro_noise = np.zeros((n, 3))
        # WorldBase.joint_state, then SimWorld.imu: each robot's noise drawn in their order.
        for i in self._noisy_rows:
            sigma_q, sigma_dq, sigma_gyro, sigma_accel = self.noise[i]
            rng = self._worlds[i]._noise_rng
            if sigma_q > 0:
                self.q_measured[i] += rng.normal(0.0, sigma_q, joints)
            if sigma_dq > 0:
                self.dq_measured[i] += rng.normal(0.0, sigma_dq, joints)
            if sigma_gyro > 0:
                gyro_noise[i] = rng.normal(0.0, sigma_gyro, 3)
            if sigma_accel > 0:
                rng.normal(0.0, sigma_accel, 3)  # the accelerometer's, not observed: drawn to keep the stream
        com, v, w, origin = np.array(reads.coms), np.array(reads.vs), np.array(reads.ws), np.array(reads.origins)
        # SimWorld.base_pose_and_velocity: the base frame's velocity, v + w x (origin - com).
        r = origin - com
        v_world = np.empty((n, 3))
        v_world[:, 0] = v[:, 0] + (w[:, 1] * r[:, 2] - w[:, 2] * r[:, 1])
        v_world[:, 1] = v[:, 1] + (w[:, 2] * r[:, 0] - w[:, 0] * r[:, 2])
        v_world[:, 2] = v[:, 2] + (w[:, 0] * r[:, 1] - w[:, 1] * r[:, 0])
        rotation = quat_to_matrices(np.array(reads.frames))
        rotation_t = rotation.transpose(0, 2, 1)
        self.v_body = np.einsum("nij,nj->ni", rotation_t, v_world)
        self.w_body = np.einsum("nij,nj->ni", rotation_t, w)
        self.gravity_body = -rotation[:, 2, :]
        self.imu_orientation = np.array(reads.imu)
        self.gyro = np.einsum("nij,nj->ni", quat_to_matrices(self.imu_orientation).transpose(0, 2, 1), w)
        self.gyro += gyro_noise
        self.base_height = origin[:, 2] - np.array(
            [height_at(env._ground_means, x, y) for env, (x, y) in zip(self.envs, origin[:, :2].tolist())]
        )
        self.foot_force, self.body_contact, self.collisions = reads.foot_force, reads.body_contact, reads.collisions

        contact = self.foot_force > FOOT_CONTACT_FORCE
        filtered = contact | self.last_contact
        first_contact = (self.air_time > 0.0) & filtered
        self.air_time += self.dt_policy
        self.touchdown_air = np.where(first_contact, self.air_time, 0.0)
        self.first_contact = first_contact
        self.air_time[filtered] = 0.0
        self.contact = contact
        self.last_contact = contact

    # ------------------------------------------------------------------ rewards
    def _terms(self) -> np.ndarray:
        """(N, K) the weighted reward terms (Go2WalkEnv._reward_<name> x weight x dt), in order."""
        first = self.envs[0]
        self._standing = (self.speed <= first._standing_below) & (np.abs(self.command[:, 2]) < STANDING_YAW_BELOW)
        out = np.empty((self.n, len(self.term_names)))
        for k, (weight, term) in enumerate(self._reward_methods):
            np.multiply(term(), weight, out=out[:, k])
        return out

    # Go2WalkEnv._reward_<name>, over rows.
    def _reward_tracking_lin_vel(self) -> np.ndarray:
        ex, ey = self.command[:, 0] - self.v_body[:, 0], self.command[:, 1] - self.v_body[:, 1]
        return np.exp(-(ex * ex + ey * ey) / self.envs[0]._sigma)

    def _reward_tracking_ang_vel(self) -> np.ndarray:
        e = self.command[:, 2] - self.w_body[:, 2]
        return np.exp(-e * e / self.envs[0]._sigma_yaw)

    def _reward_lin_vel_z(self) -> np.ndarray:
        return self.v_body[:, 2] ** 2

    def _reward_ang_vel_xy(self) -> np.ndarray:
        return self.w_body[:, 0] ** 2 + self.w_body[:, 1] ** 2

    def _reward_orientation(self) -> np.ndarray:
        return self.gravity_body[:, 0] ** 2 + self.gravity_body[:, 1] ** 2

    def _reward_torques(self) -> np.ndarray:
        return np.einsum("ij,ij->i", self.tau, self.tau)

    def _reward_dof_vel(self) -> np.ndarray:
        return np.einsum("ij,ij->i", self.dq_true, self.dq_true)

    def _reward_dof_acc(self) -> np.ndarray:
        acc = (self.dq_true - self.dq_previous) / self.dt_policy
        return np.einsum("ij,ij->i", acc, acc)

    def _reward_base_height(self) -> np.ndarray:
        return (self.base_height - self.envs[0]._base_height_target) ** 2

    def _reward_feet_air_time(self) -> np.ndarray:
        air = np.add.reduce((self.touchdown_air - self.envs[0]._air_time_target) * self.first_contact, axis=1)
        return np.where((self.speed > 0.1) & self.first_contact.any(axis=1), air, 0.0)

    def _reward_collision(self) -> np.ndarray:
        return self.collisions

    def _reward_action_rate(self) -> np.ndarray:
        diff = self.action - self.previous_action
        return np.einsum("ij,ij->i", diff, diff)

    def _reward_stand_still(self) -> np.ndarray:
        return np.where(self._standing, np.add.reduce(np.abs(self.q_true - self.offset), axis=1), 0.0)

    def _reward_dof_pos_limits(self) -> np.ndarray:
        q = self.q_true
        value = np.add.reduce(np.maximum(self.soft_lower - q, 0.0), axis=1)
        value += np.add.reduce(np.maximum(q - self.soft_upper, 0.0), axis=1)
        return value

    def _reward_gait_contact(self) -> np.ndarray:
        contact = self.contact
        wanted = (self.phase[:, None] + self.gait_offsets) % 1.0 < self.gait_stance
        agree = np.add.reduce(contact == wanted, axis=1, dtype=float) / self.feet
        return np.where(self._standing, np.add.reduce(contact, axis=1, dtype=float) / self.feet, agree)

    def _reward_feet_clearance(self) -> np.ndarray:
        first = self.envs[0]
        result = np.zeros(self.n)
        stance = self.gait_stance
        if stance >= 1.0:
            return result
        for i in np.flatnonzero(~self._standing):
            env, world = self.envs[i], self._worlds[i]
            swing = ((self.phase[i] + self.gait_offsets) % 1.0 - stance) / (1.0 - stance)
            lift = np.where(swing >= 0.0, 1.0 - np.abs(2.0 * swing - 1.0), 0.0)
            states = pb.getLinkStates(world._robot, first._feet_ids, physicsClientId=world._client)
            error = 0.0
            for foot, state in enumerate(states):
                if lift[foot] > 0.0:
                    x, y, z = state[4]
                    height = z - first._foot_radius[foot] - height_at(env._terrain, x, y)
                    error += (height - first._clearance_target * lift[foot]) ** 2
            result[i] = error
        return result

    def _rewards_and_ends(self):
        first = self.envs[0]
        terms = self._terms()
        k = len(self._weights)
        reward = np.array([math.fsum(row) for row in terms[:, :k].tolist()])  # as the single env sums them
        if first._only_positive:
            terms[:, k] = np.maximum(0.0, -reward)
            reward = np.maximum(reward, 0.0)
            k += 1
        fell = self.body_contact | (self.gravity_body[:, 2] > -first._min_up) | (self.base_height < first._min_height)
        if first._termination_weight != 0.0:
            terms[:, k] = first._termination_weight * fell
            reward = reward + terms[:, k]
        truncated = ~fell & (self.steps >= first.max_episode_steps)
        self.returns += reward
        self._after_step()
        episodes: list[dict | None] = [None] * self.n
        ended = fell | truncated
        self.unpulled |= ended
        for i in np.flatnonzero(ended) if ended.any() else ():
            settled = self.settled_error.result(i)
            every = self.all_error.result(i)
            errors = settled or every or (float("nan"), float("nan"))
            episodes[i] = {
                "return": float(self.returns[i]),
                "length": int(self.steps[i]),
                "success": bool(not fell[i] and errors[0] < first._success_error),
                "velocity_error": float(errors[0]),
                "yaw_rate_error": float(errors[1]),
                "fell": bool(fell[i]),
            }
        return reward, terms, fell, truncated, episodes

    def _after_step(self) -> None:
        if self.clock_step is not None:
            self.phase = (self.phase + self.clock_step) % 1.0
        error = np.empty((self.n, 3))
        error[:, :2] = self.v_body[:, :2]
        error[:, 2] = self.w_body[:, 2]
        error -= self.command
        self.all_error.add(error)
        self.settled_error.add(error, self.segment_steps >= self.envs[0]._settle_steps)
        self.segment_steps += 1
        resample = self.envs[0]._resample_steps
        due = self.steps % resample == 0
        for i in np.flatnonzero(due) if due.any() else ():
            env = self.envs[i]
            if env._fixed_command is None:
                env._new_command(env.np_random)
                self._take_command(i)

    # -------------------------------------------------------------- observations
    def observe(self) -> np.ndarray:
        """(N, obs) float32: every robot's observation now (ObservationSpec.observe's terms)."""
        out = np.empty((self.n, self.obs_size))
        for name, start, stop, scale in self.obs_slices:
            part = out[:, start:stop]
            if name == "base_ang_vel":
                part[:] = self.gyro
            elif name == "projected_gravity":
                x, y, z, w = (self.imu_orientation[:, k] for k in range(4))
                k2 = 2.0 / (x * x + y * y + z * z + w * w)
                part[:, 0] = -k2 * (x * z - y * w)
                part[:, 1] = -k2 * (y * z + x * w)
                part[:, 2] = -(1.0 - k2 * (x * x + y * y))
            elif name == "velocity_command":
                part[:] = self.command
            elif name == "joint_pos_rel":
                np.subtract(self.q_measured, self.offset, out=part)
            elif name == "joint_vel":
                part[:] = self.dq_measured
            elif name == "last_action":
                part[:] = self.action
            elif name == "base_lin_vel":
                part[:] = self.v_body
            elif name == "gait_clock":
                for i, phase in enumerate(self.phase.tolist()):
                    angle = 2.0 * math.pi * phase
                    part[i, 0], part[i, 1] = math.sin(angle), math.cos(angle)
            if scale != 1.0:
                part *= scale
        return out.astype(np.float32)

    def privileged(self) -> np.ndarray:
        """(N, privileged) float32: Go2WalkEnv.privileged_observation's values for every robot."""
        return np.concatenate(
            [
                self.v_body,
                self.w_body,
                self.base_height[:, None],
                self.contact,
                self.air_time,
                self.q_true - self.offset,
                self.dq_true,
                self.privileged_conditions,
            ],
            axis=1,
        ).astype(np.float32)


class _Reads:
    """What a policy step's end reads of each robot (SimWorld's joint, IMU, base and contact
    reads, as Go2WalkEnv._read_state makes them), gathered robot by robot."""

    def __init__(self, n: int, feet: int):
        self.positions: list = []
        self.velocities: list = []
        self.coms: list = []
        self.vs: list = []
        self.ws: list = []
        self.imu: list = []
        self.origins: list = []
        self.frames: list = []
        self.foot_force = np.zeros((n, feet))
        self.body_contact = np.zeros(n, dtype=bool)
        self.collisions = np.zeros(n)

    def read(self, i: int, world, env: Go2WalkEnv) -> None:
        c, robot = world._client, world._robot
        states = pb.getJointStates(robot, world._joint_ids, physicsClientId=c)
        self.positions.append([s[0] for s in states])
        self.velocities.append([s[1] for s in states])
        com, com_orientation = pb.getBasePositionAndOrientation(robot, physicsClientId=c)
        v, w = pb.getBaseVelocity(robot, physicsClientId=c)
        self.coms.append(com)
        self.vs.append(v)
        self.ws.append(w)
        self.imu.append(pb.multiplyTransforms(com, com_orientation, *world._imu_on_base)[1])
        origin, frame = pb.multiplyTransforms(com, com_orientation, *world._base_inertial_inv)
        self.origins.append(origin)
        self.frames.append(frame)
        ground, foot_slot = world._ground.bodies, env._foot_slot
        touching = set()
        for point in pb.getContactPoints(bodyA=robot, physicsClientId=c):
            if point[2] not in ground:
                continue
            link, force = point[3], point[9]
            slot = foot_slot.get(link)
            if slot is not None:
                self.foot_force[i, slot] += force
            elif link in env._terminate_ids and force > BODY_CONTACT_FORCE:
                self.body_contact[i] = True
            elif link in env._penalize_ids and force > PENALIZED_CONTACT_FORCE:
                touching.add(link)
        self.collisions[i] = len(touching)
