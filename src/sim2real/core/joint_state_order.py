"""/joint_states arrays in profile joint order, matched by name: one matcher for every node.

Drivers keep one name order, so the index is rebuilt only when the names change; every
message is checked, because one with a joint missing or arrays shorter than its names
would otherwise be read in the wrong order or raise in a callback (which ends a node).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np


class JointStateOrder:
    def __init__(self, joint_names: Sequence[str], robot: str = ""):
        self.joint_names = list(joint_names)
        self.robot = robot
        self._names: Optional[tuple[str, ...]] = None
        self.index: Optional[np.ndarray] = None  # profile order -> message order, for the last names kept

    def index_of(
        self,
        names: Sequence[str],
        position: Sequence[float],
        velocity: Sequence[float] = (),
        effort: Sequence[float] = (),
    ) -> np.ndarray:
        """The index of this message's arrays (profile joint order); ValueError naming the problem
        for a message to refuse, which leaves the previous index as it was."""
        key = tuple(names)
        n = len(key)
        if len(position) != n or len(velocity) not in (0, n) or len(effort) not in (0, n):
            raise ValueError(
                f"/joint_states with {n} names, {len(position)} positions, {len(velocity)} "
                f"velocities and {len(effort)} efforts"
            )
        if key != self._names:
            lookup = {name: i for i, name in enumerate(key)}
            absent = [name for name in self.joint_names if name not in lookup]
            if absent:
                robot = f" of robot {self.robot!r}" if self.robot else ""
                raise ValueError(f"/joint_states lack joints {absent}{robot} (names: {list(key)})")
            self.index = np.array([lookup[name] for name in self.joint_names])
            self._names = key
        assert self.index is not None  # set with _names, which is key now
        return self.index
