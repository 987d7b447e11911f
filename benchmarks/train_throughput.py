#!/usr/bin/env python3
"""Training throughput: policy steps/s through the process vector env, beside raw PyBullet.

For each task it measures, in the same run:

- raw PyBullet physics steps/s: the bare torque-control loop of ``sim_step.py``
  (getJointStates, numpy PD, setJointMotorControlArray, stepSimulation) on the same URDF,
  and that rate divided by the task's physics steps per policy step: the most policy
  steps/s one process could do if the task cost nothing beyond physics;
- one task env stepped in this process (policy steps/s): the task's own cost;
- the vector env (``sim2real.train.vec_env.ProcessVecEnv``) with ``--num-envs`` envs over
  1 and 2 worker processes (policy steps/s summed over envs): what PPO collects from.

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

import numpy as np
import pybullet

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_step import RawPyBulletLoop  # noqa: E402  (the baseline is shared with sim_step.py)

from sim2real.core.robot_profile import load_profile  # noqa: E402
from sim2real.train.tasks import make_env  # noqa: E402
from sim2real.train.vec_env import ProcessVecEnv  # noqa: E402


def raw_physics_rate(robot: str, seconds: float) -> float:
    loop = RawPyBulletLoop(load_profile(robot))
    try:
        loop.run(200)  # warm-up
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            loop.run(200)
            steps += 200
        return steps / (time.perf_counter() - start)
    finally:
        loop.close()


def single_env_rate(robot: str, task: str, randomization: str | None, seconds: float,
                    seed: int) -> tuple[float, int, float]:
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


def vec_env_rate(robot: str, task: str, randomization: str | None, num_envs: int, workers: int, seconds: float,
                 seed: int) -> float:
    fns = [partial(make_env, robot, task, seed=seed + i, randomization=randomization) for i in range(num_envs)]
    rng = np.random.default_rng(seed)
    with ProcessVecEnv(fns, workers=workers) as vec:
        vec.reset(seed=seed)
        shape = (num_envs, vec.num_actions)
        for _ in range(10):  # warm-up
            vec.step(rng.standard_normal(shape))
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            vec.step(rng.standard_normal(shape))
            steps += num_envs
        return steps / (time.perf_counter() - start)


def _row(robot: str, task: str, randomization: str | None, decimation: int, raw: float, single: float,
         physics_share: float, vec: dict[int, float], first: float, num_envs: int) -> dict:
    return {
        "task": f"{robot} {task}", "randomization": randomization or "none",
        "physics_steps_per_policy_step": decimation,
        "raw_physics_steps_per_s": raw, "raw_policy_step_ceiling_per_s": raw / decimation,
        "single_env_steps_per_s": single, "single_env_physics_share": physics_share, "num_envs": num_envs,
        "vec_env_steps_per_s": {str(w): r for w, r in vec.items()},
        "ratio_vec1_to_raw": first / (raw / decimation),
        "scaling": {str(w): r / first for w, r in vec.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=["go2:walk", "panda:reach"], metavar="ROBOT:TASK",
                        help="tasks to measure (default: go2:walk panda:reach)")
    parser.add_argument("--num-envs", type=int, default=16, help="envs in the vector env (default: 16)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                        help="worker process counts to compare (default: 1 2)")
    parser.add_argument("--randomization", nargs="+", default=["none", "reference"], metavar="R",
                        help="worlds: none (nominal), reference (<robot>_reference) or a randomization "
                             "name/path (default: none reference)")
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per subject (default: 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    rows = []
    for spec in args.tasks:
        robot, _, task = spec.partition(":")
        raw = raw_physics_rate(robot, args.seconds)
        for world in args.randomization:
            randomization = None if world == "none" else f"{robot}_reference" if world == "reference" else world
            single, decimation, share = single_env_rate(robot, task, randomization, args.seconds, args.seed)
            vec = {w: vec_env_rate(robot, task, randomization, args.num_envs, w, args.seconds, args.seed)
                   for w in args.workers}
            first = vec[args.workers[0]]
            rows.append(_row(robot, task, randomization, decimation, raw, single, share, vec, first, args.num_envs))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    workers = args.workers
    header = ["task", "randomization", "phys/policy", "raw phys/s", "raw ceiling/s", "1 env/s", "physics share",
              *(f"vec {w}w/s" for w in workers), "ratio", *(f"x{w}w" for w in workers[1:])]
    table = [[r["task"], r["randomization"], str(r["physics_steps_per_policy_step"]),
              f"{r['raw_physics_steps_per_s']:.0f}", f"{r['raw_policy_step_ceiling_per_s']:.0f}",
              f"{r['single_env_steps_per_s']:.0f}", f"{r['single_env_physics_share']:.2f}",
              *(f"{r['vec_env_steps_per_s'][str(w)]:.0f}" for w in workers), f"{r['ratio_vec1_to_raw']:.2f}",
              *(f"{r['scaling'][str(w)]:.2f}" for w in workers[1:])] for r in rows]
    widths = [max(len(line[i]) for line in [header, *table]) for i in range(len(header))]
    print(f"policy steps/s, {args.num_envs} envs in the vector env, {args.seconds:g} s per measurement")
    for line in [header, *table]:
        print("  ".join(cell.rjust(width) for cell, width in zip(line, widths)))
    print("raw ceiling = raw PyBullet physics steps/s / physics steps per policy step (one process); "
          "ratio = vec env with 1 worker / raw ceiling; physics share = time in stepSimulation / "
          "time of the single env's steps")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
