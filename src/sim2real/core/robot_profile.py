"""Robot profiles: the one description of a robot that sim, runtime and training share.

A profile is a YAML file under ``config/robots/`` (see ``config/robots/go2.yaml`` for a
commented example). :func:`load_profile` validates it completely before anything uses
it, and every problem is reported as a :class:`ProfileError` that names the file, the
field and what to do about it.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, overload

import numpy as np

from sim2real.core.config_files import ConfigError, available_configs, config_path, read_config
from sim2real.core.mirror import RobotMirror, SignedPermutation
from sim2real.core.paths import resolve
from sim2real.core.unitree.motor_map import UnitreeInterface, parse_unitree_section

KINDS = ("quadruped", "arm")
MOVABLE_URDF_JOINT_TYPES = ("revolute", "continuous", "prismatic")


class ProfileError(ConfigError):
    """A robot profile that cannot be used, with the file, field and fix in the message."""


@dataclass(frozen=True)
class JointSpec:
    """One actuated joint. Units are SI: rad, rad/s, N*m, N*m/rad, N*m*s/rad."""

    name: str
    default: float
    lower: float
    upper: float
    velocity_limit: float
    effort_limit: float
    kp: float
    kd: float
    # rad/s^2 and rad/s^3: the largest acceleration and jerk a velocity target may ask (the
    # rate limits a driver such as libfranka enforces); None where the maker publishes none.
    acceleration_limit: float | None = None
    jerk_limit: float | None = None


@dataclass(frozen=True)
class RobotProfile:
    """A validated robot profile. Joint order here is THE joint order everywhere."""

    name: str
    kind: str
    urdf: Path
    base_link: str
    imu_link: str
    foot_links: tuple[str, ...]
    end_effector_link: str | None
    fixed_base: bool
    spawn_height: float
    physics_period: float
    sensing_period: float
    policy_period: float
    command_timeout: float
    damping_kd: float
    battery_nominal_voltage: float | None
    gravity_compensation: bool
    spec_mass: float
    joints: tuple[JointSpec, ...]
    source: Path
    mirror: RobotMirror | None = None  # left-right twins (``mirror:``); None: not mirror-symmetric
    unitree: UnitreeInterface | None = None  # the robot's Unitree low-level interface (``unitree:``)
    # The MuJoCo world's model when not the URDF above (``mujoco_model:``): a URDF/MJCF path or
    # a packaged model (sim2real.sim.robot_models); None: the URDF.
    mujoco_model: str | None = None

    @property
    def joint_names(self) -> list[str]:
        return [j.name for j in self.joints]

    @property
    def num_joints(self) -> int:
        return len(self.joints)

    def _array(self, attribute: str) -> np.ndarray:
        return np.array([getattr(j, attribute) for j in self.joints], dtype=float)

    @property
    def default_positions(self) -> np.ndarray:
        return self._array("default")

    @property
    def lower_limits(self) -> np.ndarray:
        return self._array("lower")

    @property
    def upper_limits(self) -> np.ndarray:
        return self._array("upper")

    @property
    def velocity_limits(self) -> np.ndarray:
        return self._array("velocity_limit")

    @property
    def effort_limits(self) -> np.ndarray:
        return self._array("effort_limit")

    @property
    def acceleration_limits(self) -> np.ndarray:
        """Per joint, rad/s^2; inf where the profile gives none."""
        return np.array([math.inf if j.acceleration_limit is None else j.acceleration_limit for j in self.joints])

    @property
    def jerk_limits(self) -> np.ndarray:
        """Per joint, rad/s^3; inf where the profile gives none."""
        return np.array([math.inf if j.jerk_limit is None else j.jerk_limit for j in self.joints])

    @property
    def rate_limited(self) -> bool:
        """The profile gives an acceleration or jerk limit for some joint."""
        return any(j.acceleration_limit is not None or j.jerk_limit is not None for j in self.joints)

    @property
    def kp(self) -> np.ndarray:
        return self._array("kp")

    @property
    def kd(self) -> np.ndarray:
        return self._array("kd")

    def check_suspendable(self) -> None:
        """Raise ValueError unless this robot can hang on a stand (``suspended``): a bolted-down
        arm is held already, so a stand means nothing for it."""
        if self.fixed_base:
            raise ValueError(
                f"robot {self.name!r} has a fixed base; only a floating-base robot (a quadruped) "
                "hangs on a stand (suspended)"
            )


def profile_path(name_or_path: str | Path) -> Path:
    """``go2`` -> ``<share>/config/robots/go2.yaml``; an existing path is returned as is."""
    return config_path("robots", name_or_path)


def available_profiles() -> list[str]:
    return available_configs("robots")


def load_profile(name_or_path: str | Path) -> RobotProfile:
    """Load and validate a robot profile by name (``go2``) or by path."""
    path, data = read_config("robots", name_or_path, ProfileError, "profile")
    return _ProfileReader(path, data).read()


class _ProfileReader:
    """Reads one profile mapping field by field, so each error can name its field."""

    def __init__(self, path: Path, data: dict[str, Any]):
        self.path = path
        self.data = data

    def fail(self, field: str, problem: str, fix: str) -> ProfileError:
        return ProfileError(self.path, field, problem, fix)

    def get(self, mapping: dict[str, Any], key: str, field: str, default: Any = ..., kind: type | tuple = object):
        if key not in mapping:
            if default is ...:
                raise self.fail(field, "missing", f"add '{key}:' (see config/robots/go2.yaml)")
            return default
        value = mapping[key]
        if value is not None and not isinstance(value, kind):
            raise self.fail(field, f"expected {getattr(kind, '__name__', kind)}, got {value!r}", "correct its type")
        return value

    @overload
    def number(
        self,
        mapping: dict[str, Any],
        key: str,
        field: str,
        default: None,
        positive: bool = False,
        non_negative: bool = False,
    ) -> float | None: ...

    @overload
    def number(
        self,
        mapping: dict[str, Any],
        key: str,
        field: str,
        default: float = ...,
        positive: bool = False,
        non_negative: bool = False,
    ) -> float: ...

    def number(
        self,
        mapping: dict[str, Any],
        key: str,
        field: str,
        default: Any = ...,
        positive: bool = False,
        non_negative: bool = False,
    ) -> float | None:
        value = self.get(mapping, key, field, default)
        if value is None:
            if default is None:  # an optional number, left out or written as null
                return None
            raise self.fail(field, "expected a finite number, got null", "write a number in SI units")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(field, f"expected a finite number, got {value!r}", "write a number in SI units")
        if positive and value <= 0:
            raise self.fail(field, f"must be > 0, got {value}", "use a positive value")
        if non_negative and value < 0:
            raise self.fail(field, f"must be >= 0, got {value}", "use a value >= 0")
        return float(value)

    def read(self) -> RobotProfile:
        d = self.data
        name = self.get(d, "name", "name", kind=str)
        kind = self.get(d, "kind", "kind", kind=str)
        if kind not in KINDS:
            raise self.fail("kind", f"unknown kind {kind!r}", f"use one of {list(KINDS)}")
        urdf = self._urdf()
        urdf_links, urdf_joints = _read_urdf(urdf, self)

        periods = self.get(d, "periods", "periods", kind=dict)
        physics = self.number(periods, "physics", "periods.physics", positive=True)
        sensing = self.number(periods, "sensing", "periods.sensing", positive=True)
        policy = self.number(periods, "policy", "periods.policy", positive=True)
        for field, period in (("periods.sensing", sensing), ("periods.policy", policy)):
            ratio = period / physics
            if abs(ratio - round(ratio)) > 1e-6 or round(ratio) < 1:
                raise self.fail(
                    field,
                    f"{period} s is not a whole multiple of periods.physics ({physics} s)",
                    "choose a period that is an integer number of physics steps",
                )

        joints = self._joints(urdf_joints)
        links = {
            "base_link": self.get(d, "base_link", "base_link", kind=str),
            "imu_link": self.get(d, "imu_link", "imu_link", kind=str),
        }
        end_effector = self.get(d, "end_effector_link", "end_effector_link", None, kind=str)
        if end_effector:
            links["end_effector_link"] = end_effector
        feet = tuple(self.get(d, "foot_links", "foot_links", [], kind=list))
        for i, foot in enumerate(feet):
            links[f"foot_links[{i}]"] = foot
        for field, link in links.items():
            if link not in urdf_links:
                raise self.fail(
                    field, f"link {link!r} is not in {urdf.name}", f"use one of the URDF's links: {sorted(urdf_links)}"
                )
        if kind == "quadruped" and len(feet) != 4:
            raise self.fail(
                "foot_links", f"a quadruped needs 4 foot links, got {len(feet)}", "list FL, FR, RL, RR feet"
            )

        return RobotProfile(
            name=name,
            kind=kind,
            urdf=urdf,
            base_link=links["base_link"],
            imu_link=links["imu_link"],
            foot_links=feet,
            end_effector_link=end_effector,
            fixed_base=bool(self.get(d, "fixed_base", "fixed_base", kind=bool)),
            spawn_height=self.number(d, "spawn_height", "spawn_height", non_negative=True),
            physics_period=physics,
            sensing_period=sensing,
            policy_period=policy,
            command_timeout=self.number(d, "command_timeout", "command_timeout", positive=True),
            damping_kd=self.number(d, "damping_kd", "damping_kd", positive=True),
            battery_nominal_voltage=self.number(
                d, "battery_nominal_voltage", "battery_nominal_voltage", None, positive=True
            ),
            gravity_compensation=self._gravity_compensation(kind),
            spec_mass=self.number(d, "spec_mass", "spec_mass", positive=True),
            joints=joints,
            source=self.path,
            mirror=self._mirror(joints, feet),
            unitree=(
                parse_unitree_section(d["unitree"], [j.name for j in joints], self.fail)
                if d.get("unitree") is not None
                else None
            ),
            mujoco_model=self.get(d, "mujoco_model", "mujoco_model", None, kind=str),
        )

    def _check_twins(self, field: str, ja: JointSpec, jb: JointSpec, s: int) -> None:
        """``jb`` must be ``ja``'s mirror image (sign ``s``) in pose, limits, gains and strength."""
        mirrored = {
            "default": (s * ja.default, jb.default),
            "lower": (min(s * ja.lower, s * ja.upper), jb.lower),
            "upper": (max(s * ja.lower, s * ja.upper), jb.upper),
        }
        mirrored.update(
            {key: (getattr(ja, key), getattr(jb, key)) for key in ("velocity_limit", "effort_limit", "kp", "kd")}
        )
        for key, (want, got) in mirrored.items():
            if not math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-9):
                raise self.fail(
                    field,
                    f"{jb.name}'s {key} is {got}, but the mirror image of {ja.name}'s is {want}",
                    "correct the joints or the pair's sign: twins must be mirror images",
                )

    def _mirror(self, joints: tuple[JointSpec, ...], feet: tuple[str, ...]) -> RobotMirror | None:
        """The ``mirror:`` section: twin joints with a sign, twin feet. Checked against
        the joints themselves: twins must be mirror images in pose, limits, gains and strength."""
        section = self.get(self.data, "mirror", "mirror", None, kind=dict)
        if section is None:
            return None
        names = [j.name for j in joints]
        index, sign = list(range(len(names))), [1.0] * len(names)
        seen: set[str] = set()
        pairs = self.get(section, "joints", "mirror.joints", kind=list)
        for i, pair in enumerate(pairs):
            field = f"mirror.joints[{i}]"
            if not (isinstance(pair, list) and len(pair) == 3 and pair[2] in (1, -1) and not isinstance(pair[2], bool)):
                raise self.fail(
                    field,
                    f"expected [joint, twin joint, sign +1 or -1], got {pair!r}",
                    "write e.g. [FL_hip_joint, FR_hip_joint, -1] (-1: the twin's angle is the negative)",
                )
            a, b, s = pair
            for joint in (a, b):
                if joint not in names:
                    raise self.fail(field, f"{joint!r} is not a joint of the profile", f"use one of {names}")
                if joint in seen:
                    raise self.fail(field, f"{joint!r} is in two pairs", "list each joint in one pair")
            seen.update((a, b))
            ia, ib = names.index(a), names.index(b)
            index[ia], index[ib], sign[ia], sign[ib] = ib, ia, float(s), float(s)
            self._check_twins(field, joints[ia], joints[ib], s)
        unpaired = [n for n in names if n not in seen]
        if unpaired:
            raise self.fail(
                "mirror.joints",
                f"joints without a twin: {unpaired}",
                "pair every joint; one on the plane of symmetry is its own twin: [joint, joint, 1] "
                "(or -1 for a joint whose angle the reflection flips, e.g. a trunk yaw)",
            )
        foot_index = list(range(len(feet)))
        foot_pairs = self.get(section, "feet", "mirror.feet", [], kind=list)
        paired_feet: set[str] = set()
        for i, pair in enumerate(foot_pairs):
            field = f"mirror.feet[{i}]"
            if not (isinstance(pair, list) and len(pair) == 2 and all(link in feet for link in pair)):
                raise self.fail(
                    field,
                    f"expected [foot link, twin foot link] of foot_links {list(feet)}, got {pair!r}",
                    "write e.g. [FL_foot, FR_foot]",
                )
            if paired_feet & set(pair):
                raise self.fail(field, f"{pair} repeats a foot of another pair", "list each foot in one pair")
            paired_feet.update(pair)
            a, b = (feet.index(link) for link in pair)
            foot_index[a], foot_index[b] = b, a
        unpaired = [f for f in feet if f not in paired_feet]
        if unpaired:
            raise self.fail(
                "mirror.feet", f"foot links without a twin: {unpaired}", "pair every foot link, e.g. [FL_foot, FR_foot]"
            )
        return RobotMirror(
            joints=SignedPermutation(np.asarray(index), np.asarray(sign)),
            feet=SignedPermutation(np.asarray(foot_index), np.ones(len(feet))),
        )

    def _gravity_compensation(self, kind: str) -> bool:
        """Whether the robot's own controller adds gravity torques to every command (Franka
        does); defaults to true for fixed-base arms."""
        fixed = bool(self.get(self.data, "fixed_base", "fixed_base", kind=bool))
        value = self.get(self.data, "gravity_compensation", "gravity_compensation", None, kind=bool)
        if value is None:
            return kind == "arm" and fixed
        if value and not fixed:
            raise self.fail(
                "gravity_compensation",
                "only a fixed-base robot can compensate gravity per joint",
                "set gravity_compensation: false for a floating-base robot",
            )
        return value

    def _urdf(self) -> Path:
        relative = self.get(self.data, "urdf", "urdf", kind=str)
        project_root = self.path.resolve().parent.parent.parent  # <root>/config/robots/x.yaml
        urdf = resolve(relative, project_root)
        if not urdf.is_file():
            raise self.fail(
                "urdf",
                f"file {relative!r} not found (looked for {urdf})",
                "point 'urdf:' at an existing URDF, relative to the project root or absolute",
            )
        return urdf

    def _joints(self, urdf_joints: list[str]) -> tuple[JointSpec, ...]:
        entries = self.get(self.data, "joints", "joints", kind=list)
        if not entries:
            raise self.fail("joints", "no joints listed", "list the actuated joints in control order")
        joints: list[JointSpec] = []
        for i, entry in enumerate(entries):
            field = f"joints[{i}]"
            if not isinstance(entry, dict):
                raise self.fail(field, f"expected a mapping, got {entry!r}", "write {name: ..., default: ..., ...}")
            name = self.get(entry, "name", f"{field}.name", kind=str)
            field = f"joints[{i}] ({name})"
            if name not in urdf_joints:
                raise self.fail(
                    f"{field}.name", f"joint {name!r} is not a movable joint of the URDF", f"use one of {urdf_joints}"
                )
            spec = JointSpec(
                name=name,
                default=self.number(entry, "default", f"{field}.default"),
                lower=self.number(entry, "lower", f"{field}.lower"),
                upper=self.number(entry, "upper", f"{field}.upper"),
                velocity_limit=self.number(entry, "velocity", f"{field}.velocity", positive=True),
                effort_limit=self.number(entry, "effort", f"{field}.effort", positive=True),
                kp=self.number(entry, "kp", f"{field}.kp", non_negative=True),
                kd=self.number(entry, "kd", f"{field}.kd", non_negative=True),
                acceleration_limit=self.number(entry, "acceleration", f"{field}.acceleration", None, positive=True),
                jerk_limit=self.number(entry, "jerk", f"{field}.jerk", None, positive=True),
            )
            if spec.lower >= spec.upper:
                raise self.fail(
                    f"{field}.lower",
                    f"lower ({spec.lower}) must be below upper ({spec.upper})",
                    "swap or correct the limits",
                )
            if not spec.lower <= spec.default <= spec.upper:
                raise self.fail(
                    f"{field}.default",
                    f"{spec.default} is outside [{spec.lower}, {spec.upper}]",
                    "choose a default pose inside the joint limits",
                )
            joints.append(spec)
        names = [j.name for j in joints]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise self.fail("joints", f"joints listed twice: {duplicates}", "list each joint once")
        if names != urdf_joints:
            missing = [n for n in urdf_joints if n not in names]
            problem = (
                f"the URDF's movable joints {missing} are not in the profile"
                if missing
                else "the joint order differs from the URDF's"
            )
            raise self.fail(
                "joints",
                f"{problem} (URDF order: {urdf_joints})",
                "list every movable URDF joint once, in the URDF's order",
            )
        return tuple(joints)


def _read_urdf(urdf: Path, reader: _ProfileReader) -> tuple[set[str], list[str]]:
    """Link names and movable joint names (in file order) of a URDF."""
    try:
        root = ET.parse(urdf).getroot()
    except ET.ParseError as exc:
        raise reader.fail("urdf", f"{urdf} is not valid XML ({exc})", "repair the URDF") from exc
    # str: the URDF schema requires a name on every link and joint.
    links = {cast(str, link.get("name")) for link in root.findall("link")}
    joints = [cast(str, j.get("name")) for j in root.findall("joint") if j.get("type") in MOVABLE_URDF_JOINT_TYPES]
    return links, joints
