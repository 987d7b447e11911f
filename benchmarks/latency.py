#!/usr/bin/env python3
"""Tracking error of the shipped reach policy under injected actuation latency, with and without
compensation, and the latency the runtime measured.

Each cell is one lockstep run of the whole graph (sim_robot with `latency` injected ->
policy_runtime -> safety_supervisor -> sim_robot, demo_script sending the reach goals), so
the figures do not depend on the machine's load; a run takes 1-2 minutes of wall time.
Reach error: end effector to goal, mean over the settled part of each goal (1.5 s after it
changes), and the mean final distance per goal. The runtime's measured latencies (medians of
its once-a-second estimates) are printed: policy command -> motors (the whole path, which the
compensation covers beyond what the policy was trained with) and the driver's share
(/joint_commands -> motors, where the sim injects its latency). The safety config is the
shipped one.

--offline runs the same policy, goals and injected latency in one process without ROS
(SimWorld stepped in the lockstep order, compensation by the runtime's StatePredictor): no
supervisor, no scheduling, bitwise repeatable, a few seconds per cell.

Run on a DDS domain of its own if anything else on the machine runs ROS 2 graphs:
    ROS_DOMAIN_ID=57 .venv/bin/python benchmarks/latency.py
    ROS_DOMAIN_ID=57 .venv/bin/python benchmarks/latency.py --latencies 0.02 --duration 10 --json
"""

from __future__ import annotations

import argparse
import json

from sim2real.graph.latency_trial import TRIAL_DURATION_S, reach_trial


def offline_trial(latency: float, compensation: bool, duration: float) -> dict:
    """The reach script in-process: settled reach error (m) and the largest joint speed (rad/s)."""
    import numpy as np

    from sim2real.core.command_script import REACH_SCRIPT, SETTLE_S, segment_at
    from sim2real.core.kinematics import Kinematics
    from sim2real.core.latency import StatePredictor, trained_latency
    from sim2real.core.observation import RobotSignals
    from sim2real.core.policy_slot import PolicySlot
    from sim2real.core.robot_profile import load_profile
    from sim2real.core.shipped_policies import shipped_policy
    from sim2real.sim.conditions import PhysicalConditions
    from sim2real.sim.world import SimWorld

    profile = load_profile("panda")
    policy = shipped_policy("panda")
    slot = PolicySlot(profile, [str(policy.parent)])
    horizon = max(0.0, latency - trained_latency(slot.start(policy).metadata.randomization))
    kinematics, predictor = Kinematics(profile), StatePredictor(profile)
    per = round(profile.policy_period / profile.sensing_period)
    substeps = round(profile.sensing_period / profile.physics_period)
    errors, top_speed, t = [], 0.0, 0.0
    with SimWorld(profile, PhysicalConditions(latency=latency), seed=0) as world:
        while t < duration:
            state = world.joint_state()
            index, goal = segment_at(REACH_SCRIPT, t)
            signals = RobotSignals(
                joint_position=state.position,
                joint_velocity=state.velocity,
                goal_position=np.array(goal),
                end_effector_position=kinematics.end_effector_position(state.position),
            )
            if compensation:
                signals = predictor.predict(signals, t, horizon, latency)
            targets = slot.tick(signals)
            world.command(targets)
            predictor.add_command(t, targets)
            for _ in range(per):
                world.step(substeps)
                t += profile.sensing_period
                true = world.true_joint_state()
                top_speed = max(top_speed, float(np.abs(true.velocity).max()))
                if t - REACH_SCRIPT[index][0] >= SETTLE_S:
                    errors.append(np.linalg.norm(kinematics.end_effector_position(true.position) - goal))
    return {"settled_error_m": float(np.mean(errors)), "horizon_ms": horizon * 1e3, "top_speed_rps": top_speed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latencies", type=float, nargs="+", default=[0.0, 0.01, 0.02, 0.04], help="s injected")
    parser.add_argument("--duration", type=float, default=TRIAL_DURATION_S, help="s of reach script per run")
    parser.add_argument("--offline", action="store_true", help="in one process, no ROS (see above)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    if args.offline:
        for latency in args.latencies:
            for compensation in (False, True):
                r = {
                    "latency_ms": latency * 1e3,
                    "compensation": compensation,
                    **offline_trial(latency, compensation, args.duration),
                }
                rows.append(r)
                if not args.json:
                    print(
                        f"{r['latency_ms']:5.0f} ms  compensation {'on ' if compensation else 'off'}  settled "
                        f"{r['settled_error_m'] * 100:6.2f} cm  horizon {r['horizon_ms']:5.1f} ms  "
                        f"top joint speed {r['top_speed_rps']:5.1f} rad/s",
                        flush=True,
                    )
        if args.json:
            print(json.dumps(rows))
        return 0
    for latency in args.latencies:
        measured = 0.0
        for compensation in (False, True):
            # Compensated with the latency the uncompensated run measured (the driver's share: the
            # supervisor forwards a policy command in the tick it answers), as an operator would: see
            # tests/ros/test_latency_compensation.py.
            report = reach_trial(latency, compensation, duration=args.duration, horizon=measured)
            summary, runtime = report["summary"], report.get("policy_runtime", {})
            trips = [e["last_trip"] for e in report.get("supervisor_modes", []) if e["mode"] == "DAMPING"]
            rows.append(
                {
                    "latency_ms": latency * 1e3,
                    "compensation": compensation,
                    "settled_error_m": summary.get("reach_error_settled_mean_m"),
                    "final_error_m": summary.get("reach_error_final_mean_m"),
                    "measured_actuation_ms": runtime.get("actuation_p50_ms"),
                    "measured_driver_ms": runtime.get("driver_actuation_p50_ms"),
                    "horizon_ms": runtime.get("horizon_ms"),
                    "damped": bool(trips),
                    "wall_s": report["wall_s"],
                }
            )
            if not compensation and runtime.get("driver_actuation_p50_ms"):
                measured = float(runtime["driver_actuation_p50_ms"]) * 1e-3
            if not args.json:
                r = rows[-1]
                print(
                    f"{r['latency_ms']:5.0f} ms  compensation {'on ' if compensation else 'off'}  "
                    f"settled {r['settled_error_m'] * 100:6.2f} cm  final {r['final_error_m'] * 100:6.2f} cm  "
                    f"measured: policy->motor {r['measured_actuation_ms']} ms, driver {r['measured_driver_ms']} ms  "
                    f"horizon {r['horizon_ms']} ms"
                    f"{'  (supervisor damped)' if r['damped'] else ''}",
                    flush=True,
                )
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
