"""The commands a policy was trained on, read from its metadata: the runtime clamps the
operator's /cmd_vel and /goal_pose to them before the policy sees them.

A walking policy trained on vx in [-0.5, 1.0] m/s has never seen 100 m/s: asked for it, the
shipped Go2 policy flipped the robot before the tilt check tripped. Clamped, it walks at the
fastest speed it knows. Each running policy clamps to its own ranges (two run while a swap
cross-fades). The ranges are the task config's hardest command ranges (``commands.ranges_hardest``,
the whole range the curriculum reached) and the arm's goal box (``goal.box``).

Training also never drew a horizontal command slower than ``commands.standing_below`` other
than exactly zero (such a draw became a stand): below it, vx and vy become 0 here too, so a
joystick's near-centre noise asks the policy to stand, as it learned, not to creep.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

import numpy as np

from sim2real.core.observation import RobotSignals

VELOCITY_KEYS = ("vx", "vy", "yaw_rate")


def _bounds(rows: Any) -> Optional[np.ndarray]:
    """(3, 2) [low, high] rows, or None for anything else (a policy without such ranges)."""
    try:
        bounds = np.array(rows, dtype=float)
    except (TypeError, ValueError):
        return None
    if bounds.shape != (3, 2) or not np.all(np.isfinite(bounds)) or np.any(bounds[:, 0] > bounds[:, 1]):
        return None
    return bounds


@dataclass(frozen=True)
class TrainedRanges:
    velocity: Optional[np.ndarray] = None  # (3, 2): vx m/s, vy m/s, yaw rate rad/s
    goal_box: Optional[np.ndarray] = None  # (3, 2): x, y, z in the base frame, m
    standing_below: float = 0.0  # m/s: a slower horizontal command is a stand (0: no dead zone)

    @classmethod
    def of(cls, task_config: dict) -> "TrainedRanges":
        commands = task_config.get("commands") if isinstance(task_config, dict) else None
        hardest = commands.get("ranges_hardest") if isinstance(commands, dict) else None
        velocity = _bounds([hardest.get(k) for k in VELOCITY_KEYS]) if isinstance(hardest, dict) else None
        goal = task_config.get("goal") if isinstance(task_config, dict) else None
        box = _bounds(goal.get("box")) if isinstance(goal, dict) else None
        try:
            standing = float(commands.get("standing_below", 0.0)) if isinstance(commands, dict) else 0.0
        except (TypeError, ValueError):
            standing = 0.0
        return cls(velocity, box, standing if np.isfinite(standing) and standing > 0 else 0.0)

    def clamp(self, signals: RobotSignals) -> tuple[RobotSignals, str]:
        """``signals`` with the commands inside the trained ranges, and what was clamped ("": nothing;
        the dead zone below ``standing_below`` is no clamp: it is how the policy was trained)."""
        notes, changes = [], {}
        command = signals.velocity_command
        if self.standing_below > 0 and command is not None:
            command = np.asarray(command, dtype=float)
            if 0 < np.hypot(command[0], command[1]) < self.standing_below:
                command = command.copy()
                command[:2] = 0.0
                signals = replace(signals, velocity_command=command)
        for field, bounds, names in (
            ("velocity_command", self.velocity, VELOCITY_KEYS),
            ("goal_position", self.goal_box, ("goal x", "goal y", "goal z")),
        ):
            value = getattr(signals, field)
            if bounds is None or value is None:
                continue
            value = np.asarray(value, dtype=float)
            clamped = np.clip(value, bounds[:, 0], bounds[:, 1])
            outside = np.flatnonzero(clamped != value)
            if outside.size:
                changes[field] = clamped
                notes += [
                    f"{names[i]} {value[i]:g} -> {clamped[i]:g} (trained [{bounds[i, 0]:g}, {bounds[i, 1]:g}])"
                    for i in outside
                ]
        if not changes:
            return signals, ""
        return replace(signals, **changes), "commands clamped to the policy's trained ranges: " + ", ".join(notes)
