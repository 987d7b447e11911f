"""Joint commands matched by name: the hardware contract's /joint_commands, ROS-free.

A command names some or all of the robot's joints, with a position target for each
and optional velocity targets and feed-forward efforts (empty means zero). Joints a
command does not name keep their previous targets. A command that cannot be applied
exactly as sent is refused as a whole, so a half-applied command never reaches a motor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


class CommandRefused(ValueError):
    """A joint command that was not applied; the message says why and what to send instead."""


@dataclass
class JointTargets:
    """Targets in profile joint order."""

    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray

    def copy(self) -> "JointTargets":
        return JointTargets(self.position.copy(), self.velocity.copy(), self.effort.copy())

    @classmethod
    def positions(cls, position) -> "JointTargets":
        """Position targets only (a copy), with zero velocity targets and no feed-forward: a pose
        to hold or a policy's targets."""
        position = np.array(position, dtype=float)
        return cls(position, np.zeros_like(position), np.zeros_like(position))


class JointCommandMapper:
    """Maps name-addressed commands onto the profile's joint order, validating them."""

    def __init__(self, joint_names: Sequence[str], initial_position: Sequence[float] | None):
        """``initial_position``: the targets of joints no command has named yet. None when no
        pose is safe to assume (a driver forwarding to real hardware, where the arm may be
        anywhere): then the first command must name every joint."""
        self.joint_names = list(joint_names)
        self._index = {name: i for i, name in enumerate(self.joint_names)}
        n = len(self.joint_names)
        if initial_position is not None and len(initial_position) != n:
            raise ValueError(f"initial_position has {len(initial_position)} values for {n} joints")
        self._awaiting_full_command = initial_position is None
        self._last: tuple[list[str] | None, np.ndarray] = (None, np.zeros(0, dtype=int))  # last valid names, indices
        self.targets = JointTargets.positions(np.zeros(n) if initial_position is None else initial_position)

    def _index_of(self, names: list[str]) -> np.ndarray:
        """Each named joint's index, the names checked; the last list's answer is kept, since a
        driver's commands name the same joints in the same order 50-500 times a second."""
        last_names, last_index = self._last
        if names == last_names:
            return last_index
        if not names:
            raise CommandRefused("command names no joints; fill JointState.name with the joints to command")
        unknown = [n for n in names if n not in self._index]
        if unknown:
            raise CommandRefused(f"unknown joint names {unknown}; this robot's joints are {self.joint_names}")
        if len(set(names)) != len(names):
            raise CommandRefused(f"joint names repeated in one command: {names}")
        index = np.fromiter((self._index[n] for n in names), dtype=int, count=len(names))
        self._last = (names, index)  # one assignment: names and indices never come apart
        return index

    def apply(
        self,
        names: Sequence[str],
        position: Sequence[float],
        velocity: Sequence[float] = (),
        effort: Sequence[float] = (),
    ) -> JointTargets:
        """Validate a command and merge it into the held targets; raise CommandRefused otherwise."""
        names = list(names)
        index = self._index_of(names)
        if self._awaiting_full_command and len(names) != len(self.joint_names):
            missing = [n for n in self.joint_names if n not in names]
            raise CommandRefused(
                f"the first command must name every joint (missing {missing}): the others have "
                "no target yet, and a default pose would make them jump"
            )
        if len(position) != len(names):
            raise CommandRefused(
                f"position has {len(position)} values for {len(names)} names; send one target per named joint"
            )
        for field, values in (("velocity", velocity), ("effort", effort)):
            if len(values) not in (0, len(names)):
                raise CommandRefused(
                    f"{field} has {len(values)} values for {len(names)} names; send none or one per named joint"
                )
        columns = [np.asarray(v, dtype=float) for v in (position, velocity, effort)]
        for field, column in zip(("position", "velocity", "effort"), columns):
            if column.size and not np.all(np.isfinite(column)):
                raise CommandRefused(f"{field} contains non-finite values {column.tolist()}")
        position_arr, velocity_arr, effort_arr = columns
        self.targets.position[index] = position_arr
        self.targets.velocity[index] = velocity_arr if velocity_arr.size else 0.0
        self.targets.effort[index] = effort_arr if effort_arr.size else 0.0
        self._awaiting_full_command = False
        return self.targets
