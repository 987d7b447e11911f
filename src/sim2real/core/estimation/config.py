"""The estimator's settings: ``config/estimation/<robot>.yaml``, checked as it loads."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from sim2real.core.config_files import ConfigError, read_config

CONTACT_SOURCES = ("effort", "gait")


class EstimationError(ConfigError):
    """An estimation config that cannot be used, with the file, field and fix in the message."""


# ------------------------------------------------------------------------------------ config
@dataclass(frozen=True)
class ContactConfig:
    source: str = "effort"  # effort | gait
    on_force: float = 30.0  # N, vertical foot force above which a free foot lands
    off_force: float = 12.0  # N, below which a standing foot lifts (hysteresis)
    # m/s: a free foot lands only while the filter sees it moving slower than this (its force
    # alone also rises with a fast swing's own dynamics, which the static balance leaves out);
    # 0: force alone
    landing_speed: float = 0.0
    # m/s: a free foot this still lands on off_force's load already (a foot loaded slowly, as in
    # a stand-up, may never pass on_force); 0: never
    still_speed: float = 0.0
    gait_period: float = 0.3  # s, gait source: one full gait cycle
    gait_duty: float = 0.5  # fraction of the cycle a foot stands
    gait_offsets: tuple[float, ...] = (0.0, 0.5, 0.5, 0.0)  # phase of each foot, profile foot order


@dataclass(frozen=True)
class EstimationConfig:
    accelerometer_noise: float = 0.3  # m/s^2/sqrt(Hz)-like: velocity random walk from the IMU
    # Legged: the accelerometer's bias is a state of the filter (the legs make it observable): its
    # std at start (m/s^2) and its random walk (m/s^2 per sqrt(s)). 0 and 0: no bias estimated.
    accelerometer_bias_prior: float = 0.0
    accelerometer_bias_noise: float = 0.0
    position_noise: float = 0.01  # m/sqrt(s): base position process noise
    foot_stance_noise: float = 0.01  # m/sqrt(s): how much a standing foot may creep
    foot_swing_noise: float = 3.0  # m/sqrt(s): a foot in the air moves freely
    foot_position_noise: float = 0.005  # m, leg kinematics (encoder noise, link lengths)
    foot_velocity_noise: float = 0.08  # m/s, leg kinematics velocity (encoder velocity noise)
    foot_height_noise: float = 0.01  # m, standing foot height against the ground height
    ground_height: Optional[float] = 0.0  # m, world height of the ground a foot stands on; None: no height update
    foot_radius: float = 0.022  # m, a rolling foot sphere: its centre moves while the contact point stands
    swing_inflation: float = 1.0e4  # measurement variance factor for a foot not in contact
    contact: ContactConfig = ContactConfig()
    divergence_window: float = 0.2  # s over which the NIS is averaged
    divergence_nis: float = 5.0  # bound on the window-mean NIS per degree of freedom
    divergence_hold: float = 1.0  # s a divergence stays reported after the NIS fell back
    max_velocity_std: float = 2.0  # m/s: a velocity covariance beyond this is divergence
    joint_position_noise: float = 0.001  # arm: rad, encoder position noise
    # rad/s, encoder velocity noise. Arm: the filter's velocity measurement. Legged: carried to
    # each standing foot's velocity through its leg's Jacobian, beside foot_velocity_noise.
    joint_velocity_noise: float = 0.02
    gyro_noise: float = 0.0  # legged: rad/s, carried to each foot's velocity through its lever arm
    joint_jerk_noise: float = 20.0  # arm: rad/s^3/sqrt(Hz), how fast acceleration may change


_FIELDS = tuple(f for f in EstimationConfig.__dataclass_fields__ if f != "contact")
# Settings where 0 means "none" (no bias state, no sensor noise carried through the legs).
# (joint_velocity_noise stays positive: the arm's filter measures with it.)
_ZERO_IS_OFF = {"ground_height", "accelerometer_bias_prior", "accelerometer_bias_noise", "gyro_noise"}
_CONTACT_FIELDS = {
    "source",
    "on_force",
    "off_force",
    "landing_speed",
    "still_speed",
    "gait_period",
    "gait_duty",
    "gait_offsets",
}


def load_estimation_config(name_or_path: str | Path) -> EstimationConfig:
    """``config/estimation/<name>.yaml`` (or a path) -> a validated :class:`EstimationConfig`.
    Keys not given keep the defaults of :class:`EstimationConfig`."""
    path, data = read_config("estimation", name_or_path, EstimationError, "estimation config")
    return estimation_config_from_dict(data, path)


def estimation_config_from_dict(data: dict[str, Any], source: str | Path = "<estimation config>") -> EstimationConfig:
    data = dict(data)
    data.pop("robot", None)
    contact = data.pop("contact", {}) or {}
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise EstimationError(
            source, ", ".join(unknown), "unknown setting", f"use only {sorted(_FIELDS) + ['contact', 'robot']}"
        )
    _check_contact_keys(contact, source)
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key == "ground_height" and value is None:
            values[key] = None
            continue
        values[key] = _positive(source, key, value, allow_zero=key in _ZERO_IS_OFF)
    contact_config = _contact_config(contact, source)
    return EstimationConfig(**values, contact=contact_config)


def _check_contact_keys(contact: Any, source: str | Path) -> None:
    """The ``contact:`` section is a mapping of known keys (checked before any value is)."""
    if not isinstance(contact, dict):
        raise EstimationError(
            source,
            "contact",
            f"expected a mapping, got {contact!r}",
            "write contact: {source: effort, on_force: 30, off_force: 15}",
        )
    unknown = sorted(set(contact) - _CONTACT_FIELDS)
    if unknown:
        raise EstimationError(
            source, "contact." + ", contact.".join(unknown), "unknown setting", f"use only {sorted(_CONTACT_FIELDS)}"
        )


def _contact_config(contact: dict[str, Any], source: str | Path) -> ContactConfig:
    """The ``contact:`` section's values, checked: a known source, hysteresis, a duty in (0, 1)."""
    contact_values: dict[str, Any] = {}
    for key, value in contact.items():
        if key == "source":
            if value not in CONTACT_SOURCES:
                raise EstimationError(
                    source, "contact.source", f"unknown contact source {value!r}", f"use one of {list(CONTACT_SOURCES)}"
                )
            contact_values[key] = value
        elif key == "gait_offsets":
            if not isinstance(value, list) or not all(isinstance(v, (int, float)) for v in value):
                raise EstimationError(
                    source,
                    "contact.gait_offsets",
                    f"expected a list of numbers, got {value!r}",
                    "give one phase offset in [0, 1) per foot, in the profile's foot order",
                )
            contact_values[key] = tuple(float(v) for v in value)
        else:
            contact_values[key] = _positive(
                source, f"contact.{key}", value, allow_zero=key in ("landing_speed", "still_speed")
            )
    contact_config = ContactConfig(**contact_values)
    if contact_config.off_force >= contact_config.on_force:
        raise EstimationError(
            source,
            "contact.off_force",
            f"{contact_config.off_force} N is not below on_force ({contact_config.on_force} N)",
            "make off_force < on_force: the gap is the hysteresis",
        )
    if not 0 < contact_config.gait_duty < 1:
        raise EstimationError(
            source,
            "contact.gait_duty",
            f"{contact_config.gait_duty} is not in (0, 1)",
            "give the fraction of the gait cycle a foot stands, e.g. 0.5 for a trot",
        )
    return contact_config


def _positive(source, field: str, value: Any, allow_zero: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        raise EstimationError(
            source,
            field,
            f"expected a {'non-negative' if allow_zero else 'positive'} number, got {value!r}",
            "write a number in SI units",
        )
    return float(value)
