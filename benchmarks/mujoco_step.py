#!/usr/bin/env python3
"""Physics steps per second of the second engine: MujocoWorld against the bare MuJoCo loop it
wraps, with SimWorld (PyBullet) beside them for scale.

The floor is the least a torque-controlled MuJoCo simulation can do per step on the same
model MujocoWorld compiles (profile URDF, free joint, ground, IMU sensors): read q and dq,
a numpy PD, write qfrc_applied, mj_step. Subjects run interleaved, round after round, in
one process, and the medians are compared, so load drifts affect all alike. Target:
MujocoWorld.step >= 0.8 x the floor (the Panda's world also computes its controller's gravity
compensation each step, which the floor leaves out).

Example:
    .venv/bin/python benchmarks/mujoco_step.py --robots go2 panda --steps 2000 --rounds 7
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import mujoco
import numpy as np

from sim2real.core.robot_profile import RobotProfile, load_profile
from sim2real.sim.mujoco_world import MujocoWorld
from sim2real.sim.world import SimWorld

FLOOR = "raw_mujoco"


class RawMujocoLoop:
    """The floor: MujocoWorld's own compiled model, stepped by the minimum PD loop."""

    def __init__(self, profile: RobotProfile):
        world = MujocoWorld(profile)
        self.model, self.data = world.model, world.data
        self.qadr, self.dadr = world._qadr, world._dadr  # the model's layout, read once
        self.target, self.kp, self.kd = profile.default_positions, profile.kp, profile.kd
        self.limit = profile.effort_limits

    def run(self, steps: int) -> None:
        m, d = self.model, self.data
        for _ in range(steps):
            q, dq = d.qpos[self.qadr], d.qvel[self.dadr]
            tau = np.clip(self.kp * (self.target - q) - self.kd * dq, -self.limit, self.limit)
            d.qfrc_applied[self.dadr] = tau
            mujoco.mj_step(m, d)


class WorldLoop:
    def __init__(self, world):
        self.world = world
        world.reset()

    def run(self, steps: int) -> None:
        self.world.step(steps)


def measure(profile: RobotProfile, steps: int, rounds: int) -> dict[str, float]:
    subjects = {
        FLOOR: RawMujocoLoop(profile),
        "MujocoWorld.step": WorldLoop(MujocoWorld(profile)),
        "SimWorld.step (PyBullet)": WorldLoop(SimWorld(profile)),
    }
    times: dict[str, list[float]] = {name: [] for name in subjects}
    for subject in subjects.values():  # warm up
        subject.run(steps // 10)
    for _ in range(rounds):
        for name, subject in subjects.items():
            start = time.perf_counter()
            subject.run(steps)
            times[name].append(time.perf_counter() - start)
    return {name: steps / statistics.median(values) for name, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robots", nargs="+", default=["go2", "panda"])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {}
    for robot in args.robots:
        rates = measure(load_profile(robot), args.steps, args.rounds)
        results[robot] = {
            name: {"steps_per_s": rate, "ratio_to_floor": rate / rates[FLOOR]} for name, rate in rates.items()
        }
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for robot, rows in results.items():
        print(f"{robot}: physics steps/s (median of {args.rounds} rounds of {args.steps} steps)")
        for name, row in rows.items():
            print(f"  {name:<26} {row['steps_per_s']:>9.0f}   {row['ratio_to_floor']:.2f} x {FLOOR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
