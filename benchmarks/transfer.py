#!/usr/bin/env python3
"""The transfer table: how each way of training a Go2 policy does on realities it never saw.

A reality is a reality set (``config/reality/``): an independently written Go2 on MuJoCo under
physical conditions drawn from a seed no training or fitting code reads; ``go2_worn`` (heavy,
weak, late, slippery, noisy) and ``go2_independent`` (milder). What the training rows learn
of one, they learn as a user learns of a robot: through the graph and the project's commands,
each printed before it runs and skipped when its output exists in ``--out`` (an interrupted
run goes on where it stopped; a training run resumes from its last checkpoint):

measure   on the first reality (REALITY below): sysid bags of three of its robots on a stand,
          the fit and the re-centred ranges, then the shipped policy walking the same robots
          with its latency logged, and those latencies in place of the fit's:
            sim2real sysid record --robot go2 --hardware mujoco --reality REALITY
                --reality-robot K --suspended --lockstep -o OUT/measure/REALITY/sysid_K
            sim2real sysid fit .../sysid_0 .../sysid_1 .../sysid_2 --robot go2 -o .../identified.yaml
            sim2real dr from-sysid .../identified.yaml -o .../sysid.yaml
            sim2real up --robot go2 --hardware mujoco --reality REALITY --reality-robot K
                --lockstep --policy policies/go2_walk.onnx --demo --latency-log .../latency_K.jsonl
            sim2real dr from-latency .../latency_*.jsonl --base .../sysid.yaml -o .../sysid_latency.yaml
train     each row's run (below), exported:  sim2real train ... ; sim2real export RUN -o OUT/policies/ROW.onnx
evaluate  per row, PyBullet's nominal world beside every reality, and the scenario suite on the first:
            sim2real eval P --worlds nominal reality:go2_worn reality:go2_independent --episodes N
            sim2real eval P --suite go2_walk --worlds reality:go2_worn --episodes M

Rows (config/experiments/go2_walk/transfer/): ``no_randomization`` (the shipped recipe on the
nominal world, from scratch); ``reference`` (the shipped policy: the same recipe on the reference
ranges); then fine-tunes of the shipped policy for 300 iterations on the same ranges (a control:
what more training alone gives; and again with another seed, the spread of the control), under adaptive DR, with the go2_gentle reward prior (at a fixed
lambda, and annealed to 0), on the ranges
re-centred on the sysid fit, on those with the measured latency, and on the reference ranges with
robot data (the shipped policy's demo walks on the measured robots, recorded whole:
``sim2real up ... --reality-robot K --lockstep --policy policies/go2_walk.onnx --demo --record
.../robot_runs/walk_K``) cloned beside PPO (``--robot-buffer``) or adapted to with DANN
(``--adapt-from``). Last, ``pipeline``: the measured-latency row's policy walks the
same three robots with the failure collector on, and `sim2real pipeline` takes its bundles on:
            sim2real up ... --reality-robot K --lockstep --policy BASE --demo --failures-dir F
            sim2real pipeline adapt|retrain|validate --policy BASE --failures F --out OUT/pipeline_REALITY ...
            sim2real pipeline push ...   (into `sim2real up` walking robot 0 with BASE, if validated)

Writes OUT/transfer.json and OUT/transfer.md (per reality: the table, per-scenario errors).

Examples:
    .venv/bin/python benchmarks/transfer.py                          # every row (hours: a from-scratch run)
    .venv/bin/python benchmarks/transfer.py --rows reference reference_finetune --episodes 20
    .venv/bin/python benchmarks/transfer.py --dry-run                # the commands, nothing run
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = "config/experiments/go2_walk/transfer"
SHIPPED = "policies/go2_walk.onnx"
REALITIES = ("go2_worn", "go2_independent")
MEASURED_ROBOTS = (0, 1, 2)


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    config: str | None = None  # a training config, or a file written under OUT/measure (randomization:)
    init_from: str | None = None  # a fine-tune's start
    policy: str | None = None  # a finished policy file: no training
    randomization: str | None = None  # measure/<name>.yaml the row trains on (written by the measure step)
    pipeline_from: str | None = None  # the row whose policy `sim2real pipeline` takes from failures to a swap
    robot_data: dict | None = None  # a config section on the measure step's recorded runs (ROBOT_RUNS)


ROWS = (
    Row("no_randomization", "no randomization", config=f"{EXPERIMENTS}/no_randomization.yaml"),
    Row("reference", "fixed reference DR (the shipped policy)", policy=SHIPPED),
    Row(
        "reference_finetune",
        "fixed reference DR, +300 iterations",
        config=f"{EXPERIMENTS}/reference_finetune.yaml",
        init_from=SHIPPED,
    ),
    Row(
        "reference_finetune_seed1",
        "fixed reference DR, +300 iterations, seed 1",
        config=f"{EXPERIMENTS}/reference_finetune_seed1.yaml",
        init_from=SHIPPED,
    ),
    Row("adaptive_dr", "adaptive DR, +300 iterations", config=f"{EXPERIMENTS}/adaptive_dr.yaml", init_from=SHIPPED),
    Row(
        "prior_gentle",
        "fixed reference DR + reward prior go2_gentle, +300 iterations",
        config=f"{EXPERIMENTS}/prior_gentle.yaml",
        init_from=SHIPPED,
    ),
    Row(
        "prior_gentle_annealed",
        "fixed reference DR + reward prior go2_gentle, lambda 1 -> 0, +300 iterations",
        config=f"{EXPERIMENTS}/prior_gentle_annealed.yaml",
        init_from=SHIPPED,
    ),
    Row(
        "sysid",
        "DR centred on the sysid fit, +300 iterations",
        config=f"{EXPERIMENTS}/reference_finetune.yaml",
        init_from=SHIPPED,
        randomization="sysid",
    ),
    Row(
        "sysid_latency",
        "+ measured latency in DR, +300 iterations",
        config=f"{EXPERIMENTS}/reference_finetune.yaml",
        init_from=SHIPPED,
        randomization="sysid_latency",
    ),
    Row(
        "pipeline",
        "+ pipeline from reality failures, +300 iterations",
        pipeline_from="sysid_latency",
    ),
    Row(
        "robot_cloning",
        "fixed reference DR + behaviour cloning of the shipped policy's reality runs (beta 1), +300 iterations",
        config=f"{EXPERIMENTS}/reference_finetune.yaml",
        init_from=SHIPPED,
        robot_data={"behaviour_cloning": {"buffer": "ROBOT_RUNS", "beta": 1.0}},
    ),
    Row(
        "robot_adaptation",
        "fixed reference DR + domain adaptation (DANN) to the reality runs (lambda 0 -> 0.1), +300 iterations",
        config=f"{EXPERIMENTS}/reference_finetune.yaml",
        init_from=SHIPPED,
        robot_data={"domain_adaptation": {"bags": ["ROBOT_RUNS"], "lambda": 0.1}},
    ),
)
PIPELINE_ITERATIONS = 300
PIPELINE_VALIDATION_EPISODES = 20


class Steps:
    """Runs the project's commands, each printed first, skipped when its output exists."""

    # The commands whose work can run on Ray (``--ray``): training's env workers and the evaluations.
    RAY_COMMANDS = ("train", "eval")

    def __init__(self, dry_run: bool, ray_address: str | None = None):
        self.dry_run = dry_run
        self.ray_args = [] if ray_address is None else ["--ray"] if ray_address == "" else [f"--ray={ray_address}"]

    def run(
        self,
        argv: list[str],
        output: Path,
        stdout: Path | None = None,
        log: Path | None = None,
        answers: tuple[int, ...] = (0,),
    ) -> None:
        """``sim2real ARGV``, unless ``output`` exists. Its log goes to ``log`` (default ``OUTPUT.log``,
        appended to), and its standard output too unless ``stdout`` is ``output`` (a JSON report).
        ``answers``: the exit codes that are results, not failures (a validation that refuses).
        A step that fails or is interrupted leaves no output (a training run keeps its checkpoints)."""
        if argv[0] in self.RAY_COMMANDS:
            argv = [*argv, *self.ray_args]
        shown = "sim2real " + shlex.join(argv)
        if output.exists():
            print(f"  have {output}: skip  {shown}")
            return
        print(f"  run  {shown}", flush=True)
        if self.dry_run:
            return
        started = time.monotonic()
        log = log or output.parent / f"{output.name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        part = output.with_name(output.name + ".part")
        try:
            with open(log, "a") as err, open(part if stdout == output else os.devnull, "w") as report:
                command = [sys.executable, "-m", "sim2real.cli", *argv]
                result = subprocess.run(command, cwd=ROOT, stdout=report if stdout == output else err, stderr=err)
            if result.returncode not in answers:
                raise SystemExit(
                    f"failed ({result.returncode}) after {time.monotonic() - started:.0f} s: {shown}; see {log}"
                )
        except BaseException:
            for partial in (part, output):
                if partial.is_dir():  # a bag the recorder began
                    shutil.rmtree(partial)
                elif partial.exists():
                    partial.unlink()
            raise
        if stdout == output:
            part.replace(output)
        print(f"       done in {time.monotonic() - started:.0f} s", flush=True)


def measure(steps: Steps, out: Path, reality: str, sysid: bool, robot_runs: bool) -> Path:
    """What the measured rows train on, from robots of ``reality``: the folder of (``sysid``)
    ``sysid.yaml`` (ranges re-centred on the fit) and ``sysid_latency.yaml`` (with the latency
    the shipped policy measured walking them), and (``robot_runs``) ``robot_runs/``, the bags of
    the shipped policy's demo walks."""
    measured = out / "measure" / reality
    if not steps.dry_run:
        measured.mkdir(parents=True, exist_ok=True)
    robot = ["--robot", "go2", "--hardware", "mujoco", "--reality", reality]
    if sysid:
        measure_sysid(steps, measured, robot)
    for k in MEASURED_ROBOTS if robot_runs else ():  # robot data: the shipped policy's demo walk, recorded whole
        bag = measured / "robot_runs" / f"walk_{k}"
        walk = ["--lockstep", "--policy", SHIPPED, "--demo", "--no-failure-collector", "--record", str(bag)]
        steps.run(["up", *robot, "--reality-robot", str(k), *walk], bag, log=measured / f"walk_{k}.log")
    if robot_runs and not steps.dry_run:
        rebuilt_exactly(measured / "robot_runs")
    return measured


def rebuilt_exactly(runs: Path) -> None:
    """How exactly the recorded walks rebuild: per bag, the engaged ticks on which the shipped
    policy, given the rebuilt observation, sends its recorded action again (to 1e-4)."""
    import numpy as np

    from sim2real.core.policy_file import load_policy
    from sim2real.train.robot_data import find_bags, rebuild_samples

    policy = load_policy(ROOT / SHIPPED)
    clip = policy.metadata.action_clip
    for bag in find_bags(runs):
        samples = rebuild_samples(bag, policy.metadata)
        predicted = np.clip(policy.act(samples.observations), -clip, clip)
        exact = int((np.abs(predicted - samples.actions).max(axis=1) < 1e-4).sum())
        print(f"  {bag.name}: {exact} of {len(samples)} engaged ticks rebuilt exactly {samples.notes or ''}")


def measure_sysid(steps: Steps, measured: Path, robot: list[str]) -> None:
    for k in MEASURED_ROBOTS:
        bag = measured / f"sysid_{k}"
        steps.run(
            ["sysid", "record", *robot, "--reality-robot", str(k), "--suspended", "--lockstep", "-o", str(bag)], bag
        )
    identified = measured / "identified.yaml"
    bags = [str(measured / f"sysid_{k}") for k in MEASURED_ROBOTS]
    steps.run(["sysid", "fit", *bags, "--robot", "go2", "-o", str(identified)], identified)
    steps.run(["dr", "from-sysid", str(identified), "-o", str(measured / "sysid.yaml")], measured / "sysid.yaml")
    for k in MEASURED_ROBOTS:
        log = measured / f"latency_{k}.jsonl"
        walk = ["--lockstep", "--policy", SHIPPED, "--demo", "--no-failure-collector", "--latency-log", str(log)]
        steps.run(["up", *robot, "--reality-robot", str(k), *walk], log)
    logs = [str(measured / f"latency_{k}.jsonl") for k in MEASURED_ROBOTS]
    combined = measured / "sysid_latency.yaml"
    steps.run(["dr", "from-latency", *logs, "--base", str(measured / "sysid.yaml"), "-o", str(combined)], combined)


def train(steps: Steps, out: Path, row: Row, measured: Path | None) -> Path:
    """The row's policy file: the shipped one, or its run's last checkpoint exported. A run
    stopped part-way resumes from its last checkpoint."""
    key, policy = row_policy(out, row, measured.name if measured is not None else "")
    if row.policy is not None:
        return policy
    run = out / key
    config = ROOT / row.config
    if row.randomization is not None or row.robot_data is not None:
        # The row's config: the fine-tune's, on the ranges or the robot runs the measure step wrote.
        config = out / "configs" / f"{key}.yaml"
        if not config.exists() and not steps.dry_run:
            config.parent.mkdir(parents=True, exist_ok=True)
            recipe = {"extends": str(ROOT / row.config)}
            if row.randomization is not None:
                recipe["randomization"] = str(measured / f"{row.randomization}.yaml")
            if row.robot_data is not None:
                runs = str(measured / "robot_runs")
                recipe.update(json.loads(json.dumps(row.robot_data).replace('"ROBOT_RUNS"', json.dumps(runs))))
            config.write_text(
                f"# {row.label}, measured on {measured.name}: written by benchmarks/transfer.py\n"
                + yaml.safe_dump(recipe, sort_keys=False)
            )
    from sim2real.train.train_config import load_train_config

    last = load_train_config(None, None, config)["iterations"] if config.exists() else "N"
    checkpoint = run / f"model_{last}.pt"
    argv = ["train", "--config", str(config), "--out", str(run), "--no-progress"]
    if row.init_from is not None:
        argv += ["--init-from", row.init_from]
    saved = sorted(run.glob("model_*.pt"), key=lambda f: int(f.stem.split("_")[1])) if run.is_dir() else []
    if saved and not checkpoint.exists():
        argv = ["train", "--resume", str(saved[-1]), "--no-progress"]
    steps.run(argv, checkpoint, log=out / f"{key}.train.log")
    if not steps.dry_run:
        policy.parent.mkdir(parents=True, exist_ok=True)
    if policy.exists() and not steps.dry_run and _iteration(policy) != last:
        policy.unlink()  # exported from an earlier checkpoint of a run that has gone on since
    steps.run(["export", str(checkpoint), "-o", str(policy)], policy)
    return policy


def pipeline(steps: Steps, out: Path, row: Row, measured: Path) -> Path:
    """The pipeline row's policy: the base row's policy walks robots of the measured reality
    through the graph with the failure collector on; `sim2real pipeline` adapts its ranges to
    the bundles, retrains from its checkpoint, validates, and pushes the candidate into a running
    graph running the base policy on one of those robots. The candidate is the row's policy whether
    or not validation let it through; ``<key>/pipeline.json`` says which."""
    base_row = next(r for r in ROWS if r.key == row.pipeline_from)
    base_key, base_policy = row_policy(out, base_row, measured.name)
    train(steps, out, base_row, measured)
    key, candidate = row_policy(out, row, measured.name)
    work = out / key
    policy_dir = work / "pushed"
    failures = measured / f"failures_{base_key}"
    robot = ["--robot", "go2", "--hardware", "mujoco", "--reality", measured.name]
    walk = ["--lockstep", "--policy", str(base_policy), "--demo"]
    for k in MEASURED_ROBOTS:
        log = measured / f"failures_{base_key}_walk_{k}.jsonl"  # written at the end: the walk's marker
        steps.run(
            [
                "up",
                *robot,
                "--reality-robot",
                str(k),
                *walk,
                "--failures-dir",
                str(failures),
                "--latency-log",
                str(log),
            ],
            log,
        )
    common = ["--robot", "go2", "--policy", str(base_policy), "--out", str(work)]
    steps.run(["pipeline", "adapt", *common, "--failures", str(failures)], work / "randomization.yaml")
    checkpoint = out / base_key / f"model_{_iteration(base_policy) if base_policy.exists() else 'N'}.pt"
    retrain = ["--checkpoint", str(checkpoint), "--iterations", str(PIPELINE_ITERATIONS), "--no-progress"]
    steps.run(["pipeline", "retrain", *common, *retrain], candidate, log=out / f"{key}.train.log")
    validation = ["--failures", str(failures), "--episodes", str(PIPELINE_VALIDATION_EPISODES)]
    steps.run(["pipeline", "validate", *common, *validation], work / "validation.json", answers=(0, 1))
    push_live(steps, work, base_policy, policy_dir, [*robot, "--reality-robot", str(MEASURED_ROBOTS[0])])
    return candidate


def push_live(steps: Steps, work: Path, base_policy: Path, policy_dir: Path, robot: list[str]) -> None:
    """``sim2real pipeline push``: a validated candidate into a graph running the base policy on a
    reality robot (its demo: the stand, then the walk); a refused one goes nowhere, and no graph
    is started for it (the push refuses before it looks for a robot)."""
    report = work / "push.txt"
    push = ["pipeline", "push", "--robot", "go2", "--policy", str(base_policy), "--out", str(work)]
    push += ["--policy-dir", str(policy_dir), "--timeout", "60"]
    state = work / "pipeline.json"
    validated = json.loads(state.read_text()).get("validation_passed") if state.is_file() else None
    if validated is False:
        steps.run(push, report, stdout=report, answers=(1,))  # the refusal is the result
        return
    graph_argv = ["up", *robot, "--lockstep", "--policy", str(base_policy), "--demo", "--no-failure-collector"]
    graph_argv += ["--policy-dirs", str(policy_dir)]
    if not report.exists():
        print(f"  run  sim2real {shlex.join(graph_argv)}  (in the background, for the push)", flush=True)
    graph = None
    if not report.exists() and not steps.dry_run:
        policy_dir.mkdir(parents=True, exist_ok=True)
        with open(work / "push_graph.log", "w") as log:
            command = [sys.executable, "-m", "sim2real.cli", *graph_argv]
            graph = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        steps.run(push, report, stdout=report)  # a runtime that does not confirm the swap fails the step
    finally:
        if graph is not None:
            graph.send_signal(signal.SIGINT)  # as Ctrl-C
            try:
                graph.wait(timeout=60)
            except subprocess.TimeoutExpired:
                graph.kill()


def report_paths(out: Path, key: str, realities: list[str], episodes: int, suite_episodes: int):
    """(classic report, {reality: suite report}) of a row's evaluation with these counts."""
    reports = out / "eval"
    classic = reports / f"{key}.{'+'.join(realities)}.{episodes}ep.json"
    # The suite (13 scenarios) only on the first reality, the one the sysid rows measured.
    return classic, {realities[0]: reports / f"{key}.suite.{realities[0]}.{suite_episodes}ep.json"}


def evaluate(
    steps: Steps,
    out: Path,
    key: str,
    policy: Path,
    realities: list[str],
    episodes: int,
    suite_episodes: int,
    workers: int,
) -> None:
    """The classic evaluation (nominal and every reality) and the suite on the first reality."""
    classic, suites = report_paths(out, key, realities, episodes, suite_episodes)
    if not steps.dry_run:
        classic.parent.mkdir(parents=True, exist_ok=True)
        sha256 = hashlib.sha256(policy.read_bytes()).hexdigest()
        for report in (classic, *suites.values()):
            if report.exists() and json.loads(report.read_text()).get("sha256") != sha256:
                report.unlink()  # another policy's report, of an earlier export
    common = ["--workers", str(workers), "--json", "--no-plot", "--no-progress"]
    worlds = ["nominal", *(f"reality:{r}" for r in realities)]
    steps.run(["eval", str(policy), "--worlds", *worlds, "--episodes", str(episodes), *common], classic, stdout=classic)
    for reality, suite in suites.items():
        steps.run(
            ["eval", str(policy), "--suite", "go2_walk", "--worlds", f"reality:{reality}"]
            + ["--episodes", str(suite_episodes), *common],
            suite,
            stdout=suite,
        )


def _iteration(policy: Path) -> int:
    from sim2real.core.policy_file import load_policy
    from sim2real.train.policy_warm_start import policy_iteration

    return policy_iteration(load_policy(policy).metadata)


def row_policy(out: Path, row: Row, measured_on: str) -> tuple[str, Path]:
    """(key, policy file) of a row: a sysid row's key names the reality it measured."""
    if row.policy is not None:
        return row.key, ROOT / row.policy
    if row.pipeline_from is not None:
        key = f"{row.key}_{measured_on}"
        return key, out / key / "candidate.onnx"
    key = row.key if row.randomization is None and row.robot_data is None else f"{row.key}_{measured_on}"
    return key, out / "policies" / f"{key}.onnx"


_MEANS = ("fell", "velocity_error", "yaw_rate_error", "feet_down", "estimator_rmse")


def _mean(values) -> float | None:
    """The mean of the numbers (a report writes NaN, an episode that fell before it was
    scored, as null); None when there are none."""
    numbers = [v for v in values if v is not None]
    return sum(numbers) / len(numbers) if numbers else None


def _worst(values) -> float | None:
    numbers = [v for v in values if v is not None]
    return max(numbers) if numbers else None


def summarize(row: Row, key: str, policy: Path, classic: dict, suites: dict[str, dict]) -> dict:
    """One row: the policy, the nominal world's figures, and per reality set its figures, its
    gap to nominal and its suite's per-scenario errors."""
    from sim2real.core.policy_file import load_policy
    from sim2real.train.policy_warm_start import policy_iteration

    worlds = {w["name"]: w for w in classic["worlds"]}
    gaps = {g["b"]: g["gap_ratio_percent"] for g in classic["gaps"] if g["a"] == "nominal"}
    realities = {}
    for world_name in worlds:
        if not world_name.startswith("reality:"):
            continue
        reality = world_name.split(":", 1)[1]
        world, suite = worlds[world_name], suites.get(reality)
        scenarios = {}
        for result in suite["results"] if suite else []:
            command = result["command"]
            episodes = result["episodes"]
            mean = {name: _mean(e[name] for e in episodes) for name in _MEANS}
            scenarios[result["scenario"]] = {
                "passed": result["passed"],
                # The estimator's target (its velocity RMSE) says nothing of the policy.
                "policy_passed": all(t.startswith("estimator") for t in result["failed_targets"]),
                "failed_targets": result["failed_targets"],
                "fell": mean["fell"],
                "velocity_error": mean["velocity_error"],
                "yaw_rate_error_share": (
                    mean["yaw_rate_error"] / abs(command[2])
                    if command[2] and mean["yaw_rate_error"] is not None
                    else None
                ),
                "feet_down": mean["feet_down"] if not any(command) else None,
                "estimator_rmse": mean["estimator_rmse"],
            }
        realities[reality] = {
            "sr": world["success_rate"],
            "mean_return": world["mean_return"],
            "fell": world["metrics"].get("fell"),
            "velocity_error": world["metrics"].get("velocity_error"),
            "gap_ratio_percent": gaps.get(f"reality:{reality}"),
            "suite_episodes": suite["episodes"] if suite else 0,
            "scenarios": scenarios,
        }
    meta = load_policy(policy).metadata
    nominal = worlds["nominal"]
    label, stages = row.label, None
    if row.pipeline_from is not None:
        state = json.loads((policy.parent / "pipeline.json").read_text())
        stages = {
            "from": row.pipeline_from,
            "bundles": len(state.get("bundles", [])),
            "changes": state.get("changes", []),
            "validation_passed": state.get("validation_passed"),
            "pushed": state.get("pushed"),
            "push_reason": state.get("push_reason"),
        }
        if stages["pushed"]:
            label += " (validated, hot-swapped)"
        else:
            label += " (refused by validation, not pushed)" if not stages["validation_passed"] else " (not pushed)"
    return {
        "row": key,
        "label": label,
        "pipeline": stages,
        "policy": str(policy.relative_to(ROOT) if policy.is_relative_to(ROOT) else policy),
        "sha256": classic["sha256"],
        "commit": (meta.source_commit or "unknown")[:7],
        "iterations": policy_iteration(meta),
        "episodes": classic["episodes"],
        "sr_nominal": nominal["success_rate"],
        "return_nominal": nominal["mean_return"],
        "realities": realities,
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def table(rows: list[dict], reality: str) -> str:
    """The transfer table on one reality set (the suite's columns where the suite ran on it)."""
    suite = any(r["realities"][reality]["scenarios"] for r in rows)
    head = "| policy trained with | iterations | commit | SR on reality:" + reality + " | falls | velocity error m/s | "
    head += "SR nominal (PyBullet) | GapRatio |"
    if suite:
        head += (
            " suite passed (policy targets) | falls in suite | worst velocity error m/s | worst yaw-rate error | "
            "zero command: feet down |"
        )
    lines = [head, "|---" * head.count(" |") + "|"]
    for r in rows:
        x = r["realities"][reality]
        gap = "-" if x["gap_ratio_percent"] is None else f"{x['gap_ratio_percent']:.1f} %"
        line = (
            f"| {r['label']} | {r['iterations']} | {r['commit']} | {_pct(x['sr'])} | {_pct(x['fell'])} | {_num(x['velocity_error'])} | "
            f"{_pct(r['sr_nominal'])} | {gap} |"
        )
        if suite:
            s = x["scenarios"].values()
            yaw = _worst(v["yaw_rate_error_share"] for v in s)
            feet = _worst(-v["feet_down"] for v in s if v["feet_down"] is not None)
            line += (
                f" {sum(v['passed'] for v in s)} ({sum(v['policy_passed'] for v in s)}) of {len(s)} | "
                f"{sum((v['fell'] or 0) > 0 for v in s)} | {_num(_worst(v['velocity_error'] for v in s))} | "
                f"{_pct(yaw)} of the command | {_pct(None if feet is None else -feet)} |"
            )
        lines.append(line)
    return "\n".join(lines)


def scenario_table(rows: list[dict], reality: str) -> str:
    """Velocity error (m/s) and, for turns, yaw-rate error as a share of the command, per scenario."""
    names = list(rows[0]["realities"][reality]["scenarios"])
    lines = ["| scenario | " + " | ".join(r["row"] for r in rows) + " |", "|---" * (len(rows) + 1) + "|"]
    for name in names:
        cells = []
        for r in rows:
            x = r["realities"][reality]["scenarios"][name]
            cell = _num(x["velocity_error"])
            if x["yaw_rate_error_share"] is not None:
                cell += f" / {100 * x['yaw_rate_error_share']:.0f} %"
            if x["fell"]:
                cell += f" fell {_pct(x['fell'])}"
            cells.append(cell if x["policy_passed"] else f"**{cell}**")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/transfer", help="working folder (default: runs/transfer)")
    parser.add_argument(
        "--rows", nargs="+", default=[r.key for r in ROWS], choices=[r.key for r in ROWS], help="rows (default: all)"
    )
    parser.add_argument(
        "--realities",
        nargs="+",
        default=list(REALITIES),
        help=f"reality sets (config/reality/) to evaluate on; the sysid rows measure the first (default: {REALITIES})",
    )
    parser.add_argument("--episodes", type=int, default=50, help="episodes per world of the classic evaluation")
    parser.add_argument("--suite-episodes", type=int, default=3, help="episodes per suite scenario (reality robots)")
    parser.add_argument("--workers", type=int, default=2, help="evaluation worker processes (default 2)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="the rows' training and the evaluations on Ray (as `sim2real train/eval --ray`: alone a "
        "local Ray, or auto, HOST:PORT, ray://HOST:10001); the sysid recordings (a real-time graph) and "
        "the pipeline row's steps stay on this machine",
    )
    args = parser.parse_args()
    # A SIGTERM (how long runs are stopped here) unwinds like Ctrl-C: the step in progress
    # stops its command and leaves no partial output.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

    out = (ROOT / args.out).resolve() if not Path(args.out).is_absolute() else Path(args.out)
    if not args.dry_run:
        out.mkdir(parents=True, exist_ok=True)
    steps = Steps(args.dry_run, args.ray)
    rows = [r for r in ROWS if r.key in args.rows]
    measured = None
    sysid = any(r.randomization or r.pipeline_from for r in rows)
    robot_runs = any(r.robot_data for r in rows)
    if sysid or robot_runs:
        print(f"measure reality:{args.realities[0]} through the graph:")
        measured = measure(steps, out, args.realities[0], sysid, robot_runs)
    for row in rows:
        print(f"{row.key}: {row.label}")
        if row.pipeline_from is not None:
            assert measured is not None
            policy = pipeline(steps, out, row, measured)
        else:
            policy = train(steps, out, row, measured)
        key, _ = row_policy(out, row, args.realities[0])
        evaluate(steps, out, key, policy, args.realities, args.episodes, args.suite_episodes, args.workers)
    # The table: every row evaluated with these counts, by this run or an earlier one.
    results = []
    for row in ROWS:
        key, policy = row_policy(out, row, args.realities[0])
        classic, suites = report_paths(out, key, args.realities, args.episodes, args.suite_episodes)
        if policy.exists() and classic.exists() and all(f.exists() for f in suites.values()):
            reports = {r: json.loads(f.read_text()) for r, f in suites.items()}
            sha256 = hashlib.sha256(policy.read_bytes()).hexdigest()
            if all(report["sha256"] == sha256 for report in (json.loads(classic.read_text()), *reports.values())):
                results.append(summarize(row, key, policy, json.loads(classic.read_text()), reports))
    if not results:
        return 0
    (out / "transfer.json").write_text(json.dumps(results, indent=2))
    text = ""
    for reality in args.realities:
        text += f"## reality:{reality}\n\n{table(results, reality)}\n\n"
        if results[0]["realities"][reality]["scenarios"]:
            text += (
                "Per scenario (velocity error m/s / yaw-rate error as a share of the command; bold: a policy "
                f"target of the suite failed):\n\n{scenario_table(results, reality)}\n\n"
            )
    (out / "transfer.md").write_text(text)
    print(text)
    print(f"wrote {out / 'transfer.md'} and {out / 'transfer.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
