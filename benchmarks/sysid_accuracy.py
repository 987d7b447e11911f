#!/usr/bin/env python3
"""System-identification accuracy: fit back random hidden simulator parameters.

For each of ``--sets`` random hidden parameter sets (motor strength, mass scale, Coulomb
friction, viscous damping, armature, latency) a simulated Panda runs ``--duration`` s of excitation
with sensor noise (``sim2real sysid simulate``'s recorder: same bag as ``sysid record``),
then ``sim2real sysid fit``'s simulator fit recovers them from the bag. Printed per set:
hidden vs fitted values, relative errors, latency error and fit wall time; over the sets, the
coverage of the reported standard deviations: the share of fitted values whose 95 % interval
(value +- 1.96 std) holds the hidden value, for the std the fit writes (Newey-West) and, side
by side, for the Gauss-Newton std that assumes independent residuals (95 % is right; far
less means the intervals are too narrow to trust, far more that they are too wide to use).

Targets (issue 6): relative error of motor strength, friction and mass scale <= 5 %,
latency error <= 2 ms, from <= 60 s of excitation, fit wall time <= 5 min on 2 cores.

A quadruped is recorded on a stand (``--robot go2 --suspended``, every joint at once) or
standing on its feet, one leg at a time at 0.1 rad (the recorder's defaults for each,
``sysid.excitation.excitation_defaults``; ``--legs`` and ``--amplitude`` override them).
Standing, the replay has no base state to follow, so that fit is approximate.

Example:
    PYTHONPATH=src python benchmarks/sysid_accuracy.py --sets 3 --duration 40 --json
    PYTHONPATH=src python benchmarks/sysid_accuracy.py --robot go2 --suspended
    PYTHONPATH=src python benchmarks/sysid_accuracy.py --robot go2 --sets 1
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from sim2real.core.robot_profile import load_profile
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sysid.dataset import read_bags
from sim2real.sysid.excitation import excitation_defaults, make_excitation
from sim2real.sysid.fit import FitError, FitOptions, fit_conditions
from sim2real.sysid.sim_recording import record_in_sim
from sim2real.sysid.uncertainty import Z95

RANGES = {
    "motor_strength": (0.8, 1.2),
    "mass_scale": (0.85, 1.2),
    "joint_friction": (0.1, 0.6),
    "joint_damping": (0.05, 0.4),
    "latency": (0.0, 0.02),
    "armature": (0.005, 0.05),
}
NOISE = {"joint_position_noise": 0.0005, "joint_velocity_noise": 0.01}
RELATIVE = ("motor_strength", "mass_scale", "joint_friction", "joint_damping", "armature")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", default="panda")
    parser.add_argument(
        "--suspended",
        action="store_true",
        help="a quadruped recorded hanging on a stand (sysid record --suspended), as the fit replays it",
    )
    parser.add_argument("--sets", type=int, default=3, help="random hidden parameter sets")
    parser.add_argument("--duration", type=float, default=40.0, help="excitation seconds per set (<= 60)")
    parser.add_argument("--kind", default="multisine", choices=("fourier", "multisine", "chirp"))
    parser.add_argument("--amplitude", type=float, help="rad (default: the recorder's for the robot)")
    parser.add_argument("--legs", type=int, choices=(0, 1, 2), help="legs at a time (default: the recorder's)")
    parser.add_argument("--train-seconds", type=float, default=8.0, help="training seconds replayed per candidate")
    parser.add_argument(
        "--std-bandwidth",
        type=float,
        default=FitOptions.std_bandwidth,
        help="s of lags in the Newey-West std (the fit's default); to compare spans",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    profile = load_profile(args.robot)
    rng = np.random.default_rng(args.seed)
    amplitude, legs = excitation_defaults(profile, args.suspended)
    amplitude = amplitude if args.amplitude is None else args.amplitude
    legs = legs if args.legs is None else args.legs
    excitation = make_excitation(
        profile, args.kind, duration=args.duration, seed=args.seed, amplitude=amplitude, legs=legs
    )
    rows, refused = [], []
    with tempfile.TemporaryDirectory(prefix="sysid-bench-") as tmp:
        for k in range(args.sets):
            hidden = {name: float(rng.uniform(*bounds)) for name, bounds in RANGES.items()}
            bag = record_in_sim(
                profile,
                excitation,
                Path(tmp) / f"set{k}",
                PhysicalConditions(**hidden, **NOISE),
                seed=args.seed + k,
                suspended=args.suspended,
            )
            started = time.monotonic()
            try:
                result = fit_conditions(
                    profile,
                    read_bags([bag], profile),
                    FitOptions(
                        workers=args.workers, train_seconds=args.train_seconds, seed=k, std_bandwidth=args.std_bandwidth
                    ),
                )
            except FitError as exc:  # e.g. a standing Go2 the excitation turned over
                # On stderr: with --json, stdout carries the JSON alone; the sets refused are in it.
                print(f"set {k}: refused after {time.monotonic() - started:.0f} s: {exc}", file=sys.stderr, flush=True)
                refused.append({"set": k, "hidden": hidden, "refused": str(exc)})
                continue
            wall = time.monotonic() - started
            errors = {name: abs(result.values[name] - hidden[name]) / hidden[name] for name in RELATIVE}
            errors["latency_ms"] = abs(result.values["latency"] - hidden["latency"]) * 1e3
            # Latency's std is its grid's quantisation: not an interval to check coverage of.
            z_scores = {
                method: {n: abs(result.values[n] - hidden[n]) / max(stds[n], 1e-12) for n in RELATIVE}
                for method, stds in (("newey_west", result.std), ("gauss_newton", result.std_gauss_newton))
            }
            rows.append(
                {
                    "set": k,
                    "hidden": hidden,
                    "fitted": result.values,
                    "errors": errors,
                    "std": result.std,
                    "std_gauss_newton": result.std_gauss_newton,
                    "z": z_scores,
                    "heldout_rmse_mrad": float(np.sqrt(np.mean(result.heldout_rmse_after**2)) * 1e3),
                    "evaluations": result.evaluations,
                    "fit_wall_s": wall,
                }
            )
            if not args.json:
                print(
                    f"set {k}: "
                    + "  ".join(f"{n} {hidden[n]:.4g}->{result.values[n]:.4g}" for n in RANGES)
                    + f"  ({wall:.0f} s)",
                    flush=True,
                )
    if args.json:
        shares = coverage(rows) if rows else None  # none fitted: no coverage (NaN is not JSON)
        print(json.dumps({"fitted": rows, "refused": refused, "coverage_95": shares}, indent=2))
        return
    if not rows:
        print("no set was fitted (each refusal is printed above)")
        return
    header = (
        f"{'set':>3} {'strength %':>10} {'mass %':>7} {'friction %':>10} {'damping %':>9} {'armature %':>10} "
        f"{'latency ms':>10} {'held-out mrad':>13} {'fit s':>6}"
    )
    stand = " on a stand (suspended)" if args.suspended else ("" if profile.fixed_base else " standing")
    print(
        f"\n{args.robot}{stand}, {args.duration:g} s {args.kind} excitation ({amplitude:g} rad, legs at a time "
        f"{legs or 'all'}), noise {NOISE}\n{header}"
    )
    for row in rows:
        e = row["errors"]
        print(
            f"{row['set']:>3} {e['motor_strength'] * 100:>10.2f} {e['mass_scale'] * 100:>7.2f} "
            f"{e['joint_friction'] * 100:>10.2f} {e['joint_damping'] * 100:>9.2f} {e['armature'] * 100:>10.2f} {e['latency_ms']:>10.2f} "
            f"{row['heldout_rmse_mrad']:>13.2f} {row['fit_wall_s']:>6.0f}"
        )
    worst = {n: max(r["errors"][n] for r in rows) for n in (*RELATIVE, "latency_ms")}
    print(
        f"worst of the {len(rows)} fitted of {args.sets} sets ({len(refused)} refused): strength {worst['motor_strength'] * 100:.2f} %, mass {worst['mass_scale'] * 100:.2f} %, "
        f"friction {worst['joint_friction'] * 100:.2f} %, damping {worst['joint_damping'] * 100:.2f} %, "
        f"armature {worst['armature'] * 100:.2f} %, "
        f"latency {worst['latency_ms']:.2f} ms, fit wall time max {max(r['fit_wall_s'] for r in rows):.0f} s"
    )
    print("targets: strength/mass/friction <= 5 %, latency <= 2 ms, fit <= 300 s on 2 cores")
    print_coverage(coverage(rows), len(rows))


def coverage(rows: list[dict]) -> dict[str, dict[str, dict[str, float]]]:
    """Per std method and parameter: the share of fits whose 95 % interval holds the hidden value,
    and the root mean square of |error| / std (1 for a std that is right; below, too wide)."""
    return {
        method: {
            n: {
                "share": float(np.mean([row["z"][method][n] <= Z95 for row in rows])),
                "rms_z": float(np.sqrt(np.mean([row["z"][method][n] ** 2 for row in rows]))),
            }
            for n in RELATIVE
        }
        for method in ("newey_west", "gauss_newton")
    }


def print_coverage(shares: dict[str, dict[str, dict[str, float]]], fits: int) -> None:
    print(f"\n95 % interval coverage over {fits} fits (the share whose value +- 1.96 std holds the hidden value):")
    print(f"{'std':<32}" + "".join(f"{n:>22}" for n in RELATIVE))
    for method, label in (
        ("newey_west", "Newey-West (written by the fit)"),
        ("gauss_newton", "Gauss-Newton (independent)"),
    ):
        cells = (f"{shares[method][n]['share'] * 100:.0f}% (rms z {shares[method][n]['rms_z']:.2f})" for n in RELATIVE)
        print(f"{label:<32}" + "".join(f"{cell:>22}" for cell in cells))
    print("rms z: root mean square of |error| / std; 1 for a std that is right, below 1 too wide, above too narrow")


if __name__ == "__main__":
    main()
