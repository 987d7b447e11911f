"""Render a recorded robot trajectory to an animated GIF, after the run.

Rendering inside the control loop would steal time from it (PyBullet's software
renderer takes tens of ms per frame), so runs record what a person would want to
see — base pose and joint positions over time — and this module replays it
kinematically in a fresh DIRECT-mode world and renders frames with a camera that
follows the robot.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim2real.core.robot_profile import RobotProfile


def render_gif(
    profile: RobotProfile,
    times: np.ndarray,
    joint_positions: np.ndarray,
    out: Path,
    base_positions: np.ndarray | None = None,
    base_orientations: np.ndarray | None = None,
    fps: float = 12.0,
    size: tuple[int, int] = (400, 300),
    speedup: float = 1.0,
) -> Path:
    """``times`` [T] s, ``joint_positions`` [T, n] in profile order, base poses [T, 3] and [T, 4] (xyzw)
    for a floating base. Frames are taken every ``speedup / fps`` seconds of the recording."""
    import pybullet as pb
    from PIL import Image

    times = np.asarray(times, dtype=float)
    if times.size < 2:
        raise ValueError("a video needs at least two recorded samples")
    client = pb.connect(pb.DIRECT)
    try:
        pb.setAdditionalSearchPath(_pybullet_data(), physicsClientId=client)
        pb.loadURDF("plane.urdf", physicsClientId=client)
        robot = pb.loadURDF(str(profile.urdf), useFixedBase=profile.fixed_base, physicsClientId=client)
        index = {
            pb.getJointInfo(robot, i, physicsClientId=client)[1].decode(): i
            for i in range(pb.getNumJoints(robot, physicsClientId=client))
        }
        joints = [index[name] for name in profile.joint_names]
        frames = []
        width, height = size
        projection = pb.computeProjectionMatrixFOV(50, width / height, 0.05, 20, physicsClientId=client)
        distance = 1.2 if profile.kind == "quadruped" else 1.6
        for t in np.arange(times[0], times[-1], speedup / fps):
            k = int(np.searchsorted(times, t))
            k = min(k, times.size - 1)
            for joint, angle in zip(joints, joint_positions[k]):
                pb.resetJointState(robot, joint, float(angle), physicsClientId=client)
            target = [0.0, 0.0, 0.4]
            if base_positions is not None:
                pb.resetBasePositionAndOrientation(
                    robot, base_positions[k].tolist(), base_orientations[k].tolist(), physicsClientId=client
                )
                target = [float(base_positions[k][0]), float(base_positions[k][1]), 0.25]
            view = pb.computeViewMatrixFromYawPitchRoll(
                target, distance, yaw=50, pitch=-20, roll=0, upAxisIndex=2, physicsClientId=client
            )
            _, _, rgba, _, _ = pb.getCameraImage(
                width, height, view, projection, renderer=pb.ER_TINY_RENDERER, physicsClientId=client
            )
            frames.append(Image.fromarray(np.reshape(np.asarray(rgba, dtype=np.uint8), (height, width, 4))[:, :, :3]))
    finally:
        pb.disconnect(client)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    frames[0].save(out, save_all=True, append_images=frames[1:], duration=int(1000 / fps), loop=0, optimize=True)
    return out


def _pybullet_data() -> str:
    import pybullet_data

    return pybullet_data.getDataPath()
