#!/usr/bin/env python3
"""State estimator figures against PyBullet ground truth while the Go2 trots.

Rows:
  replay      the scripted open-loop trot (sim2real.sim.scripted_gait; about 0.5 m/s, it
              trots backwards) recorded with encoder and IMU white noise, replayed through
              the LegKalmanFilter with constant IMU biases added: base velocity RMSE
              (target <= 0.05 m/s), position drift as % of distance (target <= 2 %),
              contact agreement with "foot bears > 25 N", compute time per IMU sample; per
              sample and per batch of 5 samples (the node's filter_update:=batch) side by side.
  node        sim_robot (real time, 500 Hz IMU) and state_estimator as processes, as
              `sim2real up` runs them: IMU samples filtered per second of sensor and of wall
              time, the node's compute time per filter step (a batch of samples in real time)
              and the sample rate one core could sustain
              (target >= 500 Hz). The load average is printed: other work on a shared
              machine shows in these.

Examples:
    .venv/bin/python benchmarks/estimation.py                  # both, ~40 s
    .venv/bin/python benchmarks/estimation.py --only replay --seconds 20 --json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time


def replay_rows(seconds: float, seed: int, batches=(1, 5)) -> dict[int, dict]:
    """The same recorded trot through the filter per IMU sample and per batch of samples
    (filter_update:=batch in real time: 5 samples = 10 ms at 500 Hz), side by side."""
    from sim2real.core.estimation.config import load_estimation_config
    from sim2real.core.estimation.legged import LegKalmanFilter
    from sim2real.core.robot_profile import load_profile
    from sim2real.sim.conditions import PhysicalConditions
    from sim2real.sim.scripted_gait import record_trot, replay_estimator
    from sim2real.sim.world import SimWorld

    profile = load_profile("go2")
    noise = PhysicalConditions(
        joint_position_noise=0.002, joint_velocity_noise=0.05, gyro_noise=0.01, accelerometer_noise=0.1
    )
    with SimWorld(profile, noise, seed=seed) as world:
        recording = record_trot(world, seconds).arrays()
    rows = {}
    for batch in batches:
        estimator = LegKalmanFilter(profile, load_estimation_config("go2"))
        result = replay_estimator(
            estimator, recording, gyro_bias=(0.002, -0.003, 0.002), accel_bias=(0.05, -0.05, 0.08), batch=batch
        )
        metrics = result.metrics(recording)
        metrics["call_ms"] = result.seconds_per_step * 1e3  # per filter call: one sample or one batch
        metrics["per_sample_ms"] = result.seconds_per_step * 1e3 / batch
        metrics["divergence_reported"] = bool(result.diverged.any())
        rows[batch] = metrics
    return rows


def node_row(seconds: float) -> dict:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    from sim2real.graph.plan import make_plan
    from sim2real.graph.processes import GraphProcesses
    from sim2real.nodes.dds_transport import use_graph_transport

    plan = make_plan(robot="go2", estimator="true")
    plan = dataclasses.replace(plan, nodes=tuple(n for n in plan.nodes if n.name in ("sim_robot", "state_estimator")))
    use_graph_transport()  # this probe on the nodes' own DDS transport
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("estimation_benchmark", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    reports: list[dict] = []

    def on_diagnostics(msg):
        for status in msg.status:
            if status.name.startswith("state_estimator"):
                reports.append({kv.key: kv.value for kv in status.values})

    node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 10)
    with open(os.devnull, "w") as sink, GraphProcesses(plan, output=sink):
        deadline = time.monotonic() + seconds + 15.0
        while time.monotonic() < deadline and len(reports) < seconds + 2:
            executor.spin_once(timeout_sec=0.1)
    executor.shutdown()
    node.destroy_node()
    rclpy.shutdown(context=context)
    steady = reports[2:] or reports  # the first windows include start-up
    if not steady:
        return {"error": "no state_estimator diagnostics"}

    def median(key):
        values = sorted(float(r[key]) for r in steady if key in r)
        return values[len(values) // 2] if values else float("nan")

    return {
        "rate_hz": median("rate_hz"),
        "wall_rate_hz": median("wall_rate_hz"),
        "step_p50_ms": median("step_p50_ms"),
        "step_p99_ms": median("step_p99_ms"),
        "capacity_hz": median("capacity_hz"),
        "samples_per_step": median("samples_per_step"),
        "windows": len(steady),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("replay", "node"), help="run one row")
    parser.add_argument("--seconds", type=float, default=10.0, help="trot / node run length")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = {"load_average": os.getloadavg()}
    if args.only in (None, "replay"):
        out["replay"] = replay_rows(args.seconds, args.seed)
    if args.only in (None, "node"):
        out["node"] = node_row(args.seconds)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"load average {out['load_average'][0]:.1f} (2 cores)")
    if "replay" in out:
        rows = out["replay"]
        first = rows[1]
        print(
            f"replay ({args.seconds:.0f} s trot, mean speed {first['mean_speed_mps']:.2f} m/s, "
            f"{first['distance_m']:.2f} m); filter per IMU sample | per batch of 5 (filter_update:=batch)"
        )
        batched = rows[5]
        for label, key, scale, unit, target in (
            ("base velocity RMSE", "velocity_rmse_mps", 1.0, "m/s", "target <= 0.05"),
            ("position drift", "drift_percent", 1.0, "% of distance", "target <= 2 %"),
            ("contact agreement", "contact_agreement", 100.0, "%", ""),
            ("compute per IMU sample", "per_sample_ms", 1.0, "ms", "core filter, this process"),
        ):
            a, b = first[key] * scale, batched[key] * scale
            print(f"  {label:24s} {a:8.4f} | {b:8.4f} {unit:14s} ratio {b / a if a else float('nan'):5.2f}  {target}")
        print(f"  divergence reported      {first['divergence_reported']} | {batched['divergence_reported']}")
    if "node" in out:
        n = out["node"]
        if "error" in n:
            print(f"node: {n['error']}")
        else:
            print(f"node (sim_robot real time + state_estimator, {n['windows']} one-second windows, medians)")
            print(
                f"  IMU samples filtered / s sensor time {n['rate_hz']:.0f} Hz, / s wall time "
                f"{n['wall_rate_hz']:.0f} Hz"
            )
            print(
                f"  filter step ({n['samples_per_step']:.1f} samples) p50 {n['step_p50_ms']:.3f} ms, p99 "
                f"{n['step_p99_ms']:.3f} ms -> capacity {n['capacity_hz']:.0f} samples/s (target >= 500)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
