"""Failure bundles for tests, written by the collector's own bundle writer from serialized
messages, as a robot would have recorded them (a Panda holding a pose with a goal set)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim2real.core.bags import typestore
from sim2real.core.failure_bundle import write_bundle
from sim2real.core.robot_profile import RobotProfile

NS = 1_000_000_000


def _stamp(store, t_ns):
    Time = store.types["builtin_interfaces/msg/Time"]
    Header = store.types["std_msgs/msg/Header"]
    return Header(stamp=Time(sec=t_ns // NS, nanosec=t_ns % NS), frame_id="")


def write_arm_bundle(
    root: str | Path,
    name: str,
    profile: RobotProfile,
    policy: str | Path,
    goal=(0.5, 0.0, 0.4),
    event_s: float = 5.0,
    conditions: dict | None = None,
    wall_time: str = "2026-11-30T00:00:00+00:00",
    suspended: bool | None = None,
    engine: str | None = None,
    model: str | None = None,
) -> Path:
    """7 s of /joint_states at 500 Hz at the default pose and a /goal_pose, event at ``event_s``.
    Any profile works (a quadruped's policy ignores the goal); ``suspended``, ``engine`` and
    ``model`` are written to failure.json when given, as the collector does in sim."""
    store = typestore()
    JointState = store.types["sensor_msgs/msg/JointState"]
    PoseStamped = store.types["geometry_msgs/msg/PoseStamped"]
    Pose, Point, Quaternion = (store.types[f"geometry_msgs/msg/{n}"] for n in ("Pose", "Point", "Quaternion"))
    messages = []
    n = profile.num_joints
    for k in range(3500):
        t = k * NS // 500
        msg = JointState(
            header=_stamp(store, t),
            name=list(profile.joint_names),
            position=profile.default_positions.astype(float),
            velocity=np.zeros(n),
            effort=np.zeros(n),
        )
        messages.append(("/joint_states", t, bytes(store.serialize_cdr(msg, "sensor_msgs/msg/JointState"))))
        if k % 50 == 0:
            pose = PoseStamped(
                header=_stamp(store, t),
                pose=Pose(position=Point(x=goal[0], y=goal[1], z=goal[2]), orientation=Quaternion(x=0, y=0, z=0, w=1)),
            )
            messages.append(("/goal_pose", t, bytes(store.serialize_cdr(pose, "geometry_msgs/msg/PoseStamped"))))
    event = int(event_s * NS)
    info = {
        "format": "sim2real failure bundle 1",
        "reason": "test failure",
        "kind": "supervisor_damping",
        "triggers": [{"kind": "supervisor_damping", "reason": "test failure"}],
        "time_ns": event,
        "wall_time": wall_time,
        "robot": profile.name,
        "window": {"start_ns": 0, "end_ns": 7 * NS, "pre_event_s": event_s, "post_event_s": 7 - event_s},
        "topics": {},
        "conditions": conditions or {},
        "policy": {"path": str(Path(policy).resolve()), "sha256": "test"},
    }
    if suspended is not None:
        info["suspended"] = suspended
    if engine is not None:
        info["engine"] = engine
    if model is not None:
        info["model"] = model
    return write_bundle(
        root,
        name,
        {"/joint_states": "sensor_msgs/msg/JointState", "/goal_pose": "geometry_msgs/msg/PoseStamped"},
        messages,
        info,
    )
