#!/usr/bin/env python3
"""How the supervisor stops a Go2 walking the shipped policy: a hold when the policy goes silent,
and the category-1 stop of a damp or an e-stop, across the commands the policy was trained on.

Each stop (``sim2real.evaluate.hold_trial``): the policy walks at a command (episode seed s, stopped after
100 + 7 s policy periods, so the stops fall at different phases of the stride), then
- ``silent``: the policy goes silent; the supervisor trips on policy_stale after its deadline
  and stops as config/safety/go2.yaml says (the category-1 stop; the ``hold`` variants hold
  instead, as hold_pose and hold_duration say);
- ``damp`` / ``estop``: an operator's damp or e-stop: 0.3 s to the stand pose, then the
  descent to damp_pose over damp_duration, then damping.
The supervisor's commands alone drive the robot for 3.5 s. A stop is **bad** when the trunk ends
tilted over 0.5 rad, or (a hold) the base ends under 0.15 m (a hold the supervisor went on to
damp included), or (a damped stop, which ends lying by design) the trunk's centre reaches the
ground faster than 0.5 m/s. The worst tilt during the stop is printed beside it.

`--compare` also runs the variants a change is judged against: a silent policy held (hold_pose
stand, then last), and damping at once (damp_duration 0, targets = measured positions).

Example:
    PYTHONPATH=src .venv/bin/python benchmarks/supervisor_hold.py --stops 20 --compare
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
from tqdm import tqdm

from sim2real.core.safety_config import load_safety_config
from sim2real.evaluate.hold_trial import silent_policy_held, stop_mid_trot

COMMANDS = {
    "ahead 0.5": (0.5, 0.0, 0.0),
    "ahead 1.0": (1.0, 0.0, 0.0),
    "back 0.5": (-0.5, 0.0, 0.0),
    "turn 0.6": (0.5, 0.0, 0.6),
    "side 0.3": (0.2, 0.3, 0.0),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stops", type=int, default=20, help="stops per command and stop kind (default 20)")
    parser.add_argument(
        "--commands",
        nargs="+",
        default=list(COMMANDS),
        choices=list(COMMANDS),
        help="walking commands to stop from (default: all)",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also run the silent policy held (to the stand pose, then hold_pose last) and immediate damping, "
        "the variants the shipped stops beat",
    )
    parser.add_argument(
        "--durations",
        type=float,
        nargs="+",
        default=[],
        help="also hold to the stand pose in each of these hold_duration values (s)",
    )
    parser.add_argument(
        "--policy",
        help="Go2 walk policy file (default: policies/go2_walk.onnx): measure a candidate before shipping it",
    )
    args = parser.parse_args()
    shipped = load_safety_config("go2")
    silent = shipped.checks["policy_stale"].response.name.lower()
    variants = [
        ("silent", "shipped silent", shipped),
        ("damp", "shipped damp", shipped),
        ("estop", "shipped e-stop", shipped),
    ]
    variants += [
        ("silent", f"hold stand {d:g} s", silent_policy_held(shipped, hold_pose="stand", hold_duration=d))
        for d in args.durations
    ]
    if args.compare:
        variants += [
            ("silent", "hold stand", silent_policy_held(shipped, hold_pose="stand")),
            ("silent", "hold_pose last", silent_policy_held(shipped, hold_pose="last")),
            ("damp", "damp at once", dataclasses.replace(shipped, damp_duration=0.0)),
        ]
    stops = [(seed, 100 + 7 * seed) for seed in range(2, 2 + args.stops)]
    print(
        f"{args.policy or 'policies/go2_walk.onnx'}: {len(stops)} stops per cell; silent policy: {silent}; "
        f"hold {shipped.hold_pose} "
        f"{shipped.hold_duration:g} s, damp descent {shipped.damp_duration:g} s; bad = tilt > 0.5 rad, a hold's "
        "base < 0.15 m, a damped stop's landing > 0.5 m/s"
    )
    print(
        f"{'stop':16s} {'command':10s} {'bad':>6s} {'tilt end med/max rad':>21s} {'tilt worst med/max':>19s} "
        f"{'height end med m':>17s} {'landing med/max m/s':>20s}"
    )
    totals: dict[str, list[int]] = {}
    with tqdm(total=len(variants) * len(args.commands) * len(stops), desc="stops", leave=False) as progress:
        for stop, name, config in variants:
            for command_name in args.commands:
                outcomes = []
                for seed, steps in stops:
                    outcomes.append(
                        stop_mid_trot(
                            seed,
                            steps,
                            config,
                            hold_seconds=3.5,
                            policy_path=args.policy,
                            command=COMMANDS[command_name],
                            stop=stop,
                        )
                    )
                    progress.update()
                bad = sum(o.bad() for o in outcomes)
                totals.setdefault(name, [0, 0])
                totals[name][0] += bad
                totals[name][1] += len(outcomes)
                tilt = np.array([o.final_tilt for o in outcomes])
                worst = np.array([o.worst_tilt for o in outcomes])
                height = np.array([o.final_height for o in outcomes])
                landing = np.array([o.impact_speed for o in outcomes])
                tqdm.write(
                    f"{name:16s} {command_name:10s} {bad:3d}/{len(outcomes):<2d} {np.median(tilt):10.2f} / "
                    f"{tilt.max():.2f} {np.median(worst):12.2f} / {worst.max():.2f} {np.median(height):14.2f} "
                    f"{np.median(landing):12.2f} / {landing.max():.2f}"
                )
    for name, (bad, total) in totals.items():
        print(f"{name:16s} all commands: {bad}/{total} bad")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
