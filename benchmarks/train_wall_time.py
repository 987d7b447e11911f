#!/usr/bin/env python3
"""Wall time to a shipped policy's targets: train the shipped recipe from scratch, evaluate
what it ends with, and say whether it met the targets within the time asked.

It runs exactly what ``policies/README.md`` says made the file: ``sim2real train`` with the
robot's shipped config (or ``--config``) into a fresh folder, ``sim2real export`` of the
last checkpoint, then ``sim2real eval`` on the nominal world and the reference
randomization. Training gets the whole machine (``OMP_NUM_THREADS=1``, as the README's
command); run it on an otherwise idle machine, since its figure is a wall time.

Targets (issue 3): panda reach SR >= 0.95 nominal and >= 0.90 under the reference DR, in
<= 10 minutes of training; go2 walk no falls and mean velocity error <= 0.1 m/s nominal,
SR >= 0.90 under DR, in <= 60 minutes. The Panda recipe takes ~7 minutes. The shipped Go2
file came from a nine-stage recipe (hours, ``policies/README.md``); ``--robot go2`` runs
the one-run recipe ``config/train/go2_walk_onehour.yaml`` unless ``--config`` says
otherwise.

Example:
    .venv/bin/python benchmarks/train_wall_time.py                      # panda, ~9 min in all
    .venv/bin/python benchmarks/train_wall_time.py --robot go2 --out runs/go2_wall   # ~1 hour
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPES = {
    "panda": {"task": "reach", "config": "config/train/panda_reach.yaml", "minutes": 10.0,
              "randomization": "config/randomization/panda_reference.yaml"},
    "go2": {"task": "walk", "config": "config/train/go2_walk_onehour.yaml", "minutes": 60.0,
            "randomization": "config/randomization/go2_reference.yaml"},
}


def sim2real(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("sim2real")), *args]


def targets_met(robot: str, nominal: dict, randomized: dict) -> list[tuple[str, float, str, bool]]:
    """(what, measured, asked, met) per target of issue 3."""
    if robot == "panda":
        return [("nominal success rate", nominal["success_rate"], ">= 0.95", nominal["success_rate"] >= 0.95),
                ("DR success rate", randomized["success_rate"], ">= 0.90", randomized["success_rate"] >= 0.90)]
    return [("nominal fall rate", nominal["metrics"]["fell"], "0", nominal["metrics"]["fell"] == 0.0),
            ("nominal velocity error (m/s)", nominal["metrics"]["velocity_error"], "<= 0.1",
             nominal["metrics"]["velocity_error"] <= 0.1),
            ("DR success rate", randomized["success_rate"], ">= 0.90", randomized["success_rate"] >= 0.90)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", choices=sorted(RECIPES), default="panda")
    parser.add_argument("--config", help="training config (default: the robot's shipped recipe)")
    parser.add_argument("--out", type=Path, help="run folder (default: a temporary one, deleted after)")
    parser.add_argument("--iterations", type=int, help="stop the recipe early (a check of the plumbing, not a figure)")
    parser.add_argument("--episodes", type=int, default=100, help="evaluation episodes per world set (default: 100)")
    parser.add_argument("--seed", type=int, default=0, help="evaluation seed (default: 0, as policies/README.md)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    recipe = RECIPES[args.robot]
    config = args.config or recipe["config"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    with tempfile.TemporaryDirectory(prefix="sim2real_wall_") as scratch:
        out = args.out or Path(scratch) / "run"
        print(f"[wall time] training {args.robot} {recipe['task']} with {config} into {out} ...", flush=True)
        start = time.monotonic()
        train = subprocess.run(sim2real("train", "--robot", args.robot, "--task", recipe["task"], "--config", config,
                                        "--out", str(out), "--no-progress",
                                        *(["--iterations", str(args.iterations)] if args.iterations else [])),
                               cwd=ROOT, env=env, capture_output=True, text=True)
        minutes = (time.monotonic() - start) / 60.0
        if train.returncode != 0:
            print(train.stdout[-2000:], train.stderr[-4000:], sep="\n", file=sys.stderr)
            print(f"[wall time] training failed (exit {train.returncode}); its output is above", file=sys.stderr)
            return 1
        done = re.search(r"^done: (\d+) iterations in .*\(([\d.]+) it/s", train.stdout + train.stderr, re.MULTILINE)
        policy = Path(scratch) / "policy.onnx"
        subprocess.run(sim2real("export", str(out), "-o", str(policy)), cwd=ROOT, env=env, check=True,
                       capture_output=True)
        print(f"[wall time] trained in {minutes:.1f} min; evaluating {args.episodes} episodes per world set ...",
              flush=True)
        evaluation = subprocess.run(sim2real("eval", str(policy), "--worlds", "nominal", recipe["randomization"],
                                             "--episodes", str(args.episodes), "--seed", str(args.seed),
                                             "--no-progress", "--json"),
                                    cwd=ROOT, env=env, check=True, capture_output=True, text=True)
        worlds = json.loads(evaluation.stdout)["worlds"]

    rows = targets_met(args.robot, worlds[0], worlds[1])
    in_time = minutes <= recipe["minutes"]
    result = {"robot": args.robot, "config": config, "training_minutes": round(minutes, 2),
              "iterations": int(done.group(1)) if done else None,
              "iterations_per_s": float(done.group(2)) if done else None,
              "minutes_asked": recipe["minutes"], "targets": [
                  {"what": what, "measured": measured, "asked": asked, "met": met} for what, measured, asked, met in rows],
              "all_met_in_time": in_time and all(met for *_, met in rows)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"\n{args.robot} {recipe['task']} ({config}): {result['iterations']} iterations in "
          f"{minutes:.1f} min ({result['iterations_per_s']} it/s), asked <= {recipe['minutes']:.0f} min: "
          f"{'met' if in_time else 'MISSED'}")
    for what, measured, asked, met in rows:
        print(f"  {what:30s} {measured:8.3f}  asked {asked:8s} {'met' if met else 'MISSED'}")
    print(f"  evaluation: {args.episodes} episodes per world set, seed {args.seed}")
    print(f"all targets met within the time: {'yes' if result['all_met_in_time'] else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
