"""The `sim2real` command line. `sim2real COMMAND --help` explains each command with an example."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from sim2real.bringup import HARDWARE_CHOICES, PlanError, make_plan
from sim2real.core.failure_bundle import BundleError
from sim2real.core.failure_config import FailureConfigError
from sim2real.core.policy_file import PolicyFileError
from sim2real.core.robot_profile import ProfileError, available_profiles
from sim2real.evaluate.evaluate import EvaluationError
from sim2real.evaluate.failure_replay import ReplayError
from sim2real.pipeline import PipelineError
from sim2real.sim.randomization import RandomizationError
from sim2real.sysid_cli import add_dr_from_sysid, add_sysid_commands
from sim2real.train.checkpoint import CheckpointError
from sim2real.train.curriculum import CurriculumError
from sim2real.train.export import ExportError
from sim2real.train.runner import TrainingError
from sim2real.train.train_config import TrainConfigError
from sim2real.train.vec_env import WorkerError

# Bad input: the user can fix it from the message (exit 2).
_INPUT_ERRORS = (ProfileError, PlanError, PolicyFileError, EvaluationError, RandomizationError, CheckpointError,
                 CurriculumError, TrainingError, TrainConfigError, BundleError, FailureConfigError, ReplayError,
                 PipelineError)


class _UsageError(ValueError):
    """A command-line combination that cannot work; the message says what to do instead."""


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    def _get_help_string(self, action: argparse.Action) -> str | None:
        # "(default: None)" and "(default: False)" say nothing; the help text says what happens instead.
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def _add_graph_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--robot", default="go2", help=f"robot profile name ({', '.join(available_profiles())}) or path")
    parser.add_argument("--lockstep", action="store_true",
                        help="sim publishes /clock and advances only when the graph answers (use_sim_time everywhere)")
    parser.add_argument("--seed", type=int, default=0, help="seed for terrain and sensor noise")
    parser.add_argument("--conditions", default="{}",
                        help="physical conditions for the sim as YAML, e.g. '{ground_friction: 0.5, latency: 0.01}'")


def _plan_from(args: argparse.Namespace, demo: bool):
    return make_plan(robot=args.robot, hardware=getattr(args, "hardware", "sim"), lockstep=args.lockstep,
                     seed=args.seed, conditions=args.conditions, demo=demo, policy=args.policy,
                     autoengage=demo or getattr(args, "autoengage", False),
                     failures_dir=getattr(args, "failures_dir", ""))


def cmd_up(args: argparse.Namespace) -> int:
    from sim2real.graph_processes import GraphProcesses

    plan = _plan_from(args, demo=args.demo)
    if args.print_plan:
        print(json.dumps({"robot": plan.robot, "hardware": plan.hardware, "use_sim_time": plan.use_sim_time,
                          "nodes": [vars(n) for n in plan.nodes]}, indent=2, default=list))
        return 0
    if not plan.nodes:
        print(f"hardware:={plan.hardware} with no extra nodes: nothing to start yet", file=sys.stderr)
        return 0
    print(f"starting {', '.join(n.name for n in plan.nodes)} (Ctrl-C stops)", flush=True)
    graph = GraphProcesses(plan)
    try:
        graph.start()
        reason = graph.wait(duration=args.duration)
    except KeyboardInterrupt:
        reason = "interrupted"
    codes = graph.stop()
    failed = {name: code for name, code in codes.items() if code not in (0, -2)}
    if reason == "exited" and failed:
        print(f"error: node(s) exited: {failed}; see their output above", file=sys.stderr)
        return 1
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from sim2real import demo

    policy = args.policy or (None if args.no_policy else demo.shipped_policy(args.robot))
    plan = make_plan(robot=args.robot, lockstep=args.lockstep, seed=args.seed, conditions=args.conditions,
                     demo=True, autoengage=True, policy=str(policy) if policy else "")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    clock = "lockstep" if args.lockstep else "real time"
    if policy:
        print(f"demo: {plan.robot} in sim ({clock}) with {policy}: scripted commands for ~30 s; "
              f"output in {out}/", flush=True)
        return demo.run_policy_demo(plan, out, args.timeout, video=not args.no_video)
    print(f"demo: {plan.robot} in sim ({clock}), no policy: holding the default pose, then moving every joint; "
          f"output in {out}/", flush=True)
    return demo.run_joint_demo(plan, out, args.timeout)


def cmd_policy_swap(args: argparse.Namespace) -> int:
    from sim2real.nodes.policy_swap import main_swap

    return main_swap([args.file, "--node", args.node, *(["--json"] if args.json else [])])


def _single_threaded_learner() -> None:
    # Before torch loads: idle torch/OpenMP threads would steal the env workers' cores
    # (measured on 2 cores: PPO 2.5 -> 4.7 iterations/s).
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(key, "1")


def cmd_train(args: argparse.Namespace) -> int:
    _single_threaded_learner()
    from sim2real.train.checkpoint import load_checkpoint
    from sim2real.train.runner import Trainer, summary
    from sim2real.train.train_config import load_train_config, override_config

    overrides = {"iterations": args.iterations, "num_envs": args.num_envs, "workers": args.workers,
                 "seed": args.seed}
    if args.resume and args.init_from:
        raise _UsageError("--resume and --init-from exclude each other: --resume continues a run as it was, "
                          "--init-from starts a new run (--out, --config) from a checkpoint's networks")
    if args.init_from:
        from sim2real.train.checkpoint import CheckpointError, latest_checkpoint, save_checkpoint, warm_start

        if args.out is None:
            raise _UsageError("--init-from needs --out: the fine-tune is a new run")
        from_policy = Path(args.init_from).suffix == ".onnx"
        if from_policy:
            from sim2real.core.policy_file import PolicyFileError, load_policy
            from sim2real.train.policy_warm_start import warm_start_from_policy

            try:
                meta = load_policy(args.init_from).metadata
            except PolicyFileError as exc:
                raise _UsageError(str(exc)) from None
            robot, task = args.robot or meta.robot, args.task or meta.task
        else:
            checkpoint = load_checkpoint(args.init_from)
            robot, task = args.robot or checkpoint["robot"], args.task or checkpoint["task"]
        config = load_train_config(robot, task, args.config, overrides)
        try:
            warm = (warm_start_from_policy(args.init_from, config) if from_policy
                    else warm_start(checkpoint, config, args.init_from))
        except CheckpointError as exc:
            raise _UsageError(str(exc)) from None
        checkpoint = warm
        if checkpoint["iteration"] >= config["iterations"]:
            raise _UsageError(f"{args.init_from} has already run {checkpoint['iteration']} iterations and the fine-tune "
                              f"would stop at {config['iterations']}; pass --iterations N with N > "
                              f"{checkpoint['iteration']} (iterations count on from the checkpoint's)")
        out = Path(args.out)
        existing = latest_checkpoint(out) if out.is_dir() else None
        if existing is not None:
            raise _UsageError(f"{out} already holds a training run ({existing.name}): choose another --out")
        out.mkdir(parents=True, exist_ok=True)
        resume = save_checkpoint(out / "warm_start.pt", warm)
        print(f"warm start from {args.init_from} (iteration {checkpoint['iteration']}) with "
              f"{args.config or f'config/train/{robot}_{task}.yaml'}", flush=True)
    elif args.resume:
        if args.config:
            raise _UsageError("--config cannot be combined with --resume: a resumed run keeps its checkpoint's "
                              "config (override --iterations, --num-envs, --workers, --seed)")
        checkpoint = load_checkpoint(args.resume)
        for key in ("robot", "task"):
            given = getattr(args, key)
            if given is not None and given != checkpoint[key]:
                raise _UsageError(f"--{key} {given} does not match the checkpoint's {key} {checkpoint[key]!r}")
        config = override_config(checkpoint["training_config"], overrides, source=f"{args.resume} + command line")
        if checkpoint["iteration"] >= config["iterations"]:
            raise _UsageError(f"{args.resume} has already run {checkpoint['iteration']} of {config['iterations']} "
                              f"iterations; pass --iterations N with N > {checkpoint['iteration']} (the run's total)")
        out = Path(args.out) if args.out else Path(args.resume).parent
        resume = args.resume
        print(f"resuming {args.resume} at iteration {checkpoint['iteration']}", flush=True)
    else:
        if args.robot is None or args.task is None or args.out is None:
            raise _UsageError("--robot, --task and --out are required (or --resume CHECKPOINT)")
        from sim2real.train.tasks import task_entry

        try:
            task_entry(args.robot, args.task)
        except ValueError as exc:
            raise _UsageError(str(exc)) from None
        config = load_train_config(args.robot, args.task, args.config, overrides)
        out = Path(args.out)
        resume = None
    trainer = Trainer(config, out, resume=resume, progress=not args.no_progress)
    trainer.check_out()
    print(f"training {config['robot']} {config['task']} into {out}/: {config['iterations']} iterations, "
          f"{config['num_envs']} envs over {config['workers']} worker processes, "
          f"randomization {config['randomization'] or 'none'}{' + ADR' if config['adr']['enabled'] else ''}",
          flush=True)
    result = trainer.run()
    print(summary(result))
    return 130 if result.interrupted else 0


def cmd_export(args: argparse.Namespace) -> int:
    _single_threaded_learner()
    from sim2real.train.checkpoint import latest_checkpoint
    from sim2real.train.export import export_policy

    checkpoint = Path(args.checkpoint)
    if checkpoint.is_dir():
        found = latest_checkpoint(checkpoint)
        if found is None:
            raise _UsageError(f"{checkpoint} holds no model_<iteration>.pt; give a checkpoint file")
        checkpoint = found
    output = Path(args.output) if args.output else checkpoint.parent / "policy.onnx"
    report = export_policy(checkpoint, output)
    meta = report.policy.metadata
    if args.json:
        print(json.dumps({"path": str(report.path), "sha256": report.policy.sha256, "bytes": report.size_bytes,
                          "robot": meta.robot, "task": meta.task, "checkpoint": str(checkpoint),
                          "iteration": report.iteration, "observation_size": meta.observation_size,
                          "num_actions": meta.num_joints, "parity_max_abs_diff": report.max_abs_diff,
                          "parity_samples": report.samples, "source_commit": meta.source_commit,
                          "source_dirty": meta.source_dirty}, indent=2))
        return 0
    print(f"exported {report.path} ({report.size_bytes / 1024:.0f} kB, sha256 {report.policy.sha256[:16]})\n"
          f"  {meta.robot} {meta.task} from {checkpoint} (iteration {report.iteration}): "
          f"{meta.observation_size} observations -> {meta.num_joints} actions, one file, ONNX opset 17\n"
          f"  parity torch vs onnxruntime on {report.samples} observations: max |diff| "
          f"{report.max_abs_diff:.2g}\n"
          f"  source commit {meta.source_commit[:12]}{' (dirty)' if meta.source_dirty == 'true' else ''}\n"
          f"  evaluate it: sim2real eval {report.path} --worlds nominal dr --episodes 50")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from sim2real.core.policy_file import load_policy
    from sim2real.evaluate.evaluate import evaluate_policy, plot_returns

    policy = load_policy(args.policy)
    worlds = args.worlds or (["nominal", "dr"] if policy.metadata.randomization is not None else ["nominal"])
    report = evaluate_policy(policy, worlds, args.episodes, seed=args.seed, workers=args.workers,
                             difficulty=args.difficulty, progress=not args.no_progress)
    png = plot_returns(report, args.plot) if args.plot else None
    if args.json:
        data = report.to_dict()
        if png is not None:
            data["plot"] = str(png)
        print(json.dumps(data, indent=2))
    else:
        print(report.table())
        if png is not None:
            print(f"plot: {png}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sim2real", formatter_class=_Formatter,
        description="Take a robot policy from PyBullet to hardware under ROS 2.",
        epilog="examples:\n  sim2real demo --robot go2\n  sim2real up --robot panda --hardware sim --duration 10\n"
               "  sim2real train --robot panda --task reach --out runs/reach\n"
               "  sim2real export runs/reach -o policy.onnx\n"
               "  sim2real eval policy.onnx --worlds nominal dr --episodes 50\n")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = sub.add_parser("up", formatter_class=_Formatter, help="bring up the node graph (what bringup.launch.py runs)",
                        description="Run the node plan for a robot as processes, without `ros2 launch`.\n"
                                    "Same plan as `ros2 launch sim2real bringup.launch.py`.",
                        epilog="examples:\n  sim2real up --robot go2 --hardware sim --duration 30\n"
                               "  sim2real up --robot go2 --lockstep --print-plan\n")
    _add_graph_arguments(up)
    up.add_argument("--hardware", default="sim", choices=HARDWARE_CHOICES,
                    help="sim: PyBullet robot; topic: a real driver speaks the hardware contract")
    up.add_argument("--duration", type=float, default=None, help="stop after this many seconds (default: run until Ctrl-C)")
    up.add_argument("--policy", default="", help="ONNX policy for policy_runtime (sim2real export)")
    up.add_argument("--demo", action="store_true", help="add the demo operator (demo_script with a policy, "
                                                        "pose_commander without)")
    up.add_argument("--autoengage", action="store_true",
                    help="the supervisor engages once the robot stands and the policy has streamed for 1 s "
                         "(otherwise: ros2 service call "
                         "/safety_supervisor/engage std_srvs/srv/Trigger)")
    up.add_argument("--failures-dir", default="", help="folder for failure bundles (default: output_dir of "
                                                       "config/failures/default.yaml); sim2real failures list")
    up.add_argument("--print-plan", action="store_true", help="print the node plan as JSON and exit")
    up.set_defaults(func=cmd_up)

    demo = sub.add_parser("demo", formatter_class=_Formatter, help="the main job: the whole graph in sim, "
                                                                   "with what it measured",
                          description="Bring up sim_robot -> policy_runtime -> safety_supervisor in sim with the "
                                      "shipped policy (policies/<robot>_<task>.onnx) for ~30 s of scripted\n"
                                      "/cmd_vel (go2) or /goal_pose (panda); print distance, velocity or reach error, "
                                      "supervisor events and tick latency;\nwrite a plot and a GIF. Without a policy "
                                      "it holds and moves the joints through the supervisor instead.",
                          epilog="examples:\n  sim2real demo --robot go2\n  sim2real demo --robot panda --lockstep\n"
                                 "  sim2real demo --robot go2 --policy runs/walk/policy.onnx\n")
    _add_graph_arguments(demo)
    demo.add_argument("--policy", default=None, help="policy file (default: the shipped one for the robot)")
    demo.add_argument("--no-policy", action="store_true", help="run the joint script without any policy")
    demo.add_argument("--no-video", action="store_true", help="skip the GIF (it takes a few seconds to render)")
    demo.add_argument("--out", default="runs/demo", help="folder for the report, the plot and the video")
    demo.add_argument("--timeout", type=float, default=120.0, help="give up after this many wall seconds")
    demo.set_defaults(func=cmd_demo)

    policy = sub.add_parser("policy", formatter_class=_Formatter, help="act on a running policy_runtime",
                            description="Hot-swap the running policy: the runtime validates the file, dry-runs it on "
                                        "recent observations and cross-fades to it,\nor refuses it with the reason "
                                        "while the running policy keeps running.",
                            epilog="examples:\n  sim2real policy swap policies/go2_walk.onnx\n"
                                   "  sim2real policy swap new.onnx --node /robot1/policy_runtime --json\n")
    policy_sub = policy.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    swap = policy_sub.add_parser("swap", formatter_class=_Formatter, help="swap in a new policy file")
    swap.add_argument("file", help="the new .onnx policy (must sit in one of the runtime's policy_dirs)")
    swap.add_argument("--node", default="/policy_runtime", help="the policy_runtime node")
    swap.add_argument("--json", action="store_true", help="print the result as JSON")
    swap.set_defaults(func=cmd_policy_swap)

    train = sub.add_parser(
        "train", formatter_class=_Formatter, help="train a policy with PPO in PyBullet (domain randomization, "
                                                  "curriculum)",
        description="Train a task policy with rsl_rl PPO over worker processes, with domain randomization,\n"
                    "adaptive DR and a curriculum as set in config/train/<robot>_<task>.yaml. Writes\n"
                    "model_<iteration>.pt checkpoints and TensorBoard logs into --out.",
        epilog="examples:\n  sim2real train --robot panda --task reach --out runs/reach\n"
               "  sim2real train --robot go2 --task walk --out runs/walk --iterations 2000 --num-envs 32\n"
               "  sim2real train --resume runs/walk/model_500.pt --iterations 3000\n"
               "  sim2real train --init-from runs/walk/model_1500.pt --config my_walk.yaml --out runs/walk_ft "
               "--iterations 2500\n"
               "  sim2real train --init-from policies/go2_walk.onnx --config config/train/go2_walk_rough_stage9.yaml "
               "--out runs/go2_ft\n"
               "then: sim2real export runs/reach -o runs/reach/policy.onnx\n")
    train.add_argument("--robot", help="robot profile name (go2, panda)")
    train.add_argument("--task", help="task name (go2: walk, panda: reach)")
    train.add_argument("--out", help="run folder for checkpoints and logs (default with --resume: the "
                                     "checkpoint's folder)")
    train.add_argument("--config", help="training config YAML (default: config/train/<robot>_<task>.yaml)")
    train.add_argument("--iterations", type=int, help="total PPO iterations of the run (default: the config's)")
    train.add_argument("--num-envs", type=int, help="parallel envs (default: the config's)")
    train.add_argument("--workers", type=int, help="env worker processes (default: the config's)")
    train.add_argument("--seed", type=int, help="seed (default: the config's)")
    train.add_argument("--resume", metavar="CKPT", help="continue a run from a checkpoint, up to --iterations")
    train.add_argument("--init-from", metavar="CKPT|POLICY.onnx",
                       help="fine-tune: a new run (--out, --config) from this checkpoint's networks, normalizer and "
                            "optimizer; iterations go on from the checkpoint's (--iterations is the total); the "
                            "config's randomization replaces the trained one. From a policy file (.onnx, e.g. a "
                            "shipped one) only the actor carries over: the critic, the action noise "
                            "(policy.init_noise_std) and the optimizer start afresh; set critic_warmup.iterations "
                            "in the config to train the new critic alone first")
    train.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")
    train.set_defaults(func=cmd_train)

    export = sub.add_parser(
        "export", formatter_class=_Formatter, help="export a checkpoint as a self-contained ONNX policy file",
        description="Write the checkpoint's actor (observation normalizer included) as ONE ONNX file with\n"
                    "sim2real.* metadata (robot, joints, gains, observation layout, action mapping, training\n"
                    "config, randomization, source commit), after checking onnxruntime against torch on\n"
                    "1000 observations. A checkpoint with NaN/inf weights is refused.",
        epilog="examples:\n  sim2real export runs/reach/model_300.pt -o policies/panda_reach.onnx\n"
               "  sim2real export runs/reach          # latest checkpoint -> runs/reach/policy.onnx\n")
    export.add_argument("checkpoint", metavar="CHECKPOINT", help="model_<iteration>.pt, or a run folder (latest)")
    export.add_argument("-o", "--output", help="policy file to write (default: policy.onnx beside the checkpoint)")
    export.add_argument("--json", action="store_true", help="print the result as JSON")
    export.set_defaults(func=cmd_export)

    evaluate = sub.add_parser(
        "eval", formatter_class=_Formatter, help="evaluate a policy file in simulation: SR, returns, domain gap",
        description="Run the ONNX policy (through onnxruntime, as on the robot) for N episodes per world set\n"
                    "and report success rate, mean and worst-5 %% return, task metrics and, for two or more\n"
                    "world sets, the domain gap Delta = R_b - R_a and GapRatio = |R_b - R_a| / |R_a|.\n"
                    "World sets: nominal (no randomization), dr (the policy's training randomization),\n"
                    "or a randomization name/YAML. Episode k uses seed + k: reports are reproducible.",
        epilog="examples:\n  sim2real eval runs/reach/policy.onnx --worlds nominal dr --episodes 50\n"
               "  sim2real eval policy.onnx --worlds nominal --worlds config/randomization/go2_reference.yaml "
               "--episodes 100 --json --plot gap.png\n")
    evaluate.add_argument("policy", metavar="POLICY", help="policy file (.onnx from sim2real export)")
    evaluate.add_argument("--worlds", nargs="+", action="extend", metavar="SET",
                          help="world sets: nominal | dr | NAME | FILE.yaml (default: nominal dr)")
    evaluate.add_argument("--episodes", type=int, default=50, help="episodes per world set")
    evaluate.add_argument("--seed", type=int, default=0, help="episode k starts from seed + k")
    evaluate.add_argument("--workers", type=int, default=2, help="processes running episodes (0: this one)")
    evaluate.add_argument("--difficulty", type=float, default=1.0, help="task difficulty in [0, 1]")
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON (per-episode returns too)")
    evaluate.add_argument("--plot", metavar="PNG", help="write a histogram and box plot of the returns")
    evaluate.add_argument("--no-progress", action="store_true", help="no progress bar")
    evaluate.set_defaults(func=cmd_eval)

    from sim2real import failures, pipeline
    from sim2real.latency_cli import add_dr_from_latency

    failures.add_parser(sub)
    pipeline.add_parser(sub)
    add_sysid_commands(sub, _Formatter)  # sysid record|fit|simulate
    dr = sub.add_parser("dr", formatter_class=_Formatter, help="make domain-randomization configs from measurements",
                        description="Make domain-randomization configs from what was measured on the robot.",
                        epilog="examples:\n  sim2real dr from-sysid config/identified/panda.yaml "
                               "-o config/randomization/panda_identified.yaml\n"
                               "  sim2real dr from-latency latency.jsonl -o config/randomization/robot_latency.yaml\n")
    dr_sub = dr.add_subparsers(dest="dr_command", required=True, metavar="SOURCE")
    add_dr_from_sysid(dr_sub, _Formatter)
    add_dr_from_latency(dr_sub, _Formatter)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (*_INPUT_ERRORS, _UsageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (ExportError, WorkerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
