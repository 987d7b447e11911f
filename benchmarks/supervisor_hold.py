#!/usr/bin/env python3
"""What the supervisor's hold does to a Go2 whose policy stops mid-trot: keep the last targets
(hold_pose: last) against moving to the stand pose (hold_pose: stand, several durations).
Which hold is best depends on the policy's gait: rerun this after shipping a new Go2 policy and
set config/safety/go2.yaml from it.

Each stop: the shipped Go2 policy walks at 0.5 m/s in SimWorld (episode seed s, stopped after
100 + 7 s policy periods, so the stops fall at different phases of the stride), the policy goes
silent, the supervisor trips on policy_stale after its deadline and holds for 3 s
(``sim2real.hold_trial``). Printed per variant: the trunk's tilt at the end (median, worst), the
base height at the end (median, lowest), how many stops ended tilted over 0.5 rad or with
the base under 0.15 m, and how many the supervisor damped when the trunk passed the base_tilt
limit (the hold could not keep it up).

Example:
    PYTHONPATH=src .venv/bin/python benchmarks/supervisor_hold.py --stops 40
"""
from __future__ import annotations

import argparse
import dataclasses

import numpy as np

from sim2real.core.safety_config import load_safety_config
from sim2real.hold_trial import stop_mid_trot


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stops", type=int, default=40, help="stops per variant (default 40)")
    parser.add_argument("--durations", type=float, nargs="+", default=[0.2, 0.3, 0.5, 0.75],
                        help="hold_duration values for hold_pose: stand (default 0.2 0.3 0.5 0.75)")
    parser.add_argument("--policy", help="Go2 walk policy file (default: policies/go2_walk.onnx): measure a "
                                         "candidate before shipping it")
    args = parser.parse_args()
    base = load_safety_config("go2")
    variants = [("last", base.hold_duration)] + [("stand", d) for d in args.durations]
    stops = [(seed, 100 + 7 * seed) for seed in range(2, 2 + args.stops)]
    print(f"{args.policy or 'policies/go2_walk.onnx'} stopped mid-trot, {len(stops)} stops per variant, policy_stale deadline "
          f"{base.checks['policy_stale']['deadline']:g} s, 3 s hold")
    print(f"{'hold':14s} {'tilt end median/worst rad':>26s} {'height end median/lowest m':>27s} {'bad':>6s} {'damped':>7s}")
    for pose, duration in variants:
        config = dataclasses.replace(base, hold_pose=pose, hold_duration=duration)
        outcomes = [stop_mid_trot(seed, steps, config, policy_path=args.policy) for seed, steps in stops]
        tilt = np.array([o.final_tilt for o in outcomes])
        height = np.array([o.final_height for o in outcomes])
        bad = int(np.sum((tilt > 0.5) | (height < 0.15)))
        damped = sum(any("base_tilt" in trip for trip in o.trips) for o in outcomes)
        name = "last" if pose == "last" else f"stand {duration:g} s"
        print(f"{name:14s} {np.median(tilt):12.2f} / {tilt.max():.2f} {np.median(height):14.2f} / {height.min():.2f}"
              f" {bad:5d}/{len(stops)} {damped:4d}/{len(stops)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
