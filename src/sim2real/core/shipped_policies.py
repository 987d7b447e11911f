"""Where the shipped policy of a robot is: policies/<robot>_<task>.onnx in the package's share
folder, the task being the robot kind's default (walk for a quadruped, reach for an arm)."""

from __future__ import annotations

from pathlib import Path

from sim2real.core.paths import share_dir
from sim2real.core.robot_profile import load_profile

DEFAULT_TASK = {"quadruped": "walk", "arm": "reach"}


def shipped_policy(robot: str) -> Path | None:
    """The shipped policy file of ``robot``, or None when the package ships none for it."""
    profile = load_profile(robot)
    path = share_dir() / "policies" / f"{profile.name}_{DEFAULT_TASK[profile.kind]}.onnx"
    return path if path.is_file() else None
