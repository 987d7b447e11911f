#!/usr/bin/env python3
"""Physics steps per second: SimWorld against the bare PyBullet loop it wraps.

The baseline is the least a torque-controlled PyBullet simulation can do per step:
one getJointStates, a numpy PD, one setJointMotorControlArray(TORQUE_CONTROL), one
stepSimulation, on the same URDF and ground. Subjects run interleaved, round after
round, in one process, and the medians are compared, so machine load drifts affect
both alike. Target: SimWorld.step >= 0.8 x baseline.

Example:
    PYTHONPATH=src python benchmarks/sim_step.py --robots go2 panda --steps 2000 --rounds 7

Second part: the sensing rate the ``sim_robot`` node sustains in real time (Go2 at
500 Hz), in its own process as `sim2real up` runs it, measured from its own loop
statistics (/diagnostics) and from the /joint_states a subscriber receives. Target:
< 5 % missed periods on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Callable, Protocol

import numpy as np
import pybullet as pb

from sim2real.core.robot_profile import RobotProfile, load_profile
from sim2real.sim.world import SimWorld

BASELINE = "raw_pybullet"


class Subject(Protocol):
    def run(self, steps: int) -> None: ...
    def close(self) -> None: ...


class RawPyBulletLoop:
    """The baseline: the minimum torque-control loop, written directly against PyBullet."""

    def __init__(self, profile: RobotProfile):
        c = self.client = pb.connect(pb.DIRECT)
        pb.setGravity(0, 0, -9.81, physicsClientId=c)
        pb.setPhysicsEngineParameter(fixedTimeStep=profile.physics_period, physicsClientId=c)
        pb.createMultiBody(0, pb.createCollisionShape(pb.GEOM_PLANE, physicsClientId=c), physicsClientId=c)
        self.robot = pb.loadURDF(
            str(profile.urdf),
            (0, 0, profile.spawn_height),
            useFixedBase=profile.fixed_base,
            flags=pb.URDF_USE_INERTIA_FROM_FILE,
            physicsClientId=c,
        )
        names = {
            pb.getJointInfo(self.robot, i, physicsClientId=c)[1].decode(): i
            for i in range(pb.getNumJoints(self.robot, physicsClientId=c))
        }
        self.ids = [names[n] for n in profile.joint_names]
        for joint, angle in zip(self.ids, profile.default_positions):
            pb.resetJointState(self.robot, joint, float(angle), 0.0, physicsClientId=c)
        pb.setJointMotorControlArray(
            self.robot, self.ids, pb.VELOCITY_CONTROL, forces=[0.0] * len(self.ids), physicsClientId=c
        )
        self.target, self.kp, self.kd = profile.default_positions, profile.kp, profile.kd
        self.limit = profile.effort_limits

    def run(self, steps: int) -> None:
        c, robot, ids = self.client, self.robot, self.ids
        target, kp, kd, limit = self.target, self.kp, self.kd, self.limit
        for _ in range(steps):
            states = pb.getJointStates(robot, ids, physicsClientId=c)
            q = np.array([s[0] for s in states])
            dq = np.array([s[1] for s in states])
            tau = np.clip(kp * (target - q) - kd * dq, -limit, limit)
            pb.setJointMotorControlArray(robot, ids, pb.TORQUE_CONTROL, forces=tau.tolist(), physicsClientId=c)
            pb.stepSimulation(physicsClientId=c)

    def close(self) -> None:
        pb.disconnect(physicsClientId=self.client)


class SimWorldSingleSteps:
    """SimWorld advanced one physics step per call, as a control loop at the physics rate does."""

    def __init__(self, profile: RobotProfile):
        self.world = SimWorld(profile)
        self.world.command(profile.default_positions)

    def run(self, steps: int) -> None:
        step = self.world.step
        for _ in range(steps):
            step()

    def close(self) -> None:
        self.world.close()


class SimWorldBatch(SimWorldSingleSteps):
    """SimWorld advanced by all steps in one call, as a training env with decimation does."""

    def run(self, steps: int) -> None:
        self.world.step(steps)


SUBJECTS: dict[str, Callable[[RobotProfile], Subject]] = {
    BASELINE: RawPyBulletLoop,
    "sim_world.step(1)": SimWorldSingleSteps,
    "sim_world.step(n)": SimWorldBatch,
}


def measure_rates(subjects: dict[str, Subject], steps: int, rounds: int, warmup: int = 500) -> dict[str, list[float]]:
    """Steps per second of each subject per round; subjects take turns within every round."""
    for subject in subjects.values():
        subject.run(warmup)  # let the robot settle so every round times a similar contact state
    rates: dict[str, list[float]] = {name: [] for name in subjects}
    for _ in range(rounds):
        for name, subject in subjects.items():
            start = time.perf_counter()
            subject.run(steps)
            rates[name].append(steps / (time.perf_counter() - start))
    return rates


def benchmark_robot(robot: str, steps: int, rounds: int, subjects: list[str] | None = None) -> dict:
    """Median steps/s of the chosen subjects on one robot, each with its ratio to the baseline."""
    profile = load_profile(robot)
    chosen = subjects or list(SUBJECTS)
    if BASELINE not in chosen:
        chosen = [BASELINE, *chosen]
    built = {name: SUBJECTS[name](profile) for name in chosen}
    try:
        rates = measure_rates(built, steps, rounds)
    finally:
        for subject in built.values():
            subject.close()
    medians = {name: statistics.median(r) for name, r in rates.items()}
    return {
        "robot": robot,
        "steps_per_round": steps,
        "rounds": rounds,
        "physics_period": profile.physics_period,
        "subjects": {
            name: {
                "median_steps_per_s": medians[name],
                "min": min(rates[name]),
                "max": max(rates[name]),
                "ratio_to_baseline": medians[name] / medians[BASELINE],
                "real_time_factor": medians[name] * profile.physics_period,
            }
            for name in chosen
        },
    }


def print_report(result: dict, target: float) -> None:
    print(
        f"\n{result['robot']}: {result['rounds']} rounds x {result['steps_per_round']} steps, "
        f"physics period {result['physics_period'] * 1e3:g} ms"
    )
    print(f"  {'subject':<22}{'median steps/s':>15}{'min':>10}{'max':>10}{'ratio':>8}{'x real time':>13}")
    for name, row in result["subjects"].items():
        flag = "" if name == BASELINE or row["ratio_to_baseline"] >= target else f"  < {target} target"
        print(
            f"  {name:<22}{row['median_steps_per_s']:>15,.0f}{row['min']:>10,.0f}{row['max']:>10,.0f}"
            f"{row['ratio_to_baseline']:>8.2f}{row['real_time_factor']:>13.1f}{flag}"
        )


def measure_sim_robot(robot: str, seconds: float) -> dict:
    """Run sim_robot in real time for ``seconds`` and report its loop timing and delivered rate."""
    import os
    import threading

    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    from sim2real.graph.plan import make_plan
    from sim2real.graph.processes import GraphProcesses
    from sim2real.nodes import qos
    from sim2real.nodes.dds_transport import use_graph_transport

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    use_graph_transport()  # this probe on the nodes' own DDS transport
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("sim_step_benchmark", context=context)
    stamps: list[float] = []
    diagnostics: list[dict[str, str]] = []
    node.create_subscription(
        JointState, "/joint_states", lambda m: stamps.append(time.monotonic()), qos.SENSOR_SUBSCRIBE
    )
    node.create_subscription(
        DiagnosticArray,
        "/diagnostics",
        lambda m: diagnostics.extend(
            {kv.key: kv.value for kv in s.values} for s in m.status if s.name.startswith("sim_robot")
        ),
        10,
    )
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    with open(os.devnull, "w") as quiet, GraphProcesses(make_plan(robot=robot), output=quiet) as graph:
        deadline = time.monotonic() + 30
        while not stamps and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # start-up transients (imports, first contacts) are not the steady state
        start_count, start = len(stamps), time.monotonic()
        first_diag = len(diagnostics)
        time.sleep(seconds)
        received = len(stamps) - start_count
        elapsed = time.monotonic() - start
        exited = graph.exited()
    executor.shutdown()
    node.destroy_node()
    rclpy.shutdown(context=context)
    if exited or not diagnostics[first_diag:]:
        raise RuntimeError(f"sim_robot did not run (exited: {exited})")
    last = diagnostics[-1]
    profile = load_profile(robot)
    return {
        "robot": robot,
        "seconds": elapsed,
        "target_hz": 1 / profile.sensing_period,
        "received_hz": received / elapsed,
        "loop_missed_fraction": float(last["missed_fraction"]),
        "loop_ticks": int(last["ticks"]),
        "lateness_p50_ms": float(last["lateness_p50_ms"]),
        "lateness_p99_ms": float(last["lateness_p99_ms"]),
        "lateness_max_ms": float(last["lateness_max_ms"]),
    }


def print_node_report(result: dict) -> None:
    verdict = "ok" if result["loop_missed_fraction"] < 0.05 else "ABOVE the 5 % target"
    print(f"\nsim_robot ({result['robot']}) real time, {result['seconds']:.1f} s at {result['target_hz']:.0f} Hz:")
    print(f"  /joint_states received       {result['received_hz']:8.1f} Hz")
    print(f"  missed periods (loop)        {100 * result['loop_missed_fraction']:8.2f} %   ({verdict})")
    print(
        f"  lateness p50 / p99 / max     {result['lateness_p50_ms']:.3f} / {result['lateness_p99_ms']:.3f} / "
        f"{result['lateness_max_ms']:.3f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example: PYTHONPATH=src python benchmarks/sim_step.py --robots go2 --steps 2000 --rounds 7",
    )
    parser.add_argument("--robots", nargs="+", default=["go2", "panda"], help="robot profiles (default: go2 panda)")
    parser.add_argument("--steps", type=int, default=2000, help="physics steps per subject per round")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds; medians are reported")
    parser.add_argument(
        "--subjects",
        nargs="+",
        choices=list(SUBJECTS),
        default=None,
        help=f"what to time besides the baseline (default: all of {list(SUBJECTS)})",
    )
    parser.add_argument("--target", type=float, default=0.8, help="ratio to flag below (default 0.8)")
    parser.add_argument("--node-robot", default="go2", help="robot for the sim_robot rate part (default go2)")
    parser.add_argument(
        "--node-seconds",
        type=float,
        default=10.0,
        help="seconds to run sim_robot in real time; 0 skips that part (default 10)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    args = parser.parse_args(argv)
    results = [benchmark_robot(robot, args.steps, args.rounds, args.subjects) for robot in args.robots]
    node = measure_sim_robot(args.node_robot, args.node_seconds) if args.node_seconds > 0 else None
    if args.json:
        print(json.dumps({"physics": results, "sim_robot": node}, indent=2))
    else:
        for result in results:
            print_report(result, args.target)
        if node:
            print_node_report(node)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
