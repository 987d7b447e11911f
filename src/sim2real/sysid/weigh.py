"""The whole robot's mass from a bag of it standing: what a fit on a stand cannot see.

On a stand the trunk hangs from the stand, so a fit of such bags identifies the legs' masses
only (``fit.STAND_MASS``), and the trunk is where a payload sits. Standing still on its feet,
the ground carries the whole robot, and each leg's motors carry that leg's share. The static
balance of a leg's joints, with its foot Jacobian ``J`` in the base frame, the torques ``g(q)``
that hold the leg itself against gravity and the motors' torques ``tau``, gives the ground's
force on its foot::

    F = J^-T (g(q) - tau)        and, over the feet,  |sum F| = m * gravity

The magnitude of the sum does not depend on how the trunk is tilted; the legs' own gravity
torques are taken with the trunk level (a few percent of a leg's torque for a few degrees of
tilt). ``tau`` is what the motor drivers report as effort (``sensor_msgs/JointState.effort``:
the simulators' motor torque, the Go2's ``tau_est``), so a weak motor does not read as a light
robot.

Samples count while every foot is well below the trunk (at least ``STANDING_DEPTH`` of its
depth in the stand pose: lying down, or sagging until a calf or the trunk touches the ground,
something other than the feet carries the robot) and no joint swings fast: the supervisor's
stand before the engage, the excitation of ``sysid record`` without ``--suspended`` (a foot
the excitation lifts reads no force, as it should) and the settle after it. Lying on the
ground, or standing up, the feet do not carry the robot alone. A robot on its PD sways
about its stand; its trunk's acceleration averages out over a second, so each reading is
the mean force over a second of such samples, and the scatter of those readings is the
weighing's uncertainty.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from sim2real.core.kinematics import Kinematics
from sim2real.core.robot_profile import RobotProfile
from sim2real.sysid.dataset import BagError, BagTopics, read_states
from sim2real.sysid.fit import STAND_MASS_KEY
from sim2real.sysid.identified_file import read_identified, write_identified
from sim2real.sysid.metadata import profile_hash

SWAY_SPEED = 1.5  # rad/s: every joint slower than this (a sway, not a step or a stand-up)
# Each foot's depth below the base, as a share of its depth in the stand pose. A Go2 on its
# stand PD alone sags to 0.82 of it, with the stand's feed-forward to 0.9-1.0; heavier or weaker,
# its rear legs fold until the calves touch the ground (rear feet at 0.72 and 0.55 of their
# depth in PyBullet at mass x1.15 / strength 0.9, with and without the feed-forward), and the
# calves then carry part of the weight.
STANDING_DEPTH = 0.8
READING_S = 1.0  # s of samples averaged into one reading (the trunk's sway averages out)
MIN_READINGS = 2


@dataclass(frozen=True)
class Weighing:
    """The robot's mass against its model's; ``std_kg``: the standard error of the mean over the
    readings (one per ``READING_S`` of standing)."""

    mass_kg: float
    std_kg: float
    model_mass_kg: float
    samples: int
    readings: int
    bags: tuple[str, ...]

    @property
    def mass_scale(self) -> float:
        return self.mass_kg / self.model_mass_kg

    @property
    def mass_scale_std(self) -> float:
        return self.std_kg / self.model_mass_kg

    def to_dict(self) -> dict[str, Any]:
        """The ``simulator.weighed`` section of an identified file (``dr from-sysid`` reads it)."""
        return {
            "method": "static balance of the legs standing still: |sum of foot forces| / gravity",
            "mass_kg": round(self.mass_kg, 4),
            "std_kg": round(self.std_kg, 4),
            "model_mass_kg": round(self.model_mass_kg, 4),
            "mass_scale": {"value": round(self.mass_scale, 6), "std": round(self.mass_scale_std, 6)},
            "samples": self.samples,
            "readings": self.readings,
            "bags": list(self.bags),
        }


class WeighError(ValueError):
    """Bags that cannot be weighed; says why and what to record instead."""


def foot_forces(kinematics: Kinematics, positions: np.ndarray, efforts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ground's force on the feet, summed over the feet (base frame, N), that the samples'
    joint positions and efforts [samples, joints] balance, in two parts ``(legs, motors)`` of
    shape [samples, 3]: the force is ``s * legs - motors`` for legs ``s`` times as heavy as the
    model's (the legs' own gravity torques scale with their mass)."""
    legs_part = np.zeros((len(positions), 3))
    motors_part = np.zeros((len(positions), 3))
    legs = None
    for k, (q, tau) in enumerate(zip(positions, efforts)):
        _, jacobians = kinematics.foot_jacobians(q)
        if legs is None:  # each foot moves with its own leg's joints only
            legs = [np.flatnonzero(np.abs(jacobian).sum(axis=0) > 1e-9) for jacobian in jacobians]
        gravity = kinematics.gravity_torques(q)
        for jacobian, columns in zip(jacobians, legs):
            transpose = jacobian[:, columns].T
            legs_part[k] += np.linalg.solve(transpose, gravity[columns])
            motors_part[k] += np.linalg.solve(transpose, tau[columns])
    return legs_part, motors_part


def balanced_mass(
    legs: np.ndarray, motors: np.ndarray, model_mass: float, gravity: float, leg_mass_scale=None
) -> float:
    """The mass (kg) a mean foot force ``s * legs - motors`` carries. ``leg_mass_scale``: the legs'
    mass against the model's (a fit on a stand identifies it); None: the whole robot scales alike,
    solved as a fixed point (it converges: the legs' part is a fraction of the whole)."""
    if leg_mass_scale is not None:
        return float(np.linalg.norm(leg_mass_scale * legs - motors)) / gravity
    scale = 1.0
    for _ in range(50):
        scale, previous = float(np.linalg.norm(scale * legs - motors)) / (gravity * model_mass), scale
        if abs(scale - previous) < 1e-9:
            break
    return scale * model_mass


def standing_mask(kinematics: Kinematics, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """Samples of the robot on its feet, its joints not swinging fast."""
    depth = lambda positions: -kinematics.foot_positions(positions)[:, 2]  # noqa: E731
    stand = depth([joint.default for joint in kinematics.profile.joints])
    on_feet = np.array([np.all(depth(positions) >= STANDING_DEPTH * stand) for positions in q], dtype=bool)
    return on_feet & np.all(np.abs(dq) < SWAY_SPEED, axis=1)


def _readings(mask: np.ndarray, per_reading: int) -> list[slice]:
    """Whole ``per_reading`` chunks of each unbroken run of ``mask``."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    chunks = []
    for start, stop in zip(edges[::2], edges[1::2]):
        chunks += [slice(s, s + per_reading) for s in range(start, stop - per_reading + 1, per_reading)]
    return chunks


def weigh(
    profile: RobotProfile,
    bags: Sequence[str | Path],
    topics: BagTopics = BagTopics(),
    leg_mass_scale: float | None = None,
) -> Weighing:
    """The robot's mass from ``bags`` of it standing; :class:`WeighError` when they cannot tell.
    ``leg_mass_scale``: the legs' mass against the model's, when known (:func:`balanced_mass`)."""
    if profile.fixed_base or not profile.foot_links:
        raise WeighError(
            f"robot {profile.name!r} does not stand on feet: weighing is for legged robots "
            "(an arm's masses come from 'sim2real sysid fit')"
        )
    kinematics = Kinematics(profile)
    model_mass, _ = kinematics.centre_of_mass([joint.default for joint in profile.joints])
    readings, counted = [], 0
    for path in bags:
        segment = read_states(path, profile, topics)
        if segment.suspended:
            raise WeighError(
                f"{path} was recorded on a stand (suspended): its feet carried nothing. Record the robot standing "
                "on the ground: sim2real sysid record --robot ROBOT ... (without --suspended)"
            )
        if len(segment.t) < 2 or not segment.sample_period > 0:
            raise WeighError(f"{path}: {len(segment.t)} joint states with distinct stamps: record the robot standing")
        per_reading = max(1, int(round(READING_S / segment.sample_period)))
        for chunk in _readings(standing_mask(kinematics, segment.q, segment.dq), per_reading):
            silent = [
                name
                for name, any_effort in zip(profile.joint_names, np.any(segment.effort[chunk], axis=0))
                if not any_effort
            ]
            if silent:
                raise WeighError(
                    f"{path}: the joint states carry no efforts (JointState.effort) for {silent}, and weighing needs "
                    "every motor's torque; record from a driver that publishes them"
                )
            try:
                legs, motors = foot_forces(kinematics, segment.q[chunk], segment.effort[chunk])
            except np.linalg.LinAlgError:
                raise WeighError(
                    f"{path}: a leg stood stretched straight (a singular Jacobian), where its efforts cannot tell "
                    "its foot's force; record the robot in its stand pose"
                ) from None
            readings.append(
                balanced_mass(legs.mean(axis=0), motors.mean(axis=0), model_mass, kinematics.gravity, leg_mass_scale)
            )
            counted += per_reading
    if len(readings) < MIN_READINGS:
        raise WeighError(
            f"{len(readings)} s of standing in {len(bags)} bag(s), {MIN_READINGS} s needed: record the robot standing "
            f"on its feet, not sagging onto its calves (sysid record without --suspended stands it, excites one leg at a time and holds it after; "
            f"every foot at least {STANDING_DEPTH:.0%} as deep below the trunk as in the stand pose and every joint "
            f"under {SWAY_SPEED} rad/s counts)"
        )
    values = np.array(readings)
    return Weighing(
        mass_kg=float(values.mean()),
        std_kg=float(values.std(ddof=1) / np.sqrt(len(values))),
        model_mass_kg=float(model_mass),
        samples=counted,
        readings=len(values),
        bags=tuple(str(b) for b in bags),
    )


def write_weighed(
    profile: RobotProfile,
    bags: Sequence[str | Path],
    out: str | Path,
    fit: str | Path | None = None,
    topics: BagTopics = BagTopics(),
) -> tuple[dict[str, Any], Weighing]:
    """Weigh the robot and write an identified file (``sysid weigh``): ``fit``'s, with its
    ``mass_scale`` the whole robot's and the weighing in ``simulator.weighed``; or, without a fit,
    one holding the weighing alone. Returns the document written and the weighing."""
    legs = None
    if fit is not None:
        document = {k: v for k, v in read_identified(fit).items() if k not in ("format_version", "identified_utc")}
        if document.get("robot") not in (None, profile.name):
            raise WeighError(
                f"{fit} identifies robot {document['robot']!r}, not {profile.name!r}: use --robot {document['robot']}"
            )
        simulator = document["simulator"]
        if simulator.get("suspended") and "mass_scale" in simulator["parameters"]:
            legs = float(simulator["parameters"]["mass_scale"]["value"])
    else:
        document = {"robot": profile.name, "robot_profile_sha256": profile_hash(profile), "bags": []}
        simulator = document["simulator"] = {"method": "weighed standing (sim2real sysid weigh)", "parameters": {}}
    weighing = weigh(profile, bags, topics, leg_mass_scale=legs)
    document["bags"] = [*document.get("bags", []), *map(str, bags)]
    simulator["parameters"]["mass_scale"] = {
        "value": round(weighing.mass_scale, 6),
        "std": round(weighing.mass_scale_std, 6),
        "nominal": 1.0,
        "unit": "",
    }
    simulator.setdefault("not_identified", {}).pop(STAND_MASS_KEY, None)
    simulator["weighed"] = {**weighing.to_dict(), "legs_mass_scale": legs}
    write_identified(out, document)
    return document, weighing


__all__ = ["BagError", "Weighing", "WeighError", "foot_forces", "weigh", "write_weighed"]
