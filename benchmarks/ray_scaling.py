#!/usr/bin/env python3
"""Training on Ray against the local worker processes, side by side, and what a cluster would give.

For 1 and 2 env workers, the same training (the task's shipped config, ``--envs-per-worker``
envs each, a few PPO iterations after one not counted) runs with the local worker processes
(``ProcessVecEnv``) and with Ray actors on a local Ray started once for the whole benchmark
(``sim2real train --ray``: its start-up, ~2 s, is paid once per command and not counted here).
The rounds alternate local and Ray, and the figures are medians over rounds: this machine is
shared and noisy. Printed per worker count:

- env steps/s while collecting (the rollout's steps over its time) and wall time per iteration
  (collection plus the PPO update);
- ``overhead``: 1 - Ray's iteration rate / the local one's, per round (its two runs back to
  back) and the median over rounds (target <= 10 % at 2 workers);

the round trip of one step of every worker with envs that cost nearly nothing (the local
pipes, Ray's per-worker connections, and Ray actor calls, which the connections replace),
and the projection for a cluster, from the measured figures: an iteration is the rollout
(``num_steps_per_env`` steps of one worker's envs, the same whatever the number of workers,
plus Ray's round trip per step) and the update (the learner here, ``u`` seconds per sample
measured). With ``W`` workers of ``M`` envs the batch is ``W M T`` samples; env steps/s is
``W M T / (T t_step + W M T u)``, and the learner is the bottleneck from ``W = t_step / (M u)``
on. Printed for 4 machines x 16 cores (64 workers).

Example:
    .venv/bin/python benchmarks/ray_scaling.py                       # go2 walk, ~3 minutes
    .venv/bin/python benchmarks/ray_scaling.py --task panda:reach --iterations 4 --rounds 3 --json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from sim2real.train.ray_cluster import ray_session
from sim2real.train.runner import Trainer
from sim2real.train.train_config import load_train_config, override_config

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = (4, 16)  # machines x cores of the projection


def one_run(robot: str, task: str, workers: int, envs_per_worker: int, iterations: int, ray: bool, seed: int):
    """(env steps/s while collecting, seconds per iteration, update seconds per iteration), the
    medians over the run's iterations after its first."""
    config = load_train_config(robot, task, ROOT / "config" / "train" / f"{robot}_{task}.yaml")
    config = override_config(
        config,
        {"iterations": iterations + 1, "workers": workers, "num_envs": workers * envs_per_worker, "seed": seed},
    )
    config["save_interval"] = 10**6  # no checkpoint but the last: the disk is not measured
    with tempfile.TemporaryDirectory(prefix="sim2real-ray-scaling-") as out:
        trainer = Trainer(config, Path(out) / "run", progress=False, ray_address="" if ray else None)
        with contextlib.redirect_stdout(io.StringIO()):
            history = trainer.run().history[1:]
    steps = [row["env_steps_per_s"] for row in history]
    iteration = [row["collect_time"] + row["learn_time"] for row in history]
    learn = [row["learn_time"] for row in history]
    return statistics.median(steps), statistics.median(iteration), statistics.median(learn), config


def measure(args) -> dict:
    robot, task = args.task.split(":")
    figures: dict = {}
    config = None
    with ray_session("", max(args.workers)):
        round_trips = step_round_trips(args.workers, args.envs_per_worker)
        for round_index in range(args.rounds):
            for workers in args.workers:
                for mode in ("local", "ray"):
                    steps, seconds, learn, config = one_run(
                        robot, task, workers, args.envs_per_worker, args.iterations, mode == "ray", round_index
                    )
                    entry = figures.setdefault(workers, {}).setdefault(mode, {"steps": [], "seconds": [], "learn": []})
                    entry["steps"].append(steps)
                    entry["seconds"].append(seconds)
                    entry["learn"].append(learn)
                    print(
                        f"  round {round_index + 1}, {workers} worker(s), {mode:5s}: {steps:7.0f} env steps/s, "
                        f"{seconds:.2f} s per iteration",
                        file=sys.stderr,
                        flush=True,
                    )
    assert config is not None
    rows = {}
    for workers, modes in figures.items():
        median = {mode: {k: statistics.median(v) for k, v in entry.items()} for mode, entry in modes.items()}
        # Each round's local and Ray runs ran back to back: the overhead per round, then its median.
        per_round = [1.0 - lo / r for lo, r in zip(modes["local"]["seconds"], modes["ray"]["seconds"])]
        rows[workers] = {
            **median,
            "overhead": statistics.median(per_round),
            "overhead_rounds": per_round,
            "steps_ratio": median["ray"]["steps"] / median["local"]["steps"],
        }
    return {
        "task": args.task,
        "envs_per_worker": args.envs_per_worker,
        "steps_per_env": config["num_steps_per_env"],
        "rows": rows,
        "projection": project(rows, args.envs_per_worker, config["num_steps_per_env"]),
        "step_round_trips_ms": round_trips,
    }


def step_round_trips(workers_list: list[int], envs_per_worker: int, steps: int = 2000) -> dict:
    """ms per step of every worker, with envs that cost nearly nothing (gymnasium's Pendulum):
    the local pipes, Ray's per-worker connections (``RayVecEnv.step``), and Ray actor calls
    (the same actors' ``answer("step")``, the path the connections replace)."""
    import gymnasium
    import numpy as np

    from sim2real.train.ray_vec_env import RayVecEnv
    from sim2real.train.vec_env import ProcessVecEnv

    def per_step(step) -> float:
        for _ in range(100):
            step()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        return 1e3 * (time.perf_counter() - start) / steps

    import ray

    figures = {}
    for workers in workers_list:
        fns = [partial(gymnasium.make, "Pendulum-v1") for _ in range(workers * envs_per_worker)]
        actions = np.zeros((len(fns), 1), np.float32)
        with ProcessVecEnv(fns, workers=workers) as local:
            local.reset(seed=0)
            pipes = per_step(partial(local.step, actions))
        with RayVecEnv(fns, workers=workers) as remote:
            remote.reset(seed=0)
            connections = per_step(partial(remote.step, actions))
            calls = [(actor, actions[b:e]) for actor, (b, e) in zip(remote._actors, remote._slices)]
            actor_calls = per_step(partial(_actor_call_step, ray, calls))
        figures[workers] = {"pipes": pipes, "ray_connections": connections, "ray_actor_calls": actor_calls}
    return figures


def _actor_call_step(ray, calls: list) -> None:
    ray.get([actor.answer.remote("step", actions) for actor, actions in calls])


def project(rows: dict, envs_per_worker: int, steps_per_env: int) -> dict:
    """The cluster projection (module docstring) from the 1-worker Ray figures."""
    one = rows[min(rows)]["ray"]
    samples = min(rows) * envs_per_worker * steps_per_env
    update_per_sample = one["learn"] / samples
    step_seconds = (one["seconds"] - one["learn"]) / steps_per_env  # one step of every worker's envs
    machines, cores = CLUSTER
    workers = machines * cores
    batch = workers * envs_per_worker * steps_per_env
    iteration = steps_per_env * step_seconds + batch * update_per_sample
    return {
        "cluster": f"{machines} machines x {cores} cores",
        "workers": workers,
        "update_seconds_per_sample": update_per_sample,
        "step_seconds": step_seconds,
        "env_steps_per_s": batch / iteration,
        "iteration_seconds": iteration,
        "update_share": batch * update_per_sample / iteration,
        "learner_bound_from_workers": step_seconds / (envs_per_worker * update_per_sample),
    }


def table(result: dict) -> str:
    lines = [
        f"{result['task']}, {result['envs_per_worker']} envs per worker, {result['steps_per_env']} steps per env "
        "and iteration (medians over rounds)",
        "| workers | local env steps/s | Ray env steps/s | local s/iteration | Ray s/iteration | Ray overhead "
        "(median of rounds) | per round |",
        "|---|---|---|---|---|---|---|",
    ]
    for workers, row in sorted(result["rows"].items()):
        rounds = ", ".join(f"{100 * x:.0f}" for x in row["overhead_rounds"])
        lines.append(
            f"| {workers} | {row['local']['steps']:.0f} | {row['ray']['steps']:.0f} | {row['local']['seconds']:.2f} "
            f"| {row['ray']['seconds']:.2f} | {100 * row['overhead']:.1f} % | {rounds} % |"
        )
    lines.append(
        "ms per step of every worker's envs with near-free envs (Pendulum): local pipes / Ray connections / Ray actor calls"
    )
    for workers, trips in sorted(result["step_round_trips_ms"].items()):
        lines.append(
            f"  {workers} worker(s): {trips['pipes']:.2f} / {trips['ray_connections']:.2f} / {trips['ray_actor_calls']:.2f}"
        )
    p = result["projection"]
    lines.append(
        f"projection, {p['cluster']} ({p['workers']} workers): {p['env_steps_per_s']:.0f} env steps/s, "
        f"{p['iteration_seconds']:.2f} s per iteration of which the update {100 * p['update_share']:.0f} %; "
        f"the learner (here: {1e6 * p['update_seconds_per_sample']:.1f} us per sample) is the bottleneck "
        f"from {p['learner_bound_from_workers']:.0f} workers on"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="go2:walk", help="ROBOT:TASK with a shipped config (default go2:walk)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts (default 1 2)")
    parser.add_argument("--envs-per-worker", type=int, default=8, help="envs each worker steps (default 8)")
    parser.add_argument("--iterations", type=int, default=6, help="iterations measured per run (default 6)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of local and Ray (default 3)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    result = measure(args)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
