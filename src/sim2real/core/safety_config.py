"""Safety supervisor configuration: `config/safety/<robot>.yaml`, validated up front.

Each check has a threshold and a response; responses are ordered by severity
(clamp < hold < damp < estop) and the most severe one raised in a tick wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any

from sim2real.core.config_files import ConfigError, config_path, read_config


class Response(IntEnum):
    """What a failed check makes the supervisor do, by increasing severity."""

    NONE = 0
    CLAMP = 1  # limit the command, carry on
    HOLD = 2  # IEC 60204-1 category 2: controlled stop, power kept, hold a pose
    DAMP = 3  # category 1: controlled stop, then joints damped only
    ESTOP = 4  # damped and latched until reset


class SafetyConfigError(ConfigError):
    """A safety config that cannot be used, with the file, field and fix in the message."""


# Every check, the thresholds it takes (with defaults) and the responses that make sense for it.
CHECKS: dict[str, dict[str, Any]] = {
    "joint_states_stale": {"deadline": 0.05},
    "imu_stale": {"deadline": 0.05},
    "policy_stale": {"deadline": 0.1},
    "non_finite_command": {},
    "position_limit": {"margin": 0.05},
    "velocity_limit": {"factor": 1.2},
    "torque_limit": {"factor": 1.5},
    "target_step": {"max_step": 0.35},
    "base_tilt": {"max_angle": 1.0},
    "estimator_divergence": {},
    "deadman": {"deadline": 0.5},
    "tick_overrun": {"max_age": 0.04},
    # The command followed (policy or teleop) asks a velocity target or feed-forward effort over
    # factor x the profile's limit: always clamped on the write path (as ros2_control's
    # joint_limits and libfranka do), and the response trips.
    "command_limit": {"factor": 1.0},
    # Velocity targets change no faster than factor x the profile's acceleration and jerk limits
    # (a profile without them is not limited): the rate limit libfranka and ros2_control's joint
    # limiters apply to the commands they pass on.
    "target_rate": {"factor": 1.0},
    # Another node publishes /joint_commands: a driver that does not check the writer obeys it.
    "sole_writer": {},
}
# Checks that act as filters on every outgoing command rather than as trips.
FILTERS = ("position_limit", "target_step", "target_rate")
# Per-check settings that are not thresholds: hardware_only = skipped when the robot is simulated
# (the deadman: a simulation has no operator's hand to hold it).
CHECK_FLAGS = ("enabled", "hardware_only")
# What an operator may ask (the supervisor node's ~/ACTION services, the joystick, `sim2real safety ACTION`).
OPERATOR_ACTIONS = ("engage", "takeover", "damp", "estop", "reset")
BUTTONS = ("deadman", *OPERATOR_ACTIONS)
HOLD_POSES = ("last", "stand")
STAND_EFFORTS = ("none", "gravity")


@dataclass(frozen=True)
class CheckConfig:
    name: str
    response: Response
    enabled: bool = True
    thresholds: dict[str, float] = field(default_factory=dict)
    hardware_only: bool = False

    def __getitem__(self, key: str) -> float:
        return self.thresholds[key]


@dataclass(frozen=True)
class SafetyConfig:
    command_period: float  # 0 = the profile's policy period
    stand_duration: float
    blend_duration: float
    checks: dict[str, CheckConfig]
    buttons: dict[str, int]
    source: Path | None = None
    # What a hold (a HOLD trip, or a takeover without teleop) moves to from the targets last sent:
    # "last" keeps them (a category-2 stop where the robot is); "stand" goes to the stand pose
    # within hold_duration (for a robot whose stopped pose cannot be held).
    hold_pose: str = "last"
    hold_duration: float = 0.75
    # The feed-forward effort of the supervisor's stand (STANDBY, and a takeover from STANDBY): "none",
    # or "gravity", the torques that hold a legged robot's stand pose on its feet
    # (sim2real.core.stand_effort), so that soft policy gains do not let the stand sag.
    stand_effort: str = "none"
    # s a stream must be silent to trip its stale check until the robot first stands after start
    # (no policy runs; the stand-up does not depend on the newest sample); the check's own
    # deadline when shorter.
    standby_deadline: float = 0.0
    # The explicit flag that lets a hardware run use checks weaker than
    # :mod:`sim2real.core.safety_requirements` asks (removed, disabled, looser, milder).
    allow_weakened: bool = False
    # DAMPING / ESTOP as IEC 60204-1 stop category 1 for a robot that falls when damped (a
    # quadruped): a robot that stood goes to the stand pose in 0.3 s (four feet down), then from
    # there (a robot that never stood: from the targets last sent) to ``damp_pose`` (joint -> rad,
    # a folded lying pose) over ``damp_duration`` s under the PD gains, then it is damped. Empty:
    # damp at once.
    damp_pose: dict[str, float] = field(default_factory=dict)
    damp_duration: float = 0.0
    # A Unitree robot's own remote (hardware:=unitree): action -> remote button name
    # (sim2real.core.unitree.remote.BUTTONS); the bridge presses the joystick's button for it.
    remote: dict[str, str] = field(default_factory=dict)


def safety_config_path(name_or_path: str | Path) -> Path:
    return config_path("safety", name_or_path)


def load_safety_config(name_or_path: str | Path) -> SafetyConfig:
    """Load ``config/safety/<name>.yaml`` (or a path); every problem names its field and fix."""
    path, data = read_config("safety", name_or_path, SafetyConfigError, "safety config")
    return parse_safety_config(data, path)


def parse_safety_config(data: dict[str, Any], source: str | Path = "<safety config>") -> SafetyConfig:
    def fail(field: str, problem: str, fix: str) -> SafetyConfigError:
        return SafetyConfigError(source, field, problem, fix)

    def number(value: Any, field: str) -> float:
        return _non_negative(value, field, fail)

    unknown = sorted(
        set(data)
        - {
            "command_period",
            "stand_duration",
            "blend_duration",
            "hold_pose",
            "hold_duration",
            "stand_effort",
            "standby_deadline",
            "allow_weakened",
            "damp_pose",
            "damp_duration",
            "checks",
            "joystick",
            "remote",
        }
    )
    if unknown:
        raise fail(", ".join(unknown), "unknown fields", "remove them (see config/safety/go2.yaml)")
    checks_data = data.get("checks") or {}
    if not isinstance(checks_data, dict):
        raise fail("checks", "must be a mapping of check name -> settings", "see config/safety/go2.yaml")
    checks = {name: _check(name, entry, fail) for name, entry in checks_data.items()}
    buttons = _joystick(data.get("joystick") or {}, fail)
    remote = _remote(data.get("remote") or {}, fail)

    def choice(field: str, choices: tuple[str, ...], fix: str) -> str:
        value = data.get(field, choices[0])
        if value not in choices:
            raise fail(field, f"expected one of {list(choices)}, got {value!r}", fix)
        return value

    hold_pose = choice(
        "hold_pose",
        HOLD_POSES,
        "write last (hold the targets last sent: arms) or stand (go to the stand pose: legged robots)",
    )
    stand_effort = choice(
        "stand_effort",
        STAND_EFFORTS,
        "write gravity (a legged robot standing on its feet) or none (an arm, or a robot on a gantry)",
    )
    damp_pose = data.get("damp_pose") or {}
    if not isinstance(damp_pose, dict):
        raise fail(
            "damp_pose",
            f"expected a mapping of joint name -> rad, got {damp_pose!r}",
            "write e.g. damp_pose: {FL_thigh_joint: 1.36, ...} for every joint (see config/safety/go2.yaml)",
        )
    damp_pose = {str(name): _finite(value, f"damp_pose.{name}", fail) for name, value in damp_pose.items()}
    allow_weakened = data.get("allow_weakened", False)
    if not isinstance(allow_weakened, bool):
        raise fail("allow_weakened", f"expected true or false, got {allow_weakened!r}", "write true or false")
    return SafetyConfig(
        standby_deadline=number(data.get("standby_deadline", 0.0), "standby_deadline"),
        allow_weakened=allow_weakened,
        damp_pose=damp_pose,
        damp_duration=number(data.get("damp_duration", 0.0), "damp_duration"),
        hold_pose=hold_pose,
        stand_effort=stand_effort,
        hold_duration=number(data.get("hold_duration", 0.75), "hold_duration"),
        command_period=number(data.get("command_period", 0.0), "command_period"),
        stand_duration=number(data.get("stand_duration", 2.0), "stand_duration"),
        blend_duration=number(data.get("blend_duration", 0.5), "blend_duration"),
        checks=checks,
        buttons=buttons,
        remote=remote,
        source=Path(source) if isinstance(source, (str, Path)) else None,
    )


def _non_negative(value: Any, field: str, fail) -> float:
    # NaN passes `value < 0`: a NaN deadline never trips, a NaN max_step makes every command NaN.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise fail(field, f"expected a finite number >= 0, got {value!r}", "write a non-negative number in SI units")
    return float(value)


def _check(name: str, entry: Any, fail) -> CheckConfig:
    """One entry of ``checks:``: its response (a filter clamps, a trip stops), flags and thresholds."""
    if name not in CHECKS:
        raise fail(f"checks.{name}", "unknown check", f"use one of {sorted(CHECKS)}")
    if entry is not None and not isinstance(entry, dict):
        raise fail(
            f"checks.{name}",
            f"expected a mapping of settings, got {entry!r}",
            f"write e.g. {name}: {{response: hold}} (see config/safety/go2.yaml)",
        )
    entry = dict(entry or {})
    response_name = str(entry.pop("response", "")).upper()
    if response_name not in Response.__members__ or response_name == "NONE":
        raise fail(
            f"checks.{name}.response", f"unknown response {response_name.lower()!r}", "use clamp, hold, damp or estop"
        )
    if name in FILTERS and response_name != "CLAMP":
        raise fail(
            f"checks.{name}.response",
            f"{name} limits every command, it cannot {response_name.lower()}",
            "use response: clamp",
        )
    if name not in FILTERS and response_name == "CLAMP":
        # A trip set to clamp never stops anything: the check would report and do nothing.
        raise fail(
            f"checks.{name}.response",
            f"{name} is a trip: clamp would make it do nothing",
            "use hold, damp or estop (or enabled: false, which hardware refuses without allow_weakened)",
        )
    flags = {flag: entry.pop(flag, flag == "enabled") for flag in CHECK_FLAGS}
    for flag, value in flags.items():
        if not isinstance(value, bool):
            raise fail(f"checks.{name}.{flag}", f"expected true or false, got {value!r}", "write true or false")
    extra = sorted(set(entry) - set(CHECKS[name]))
    if extra:
        raise fail(
            f"checks.{name}",
            f"unknown settings {extra}",
            f"this check takes {sorted(CHECKS[name])}, response and {list(CHECK_FLAGS)}",
        )
    thresholds = {
        key: _non_negative(entry.get(key, default), f"checks.{name}.{key}", fail)
        for key, default in CHECKS[name].items()
    }
    if name == "target_rate" and thresholds["factor"] <= 0:
        # A zero limit would divide by zero in the rate limiter: no velocity could ever change.
        raise fail(
            "checks.target_rate.factor",
            f"must be > 0, got {thresholds['factor']:g}",
            "use 1.0 (the profile's limits) or a fraction of them; enabled: false turns it off",
        )
    return CheckConfig(name, Response[response_name], flags["enabled"], thresholds, flags["hardware_only"])


def _joystick(buttons_data: Any, fail) -> dict[str, int]:
    """``joystick:``: action -> button index, each action its own button."""
    if not isinstance(buttons_data, dict):
        raise fail("joystick", "must map actions to button indices", f"use keys {list(BUTTONS)}")
    buttons: dict[str, int] = {}
    for action, index in buttons_data.items():
        if action not in BUTTONS:
            raise fail(f"joystick.{action}", "unknown action", f"use one of {list(BUTTONS)}")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise fail(f"joystick.{action}", f"expected a button index >= 0, got {index!r}", "write an integer")
        buttons[action] = index
    shared = sorted({index for index in buttons.values() if list(buttons.values()).count(index) > 1})
    if shared:
        # One press would run several actions in a tick: estop, then reset, stands the robot back up.
        actions = {index: [a for a, i in buttons.items() if i == index] for index in shared}
        raise fail("joystick", f"buttons shared by several actions: {actions}", "give each action its own button")
    return buttons


def _finite(value: Any, field: str, fail) -> float:
    """A finite number (an angle may be negative)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise fail(field, f"expected a finite number (rad), got {value!r}", "write an angle in rad")
    return float(value)


def _remote(data: Any, fail) -> dict[str, str]:
    """The ``remote:`` section: operator action -> button of a Unitree remote."""
    from sim2real.core.unitree.remote import BUTTONS as REMOTE_BUTTONS  # a table only: no DDS

    if not isinstance(data, dict):
        raise fail(
            "remote",
            f"expected a mapping of action -> remote button, got {data!r}",
            "write e.g. remote: {estop: select, ...} (see config/safety/go2.yaml)",
        )
    for action, button in data.items():
        if action not in BUTTONS:
            raise fail(f"remote.{action}", "unknown action", f"use one of {list(BUTTONS)}")
        if button not in REMOTE_BUTTONS:
            raise fail(f"remote.{action}", f"unknown remote button {button!r}", f"use one of {list(REMOTE_BUTTONS)}")
    shared = sorted({b for b in data.values() if list(data.values()).count(b) > 1})
    if shared:
        raise fail("remote", f"remote buttons shared by several actions: {shared}", "give each action its own button")
    return {str(action): str(button) for action, button in data.items()}
