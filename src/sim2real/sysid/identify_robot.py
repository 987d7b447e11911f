"""``sim2real sysid fit`` as a function: bags -> fits -> plots -> identified YAML.

Nothing is written when a fit fails: a :class:`FitError` says why, and the previous
identified file (if any) stays as it was.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Callable, Sequence

from sim2real.core.robot_profile import RobotProfile
from sim2real.sysid.dataset import BagTopics, read_bags
from sim2real.sysid.fit import FitOptions, fit_conditions
from sim2real.sysid.identified_file import write_identified
from sim2real.sysid.metadata import profile_hash


def identify_robot(
    profile: RobotProfile,
    bags: Sequence[str | Path],
    out: str | Path,
    options: FitOptions | None = None,
    rigid_body: bool | None = None,
    plots: bool = True,
    log: Callable[[str], None] = print,
    topics: BagTopics = BagTopics(),
) -> dict:
    """Fit the simulator (and, for a fixed-base arm, the rigid-body model); write ``out``.

    Returns the document written. ``rigid_body`` None: only for fixed-base robots with efforts.
    """
    options = options or FitOptions()
    dataset = read_bags(bags, profile, topics)
    log(f"{len(dataset.segments)} recording(s), {dataset.duration:.1f} s of {profile.name}")
    hashes = {seg.metadata.get("robot_profile_sha256") for seg in dataset.segments} - {None}
    current = profile_hash(profile)
    warnings = []
    if hashes and hashes != {current}:
        warnings.append(
            "the robot profile or URDF changed since recording (profile hash differs): the fit uses the current profile"
        )
        log("warning: " + warnings[-1])
    if not profile.fixed_base and not dataset.suspended:
        # Bags from a real robot carry no base pose or velocity, so each replay window starts
        # with the base at rest at its spawn pose: right for the first window after standing
        # still, approximate later. On a stand (suspended) the base stays put, as in the replay.
        warnings.append(
            "floating base recorded standing: replay windows start with the base at rest at its spawn "
            "pose (the bag has no base state), so this fit is approximate; record on a stand "
            "(sim2real sysid record --suspended), where the base stays put as in the replay"
        )
        log("warning: " + warnings[-1])
    result = fit_conditions(profile, dataset, options, log=log)
    document = {
        "robot": profile.name,
        "robot_profile_sha256": current,
        "bags": [str(Path(b)) for b in bags],
        "excitation_seconds": round(dataset.duration, 2),
        "fit_options": asdict(options),
        "simulator": result.to_dict(profile.joint_names),
    }
    if warnings:
        document["warnings"] = warnings
    if rigid_body is None:
        rigid_body = profile.fixed_base and all(seg.effort.any() for seg in dataset.segments)
    if rigid_body:
        from sim2real.sysid.rigid_body import RegressorModel, identify

        rb = identify(RegressorModel(profile), dataset.segments, options.train_fraction)
        document["rigid_body"] = rb.to_dict(profile.joint_names)
        log(
            f"rigid body: inertial scale {rb.inertial_scale:.3f}, physically consistent: {rb.consistent} "
            f"(unconstrained OLS: {rb.ols_consistent}, {rb.ols_distance:.2f} std away); held-out torque RMSE "
            f"{rb.heldout_rmse.mean():.3f} N*m (OLS {rb.ols_heldout_rmse.mean():.3f}, "
            f"URDF {rb.nominal_heldout_rmse.mean():.3f})"
        )
    out = Path(out)
    if plots:
        from sim2real.sysid.plots import plot_before_after

        nominal = {p.name: p.nominal for p in result.space}
        png = plot_before_after(
            profile, dataset, result.heldout_windows, nominal, result.values, out.with_suffix(".png")
        )
        document["plots"] = [str(png)]
        log(f"plot: {png}")
    write_identified(out, document)
    return document
