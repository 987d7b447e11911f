#!/usr/bin/env python3
"""Training throughput: policy steps/s through the process vector env, beside raw PyBullet.

For each task it measures, in the same run:

- raw PyBullet physics steps/s: the bare torque-control loop of ``sim_step.py``
  (getJointStates, numpy PD, setJointMotorControlArray, stepSimulation) on the same URDF,
  and that rate divided by the task's physics steps per policy step: the most policy
  steps/s one process could do if the task cost nothing beyond physics;
- one task env stepped in this process (policy steps/s): the task's own cost;
- the vector env (``sim2real.train.vec_env.ProcessVecEnv``) with ``--num-envs`` envs over
  1 and 2 worker processes (policy steps/s summed over envs): what PPO collects from;
- for a task that batches (the Go2 walk), the same vector env with ``batched=True``: each
  worker steps its envs together (``sim2real.train.envs.go2_walk_batch``), 1 worker, and its
  ``ratio`` and ``ratio to own`` beside the one-env-at-a-time worker's.

Actions are Gaussian with std 1 (an untrained policy's exploration), so episodes end and
auto-reset as they do early in training. Each task is measured in the nominal world and
under its reference randomization (``<robot>_reference``, what training uses): rough
terrain, latency and sensor noise make a Go2 step about twice as expensive. ``ratio`` is vec env (1 worker) / raw ceiling;
``scaling`` is 2 workers / 1 worker (ideal 2.0 on 2 free cores; the parent process also
needs CPU to move the arrays).

The raw loop holds a standing robot, and a robot's physics cost depends on its state (how
many contacts, how fast it moves): a Go2 thrashing under random actions, or lying on
rough ground, does not cost what one standing on a plane does. ``physics share``
therefore also reports, for the single env, the fraction of its own step time spent
inside ``pybullet.stepSimulation`` on the physics it actually simulates: what is left
(1 - share) is the task's Python (actuator model, state reading, observation, rewards).
``ratio to own`` is the same for the vector env (1 worker), timed in its worker over the
window its rate is measured in: the share of the wall time spent in ``stepSimulation``, i.e.
its rate over ``own physics``, the policy steps/s its own worlds' physics alone would give
(the terrain, conditions and motion it simulated, which under the reference randomization
cost far more than a robot standing on a plane): of the physics a training run pays for, the
share it gets, on the same worlds and measured at the same time.

``floor``: what an env written in Python over PyBullet costs per policy step before any
task logic: the raw loop's own torque PD at every physics step (no actuator model), toward
targets the task's own action mapping (``action_targets``: clip, scale, offset, joint
limits) makes of random actions, plus only the reads a task cannot do
without once per policy step (joint states; base pose, base velocity and contacts for a
floating base, the last link's pose for a fixed one); no observation, no reward, no
randomization, no process boundary. ``floor ratio`` is that rate over the raw ceiling: an
env that steps one robot per PyBullet world adds its observation, rewards and actuator model
on top of it. ``floor, N
robots in a world`` puts N robots in one world stepped by one ``stepSimulation`` (what a
batched worker would do), rate per robot: the bound for that design. The raw loop and the
floors are measured interleaved, 5 rounds, medians (the machine's speed drifts).

Example:
    .venv/bin/python benchmarks/train_throughput.py
    .venv/bin/python benchmarks/train_throughput.py --tasks panda:reach --randomization none --seconds 5 --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np
import pybullet

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim2real.core.robot_profile import load_profile  # noqa: E402
from sim2real.train.tasks import make_env  # noqa: E402
from sim2real.train.vec_env import ProcessVecEnv  # noqa: E402
from sim_step import RawPyBulletLoop  # noqa: E402  (the baseline is shared with sim_step.py)


def _rate(run, chunk: int, seconds: float) -> float:
    """Units/s of ``run(chunk)`` (which does ``chunk`` units) over about ``seconds``."""
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        run(chunk)
        done += chunk
    return done / (time.perf_counter() - start)


def raw_and_floor_rates(
    robot: str,
    decimation: int,
    action_targets: Callable[[np.ndarray], np.ndarray],
    robots_per_world: int,
    seconds: float,
    seed: int,
    rounds: int = 5,
) -> tuple[float, dict[int, float]]:
    """(raw physics steps/s, {robots per world: floor policy steps/s per robot}), the subjects
    interleaved round after round and each one's median kept: a drift of the machine's speed
    during the run then moves numerator and denominator alike."""
    raw = RawPyBulletLoop(load_profile(robot))
    floors = {n: PythonFloor(robot, n, decimation, action_targets, seed) for n in sorted({1, robots_per_world})}
    try:
        raw.run(200)  # warm-up
        for floor in floors.values():
            floor.policy_steps(50)
        raw_rates, floor_rates = [], {n: [] for n in floors}
        for _ in range(rounds):
            raw_rates.append(_rate(raw.run, 200, seconds / rounds))
            for n, floor in floors.items():
                floor_rates[n].append(_rate(floor.policy_steps, 50, seconds / rounds) * n)
        return float(np.median(raw_rates)), {n: float(np.median(r)) for n, r in floor_rates.items()}
    finally:
        raw.close()
        for floor in floors.values():
            floor.close()


def single_env_rate(
    robot: str, task: str, randomization: str | None, seconds: float, seed: int
) -> tuple[float, int, float]:
    """(policy steps/s, physics steps per policy step, share of the step time in stepSimulation)."""
    env = make_env(robot, task, seed=seed, randomization=randomization)
    rng = np.random.default_rng(seed)
    step_simulation, in_physics = pybullet.stepSimulation, [0.0]

    def timed_step_simulation(**kwargs):
        # SimWorld looks pybullet.stepSimulation up on every step(), so this wrapper is what it calls.
        begin = time.perf_counter()
        step_simulation(**kwargs)
        in_physics[0] += time.perf_counter() - begin

    try:
        env.reset(seed=seed)
        pybullet.stepSimulation = timed_step_simulation
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            _, _, terminated, truncated, _ = env.step(rng.standard_normal(env.action_space.shape))
            steps += 1
            if terminated or truncated:
                env.reset()
        elapsed = time.perf_counter() - start
        return steps / elapsed, env.decimation, in_physics[0] / elapsed
    finally:
        pybullet.stepSimulation = step_simulation
        env.close()


class PythonFloor:
    """``robots`` copies of the raw loop's robot in one world (3 m apart on the plane), the
    raw loop's PD every physics step toward targets redrawn every policy step, and the
    minimal per-policy-step reads. A robot that fell (base below half its spawn height) or
    ran 1000 policy steps is put back, as an episode would end."""

    def __init__(
        self, robot: str, robots: int, decimation: int, action_targets: Callable[[np.ndarray], np.ndarray], seed: int
    ):
        profile = load_profile(robot)
        self.loop = RawPyBulletLoop(profile)  # the baseline's world, physics settings and first robot
        c = self.loop.client
        self.profile, self.decimation, self.action_targets = profile, decimation, action_targets
        self.bodies = [self.loop.robot]
        for k in range(1, robots):
            body = pybullet.loadURDF(
                str(profile.urdf),
                (3.0 * k, 0.0, profile.spawn_height),
                useFixedBase=profile.fixed_base,
                flags=pybullet.URDF_USE_INERTIA_FROM_FILE,
                physicsClientId=c,
            )
            pybullet.setJointMotorControlArray(
                body, self.loop.ids, pybullet.VELOCITY_CONTROL, forces=[0.0] * len(self.loop.ids), physicsClientId=c
            )
            self.bodies.append(body)
        for k in range(robots):
            self._put_back(k)
        self.rng = np.random.default_rng(seed)
        self.ages = np.zeros(robots, dtype=int)

    def _put_back(self, k: int) -> None:
        c, body, profile = self.loop.client, self.bodies[k], self.profile
        pybullet.resetBasePositionAndOrientation(
            body, (3.0 * k, 0.0, profile.spawn_height), (0, 0, 0, 1), physicsClientId=c
        )
        pybullet.resetBaseVelocity(body, (0, 0, 0), (0, 0, 0), physicsClientId=c)
        for joint, angle in zip(self.loop.ids, profile.default_positions):
            pybullet.resetJointState(body, joint, float(angle), 0.0, physicsClientId=c)

    def policy_steps(self, count: int) -> None:
        loop, profile = self.loop, self.profile
        c, ids, bodies = loop.client, loop.ids, self.bodies
        kp, kd, limit = loop.kp, loop.kd, loop.limit
        n, fixed, last_link = len(bodies), profile.fixed_base, ids[-1]
        q, dq = np.zeros((n, len(ids))), np.zeros((n, len(ids)))
        for _ in range(count):
            target = self.action_targets(self.rng.standard_normal(q.shape))  # as the task maps its actions
            for _ in range(self.decimation):
                for k, body in enumerate(bodies):
                    states = pybullet.getJointStates(body, ids, physicsClientId=c)
                    q[k] = [s[0] for s in states]
                    dq[k] = [s[1] for s in states]
                tau = np.clip(kp * (target - q) - kd * dq, -limit, limit)
                for k, body in enumerate(bodies):
                    pybullet.setJointMotorControlArray(
                        body, ids, pybullet.TORQUE_CONTROL, forces=tau[k].tolist(), physicsClientId=c
                    )
                pybullet.stepSimulation(physicsClientId=c)
            self.ages += 1
            for k, body in enumerate(bodies):
                pybullet.getJointStates(body, ids, physicsClientId=c)
                if fixed:
                    pybullet.getLinkState(body, last_link, physicsClientId=c)
                    fell = False
                else:
                    position, _ = pybullet.getBasePositionAndOrientation(body, physicsClientId=c)
                    pybullet.getBaseVelocity(body, physicsClientId=c)
                    pybullet.getContactPoints(bodyA=body, physicsClientId=c)
                    fell = position[2] < 0.5 * profile.spawn_height
                if fell or self.ages[k] >= 1000:
                    self._put_back(k)
                    self.ages[k] = 0

    def close(self) -> None:
        self.loop.close()


# Tasks whose envs a worker can step together (ProcessVecEnv(batched=True)).
BATCHED_TASKS = {("go2", "walk")}

_PHYSICS_S = [0.0]  # in a vector env's worker: seconds spent in pybullet.stepSimulation


def _timed_step_simulation(step_simulation):
    def timed(**kwargs):
        begin = time.perf_counter()
        step_simulation(**kwargs)
        _PHYSICS_S[0] += time.perf_counter() - begin

    timed.timed = True
    return timed


def _make_timed_env(robot: str, task: str, seed: int, randomization: str | None):
    """A worker's env, its worker's stepSimulation timed (SimWorld looks it up on every step())."""
    if not getattr(pybullet.stepSimulation, "timed", False):
        pybullet.stepSimulation = _timed_step_simulation(pybullet.stepSimulation)
    return make_env(robot, task, seed=seed, randomization=randomization)


def _take_physics_seconds(env) -> float:
    """In the worker: its stepSimulation time since the last take."""
    taken, _PHYSICS_S[0] = _PHYSICS_S[0], 0.0
    return taken


def vec_env_rate(
    robot: str,
    task: str,
    randomization: str | None,
    num_envs: int,
    workers: int,
    seconds: float,
    seed: int,
    batched: bool = False,
) -> tuple[float, float]:
    """(policy steps/s summed over envs, share of each worker's wall time spent in
    stepSimulation, the mean over the workers), both over the same measured window."""
    fns = [partial(_make_timed_env, robot, task, seed + i, randomization) for i in range(num_envs)]
    rng = np.random.default_rng(seed)
    with ProcessVecEnv(fns, workers=workers, batched=batched) as vec:
        firsts = {begin for begin, _ in vec._slices}
        each_worker = [() if i in firsts else None for i in range(num_envs)]
        vec.reset(seed=seed)
        shape = (num_envs, vec.num_actions)
        for _ in range(10):  # warm-up
            vec.step(rng.standard_normal(shape))
        vec.run(_take_physics_seconds, each_worker)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            vec.step(rng.standard_normal(shape))
            steps += num_envs
        elapsed = time.perf_counter() - start
        physics = [t for t in vec.run(_take_physics_seconds, each_worker) if t is not None]
        return steps / elapsed, float(np.mean(physics)) / elapsed


def _row(
    robot: str,
    task: str,
    randomization: str | None,
    decimation: int,
    raw: float,
    single: float,
    physics_share: float,
    vec: dict[int, float],
    first: float,
    first_physics_share: float,
    num_envs: int,
    floors: dict[int, float],
    batched: tuple[float, float] | None,
) -> dict:
    ceiling = raw / decimation
    nan = float("nan")
    batched_rate, batched_share = batched or (nan, nan)
    return {
        "task": f"{robot} {task}",
        "randomization": randomization or "none",
        "physics_steps_per_policy_step": decimation,
        "raw_physics_steps_per_s": raw,
        "raw_policy_step_ceiling_per_s": ceiling,
        "floor_policy_steps_per_s": {str(n): r for n, r in floors.items()},
        "floor_ratio": floors[1] / ceiling,
        "single_env_steps_per_s": single,
        "single_env_physics_share": physics_share,
        "num_envs": num_envs,
        "vec_env_steps_per_s": {str(w): r for w, r in vec.items()},
        "ratio_vec1_to_raw": first / ceiling,
        # The vector env's own worlds' physics alone, over the same window as its rate.
        "own_physics_policy_steps_per_s": first / first_physics_share if first_physics_share > 0 else float("nan"),
        "ratio_vec1_to_own_physics": first_physics_share,
        "scaling": {str(w): r / first for w, r in vec.items()},
        # The same vector env, its worker stepping its envs together (nan: the task does not batch).
        "batched_vec1_steps_per_s": batched_rate,
        "ratio_batched1_to_raw": batched_rate / ceiling,
        "ratio_batched1_to_own_physics": batched_share,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=["go2:walk", "panda:reach"],
        metavar="ROBOT:TASK",
        help="tasks to measure (default: go2:walk panda:reach)",
    )
    parser.add_argument("--num-envs", type=int, default=16, help="envs in the vector env (default: 16)")
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1, 2], help="worker process counts to compare (default: 1 2)"
    )
    parser.add_argument(
        "--randomization",
        nargs="+",
        default=["none", "reference"],
        metavar="R",
        help="worlds: none (nominal), reference (<robot>_reference) or a randomization "
        "name/path (default: none reference)",
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per subject (default: 3)")
    parser.add_argument(
        "--robots-per-world",
        type=int,
        default=8,
        metavar="N",
        help="robots in one world for the batched floor (default: 8)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    rows = []
    for spec in args.tasks:
        robot, _, task = spec.partition(":")
        probe = make_env(robot, task, seed=args.seed)  # the task's decimation and action mapping
        try:
            raw, floors = raw_and_floor_rates(
                robot, probe.decimation, probe.action_targets, args.robots_per_world, 3 * args.seconds, args.seed
            )
        finally:
            probe.close()
        decimation = probe.decimation
        for world in args.randomization:
            randomization = None if world == "none" else f"{robot}_reference" if world == "reference" else world
            single, _, share = single_env_rate(robot, task, randomization, args.seconds, args.seed)
            measured = {
                w: vec_env_rate(robot, task, randomization, args.num_envs, w, args.seconds, args.seed)
                for w in args.workers
            }
            vec = {w: rate for w, (rate, _) in measured.items()}
            first, first_share = measured[args.workers[0]]
            batched = (
                vec_env_rate(robot, task, randomization, args.num_envs, 1, args.seconds, args.seed, batched=True)
                if (robot, task) in BATCHED_TASKS
                else None
            )
            rows.append(
                _row(
                    robot,
                    task,
                    randomization,
                    decimation,
                    raw,
                    single,
                    share,
                    vec,
                    first,
                    first_share,
                    args.num_envs,
                    floors,
                    batched,
                )
            )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    workers = args.workers
    batched = str(args.robots_per_world)
    header = [
        "task",
        "randomization",
        "phys/policy",
        "raw phys/s",
        "raw ceiling/s",
        "floor/s",
        f"floor {batched}/world/s",
        "floor ratio",
        "1 env/s",
        "physics share",
        *(f"vec {w}w/s" for w in workers),
        "ratio",
        "own physics/s",
        "ratio to own",
        *(f"x{w}w" for w in workers[1:]),
        "batched 1w/s",
        "batched ratio",
        "batched to own",
    ]
    table = [
        [
            r["task"],
            r["randomization"],
            str(r["physics_steps_per_policy_step"]),
            f"{r['raw_physics_steps_per_s']:.0f}",
            f"{r['raw_policy_step_ceiling_per_s']:.0f}",
            f"{r['floor_policy_steps_per_s']['1']:.0f}",
            f"{r['floor_policy_steps_per_s'][batched]:.0f}",
            f"{r['floor_ratio']:.2f}",
            f"{r['single_env_steps_per_s']:.0f}",
            f"{r['single_env_physics_share']:.2f}",
            *(f"{r['vec_env_steps_per_s'][str(w)]:.0f}" for w in workers),
            f"{r['ratio_vec1_to_raw']:.2f}",
            f"{r['own_physics_policy_steps_per_s']:.0f}",
            f"{r['ratio_vec1_to_own_physics']:.2f}",
            *(f"{r['scaling'][str(w)]:.2f}" for w in workers[1:]),
            f"{r['batched_vec1_steps_per_s']:.0f}",
            f"{r['ratio_batched1_to_raw']:.2f}",
            f"{r['ratio_batched1_to_own_physics']:.2f}",
        ]
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *table]) for i in range(len(header))]
    print(f"policy steps/s, {args.num_envs} envs in the vector env, {args.seconds:g} s per measurement")
    for line in [header, *table]:
        print("  ".join(cell.rjust(width) for cell, width in zip(line, widths)))
    print(
        "raw ceiling = raw PyBullet physics steps/s / physics steps per policy step (one process); "
        "floor = a Python env before any task logic (raw PD toward the task's targets for random actions, "
        "minimal reads), per robot; floor ratio = floor / raw ceiling; "
        "ratio = vec env with 1 worker / raw ceiling; physics share = time in stepSimulation / "
        "time of the single env's steps; ratio to own = the share of the vec env's (1 worker) wall time its "
        "worker spent in stepSimulation, over the same window: its rate / own physics, the rate of its own "
        "worlds' physics alone (terrain, conditions and motion as simulated); batched = the same vec env (1 "
        "worker) stepping its envs together, its ratio and ratio to own alike"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
