"""The observation layout: THE contract between a training environment and the deployed policy.

A policy sees one flat float32 vector. Which quantities it holds, in which order, at
which scale, is an :class:`ObservationSpec`: the training envs build their observations
with it, the export writes it into the ONNX metadata (:meth:`ObservationSpec.to_metadata`),
and the ROS policy runtime rebuilds the same spec from that metadata and fills it from
ROS messages through the same :meth:`ObservationSpec.observe`. No other code lays out
an observation, so training and deployment cannot drift apart silently; a model whose
layout differs from the running robot's is refused with :meth:`ObservationSpec.differences`.

Every term is a function of :class:`RobotSignals` from a fixed vocabulary (``n`` is the
robot's number of joints; frames: "body" is the base/IMU frame, x forward, z up)::

    name               size  value (before scaling)                          signals used
    base_ang_vel       3     angular velocity of the base, body frame, rad/s  base_angular_velocity
    projected_gravity  3     unit gravity direction in the body frame         base_orientation
                             ((0, 0, -1) when level)
    velocity_command   3     commanded (vx m/s, vy m/s, yaw rate rad/s)       velocity_command
    joint_pos_rel      n     q - q_default, rad                               joint_position, default_joint_position
    joint_vel          n     dq, rad/s                                        joint_velocity
    last_action        n     the policy's previous action (after clipping)    last_action
    base_lin_vel       3     linear velocity of the base, body frame, m/s     base_linear_velocity
    joint_pos          n     q, rad                                           joint_position
    ee_position        3     end-effector position in the base frame, m       end_effector_position
    goal_position      3     arm target position in the base frame, m         goal_position
    goal_offset        3     goal - end effector, base frame, m               goal_position, end_effector_position
    gait_clock         2     (sin 2*pi*phase, cos 2*pi*phase) of the policy's gait_phase
                             own gait cycle (walk-these-ways' clock inputs)

The observation is the concatenation, in spec order, of ``scale * value`` per term.
Joint arrays are in the robot profile's joint order.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from sim2real.core.mirror import RobotMirror, SignedPermutation

METADATA_FORMAT = "sim2real.observation"
METADATA_VERSION = 1


@dataclass
class RobotSignals:
    """What a robot tells a policy at one instant. Fields a spec does not use may be None.

    Arrays in SI units; joint arrays in profile joint order; quaternions (x, y, z, w).
    """

    joint_position: Any = None  # rad
    joint_velocity: Any = None  # rad/s
    base_orientation: Any = None  # base (IMU) frame in the world, xyzw
    base_angular_velocity: Any = None  # rad/s, body frame
    base_linear_velocity: Any = None  # m/s, body frame (only from an estimator on hardware)
    velocity_command: Any = None  # (vx m/s, vy m/s, yaw rate rad/s), body frame
    goal_position: Any = None  # m, arm target in the base frame
    end_effector_position: Any = None  # m, base frame
    last_action: Any = None  # previous policy output, after clipping
    default_joint_position: Any = None  # rad, the profile's default pose
    gait_phase: Any = None  # cycles of the policy's own gait clock (its frequency x time)


SIGNAL_NAMES = tuple(f.name for f in fields(RobotSignals))


def _projected_gravity(s: RobotSignals) -> np.ndarray:
    # R^T (0, 0, -1) is minus the third row of R; written out, this avoids building R.
    try:  # Python floats: numpy scalars cost 3x as much
        x, y, z, w = (float(v) for v in s.base_orientation)
    except (TypeError, ValueError):
        x = y = z = w = 0.0  # not four numbers: refused below, by name
    norm2 = x * x + y * y + z * z + w * w
    if not norm2 > 1e-12:
        raise ValueError(
            f"observation term 'projected_gravity': base_orientation {s.base_orientation!r} "
            "is not a quaternion (x, y, z, w)"
        )
    k = 2.0 / norm2  # exact rotation for a quaternion that drifted off unit length
    return np.array([-k * (x * z - y * w), -k * (y * z + x * w), -(1.0 - k * (x * x + y * y))])


@dataclass(frozen=True)
class _Definition:
    per_joint: bool  # size n (number of joints) rather than `size`
    signals: tuple[str, ...]
    compute: Callable[[RobotSignals], Any]
    meaning: str
    mirror: str  # how the left-right reflection maps it (core/mirror.py): polar, axial, command, joints, gait_clock
    size: int = 3


def _gait_clock(s: RobotSignals) -> np.ndarray:
    angle = 2.0 * math.pi * float(s.gait_phase)
    return np.array([math.sin(angle), math.cos(angle)])


VOCABULARY: dict[str, _Definition] = {
    "base_ang_vel": _Definition(
        False,
        ("base_angular_velocity",),
        lambda s: s.base_angular_velocity,
        "base angular velocity, body frame, rad/s",
        "axial",
    ),
    "projected_gravity": _Definition(
        False, ("base_orientation",), _projected_gravity, "unit gravity direction in the body frame", "polar"
    ),
    "velocity_command": _Definition(
        False,
        ("velocity_command",),
        lambda s: s.velocity_command,
        "commanded vx, vy (m/s), yaw rate (rad/s)",
        "command",
    ),
    "joint_pos_rel": _Definition(
        True,
        ("joint_position", "default_joint_position"),
        lambda s: np.subtract(s.joint_position, s.default_joint_position),
        "joint position minus default pose, rad",
        "joints",
    ),
    "joint_vel": _Definition(True, ("joint_velocity",), lambda s: s.joint_velocity, "joint velocity, rad/s", "joints"),
    "last_action": _Definition(True, ("last_action",), lambda s: s.last_action, "previous action", "joints"),
    "base_lin_vel": _Definition(
        False,
        ("base_linear_velocity",),
        lambda s: s.base_linear_velocity,
        "base linear velocity, body frame, m/s",
        "polar",
    ),
    "joint_pos": _Definition(True, ("joint_position",), lambda s: s.joint_position, "joint position, rad", "joints"),
    "ee_position": _Definition(
        False,
        ("end_effector_position",),
        lambda s: s.end_effector_position,
        "end-effector position, base frame, m",
        "polar",
    ),
    "goal_position": _Definition(
        False, ("goal_position",), lambda s: s.goal_position, "goal position, base frame, m", "polar"
    ),
    "goal_offset": _Definition(
        False,
        ("goal_position", "end_effector_position"),
        lambda s: np.subtract(s.goal_position, s.end_effector_position),
        "goal minus end-effector position, base frame, m",
        "polar",
    ),
    "gait_clock": _Definition(
        False, ("gait_phase",), _gait_clock, "sin and cos of the policy's gait phase", "gait_clock", size=2
    ),
}


def _definition(name: str) -> _Definition:
    try:
        return VOCABULARY[name]
    except KeyError:
        raise ValueError(f"unknown observation term {name!r}; known terms: {', '.join(VOCABULARY)}") from None


def term_size(name: str, num_joints: int) -> int:
    """Size of a vocabulary term on a robot with ``num_joints`` joints."""
    definition = _definition(name)
    return num_joints if definition.per_joint else definition.size


@dataclass(frozen=True)
class ObservationTerm:
    name: str
    size: int
    scale: float


class ObservationSpec:
    """An ordered list of observation terms; see the module docstring for the vocabulary."""

    def __init__(self, terms: Iterable[ObservationTerm]):
        self.terms: tuple[ObservationTerm, ...] = tuple(terms)
        if not self.terms:
            raise ValueError("an observation spec needs at least one term")
        seen = set()
        for term in self.terms:
            definition = _definition(term.name)
            if term.name in seen:
                raise ValueError(f"observation term {term.name!r} is listed twice")
            seen.add(term.name)
            if isinstance(term.size, bool) or not isinstance(term.size, (int, np.integer)) or term.size < 1:
                raise ValueError(f"observation term {term.name!r}: size must be a positive integer, got {term.size!r}")
            if not definition.per_joint and term.size != definition.size:
                raise ValueError(f"observation term {term.name!r} has size {definition.size}, not {term.size}")
            if (
                isinstance(term.scale, bool)
                or not isinstance(term.scale, (int, float))
                or not math.isfinite(term.scale)
            ):
                raise ValueError(f"observation term {term.name!r}: scale must be a finite number, got {term.scale!r}")
        self._definitions = [VOCABULARY[t.name] for t in self.terms]
        # Once: the runtime asks every tick whether these are all there and finite.
        self._signals_needed = tuple(dict.fromkeys(name for d in self._definitions for name in d.signals))
        self._bounds = []
        offset = 0
        for term in self.terms:
            self._bounds.append((offset, offset + term.size))
            offset += term.size
        self.size = offset
        self._buffer = np.zeros(self.size)

    # ------------------------------------------------------------- construction
    @classmethod
    def from_config(cls, entries: Sequence[Mapping[str, Any]], num_joints: int) -> "ObservationSpec":
        """From config entries ``{name: ..., scale: ...}`` (optional ``size``, checked) for a
        robot with ``num_joints`` joints."""
        terms = []
        for i, entry in enumerate(entries):
            if not isinstance(entry, Mapping) or "name" not in entry:
                raise ValueError(f"observation[{i}]: expected {{name: <term>, scale: <number>}}, got {entry!r}")
            unknown = set(entry) - {"name", "scale", "size"}
            if unknown:
                raise ValueError(
                    f"observation[{i}] ({entry['name']}): unknown keys {sorted(unknown)}; "
                    "use name, scale (and optionally size)"
                )
            size = term_size(entry["name"], num_joints)
            if "size" in entry and entry["size"] != size:
                raise ValueError(
                    f"observation[{i}] ({entry['name']}): size {entry['size']} given, "
                    f"but the term has {size} values on a {num_joints}-joint robot"
                )
            scale = entry.get("scale", 1.0)
            terms.append(ObservationTerm(entry["name"], size, float(scale) if _is_number(scale) else scale))
        return cls(terms)

    def to_metadata(self) -> str:
        """The layout as compact JSON (for ONNX metadata_props); :meth:`from_metadata` reads it."""
        return json.dumps(
            {
                "format": METADATA_FORMAT,
                "version": METADATA_VERSION,
                "terms": [{"name": t.name, "size": int(t.size), "scale": float(t.scale)} for t in self.terms],
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_metadata(cls, text: str) -> "ObservationSpec":
        try:
            data = json.loads(text)
        except (TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"observation metadata is not valid JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != METADATA_FORMAT:
            raise ValueError(f"observation metadata: expected a {METADATA_FORMAT!r} JSON object")
        if data.get("version") != METADATA_VERSION:
            raise ValueError(
                f"observation metadata version {data.get('version')!r} is not supported "
                f"(this code reads version {METADATA_VERSION})"
            )
        terms = data.get("terms")
        if not isinstance(terms, list):
            raise ValueError("observation metadata: 'terms' must be a list")
        try:
            return cls(ObservationTerm(t["name"], t["size"], t["scale"]) for t in terms)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"observation metadata: every term needs name, size and scale ({exc})") from None

    # ------------------------------------------------------------------ layout
    @property
    def names(self) -> list[str]:
        return [t.name for t in self.terms]

    def slices(self) -> dict[str, slice]:
        return {t.name: slice(a, b) for t, (a, b) in zip(self.terms, self._bounds)}

    def signals_needed(self) -> list[str]:
        """The RobotSignals fields this spec reads, in first-use order."""
        return list(self._signals_needed)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObservationSpec) and not self.differences(other)

    def __repr__(self) -> str:
        inner = ", ".join(f"{t.name}[{t.size}]x{t.scale:g}" for t in self.terms)
        return f"ObservationSpec({inner})"

    def differences(self, other: "ObservationSpec") -> list[str]:
        """Human-readable mismatches between this layout and ``other`` (empty: identical)."""
        problems = []
        mine, theirs = self.names, other.names
        for name in mine:
            if name not in theirs:
                problems.append(f"term {name!r} is in this layout but not in the other")
        for name in theirs:
            if name not in mine:
                problems.append(f"term {name!r} is in the other layout but not in this one")
        common_mine = [n for n in mine if n in theirs]
        common_theirs = [n for n in theirs if n in mine]
        if common_mine != common_theirs:
            problems.append(f"term order differs: this {common_mine} vs other {common_theirs}")
        other_terms = {t.name: t for t in other.terms}
        for term in self.terms:
            match = other_terms.get(term.name)
            if match is None:
                continue
            if term.size != match.size:
                problems.append(f"term {term.name!r}: size {term.size} here vs {match.size} in the other")
            if not math.isclose(term.scale, match.scale, rel_tol=1e-9, abs_tol=1e-12):
                problems.append(f"term {term.name!r}: scale {term.scale:g} here vs {match.scale:g} in the other")
        return problems

    def mirror(self, robot: RobotMirror, gait_shift: float | None = None) -> SignedPermutation:
        """The left-right mirror of this layout's observations (see :mod:`sim2real.core.mirror`).

        ``gait_shift``: how far, in cycles, the mirror image's gait clock runs ahead (the
        twin feet's phase offset: 0.5 for a trot or a pace, 0 for a bound); a clock shifted by
        half a cycle has sin and cos negated. Needed only when the layout has a gait clock."""
        parts = []
        for term, definition in zip(self.terms, self._definitions):
            kind = definition.mirror
            if kind == "joints":
                if term.size != len(robot.joints):
                    raise ValueError(
                        f"observation term {term.name!r} has {term.size} values, but the robot's "
                        f"mirror pairs {len(robot.joints)} joints"
                    )
                parts.append(robot.joints)
            elif kind == "gait_clock":
                if gait_shift is None:
                    raise ValueError(
                        "observation term 'gait_clock' needs the gait shift of the mirror image "
                        "(how far its clock runs ahead), and the task gives none"
                    )
                if min(gait_shift % 1.0, 1.0 - gait_shift % 1.0) not in (0.0, 0.5):
                    raise ValueError(
                        f"observation term 'gait_clock' mirrors only with twin feet in phase or "
                        f"half a cycle apart (gait shift 0 or 0.5), got {gait_shift!r}"
                    )
                parts.append(
                    SignedPermutation(
                        np.array([0, 1]), np.array([-1.0, -1.0] if gait_shift % 1.0 == 0.5 else [1.0, 1.0])
                    )
                )
            else:
                parts.append(SignedPermutation.of_vector(kind))
        return SignedPermutation.concatenate(parts)

    # ----------------------------------------------------------------- compute
    def observe(self, signals: RobotSignals) -> np.ndarray:
        """The observation vector (float32, a new array) for ``signals``. Computed in one scratch
        buffer per spec: call it from one thread at a time."""
        buffer = self._buffer
        for term, definition, (start, stop) in zip(self.terms, self._definitions, self._bounds):
            for name in definition.signals:
                if getattr(signals, name) is None:
                    raise ValueError(
                        f"observation term {term.name!r} needs signal {name!r}, but RobotSignals.{name} is None"
                    )
            value = np.asarray(definition.compute(signals), dtype=float)
            if value.shape != (term.size,):
                # Checked, not broadcast: a scalar or a wrong-robot array must not fill a slot silently.
                raise ValueError(
                    f"observation term {term.name!r} expects {term.size} values, got shape "
                    f"{value.shape} from signals {list(definition.signals)}"
                )
            buffer[start:stop] = value
            if term.scale != 1.0:
                buffer[start:stop] *= term.scale
        return buffer.astype(np.float32)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
