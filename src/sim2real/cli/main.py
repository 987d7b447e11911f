"""The `sim2real` command line. `sim2real COMMAND --help` explains each command with an example."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
import threading
import time
import warnings
from functools import partial
from pathlib import Path

from sim2real.core.errors import InputError, Sim2RealError


def _import_pybullet_quietly() -> None:
    # pybullet's C module prints "pybullet build time: ..." to stderr when first imported:
    # noise before every command's own output, --help included.
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        importlib.import_module("pybullet")
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


_import_pybullet_quietly()

from sim2real.cli.sysid import add_dr_from_sysid, add_sysid_commands
from sim2real.core.bags import BagSalvagedWarning
from sim2real.core.robot_profile import available_profiles
from sim2real.core.supervisor import OPERATOR_ACTIONS
from sim2real.evaluate.evaluate import EvaluationError
from sim2real.graph.plan import BOOL_CHOICES, COMPOSED_PROCESS, HARDWARE_CHOICES, LAUNCH_ARGUMENTS, make_plan
from sim2real.sim.engines import DEFAULT_ENGINE, ENGINES
from sim2real.train.threads import single_threaded_learner

# Bad input: the user can fix it from the message (exit 2).

FAILURE_WRITE_S = 2.5  # a bundle's write on a loaded 2-core machine, with margin


class _UsageError(InputError):
    """A command-line combination that cannot work; the message says what to do instead."""


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    def _get_help_string(self, action: argparse.Action) -> str | None:
        # "(default: None)", "(default: False)" and "(default: )" say nothing; the help text says
        # what happens instead, or names the default itself.
        if (
            any(action.default is nothing for nothing in (None, False, True))
            or action.default == ""
            or "default" in (action.help or "")
        ):
            return action.help
        return super()._get_help_string(action)


def _add_graph_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--robot", default="go2", help=f"robot profile name ({', '.join(available_profiles())}) or path"
    )
    parser.add_argument(
        "--lockstep",
        action="store_true",
        help="sim publishes /clock and advances only when the graph answers (use_sim_time everywhere)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for terrain and sensor noise")
    parser.add_argument(
        "--conditions",
        default="{}",
        help="physical conditions for the sim as YAML, e.g. '{ground_friction: 0.5, latency: 0.01}'",
    )


# Launch arguments `up` spells its own way (flags, shared options); every other one becomes
# --its-name, so `sim2real up` takes whatever `ros2 launch sim2real bringup.launch.py` does.

_UP_OWN_ARGUMENTS = {
    "robot",
    "lockstep",
    "seed",
    "conditions",
    "hardware",
    "policy",
    "demo",
    "autoengage",
    "failures_dir",
}


def _add_launch_arguments(parser: argparse.ArgumentParser) -> None:
    for arg in LAUNCH_ARGUMENTS.values():
        if arg.name in _UP_OWN_ARGUMENTS:
            continue
        option = "--" + arg.name.replace("_", "-")
        where = f" (launch: {arg.name}:=)"
        if arg.choices == BOOL_CHOICES and arg.default == "true":
            parser.add_argument(
                "--no-" + arg.name.replace("_", "-"),
                dest=arg.name,
                action="store_false",
                help=f"leave this out: {arg.description}{where}",
            )
        elif arg.choices == BOOL_CHOICES:
            parser.add_argument(option, dest=arg.name, action="store_true", help=arg.description + where)
        else:
            default = f" (default: {arg.default})" if arg.default else ""
            parser.add_argument(
                option,
                dest=arg.name,
                default=arg.default,
                choices=arg.choices or None,
                help=arg.description + where + default,
            )


def _plan_from(args: argparse.Namespace, demo: bool):
    extra = {
        name: getattr(args, name) for name in LAUNCH_ARGUMENTS if name not in _UP_OWN_ARGUMENTS and hasattr(args, name)
    }
    return make_plan(
        robot=args.robot,
        hardware=getattr(args, "hardware", "sim"),
        lockstep=args.lockstep,
        seed=args.seed,
        conditions=args.conditions,
        demo=demo,
        policy=args.policy,
        autoengage=demo or getattr(args, "autoengage", False),
        failures_dir=getattr(args, "failures_dir", ""),
        **extra,
    )


def _say_cautions(plan) -> None:
    for caution in plan.cautions:
        print(f"warning: {caution}", file=sys.stderr, flush=True)


def _plan_json(plan) -> str:
    """`sim2real up --print-plan`: the plan as JSON, node by node."""
    return json.dumps(
        {
            "robot": plan.robot,
            "hardware": plan.hardware,
            "use_sim_time": plan.use_sim_time,
            "nodes": [vars(n) for n in plan.nodes],
            "cautions": list(plan.cautions),
        },
        indent=2,
        default=list,
    )


def cmd_up(args: argparse.Namespace) -> int:
    from sim2real.graph.processes import GraphProcesses

    plan = _plan_from(args, demo=args.demo)
    _say_cautions(plan)
    if args.print_plan:
        print(_plan_json(plan))
        return 0
    if not plan.nodes:
        print(f"hardware:={plan.hardware} with no extra nodes: nothing to start yet", file=sys.stderr)
        return 0
    print(f"starting {', '.join(n.name for n in plan.nodes)} (Ctrl-C stops)", flush=True)
    graph = GraphProcesses(plan)
    exited: dict[str, int] = {}
    operator = next((n.name for n in plan.nodes if n.role == "demo"), None)
    grace = _failure_capture_grace(plan)
    ending: list[float] = []  # when a lost node made the demo end

    def report_exits() -> bool:
        """Say which nodes exited since the last call; True when the graph should stop."""
        for name, code in graph.exited().items():
            if name in exited:
                continue
            exited[name] = code
            if name == operator and code == 0:
                print(f"{name} finished its script: stopping the graph", flush=True)
            elif operator is not None:
                # A demo cannot play on without one of its nodes (a lockstep sim would wait
                # for a dead node's answer for ever): it ends, named, once the failure
                # collector had the time to write the bundle of what the loss did.
                wait = grace if _loss_is_written_up(plan, name, code, exited) else 0.0
                print(
                    f"{name} exited (code {code}): the demo cannot go on; stopping the graph"
                    + (f" in {wait:g} s (the failure collector writes its bundle)" if wait and not ending else ""),
                    file=sys.stderr,
                    flush=True,
                )
                if not ending:
                    ending.append(time.monotonic() + wait)
            else:
                print(_exit_without_operator(name, code), file=sys.stderr, flush=True)
        # Everything stopped, or the demo finished its script or lost a node (after the grace).
        return (
            len(exited) == len(graph.processes)
            or exited.get(operator) == 0
            or bool(ending and time.monotonic() >= ending[0])
        )

    try:
        graph.start()
        # Without a demo operator, like `ros2 launch`: a node that exits is reported and the others
        # run on (the supervisor must outlive a crashed policy runtime: it stops the robot when the
        # policy goes silent). With one, any exit ends the demo (report_exits).
        graph.wait(args.duration, until=report_exits, stop_on_exit=False)
    except KeyboardInterrupt:
        pass
    graph.stop()
    failed = {name: code for name, code in exited.items() if code not in (0, -2)}
    if failed:
        print(f"error: node(s) exited: {failed}; see their output above", file=sys.stderr)
        return 1
    if operator is not None and exited and exited.get(operator) != 0:
        print(f"error: the demo stopped before {operator} finished its script: {exited}", file=sys.stderr)
        return 1
    return 0


def _loss_is_written_up(plan, name: str, code: int, exited: dict[str, int]) -> bool:
    """Whether the failure collector writes a bundle of a process's loss (a demo waits for it).
    Not of its own, nor once it is gone; not of a process that refused its configuration at
    start (exit code 2: nothing ran). A dead supervisor, or composed chain, trips nothing: the
    collector writes the bundle on the silence of /joint_commands, in real time only (in lockstep
    the sim's clock stops with the commands, and no silence is ever long enough)."""
    if name == "failure_collector" or "failure_collector" in exited or code == InputError.exit_code:
        return False
    commands = plan.process_of("safety_supervisor") if any(n.name == "safety_supervisor" for n in plan.nodes) else None
    return not (plan.use_sim_time and name == commands)


def _exit_without_operator(name: str, code: int) -> str:
    """What `sim2real up` says when a process exits and no demo operator ends the graph."""
    if name == COMPOSED_PROCESS:
        return (
            f"{name} exited (code {code}): the supervisor, estimator and runtime with it; nothing commands "
            "the robot, and only its driver's own command timeout stops it; in real time a running "
            "failure collector writes a stale_command bundle (Ctrl-C stops the rest)"
        )
    return f"{name} exited (code {code}); the other nodes run on (Ctrl-C stops them)"


def _failure_capture_grace(plan) -> float:
    """Seconds a demo that lost a node keeps the rest running: the supervisor damps, the
    collector notices the silence, waits its post-event window and writes the bundle."""
    if not any(n.name == "failure_collector" for n in plan.nodes):
        return 0.0
    from sim2real.core.failure_config import load_failure_config

    config = load_failure_config("default")
    return config.post_event_s + (config.triggers.stale_s or 0.0) + FAILURE_WRITE_S


def cmd_demo(args: argparse.Namespace) -> int:
    from sim2real.cli import demo
    from sim2real.core.shipped_policies import shipped_policy

    policy = args.policy or (None if args.no_policy else shipped_policy(args.robot))
    hardware = "mujoco" if args.engine == "mujoco" else "sim"
    plan = make_plan(
        robot=args.robot,
        hardware=hardware,
        lockstep=args.lockstep,
        seed=args.seed,
        conditions=args.conditions,
        demo=True,
        autoengage=True,
        policy=str(policy) if policy else "",
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    clock = "lockstep" if args.lockstep else "real time"
    if policy:
        print(
            f"demo: {plan.robot} in sim on {args.engine} ({clock}) with {policy}: scripted commands for ~30 s; "
            f"output in {out}/",
            flush=True,
        )
        return demo.run_policy_demo(plan, out, args.timeout, video=not args.no_video)
    hung = ", suspended as on a gantry" if plan.node("sim_robot").parameters["suspended"] else ""
    print(
        f"demo: {plan.robot} in sim on {args.engine} ({clock}{hung}), no policy: holding the default pose, then moving every "
        f"joint; output in {out}/",
        flush=True,
    )
    return demo.run_joint_demo(plan, out, args.timeout)


def cmd_safety(args: argparse.Namespace) -> int:
    from sim2real.nodes.trigger_call import call_trigger

    ok, message = call_trigger(f"{args.node.rstrip('/')}/{args.action}", args.timeout)
    if args.json:
        print(json.dumps({"action": args.action, "accepted": ok, "message": message}))
    else:
        print(f"{args.action}: {'accepted' if ok else 'refused'}: {message}")
    return 0 if ok else 1


def cmd_policy_info(args: argparse.Namespace) -> int:
    from sim2real.cli.policy_info import describe_policy, policy_info
    from sim2real.core.policy_file import load_policy

    policy = load_policy(args.file)
    print(json.dumps(policy_info(policy), indent=2) if args.json else describe_policy(policy))
    return 0


def cmd_policy_swap(args: argparse.Namespace) -> int:
    from sim2real.nodes.policy_swap import main_swap

    return main_swap([args.file, "--node", args.node, *(["--json"] if args.json else [])])


def cmd_train(args: argparse.Namespace) -> int:
    single_threaded_learner()
    from sim2real.train.run_start import RunStartError, plan_run_start
    from sim2real.train.runner import Trainer, summary

    overrides = {
        "iterations": args.iterations,
        "num_envs": args.num_envs,
        "workers": args.workers,
        "seed": args.seed,
        "behaviour_cloning.buffer": args.robot_buffer,
        "domain_adaptation.bags": args.adapt_from,
    }
    if args.envs_per_worker is not None and args.envs_per_worker < 1:
        raise _UsageError(f"--envs-per-worker must be >= 1, got {args.envs_per_worker}")
    if args.envs_per_worker is not None and args.num_envs is not None:
        raise _UsageError("--envs-per-worker M gives num_envs = workers x M: leave out --num-envs")
    if args.ray is not None:
        from sim2real.train.ray_cluster import import_ray

        import_ray()  # missing Ray is said before anything is written
    plan = partial(
        plan_run_start,
        out=args.out,
        robot=args.robot,
        task=args.task,
        config=args.config,
        resume=args.resume,
        init_from=args.init_from,
    )
    try:
        start = plan(overrides=overrides)
        if args.envs_per_worker is not None:
            start = plan(overrides={**overrides, "num_envs": start.config["workers"] * args.envs_per_worker})
    except RunStartError as exc:
        raise _UsageError(str(exc)) from None
    if start.announcement:
        print(start.announcement, flush=True)
    config, out = start.config, start.out
    trainer = Trainer(config, out, resume=start.resume, progress=not args.no_progress, ray_address=args.ray)
    trainer.check_out()
    if args.ray is not None:
        from sim2real.train.ray_cluster import describe_address

        where = f"Ray actors ({describe_address(args.ray)})"
    else:
        where = "worker processes"
    print(
        f"training {config['robot']} {config['task']} into {out}/: {config['iterations']} iterations, "
        f"{config['num_envs']} envs over {config['workers']} {where}, "
        f"randomization {config['randomization'] or 'none'}{' + ADR' if config['adr']['enabled'] else ''}",
        flush=True,
    )
    result = trainer.run()
    print(summary(result))
    return 130 if result.interrupted else 0


def cmd_export(args: argparse.Namespace) -> int:
    single_threaded_learner()
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
        print(
            json.dumps(
                {
                    "path": str(report.path),
                    "sha256": report.policy.sha256,
                    "bytes": report.size_bytes,
                    "robot": meta.robot,
                    "task": meta.task,
                    "checkpoint": str(checkpoint),
                    "iteration": report.iteration,
                    "observation_size": meta.observation_size,
                    "num_actions": meta.num_joints,
                    "parity_max_abs_diff": report.max_abs_diff,
                    "parity_samples": report.samples,
                    "opset": report.opset,
                    "source_commit": meta.source_commit,
                    "source_dirty": meta.source_dirty,
                },
                indent=2,
            )
        )
        return 0
    print(
        f"exported {report.path} ({report.size_bytes / 1024:.0f} kB, sha256 {report.policy.sha256[:16]})\n"
        f"  {meta.robot} {meta.task} from {checkpoint} (iteration {report.iteration}): "
        f"{meta.observation_size} observations -> {meta.num_joints} actions, one file, ONNX opset {report.opset}\n"
        f"  parity torch vs onnxruntime on {report.samples} observations: max |diff| "
        f"{report.max_abs_diff:.2g}\n"
        f"  source commit {meta.source_commit[:12]}{' (dirty)' if meta.source_dirty == 'true' else ''}\n"
        f"  evaluate it: sim2real eval {report.path} --worlds nominal dr --episodes 50"
    )
    return 0


def cmd_select(args: argparse.Namespace) -> int:
    single_threaded_learner()
    from sim2real.evaluate.select import select_checkpoint

    print(
        f"evaluating the last {args.last} checkpoints of {args.run} on {args.worlds}, {args.episodes} episodes "
        f"each (seed {args.seed}) ...",
        flush=True,
    )
    best, candidates, output = select_checkpoint(
        args.run,
        args.worlds,
        args.episodes,
        args.last,
        args.seed,
        args.workers,
        args.output,
        progress=not args.no_progress,
        difficulty=args.difficulty,
        ray_address=args.ray,
    )
    if args.json:
        print(
            json.dumps(
                {
                    "selected": str(best.checkpoint),
                    "output": str(output),
                    "candidates": [
                        {
                            "checkpoint": str(c.checkpoint),
                            "iteration": c.iteration,
                            "worlds": {
                                w.name: {"success_rate": w.success_rate, "mean_return": w.mean_return}
                                for w in c.report.worlds
                            },
                        }
                        for c in candidates
                    ],
                },
                indent=2,
            )
        )
    else:
        weakest = best.weakest
        print(
            f"selected {best.checkpoint.name}: weakest world set {weakest.name}, SR "
            f"{100 * weakest.success_rate:.0f} %, mean return {weakest.mean_return:.2f}\n"
            f"exported {output}\n  evaluate it afresh: sim2real eval {output} --worlds {' '.join(args.worlds)} "
            f"--episodes {args.episodes} --seed {args.seed + 1000}"
        )
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from sim2real.core.policy_file import load_policy
    from sim2real.evaluate.evaluate import evaluate_policy, plot_returns

    if args.suite:
        return _eval_suite(args)
    args.episodes = 50 if args.episodes is None else args.episodes
    if args.scenarios or args.require_pass or args.ablate:
        raise EvaluationError(
            "--scenarios, --require-pass and --ablate belong to a suite. Fix: add --suite NAME (e.g. --suite go2_walk)"
        )
    policy = load_policy(args.policy)
    worlds = args.worlds or (["nominal", "dr"] if policy.metadata.randomization is not None else ["nominal"])
    report = evaluate_policy(
        policy,
        worlds,
        args.episodes,
        seed=args.seed,
        workers=args.workers,
        difficulty=args.difficulty,
        progress=not args.no_progress,
        engine=args.engine,
        model=args.model,
        ray_address=args.ray,
    )
    plot = None if args.no_plot else args.plot or Path("runs") / "eval" / f"{Path(args.policy).stem}_returns.png"
    png = plot_returns(report, plot) if plot else None
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


def _eval_suite(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from sim2real.core.policy_file import load_policy
    from sim2real.evaluate.suite import evaluate_suite, load_suite, plot_suite

    policy = load_policy(args.policy)
    suite = load_suite(args.suite)
    worlds = args.worlds or ["nominal"]
    bar = tqdm(
        total=None, desc=f"suite {suite.name} ({args.engine})", unit="run", dynamic_ncols=True, disable=args.no_progress
    )

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    try:
        episodes = 1 if args.episodes is None else args.episodes
        report = evaluate_suite(
            policy,
            suite,
            worlds,
            episodes=episodes,
            seed=args.seed,
            engine=args.engine,
            workers=args.workers,
            scenarios=args.scenarios,
            progress=progress,
            model=args.model,
            ray_address=args.ray,
            ablate=args.ablate,
        )
    finally:
        bar.close()
    on = args.engine + ("_" + Path(str(args.model)).stem.replace(":", "_") if args.model else "")
    stem = Path("runs") / "eval" / f"{Path(args.policy).stem}_{suite.name}_{on}"
    # Suffixes appended, not swapped: a policy named walk.v2.onnx keeps its whole name.
    plot = None if args.no_plot else Path(args.plot) if args.plot else Path(f"{stem}.png")
    png = plot_suite(report, plot) if plot else None
    json_path = plot.with_suffix(".json") if plot and args.plot else Path(f"{stem}.json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    data = report.to_dict()
    if png is not None:
        data["plot"] = str(png)
    json_path.write_text(json.dumps(data, indent=2))
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(report.table())
        print(f"json: {json_path}" + (f"\nplot: {png}" if png is not None else ""))
    return 1 if args.require_pass and not report.passed else 0


def _add_ray_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help=f"{what}. --ray alone: a local Ray started for this command; auto: the cluster this "
        "machine joined (ray start); HOST:PORT: the address `ray start --head` prints; "
        "ray://HOST:10001: Ray Client. Needs pip install -e '.[ray]' on every machine "
        "(docs/distributed.md). Put it after the positional arguments",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sim2real",
        formatter_class=_Formatter,
        description="Take a robot policy from PyBullet to hardware under ROS 2.",
        epilog="examples:\n  sim2real demo --robot go2\n  sim2real up --robot panda --hardware sim --duration 10\n"
        "  sim2real train --robot panda --task reach --out runs/reach\n"
        "  sim2real export runs/reach -o policy.onnx\n"
        "  sim2real eval policy.onnx --worlds nominal dr --episodes 50\n",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = sub.add_parser(
        "up",
        formatter_class=_Formatter,
        help="bring up the node graph (what bringup.launch.py runs)",
        description="Run the node plan for a robot as processes, without `ros2 launch`.\n"
        "Same plan as `ros2 launch sim2real bringup.launch.py`.",
        epilog="examples:\n  sim2real up --robot go2 --hardware sim --duration 30\n"
        "  sim2real up --robot go2 --lockstep --print-plan\n"
        "  sim2real up --robot go2 --policy policies/go2_walk.onnx --autoengage "
        "--policy-dirs runs/walk\n"
        "    then: sim2real policy swap runs/walk/policy.onnx\n"
        "  sim2real up --robot panda --hardware ros2_control --controller-joints "
        "panda_joint1,...,panda_joint7\n",
    )
    _add_graph_arguments(up)
    up.add_argument(
        "--hardware", default="sim", choices=HARDWARE_CHOICES, help=LAUNCH_ARGUMENTS["hardware"].description
    )
    up.add_argument(
        "--duration", type=float, default=None, help="stop after this many seconds (default: run until Ctrl-C)"
    )
    up.add_argument("--policy", default="", help="ONNX policy for policy_runtime (sim2real export)")
    up.add_argument(
        "--demo",
        action="store_true",
        help="add the demo operator (demo_script with a policy, "
        "pose_commander without); the graph stops when its "
        "script ends or any node exits",
    )
    up.add_argument(
        "--autoengage",
        action="store_true",
        help="the supervisor engages once the robot stands and the policy has streamed for 1 s "
        "(otherwise: ros2 service call "
        "/safety_supervisor/engage std_srvs/srv/Trigger)",
    )
    up.add_argument(
        "--failures-dir",
        default="",
        help="folder for failure bundles (default: output_dir of config/failures/default.yaml); sim2real failures list",
    )
    _add_launch_arguments(up)
    up.add_argument("--print-plan", action="store_true", help="print the node plan as JSON and exit")
    up.set_defaults(func=cmd_up)

    demo = sub.add_parser(
        "demo",
        formatter_class=_Formatter,
        help="the main job: the whole graph in sim, with what it measured",
        description="Bring up sim_robot -> policy_runtime -> safety_supervisor in sim with the "
        "shipped policy (policies/<robot>_<task>.onnx) for ~30 s of scripted\n"
        "/cmd_vel (go2) or /goal_pose (panda); print distance, velocity or reach error, "
        "supervisor events and tick latency;\nwrite a plot and a GIF. Without a policy "
        "it holds and moves the joints through the supervisor instead.",
        epilog="examples:\n  sim2real demo --robot go2\n  sim2real demo --robot panda --lockstep\n"
        "  sim2real demo --robot go2 --policy runs/walk/policy.onnx\n"
        "  sim2real demo --robot go2 --engine mujoco --lockstep   # sim2sim on the graph\n",
    )
    _add_graph_arguments(demo)
    demo.add_argument(
        "--engine",
        choices=ENGINES,
        default=DEFAULT_ENGINE,
        help="physics engine of the simulated robot (mujoco: the second engine, as --hardware mujoco does for `up`)",
    )
    demo.add_argument("--policy", default=None, help="policy file (default: the shipped one for the robot)")
    demo.add_argument(
        "--no-policy",
        action="store_true",
        help="run the joint script without any policy (a quadruped hangs in the air for it, as on a "
        "gantry; `sim2real up --demo --suspended false` keeps it standing)",
    )
    demo.add_argument("--no-video", action="store_true", help="skip the GIF (it takes a few seconds to render)")
    demo.add_argument("--out", default="runs/demo", help="folder for the report, the plot and the video")
    demo.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="give up after this many wall seconds (a lockstep demo runs as fast as the machine "
        "computes: the Go2's 30 s took 31 s of wall time on an idle 2-core machine)",
    )
    demo.set_defaults(func=cmd_demo)

    policy = sub.add_parser(
        "policy",
        formatter_class=_Formatter,
        help="inspect, sign and verify a policy file; hot-swap the running one; its history",
        description="info: what a policy file says about itself (robot, joints, gains, action "
        "mapping, observation layout,\ntraining randomization, checkpoint and "
        "commit), from its metadata.\n"
        "swap: hot-swap the running policy: the runtime validates the file, dry-runs "
        "it on recent observations and cross-fades to it,\nor refuses it with the "
        "reason while the running policy keeps running.\n"
        "keygen, sign, verify: ed25519 signatures; with trusted_keys the runtime "
        "runs only signed files.\nhistory: every start and swap request, "
        "accepted or refused, with who asked.",
        epilog="examples:\n  sim2real policy info policies/go2_walk.onnx\n"
        "  sim2real policy swap policies/go2_walk.onnx\n"
        "  sim2real policy swap new.onnx --node /robot1/policy_runtime --json\n"
        "  sim2real policy keygen lab-release --dir keys\n"
        "  sim2real policy sign new.onnx --key keys/lab-release.key\n"
        "  sim2real policy verify new.onnx --trusted-keys /etc/sim2real/trusted_keys\n"
        "  sim2real policy history --last 20\n",
    )
    policy_sub = policy.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    info = policy_sub.add_parser("info", formatter_class=_Formatter, help="show what a policy file was trained for")
    info.add_argument("file", help="an .onnx policy (sim2real export)")
    info.add_argument("--json", action="store_true", help="print it as JSON")
    info.set_defaults(func=cmd_policy_info)
    swap = policy_sub.add_parser("swap", formatter_class=_Formatter, help="swap in a new policy file")
    swap.add_argument("file", help="the new .onnx policy (must sit in one of the runtime's policy_dirs)")
    swap.add_argument("--node", default="/policy_runtime", help="the policy_runtime node")
    swap.add_argument("--json", action="store_true", help="print the result as JSON")
    swap.set_defaults(func=cmd_policy_swap)
    from sim2real.cli.policy_trust import add_commands as add_policy_trust_commands

    add_policy_trust_commands(policy_sub, _Formatter)

    safety = sub.add_parser(
        "safety",
        formatter_class=_Formatter,
        help="the operator's requests to the running safety supervisor",
        description="Ask the running safety_supervisor to engage (STANDBY/TAKEOVER -> ACTIVE), take over, damp,\n"
        "e-stop (latched) or reset (DAMPING/ESTOP -> STANDBY), as its ~/ACTION services do\n"
        "(`ros2 service call /safety_supervisor/engage std_srvs/srv/Trigger`, without ros2). It says\n"
        "whether the supervisor accepted, and why not. Exit status 0: accepted, 1: refused or no answer.",
        epilog="examples:\n  sim2real safety engage\n  sim2real safety estop\n"
        "  sim2real safety reset --node /robot1/safety_supervisor\n",
    )
    safety.add_argument("action", choices=OPERATOR_ACTIONS, help="what to ask")
    safety.add_argument("--node", default="/safety_supervisor", help="the safety_supervisor node")
    safety.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for its answer")
    safety.add_argument("--json", action="store_true", help="print {action, accepted, message} as JSON")
    safety.set_defaults(func=cmd_safety)

    train = sub.add_parser(
        "train",
        formatter_class=_Formatter,
        help="train a policy with PPO in PyBullet (domain randomization, curriculum)",
        description="Train a task policy with rsl_rl PPO over worker processes, with domain randomization,\n"
        "adaptive DR and a curriculum as set in config/train/<robot>_<task>.yaml. Writes\n"
        "model_<iteration>.pt checkpoints and TensorBoard logs into --out.",
        epilog="examples:\n  sim2real train --robot panda --task reach --out runs/reach\n"
        "  sim2real train --robot go2 --task walk --out runs/walk --iterations 2000 --num-envs 32\n"
        "  sim2real train --config config/experiments/go2_walk/onehour.yaml --out runs/walk_onehour\n"
        "  sim2real train --resume runs/walk/model_500.pt --iterations 3000\n"
        "  sim2real train --init-from runs/walk/model_1500.pt --config my_walk.yaml --out runs/walk_ft "
        "--iterations 2500\n"
        "  sim2real train --init-from policies/go2_walk.onnx --config my_walk_ft.yaml --out runs/go2_ft "
        "--iterations 2200\n"
        "  sim2real train --init-from policies/go2_walk.onnx --config my_walk_ft.yaml --out runs/go2_bc "
        "--robot-buffer bags/go2_runs\n"
        "  sim2real train --init-from policies/go2_walk.onnx --config my_walk_ft.yaml --out runs/go2_dann "
        "--adapt-from bags/go2_runs\n"
        "then: sim2real export runs/reach -o runs/reach/policy.onnx\n",
    )
    train.add_argument("--robot", help="robot profile name (go2, panda; default: the --config file's robot:)")
    train.add_argument("--task", help="task name (go2: walk, panda: reach; default: the --config file's task:)")
    train.add_argument(
        "--out", help="run folder for checkpoints and logs (default with --resume: the checkpoint's folder)"
    )
    train.add_argument("--config", help="training config YAML (default: config/train/<robot>_<task>.yaml)")
    train.add_argument("--iterations", type=int, help="total PPO iterations of the run (default: the config's)")
    train.add_argument("--num-envs", type=int, help="parallel envs (default: the config's)")
    train.add_argument("--workers", type=int, help="env worker processes, or Ray actors (default: the config's)")
    train.add_argument(
        "--envs-per-worker",
        type=int,
        metavar="M",
        help="envs each worker steps: num_envs = workers x M (instead of --num-envs)",
    )
    _add_ray_option(train, "the env workers run as Ray actors (the learner stays here)")
    train.add_argument("--seed", type=int, help="seed (default: the config's)")
    train.add_argument("--resume", metavar="CKPT", help="continue a run from a checkpoint, up to --iterations")
    train.add_argument(
        "--init-from",
        metavar="CKPT|POLICY.onnx",
        help="fine-tune: a new run (--out, --config) from this checkpoint's networks, normalizer and "
        "optimizer; iterations go on from the checkpoint's (--iterations is the total); the "
        "config's randomization replaces the trained one. From a policy file (.onnx, e.g. a "
        "shipped one) only the actor carries over: the critic, the action noise "
        "(policy.init_noise_std) and the optimizer start afresh; set critic_warmup.iterations "
        "in the config to train the new critic alone first",
    )
    train.add_argument(
        "--robot-buffer",
        metavar="DIR",
        help="system-in-the-loop: add beta * behaviour cloning of the actions in robot bags to PPO's "
        "loss (behaviour_cloning in the config: beta, its anneal, demonstrations policy|teleop). DIR: "
        "a bag recorded through the graph (record:=DIR), a failure bundle, or a folder of them; "
        "bags added to it during the run join between iterations",
    )
    train.add_argument(
        "--adapt-from",
        metavar="BAGS",
        nargs="+",
        help="domain adaptation (DANN): align the actor's features of simulated observations with "
        "those of the robot's, rebuilt from these bags (recorded with record:=DIR, failure bundles, "
        "or folders of them), through a gradient-reversal domain classifier "
        "(domain_adaptation in the config: lambda, schedule). Logged: Loss/domain_adaptation, "
        "domain_adaptation/classifier_accuracy (toward 50 %%), domain_adaptation/feature_mmd",
    )
    train.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")
    train.set_defaults(func=cmd_train)

    export = sub.add_parser(
        "export",
        formatter_class=_Formatter,
        help="export a checkpoint as a self-contained ONNX policy file",
        description="Write the checkpoint's actor (observation normalizer included) as ONE ONNX file with\n"
        "sim2real.* metadata (robot, joints, gains, observation layout, action mapping, training\n"
        "config, randomization, source commit), after checking onnxruntime against torch on\n"
        "1000 observations. A checkpoint with NaN/inf weights is refused.",
        epilog="examples:\n  sim2real export runs/reach/model_300.pt -o policies/panda_reach.onnx\n"
        "  sim2real export runs/reach          # latest checkpoint -> runs/reach/policy.onnx\n",
    )
    export.add_argument("checkpoint", metavar="CHECKPOINT", help="model_<iteration>.pt, or a run folder (latest)")
    export.add_argument("-o", "--output", help="policy file to write (default: policy.onnx beside the checkpoint)")
    export.add_argument("--json", action="store_true", help="print the result as JSON")
    export.set_defaults(func=cmd_export)

    evaluate = sub.add_parser(
        "eval",
        formatter_class=_Formatter,
        help="evaluate a policy file in simulation: SR, returns, domain gap",
        description="Run the ONNX policy (through onnxruntime, as on the robot) for N episodes per world set\n"
        "and report success rate, mean and worst-5 % return, task metrics and, for two or more\n"
        "world sets, the domain gap Delta = R_b - R_a and GapRatio = |R_b - R_a| / |R_a|.\n"
        "World sets: nominal (no randomization), dr (the policy's training randomization),\n"
        "or a randomization name/YAML. Episode k uses seed + k: reports are reproducible.\n"
        "--engine mujoco runs the same episodes in MuJoCo (sim2sim): another contact model,\n"
        "integrator and IMU than the PyBullet the policy trained in, the check to pass before hardware.",
        epilog="examples:\n  sim2real eval runs/reach/policy.onnx --worlds nominal dr --episodes 50\n"
        "  sim2real eval policies/go2_walk.onnx --engine mujoco --worlds nominal go2_reference --episodes 20\n"
        "  sim2real eval policies/go2_walk.onnx --suite go2_walk --engine mujoco --worlds nominal "
        "go2_takeover_stress --episodes 1\n"
        "  sim2real eval policies/go2_walk.onnx --suite go2_walk --scenarios stand_still turn_left_0.6 "
        "--episodes 3\n"
        "  sim2real eval policies/go2_walk.onnx --suite go2_walk --worlds go2_reference --ablate "
        "--scenarios forward_0.3 left_0.3\n"
        "  sim2real eval policy.onnx --worlds nominal --worlds config/randomization/go2_reference.yaml "
        "--episodes 100 --json --plot gap.png\n",
    )
    evaluate.add_argument("policy", metavar="POLICY", help="policy file (.onnx from sim2real export)")
    evaluate.add_argument(
        "--worlds",
        nargs="+",
        action="extend",
        metavar="SET",
        help="world sets: nominal | dr | NAME | FILE.yaml (default: nominal dr)",
    )
    evaluate.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="episodes per world set (default 50); with --suite, per scenario and world set (default 1)",
    )
    evaluate.add_argument("--seed", type=int, default=0, help="episode k starts from seed + k")
    evaluate.add_argument("--workers", type=int, default=2, help="processes running episodes (0: this one)")
    evaluate.add_argument("--difficulty", type=float, default=1.0, help="task difficulty in [0, 1]")
    _add_ray_option(evaluate, "the episodes run on Ray, --workers actors at a time (same results)")
    evaluate.add_argument(
        "--engine",
        choices=ENGINES,
        default=DEFAULT_ENGINE,
        help="physics engine of the episodes (mujoco: sim2sim against another engine)",
    )
    evaluate.add_argument(
        "--model",
        metavar="MODEL",
        help="with --engine mujoco: another robot model than the profile's, a URDF/MJCF path or "
        "example-robot-data:go2 (an independently written Go2: pip install -e '.[reality]')",
    )
    evaluate.add_argument(
        "--suite",
        metavar="NAME",
        help="run an evaluation suite instead (config/eval/NAME.yaml or a path): the deployed "
        "stack (runtime, supervisor, estimator) through named scenarios of commands; one "
        "table of falls, tracking, feet, drift, takeover height, torque saturation and "
        "estimator error per scenario; JSON and plot in runs/eval/. --episodes then counts "
        "episodes per scenario and world set (default of --worlds: nominal)",
    )
    evaluate.add_argument("--scenarios", nargs="+", metavar="NAME", help="with --suite: only these scenarios")
    evaluate.add_argument(
        "--require-pass",
        action="store_true",
        help="with --suite: exit 1 unless every scenario passes its targets (for CI)",
    )
    evaluate.add_argument(
        "--ablate",
        action="store_true",
        help="with --suite: run each randomized world set's draws again once per group of conditions "
        "(terrain, ground friction, mass, motors, latency, joint losses, sensor noise) with that group "
        "nominal, as world sets '<set> minus <group>', and say per set how many scenario runs pass with "
        "each group nominal: which condition costs a scenario. Diagnostics: --require-pass, the pass "
        "count and the plot judge the world sets asked for",
    )
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON (per-episode returns too)")
    evaluate.add_argument(
        "--plot",
        metavar="PNG",
        help="where to write the histogram and box plot of the returns (default: runs/eval/<policy name>_returns.png)",
    )
    evaluate.add_argument("--no-plot", action="store_true", help="write no plot")
    evaluate.add_argument("--no-progress", action="store_true", help="no progress bar")
    evaluate.set_defaults(func=cmd_eval)

    select = sub.add_parser(
        "select",
        formatter_class=_Formatter,
        help="export the best of a run's last checkpoints, by evaluation",
        description="Export a training run's last --last checkpoints, evaluate each on the same episodes and\n"
        "export the best: the highest success rate on its weakest world set, then that set's mean\n"
        "return; a tie goes to the later checkpoint. Under randomization the success rate swings\n"
        "between checkpoints (the Go2 recipe, seed 1: 96 %, 80 %, 88 % at 1100, 1200, 1300), so the\n"
        "file to ship is chosen this way. The chosen seed is used for choosing: evaluate the\n"
        "result again on other seeds before believing its figure.",
        epilog="examples:\n  sim2real select runs/go2 --worlds nominal config/randomization/go2_reference.yaml\n"
        "  sim2real select runs/reach --last 3 --episodes 100 -o policies/panda_reach.onnx\n",
    )
    select.add_argument("run", help="training run folder (model_<iteration>.pt files)")
    select.add_argument(
        "--worlds",
        nargs="+",
        default=["nominal", "dr"],
        help="world sets, as sim2real eval takes them (dr: the run's own randomization)",
    )
    select.add_argument("--last", type=int, default=5, help="how many of the newest checkpoints to compare")
    select.add_argument("--episodes", type=int, default=50, help="episodes per world set and checkpoint")
    select.add_argument("--seed", type=int, default=0, help="seed of the first episode (the same for every checkpoint)")
    select.add_argument("--workers", type=int, default=2, help="evaluation processes (0: this one)")
    select.add_argument("--difficulty", type=float, default=1.0, help="task difficulty in [0, 1]")
    _add_ray_option(select, "the evaluations run on Ray, --workers actors at a time (same results)")
    select.add_argument("-o", "--output", help="where to write the chosen policy (default: RUN/policy.onnx)")
    select.add_argument("--json", action="store_true", help="print every candidate's figures as JSON")
    select.add_argument("--no-progress", action="store_true", help="no progress bars")
    select.set_defaults(func=cmd_select)

    from sim2real.cli import failures, pipeline
    from sim2real.cli import preflight as preflight_cli
    from sim2real.cli import prior as prior_cli
    from sim2real.cli.latency import add_dr_from_latency

    failures.add_parser(sub, _Formatter)
    preflight_cli.add_parser(sub, _Formatter)
    pipeline.add_parser(sub, _Formatter)
    prior_cli.add_parser(sub, _Formatter)
    add_sysid_commands(sub, _Formatter)  # sysid record|fit|weigh|simulate
    dr = sub.add_parser(
        "dr",
        formatter_class=_Formatter,
        help="make domain-randomization configs from measurements",
        description="Make domain-randomization configs from what was measured on the robot.",
        epilog="examples:\n  sim2real dr from-sysid config/identified/panda.yaml "
        "-o config/randomization/panda_identified.yaml\n"
        "  sim2real dr from-latency latency.jsonl -o config/randomization/robot_latency.yaml\n",
    )
    dr_sub = dr.add_subparsers(dest="dr_command", required=True, metavar="SOURCE")
    add_dr_from_sysid(dr_sub, _Formatter)
    add_dr_from_latency(dr_sub, _Formatter)
    return parser


_MAIN_PID = os.getpid()


def _interrupt(signum, frame) -> None:
    if os.getpid() != _MAIN_PID:
        # A forked child inherits this handler (our pools start theirs from a spawn or a fork
        # server, but a fork may come from elsewhere); a pool ends its workers with SIGTERM,
        # which must end them quietly, not as a KeyboardInterrupt traceback.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise KeyboardInterrupt


def _show_warning(message, category, filename, lineno, file=None, line=None, _default=warnings.showwarning):
    """A warning meant for the user (a damaged bag read in part) reads as one line, without the
    source line Python's default shows."""
    if issubclass(category, BagSalvagedWarning):
        print(f"warning: {message}", file=file or sys.stderr)
    else:
        _default(message, category, filename, lineno, file, line)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    warnings.showwarning = _show_warning
    # SIGTERM (kill, a systemd stop, a CI timeout) takes the Ctrl-C path: the node processes a
    # command started are stopped and a training run saves its checkpoint. Without it they ran on.
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None
    try:
        return args.func(args)
    except Sim2RealError as exc:  # bad input exits 2, work that could not be done 1
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    finally:
        if main_thread and previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    raise SystemExit(main())
