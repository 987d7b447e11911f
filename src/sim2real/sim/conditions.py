"""Physical conditions of a simulated world, set by name at run time.

The field names are a contract: domain-randomization configs, sysid results and
``SimWorld.set_condition`` all refer to a condition by exactly these names.
Units are SI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

_INF = math.inf


def _condition(
    default: Any, low: float, high: float = _INF, *, low_open: bool = False, optional: bool = False, doc: str = ""
) -> Any:
    # The valid range lives beside the default so that validation, error messages and
    # anything that samples the conditions read one table instead of three.
    return field(
        default=default,
        metadata={
            "low": low,
            "high": high,
            "low_open": low_open,
            "optional": optional,
            "doc": doc,
        },
    )


@dataclass
class PhysicalConditions:
    """The physical conditions of one world. Defaults are the nominal robot on flat ground."""

    ground_friction: float = _condition(0.8, 0.0, doc="lateral friction coefficient of the robot-ground contact")
    mass_scale: float = _condition(1.0, 0.0, low_open=True, doc="multiplies every link's mass and inertia")
    motor_strength: float = _condition(1.0, 0.0, doc="multiplies the actuator torque (before the torque limit)")
    latency: float = _condition(
        0.0, 0.0, doc="actuation latency, s: a command takes effect this long after it is given"
    )
    terrain_roughness: float = _condition(
        0.0, 0.0, doc="height-field amplitude, m: heights lie in [-r, r] around z=0; 0 is a flat plane"
    )
    battery_voltage: float | None = _condition(
        None,
        0.0,
        low_open=True,
        optional=True,
        doc="battery voltage, V: the torque limit scales by min(1, V / nominal); None is nominal",
    )
    joint_friction: float = _condition(0.0, 0.0, doc="Coulomb joint friction, N*m")
    joint_damping: float = _condition(0.0, 0.0, doc="viscous joint damping, N*m*s/rad")
    armature: float = _condition(
        0.0,
        0.0,
        doc="rotor inertia reflected through the gearbox (N^2 * rotor inertia), kg*m^2, added to "
        "every actuated joint's inertia about its axis",
    )
    joint_position_noise: float = _condition(0.0, 0.0, doc="std of joint position readings, rad")
    joint_velocity_noise: float = _condition(0.0, 0.0, doc="std of joint velocity readings, rad/s")
    gyro_noise: float = _condition(0.0, 0.0, doc="std of IMU angular velocity, rad/s")
    accelerometer_noise: float = _condition(0.0, 0.0, doc="std of IMU linear acceleration, m/s^2")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def valid_range(cls, name: str) -> str:
        """Human-readable valid range of one condition, as used in error messages."""
        meta = cls._metadata(name)
        left = "(" if meta["low_open"] else "["
        right = ")" if meta["high"] == _INF else "]"
        text = f"{left}{meta['low']:g}, {meta['high']:g}{right}"
        return text + " or None" if meta["optional"] else text

    @classmethod
    def check(cls, name: str, value: Any) -> float | None:
        """Validate one condition value and return it as a float (or None where allowed)."""
        meta = cls._metadata(name)
        if value is None and meta["optional"]:
            return None
        try:
            number = math.nan if isinstance(value, bool) else float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not math.isfinite(number):
            raise ValueError(
                f"condition {name!r}: {value!r} is not a finite number; valid range {cls.valid_range(name)}"
            )
        too_low = number <= meta["low"] if meta["low_open"] else number < meta["low"]
        if too_low or number > meta["high"]:
            raise ValueError(f"condition {name!r}: {value!r} is out of range; valid range {cls.valid_range(name)}")
        return number

    def validate(self) -> "PhysicalConditions":
        for name in self.names():
            self.check(name, getattr(self, name))
        return self

    @classmethod
    def from_yaml(cls, text: str, what: str = "parameter 'conditions'") -> "PhysicalConditions":
        """Conditions from a YAML mapping such as ``'{ground_friction: 0.5}'`` (what sim_robot's
        ``conditions`` parameter and ``sim2real demo/up --conditions`` take), validated;
        ValueError naming ``what``, the problem and the valid names or range."""
        import yaml

        try:
            values = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ValueError(
                f"{what} is not valid YAML ({exc}); write a mapping such as '{{ground_friction: 0.5}}'"
            ) from exc
        if not isinstance(values, dict):
            raise ValueError(f"{what} must be a mapping such as '{{ground_friction: 0.5}}', got {values!r}")
        unknown = sorted(set(values) - set(cls.names()))
        if unknown:
            raise ValueError(f"{what} has unknown names {unknown}; valid names: {list(cls.names())}")
        try:
            return cls(**values).validate()
        except ValueError as exc:
            raise ValueError(f"{what}: {exc}") from None

    @classmethod
    def _metadata(cls, name: str) -> dict[str, Any]:
        for f in fields(cls):
            if f.name == name:
                return f.metadata  # type: ignore[return-value]
        raise ValueError(f"unknown condition {name!r}; valid names: {', '.join(cls.names())}")
