"""The main job's script: what the operator asks of the policy, and what came of it.

Quadruped: a sequence of /cmd_vel segments (stand, walk, turn, walk). Arm: a sequence
of /goal_pose targets. :class:`DemoRecorder` keeps the recorded motion and turns it
into the figures `sim2real demo` prints: distance, velocity or reach error, falls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# (start s, vx m/s, vy m/s, yaw rate rad/s): each segment lasts until the next starts.
WALK_SCRIPT = (
    (0.0, 0.0, 0.0, 0.0),
    (3.0, 0.5, 0.0, 0.0),
    (13.0, 0.4, 0.0, 0.4),
    (19.0, 0.5, 0.0, 0.0),
    (27.0, 0.0, 0.0, 0.0),
)
WALK_DURATION = 30.0
# (start s, x, y, z) in the arm's base frame, inside the training workspace.
REACH_SCRIPT = (
    (0.0, 0.45, 0.0, 0.45),
    (5.0, 0.55, 0.25, 0.35),
    (10.0, 0.40, -0.25, 0.55),
    (15.0, 0.60, 0.10, 0.25),
    (20.0, 0.35, 0.20, 0.60),
    (25.0, 0.50, -0.10, 0.40),
)
REACH_DURATION = 30.0
SETTLE_S = 1.5  # after a command or goal change, before errors count
FALL_HEIGHT = 0.15  # m: a quadruped base below this has fallen


def segment_at(script, t: float) -> tuple[int, tuple[float, ...]]:
    index = max(i for i, row in enumerate(script) if row[0] <= t)
    return index, script[index][1:]


@dataclass
class DemoRecorder:
    """Samples of the run (time from the start, s) and the figures computed from them."""

    kind: str  # quadruped | arm
    t: list[float] = field(default_factory=list)
    joint_positions: list[np.ndarray] = field(default_factory=list)
    base_positions: list[np.ndarray] = field(default_factory=list)
    base_orientations: list[np.ndarray] = field(default_factory=list)
    command: list[np.ndarray] = field(default_factory=list)  # cmd (3) or goal (3)
    measured: list[np.ndarray] = field(default_factory=list)  # body velocity (vx, vy, wz) or end effector (3)
    segment: list[int] = field(default_factory=list)

    def add(
        self, t: float, segment: int, joint_position, command, measured, base_position=None, base_orientation=None
    ) -> None:
        self.t.append(t)
        self.segment.append(segment)
        self.joint_positions.append(np.asarray(joint_position, dtype=float))
        self.command.append(np.asarray(command, dtype=float))
        self.measured.append(np.asarray(measured, dtype=float))
        if base_position is not None:
            self.base_positions.append(np.asarray(base_position, dtype=float))
            self.base_orientations.append(np.asarray(base_orientation, dtype=float))

    def _settled(self) -> np.ndarray:
        t, segment = np.asarray(self.t), np.asarray(self.segment)
        starts = {s: t[segment == s].min() for s in np.unique(segment)}
        return np.array([ti - starts[s] >= SETTLE_S for ti, s in zip(t, segment)])

    def summary(self) -> dict[str, float]:
        if len(self.t) < 2:
            return {"samples": len(self.t)}
        command, measured, settled = np.asarray(self.command), np.asarray(self.measured), self._settled()
        result: dict[str, float] = {"samples": len(self.t), "duration_s": self.t[-1] - self.t[0]}
        if self.kind == "quadruped":
            base = np.asarray(self.base_positions)
            steps = np.linalg.norm(np.diff(base[:, :2], axis=0), axis=1)
            result["distance_m"] = float(steps.sum())
            result["displacement_m"] = float(np.linalg.norm(base[-1, :2] - base[0, :2]))
            result["fell"] = bool(np.any(base[:, 2] < FALL_HEIGHT))
            moving = settled & (np.linalg.norm(command[:, :2], axis=1) > 0)
            if moving.any():
                error = np.linalg.norm(measured[moving, :2] - command[moving, :2], axis=1)
                result["velocity_error_mean_mps"] = float(error.mean())
                result["velocity_error_p95_mps"] = float(np.percentile(error, 95))
                # Per segment, the mean velocity against the command: what "walks at 0.5 m/s" means.
                segment = np.asarray(self.segment)
                errors = []
                for s in np.unique(segment[moving]):
                    rows = moving & (segment == s)
                    errors.append(np.linalg.norm(measured[rows, :2].mean(axis=0) - command[rows, :2].mean(axis=0)))
                result["segment_mean_velocity_error_mps"] = float(np.max(errors))
            turning = settled & (np.abs(command[:, 2]) > 0)
            if turning.any():
                result["yaw_rate_error_mean_rps"] = float(np.abs(measured[turning, 2] - command[turning, 2]).mean())
        else:
            error = np.linalg.norm(measured - command, axis=1)
            segment = np.asarray(self.segment)
            finals = [error[segment == s][-1] for s in np.unique(segment)]
            result["goals"] = len(finals)
            result["reach_error_final_mean_m"] = float(np.mean(finals))
            result["reach_error_final_max_m"] = float(np.max(finals))
            result["goals_within_2cm"] = int(np.sum(np.asarray(finals) < 0.02))
            if settled.any():
                result["reach_error_settled_mean_m"] = float(error[settled].mean())
        return result

    def save(self, path) -> None:
        # Any, not np.ndarray: mypy refuses a ** of ndarrays for savez_compressed, whose allow_pickle keyword is a bool.
        arrays: dict[str, Any] = {
            "t": np.asarray(self.t),
            "joint_positions": np.asarray(self.joint_positions),
            "command": np.asarray(self.command),
            "measured": np.asarray(self.measured),
            "segment": np.asarray(self.segment),
        }
        if self.base_positions:
            arrays["base_positions"] = np.asarray(self.base_positions)
            arrays["base_orientations"] = np.asarray(self.base_orientations)
        np.savez_compressed(path, **arrays)
