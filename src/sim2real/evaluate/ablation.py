"""Which drawn condition costs a scenario: a world set's draw run again with one group of
conditions put back to nominal (``sim2real eval --suite ... --ablate``).

A randomized world set draws every condition at once, so a scenario that fails under it does
not say whether the ground, the motors or the sensors made it fail. An ablation keeps the same
episodes (the same seeds and the same draws) and sets one group of related conditions to the
nominal robot's values, the rest as drawn: a scenario that passes with a group nominal and fails
on the full draw fails by that group. The groups together name every
:class:`~sim2real.sim.conditions.PhysicalConditions` field once (a test holds them to it).
"""

from __future__ import annotations

from typing import Mapping

from sim2real.sim.conditions import PhysicalConditions

# Related conditions that a user would change together on a robot (a new battery and other
# motors; a stiffer gearbox; another floor), in the order the attribution lists them.
CONDITION_GROUPS: dict[str, tuple[str, ...]] = {
    "terrain": ("terrain_roughness",),
    "ground friction": ("ground_friction",),
    "mass": ("mass_scale",),
    "motors": ("motor_strength", "battery_voltage", "armature"),
    "latency": ("latency",),
    "joint losses": ("joint_friction", "joint_damping"),
    "sensor noise": ("joint_position_noise", "joint_velocity_noise", "gyro_noise", "accelerometer_noise"),
}

_NOMINAL = PhysicalConditions()


def changed_groups(drawn: Mapping[str, float | None]) -> list[str]:
    """The groups of which ``drawn`` sets some condition away from the nominal robot's value
    (a condition absent from ``drawn`` is nominal), in ``CONDITION_GROUPS`` order."""
    return [
        group
        for group, names in CONDITION_GROUPS.items()
        if any(name in drawn and drawn[name] != getattr(_NOMINAL, name) for name in names)
    ]


def without_group(drawn: Mapping[str, float | None], group: str) -> dict[str, float | None]:
    """``drawn`` with the conditions of ``group`` back to nominal (left out: absent is nominal)."""
    names = CONDITION_GROUPS[group]
    return {name: value for name, value in drawn.items() if name not in names}


def ablated_name(world: str, group: str) -> str:
    """The world set name of ``world``'s draw with ``group`` nominal."""
    return f"{world} minus {group}"


def attribution_line(world: str, draw_passes: int, group_passes: Mapping[str, int], scenarios: int) -> str:
    """One line per ablated world set: how many scenario runs pass on the full draw and with each
    group nominal, the groups that pass the most first."""
    ranked = sorted(group_passes.items(), key=lambda item: -item[1])  # stable: ties keep group order
    parts = ", ".join(f"{group} nominal {passes}" for group, passes in ranked)
    return f"{world}: {draw_passes}/{scenarios} pass as drawn; with {parts}"
