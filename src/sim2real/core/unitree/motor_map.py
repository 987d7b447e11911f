"""Which Go2 motor drives which named joint: the ``unitree:`` section of a robot profile.

The SDK indexes motors FR, FL, RR, RL x (hip, thigh, calf); the profile lists joints FL, FR,
RL, RR. The mapping is by name, in the profile, never by position in code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

MOTOR_SLOTS = 20  # motor entries in LowCmd_ and LowState_ (a Go2 uses 12)


@dataclass(frozen=True)
class UnitreeInterface:
    head: tuple[int, int]  # LowCmd head bytes
    level_flag: int  # 0xFF: low-level control
    motor_mode: int  # MotorCmd mode of a commanded motor (0x01: servo)
    motor_index: dict[str, int]  # joint name -> motor slot in LowCmd/LowState
    lowstate_rate: float = 500.0  # Hz the robot sends LowState at
    min_battery_voltage: float = 0.0  # V, preflight refuses to command below it
    max_motor_temperature: float = 70.0  # deg C, preflight refuses to command above it

    def slots(self, joint_names: Sequence[str]) -> np.ndarray:
        """Motor slot of each joint, in ``joint_names`` order."""
        return np.array([self.motor_index[name] for name in joint_names], dtype=int)


def _motor_index(motors: Any, joint_names: Sequence[str], fail: Callable[[str, str, str], Exception]) -> dict[str, int]:
    """``unitree.motors``: one motor slot of its own for every joint of the profile."""
    if not isinstance(motors, dict):
        raise fail(
            "unitree.motors",
            f"expected joint name -> motor index, got {motors!r}",
            "write e.g. {FR_hip_joint: 0, ...} for every joint",
        )
    missing = [name for name in joint_names if name not in motors]
    extra = sorted(set(motors) - set(joint_names))
    if missing or extra:
        raise fail(
            "unitree.motors",
            f"joints without a motor: {missing}; names that are no joint: {extra}",
            "give every joint of the profile exactly one motor index",
        )
    index = {}
    for name in joint_names:
        slot = motors[name]
        if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < MOTOR_SLOTS:
            raise fail(
                f"unitree.motors.{name}",
                f"expected a motor index 0..{MOTOR_SLOTS - 1}, got {slot!r}",
                "use the SDK's motor index",
            )
        index[name] = slot
    shared = sorted({s for s in index.values() if list(index.values()).count(s) > 1})
    if shared:
        raise fail(
            "unitree.motors", f"motor indices given to several joints: {shared}", "give each joint its own motor"
        )
    return index


def parse_unitree_section(
    data: Any, joint_names: Sequence[str], fail: Callable[[str, str, str], Exception]
) -> UnitreeInterface:
    """The profile's ``unitree:`` mapping, checked; ``fail(field, problem, fix)`` makes the error."""
    if not isinstance(data, dict):
        raise fail("unitree", f"expected a mapping, got {data!r}", "see config/robots/go2.yaml")
    known = {
        "head",
        "level_flag",
        "motor_mode",
        "motors",
        "lowstate_rate",
        "min_battery_voltage",
        "max_motor_temperature",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise fail("unitree", f"unknown fields {unknown}", f"use {sorted(known)}")

    def positive(key: str, default: float) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
            raise fail(f"unitree.{key}", f"expected a finite number > 0, got {value!r}", "write it in SI units")
        return float(value)

    def byte(value: Any, field: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFF:
            raise fail(field, f"expected a byte (0..255), got {value!r}", "write e.g. 0xFF")
        return value

    head = data.get("head")
    if not isinstance(head, list) or len(head) != 2:
        raise fail("unitree.head", f"expected two bytes, got {head!r}", "write [0xFE, 0xEF] (the Go2's)")
    index = _motor_index(data.get("motors"), joint_names, fail)
    return UnitreeInterface(
        head=(byte(head[0], "unitree.head[0]"), byte(head[1], "unitree.head[1]")),
        level_flag=byte(data.get("level_flag", 0xFF), "unitree.level_flag"),
        motor_mode=byte(data.get("motor_mode", 0x01), "unitree.motor_mode"),
        motor_index=index,
        lowstate_rate=positive("lowstate_rate", 500.0),
        min_battery_voltage=positive("min_battery_voltage", 1.0),
        max_motor_temperature=positive("max_motor_temperature", 70.0),
    )
