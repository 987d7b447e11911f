"""Left-right mirror images of a robot's signals, for symmetric training.

A robot that is its own mirror image through the trunk's x-z plane (a quadruped, a
humanoid) lives in a world with the same symmetry: the mirrored state, driven by the
mirrored action, is as likely and earns the same return. PPO can then learn from every
sample twice (data augmentation), or be told that its policy should commute with the
mirror (mirror loss): Mittal et al., "Symmetry Considerations for Learning Task Symmetric
Robot Policies", ICRA 2024, which rsl_rl's symmetry extension implements.

Every mirror here is a *signed permutation*, ``y = sign * x[index]``: twins swap places
(left and right legs), and a value changes sign when the reflection flips it. The
reflection y -> -y of the body frame gives, per kind of quantity:

    polar    a vector (position, velocity, gravity direction): (x, -y, z)
    axial    an angular velocity (a pseudovector): (-x, y, -z)
    command  a velocity command (vx, vy, yaw rate): (vx, -vy, -yaw rate)
    joints   the robot profile's twins and signs (``mirror.joints``): a hip abduction
             changes sign, a knee does not
    feet     the robot profile's twin feet (``mirror.feet``), no sign
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

VECTOR_SIGNS = {
    "polar": (1.0, -1.0, 1.0),
    "axial": (-1.0, 1.0, -1.0),
    "command": (1.0, -1.0, -1.0),
}


@dataclass(frozen=True, eq=False)
class SignedPermutation:
    """``y = sign * x[..., index]``: a mirror of vectors of ``len(index)`` values."""

    index: np.ndarray
    sign: np.ndarray

    def __post_init__(self):
        index = np.asarray(self.index, dtype=np.int64)
        sign = np.asarray(self.sign, dtype=np.float32)
        if index.ndim != 1 or sign.shape != index.shape:
            raise ValueError(
                f"a signed permutation needs index and sign of one length, got {index.shape} and {sign.shape}"
            )
        if sorted(index.tolist()) != list(range(len(index))):
            raise ValueError(f"index {index.tolist()} is not a permutation of 0..{len(index) - 1}")
        if not np.all(np.abs(sign) == 1.0):
            raise ValueError(f"signs must be +1 or -1, got {sign.tolist()}")
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "sign", sign)

    @classmethod
    def identity(cls, size: int) -> "SignedPermutation":
        return cls(np.arange(size), np.ones(size))

    @classmethod
    def of_vector(cls, kind: str) -> "SignedPermutation":
        """The mirror of a 3-vector of ``kind`` (polar, axial or command)."""
        try:
            return cls(np.arange(3), np.array(VECTOR_SIGNS[kind]))
        except KeyError:
            raise ValueError(f"unknown vector kind {kind!r}; known: {', '.join(VECTOR_SIGNS)}") from None

    @classmethod
    def concatenate(cls, parts: Sequence["SignedPermutation"]) -> "SignedPermutation":
        """The mirror of the concatenation of vectors, each mirrored by its part."""
        index, sign, offset = [], [], 0
        for part in parts:
            index.append(part.index + offset)
            sign.append(part.sign)
            offset += len(part)
        return cls(np.concatenate(index) if index else np.zeros(0), np.concatenate(sign) if sign else np.zeros(0))

    def __len__(self) -> int:
        return len(self.index)

    def __call__(self, values: Any) -> Any:
        """Mirror the last axis of ``values`` (a numpy array; torch tensors via :meth:`as_torch`)."""
        return np.asarray(values)[..., self.index] * self.sign

    def as_torch(self):
        """``(index, sign)`` as torch tensors, for ``values[..., index] * sign`` on tensors."""
        import torch

        return torch.from_numpy(self.index), torch.from_numpy(self.sign)

    def is_involution(self) -> bool:
        """Mirroring twice gives back the original (every reflection must)."""
        return bool(
            np.array_equal(self.index[self.index], np.arange(len(self)))
            and np.all(self.sign * self.sign[self.index] == 1.0)
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, SignedPermutation)
            and np.array_equal(self.index, other.index)
            and np.array_equal(self.sign, other.sign)
        )

    def __repr__(self) -> str:
        items = ", ".join(f"{'-' if s < 0 else ''}x{i}" for i, s in zip(self.index.tolist(), self.sign.tolist()))
        return f"SignedPermutation({items})"


@dataclass(frozen=True)
class RobotMirror:
    """A robot's left-right twins: ``joints`` over its joints in profile order (twin and
    sign), ``feet`` over its foot links in profile order (twin only)."""

    joints: SignedPermutation
    feet: SignedPermutation
