"""Quaternion helpers. Quaternions are (x, y, z, w), the order of ROS messages and PyBullet."""

from __future__ import annotations

import math

import numpy as np


def quat_to_matrix(q) -> np.ndarray:
    """Rotation matrix of a unit quaternion (x, y, z, w): body -> world."""
    # Python floats, not numpy scalars: the same IEEE arithmetic at a third of the cost (this
    # runs twice per training step of a legged env).
    x, y, z, w = (float(v) for v in q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def quat_to_matrices(q: np.ndarray) -> np.ndarray:
    """:func:`quat_to_matrix` over rows of unit quaternions, (N, 4) -> (N, 3, 3): the same
    arithmetic on arrays, for a batch of robots."""
    x, y, z, w = (q[:, k] for k in range(4))
    out = np.empty((len(q), 3, 3))
    out[:, 0, 0] = 1 - 2 * (y * y + z * z)
    out[:, 0, 1] = 2 * (x * y - z * w)
    out[:, 0, 2] = 2 * (x * z + y * w)
    out[:, 1, 0] = 2 * (x * y + z * w)
    out[:, 1, 1] = 1 - 2 * (x * x + z * z)
    out[:, 1, 2] = 2 * (y * z - x * w)
    out[:, 2, 0] = 2 * (x * z - y * w)
    out[:, 2, 1] = 2 * (y * z + x * w)
    out[:, 2, 2] = 1 - 2 * (x * x + y * y)
    return out


def world_to_body(q, vector) -> np.ndarray:
    """Express a world-frame vector in the body frame of orientation ``q``."""
    return quat_to_matrix(q).T @ np.asarray(vector, dtype=float)


def is_unit_quaternion(q, tolerance: float = 0.1) -> bool:
    """Finite with a norm within ``tolerance`` of 1: an orientation. An IMU that gives none sends
    all zeros (REP-145); a glitch, NaN."""
    return abs(math.sqrt(sum(float(v) * float(v) for v in q)) - 1.0) < tolerance  # NaN fails


def unit_orientation(q, source: str = "/imu/data") -> np.ndarray:
    """``q`` normalised, or ValueError naming ``source`` when it is no orientation
    (:func:`is_unit_quaternion`). Every node reads an IMU through this, so a quaternion is
    refused (or accepted) the same way everywhere, never read as a small tilt in one node and
    as a valid attitude in another."""
    values = np.asarray(q, dtype=float)
    # is_unit_quaternion on the values as Python floats: the same sum, a third of the time over
    # numpy scalars (this runs for every 500 Hz IMU sample the estimator takes).
    if values.shape != (4,) or not is_unit_quaternion(values.tolist()):
        raise ValueError(
            f"{source} orientation {values.tolist()} is not a unit quaternion (x, y, z, w) "
            "(all zeros: an IMU that gives no orientation); sample refused"
        )
    return values / math.sqrt(float(values @ values))


def tilt_angle(q) -> float:
    """Angle (rad) between the body z axis and the world z axis: 0 upright, pi upside down; NaN
    for a ``q`` that is no orientation (:func:`is_unit_quaternion`): clamped, NaN read as 0,
    upright, and a fall detector never fired on it."""
    if not is_unit_quaternion(q):
        return math.nan
    x, y = float(q[0]), float(q[1])
    z_world = 1.0 - 2.0 * (x * x + y * y)  # quat_to_matrix(q)[2, 2], without building the matrix
    return math.acos(max(-1.0, min(1.0, z_world)))


def matrix_to_quat(R) -> tuple[float, float, float, float]:
    """Unit quaternion (x, y, z, w) of a rotation matrix (Shepperd's method: stable at any angle)."""
    R = np.asarray(R, dtype=float)
    trace = R[0, 0] + R[1, 1] + R[2, 2]
    if trace > 0:
        s = 2.0 * np.sqrt(trace + 1.0)
        return ((R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, 0.25 * s)
    i = int(np.argmax(np.diag(R)))
    j, k = (i + 1) % 3, (i + 2) % 3
    s = 2.0 * np.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
    q = [0.0, 0.0, 0.0, 0.0]
    q[i] = 0.25 * s
    q[j] = (R[j, i] + R[i, j]) / s
    q[k] = (R[k, i] + R[i, k]) / s
    q[3] = (R[k, j] - R[j, k]) / s
    return float(q[0]), float(q[1]), float(q[2]), float(q[3])
