#!/usr/bin/env python3
"""Where a training env's policy step spends its time: physics, PyBullet reads and writes, the
task's Python.

One env of the shipped recipe (``config/train/go2_walk.yaml``'s task settings), stepped in this
process with Gaussian actions (std 0.5: a robot that walks, stumbles and falls as early in
training), each phase timed by wrapping the method that does it. Nested phases are reported
inside their parent (``physics substeps`` holds ``stepSimulation``); ``task Python, other`` is
what :meth:`RobotTaskEnv.step` does outside the timed phases (checking the action, mapping it to
targets, pushes, summing the reward terms, the episode's bookkeeping and metrics). Resets are
timed apart and left out of every phase. The wrappers' own cost outside their timed window (the
call, the bookkeeping) is measured on a wrapped no-op and taken off ``task Python, other``, where
it would land; inside the window each phase still carries about half a microsecond of it.

A batched worker (several robots per worker process, the task written over (N, 12) arrays) can
share over robots every phase but ``stepSimulation`` and the PyBullet calls themselves: this says
how much that is. ``PyBullet calls`` times every other call the world makes into PyBullet during a
step (joint reads, torque writes, base and link reads, contacts, transforms, pushes), whichever
phase makes it: what a robot costs besides its physics however its task is written.

Example:
    .venv/bin/python benchmarks/env_step_time.py --randomization none --steps 3000
    .venv/bin/python benchmarks/env_step_time.py --randomization go2_reference --json
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

import numpy as np
import pybullet

from sim2real.train.tasks import make_env
from sim2real.train.train_config import load_train_config

# The PyBullet functions SimWorld calls while a step runs (it looks each up on the module per call).
PYBULLET_CALLS = (
    "getJointStates",
    "setJointMotorControlArray",
    "getBasePositionAndOrientation",
    "getBaseVelocity",
    "getLinkState",
    "getLinkStates",
    "getContactPoints",
    "multiplyTransforms",
    "applyExternalForce",
)
PYBULLET_LABEL = "PyBullet calls besides stepSimulation (in the phases above)"

# (label, object attribute path, method name): the phases timed, outermost first.
WORLD_PHASES = (
    ("physics substeps (joint reads, actuator model, torque writes)", "world", "step"),
    ("state: joint readings", "world", "true_joint_state"),
    ("state: sensor noise", "world", "joint_state"),
    ("state: IMU", "world", "imu"),
    ("state: base pose and velocity", "world", "base_pose_and_velocity"),
    ("state: contacts", "world", "ground_contacts"),
    ("command to the actuator", "world", "command"),
)
ENV_PHASES = (
    ("state reading, all", "_read_state"),
    ("observation", "_observe"),
    ("privileged observation (critic)", "privileged_observation"),
    ("after step (gait clock, metrics, commands)", "_after_step"),
    ("fall check", "_check_fall"),
)


class _Timer:
    """Seconds and calls per label of the wrapped methods, while ``on``."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.on = True

    def wrap(self, label: str, function):
        def timed(*args, **kwargs):
            if not self.on:
                return function(*args, **kwargs)
            begin = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - begin
                self.calls[label] += 1

        return timed


def wrapper_overhead(calls: int = 200_000) -> float:
    """Seconds a wrapped call costs its caller outside the wrapper's timed window."""
    timer = _Timer()
    noop = timer.wrap("noop", lambda: None)
    begin = time.perf_counter()
    for _ in range(calls):
        noop()
    outside = time.perf_counter() - begin - timer.seconds["noop"]
    bare = lambda: None  # noqa: E731 - the loop's own cost, to take off
    begin = time.perf_counter()
    for _ in range(calls):
        bare()
    return max(0.0, (outside - (time.perf_counter() - begin)) / calls)


def measure(randomization: str | None, steps: int, seed: int) -> dict[str, float]:
    """Seconds per policy step, by phase, plus ``total``."""
    config = load_train_config("go2", "walk")
    env = make_env("go2", "walk", seed=seed, randomization=randomization, config=config["task_config"])
    timer = _Timer()
    step_simulation = pybullet.stepSimulation
    originals = {name: getattr(pybullet, name) for name in PYBULLET_CALLS}
    try:
        env.reset(seed=seed)
        world = env.world
        for label, _, name in WORLD_PHASES:
            method = getattr(world, name)
            if name == "ground_contacts":  # a generator: time the walk over the contact points too
                method = (lambda contacts: lambda: list(contacts()))(method)
            setattr(world, name, timer.wrap(label, method))
        for label, name in ENV_PHASES:
            setattr(env, name, timer.wrap(label, getattr(env, name)))
        env._reward_fns = [
            (name, weight, timer.wrap("reward terms", function)) for name, weight, function in env._reward_fns
        ]
        pybullet.stepSimulation = timer.wrap("stepSimulation", step_simulation)  # SimWorld looks it up per step
        for name, function in originals.items():
            setattr(pybullet, name, timer.wrap(PYBULLET_LABEL, function))
        rng = np.random.default_rng(seed)
        step = timer.wrap("total", env.step)
        resets, reset_seconds = 0, 0.0
        for _ in range(steps):
            _, _, terminated, truncated, _ = step(0.5 * rng.standard_normal(env.action_space.shape))
            env.privileged_observation()  # what the training worker asks for every step
            if terminated or truncated:
                timer.on = False
                begin = time.perf_counter()
                env.reset()
                reset_seconds += time.perf_counter() - begin
                timer.on = True
                resets += 1
    finally:
        pybullet.stepSimulation = step_simulation
        for name, function in originals.items():
            setattr(pybullet, name, function)
        env.close()
    per_step = {label: seconds / steps for label, seconds in timer.seconds.items()}
    per_step["total"] += per_step.get("privileged observation (critic)", 0.0)
    per_step["resets, per episode"] = reset_seconds / max(1, resets)
    inside = ("observation", "privileged observation (critic)", "state reading, all", "reward terms")
    timed = sum(per_step.get(label, 0.0) for label in inside)
    timed += sum(per_step.get(label, 0.0) for label, _, name in WORLD_PHASES if name in ("step", "command"))
    timed += per_step.get("after step (gait clock, metrics, commands)", 0.0) + per_step.get("fall check", 0.0)
    # Wrapped calls made inside env.step but outside every other timed phase leave their cost there.
    nested = {"total", "stepSimulation", "privileged observation (critic)", PYBULLET_LABEL}
    nested |= {label for label, _, _ in WORLD_PHASES if label.startswith("state:")}
    outside = sum(n for label, n in timer.calls.items() if label not in nested) / steps
    per_step["timing wrappers (taken off other)"] = outside * wrapper_overhead()
    per_step["task Python, other"] = per_step["total"] - timed - per_step["timing wrappers (taken off other)"]
    per_step["episodes"] = resets
    return per_step


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--randomization", default="none", help="none, or a randomization name (go2_reference)")
    parser.add_argument("--steps", type=int, default=3000, help="policy steps timed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print microseconds per step by phase as JSON")
    args = parser.parse_args()
    randomization = None if args.randomization == "none" else args.randomization
    per_step = measure(randomization, args.steps, args.seed)
    total = per_step["total"]
    if args.json:
        print(json.dumps({k: v * 1e6 if k != "episodes" else v for k, v in per_step.items()}, indent=2))
        return 0
    print(f"go2 walk, randomization {args.randomization}: {args.steps} policy steps, {per_step['episodes']} episodes")
    print(f"{'phase':<66} {'us/step':>9} {'of step':>8}")
    order = [label for label, _, _ in WORLD_PHASES[:1]] + ["stepSimulation"]
    order += [label for label, _ in ENV_PHASES[:1]] + [label for label, _, _ in WORLD_PHASES[1:6]]
    order += ["reward terms"] + [label for label, _ in ENV_PHASES[1:]] + [WORLD_PHASES[6][0], "task Python, other"]
    for label in order:
        nested = label == "stepSimulation" or label.startswith("state:")
        value = per_step.get(label, 0.0)
        print(f"{('  ' if nested else '') + label:<66} {value * 1e6:>9.1f} {value / total:>8.1%}")
    print(f"{'total':<66} {total * 1e6:>9.1f}")
    print(f"timing wrappers, taken off other: {per_step['timing wrappers (taken off other)'] * 1e6:.1f} us/step")
    print(f"a reset: {per_step['resets, per episode'] * 1e3:.1f} ms (not in the phases)")
    print(f"{PYBULLET_LABEL:<66} {per_step.get(PYBULLET_LABEL, 0.0) * 1e6:>9.1f}")
    print(f"physics share: {per_step.get('stepSimulation', 0.0) / total:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
