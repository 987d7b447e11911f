"""Quaternion helpers. Quaternions are (x, y, z, w), the order of ROS messages and PyBullet."""
from __future__ import annotations

import math

import numpy as np


def quat_to_matrix(q) -> np.ndarray:
    """Rotation matrix of a unit quaternion (x, y, z, w): body -> world."""
    x, y, z, w = np.asarray(q, dtype=float)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def world_to_body(q, vector) -> np.ndarray:
    """Express a world-frame vector in the body frame of orientation ``q``."""
    return quat_to_matrix(q).T @ np.asarray(vector, dtype=float)


def tilt_angle(q) -> float:
    """Angle (rad) between the body z axis and the world z axis: 0 upright, pi upside down."""
    x, y = float(q[0]), float(q[1])
    z_world = 1.0 - 2.0 * (x * x + y * y)  # quat_to_matrix(q)[2, 2], without building the matrix
    return math.acos(max(-1.0, min(1.0, z_world)))
