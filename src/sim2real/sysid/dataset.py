"""Sysid bags -> time-aligned arrays in profile joint order.

A sysid bag is a rosbag2 directory (or a bare ``.mcap``) holding ``/joint_states``
(measured q, dq, effort) and ``/joint_commands`` (what the safety supervisor sent: target
q, dq, feed-forward effort), optionally ``/imu/data``. Times come from the messages'
``header.stamp`` (the time the robot measured / the supervisor commanded), not from the
recording time, so transport delays in the recorder do not enter the fit.

Several bags make one dataset of separate *segments*: the fit replays each from its own
initial state and never across the gap between two recordings.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import yaml

from sim2real.core.robot_profile import RobotProfile
from sim2real.sysid.metadata import SUSPENDED

STATES = "/joint_states"
COMMANDS = "/joint_commands"
IMU = "/imu/data"
REQUIRED = (STATES, COMMANDS)
JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
MIN_STATES = 50


class BagError(ValueError):
    """A bag that cannot be used for identification; the message names the bag, the problem and the fix."""

    def __init__(self, bag: str | Path, problem: str, fix: str):
        super().__init__(f"{bag}: {problem}; {fix}")
        self.bag = str(bag)


@dataclass
class Segment:
    """One recording. Times in s from the first joint state; arrays [samples, joints]."""

    source: str
    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    effort: np.ndarray
    command_t: np.ndarray
    command_q: np.ndarray
    command_dq: np.ndarray
    command_effort: np.ndarray
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return float(self.t[-1] - self.t[0])

    @property
    def sample_period(self) -> float:
        return float(np.median(np.diff(self.t)))

    @property
    def suspended(self) -> bool:
        """Recorded with the robot on a stand (bag metadata ``suspended``, sysid record --suspended)."""
        return self.metadata.get(SUSPENDED) is True

    def command_at(self, t: float) -> int:
        """Index of the command in force at time ``t`` (-1: none yet)."""
        return int(np.searchsorted(self.command_t, t, side="right")) - 1


@dataclass
class Dataset:
    joint_names: list[str]
    segments: list[Segment]

    @property
    def duration(self) -> float:
        return sum(s.duration for s in self.segments)

    @property
    def suspended(self) -> bool:
        """The robot hung on a stand, feet clear of the ground, in every recording (read_bags
        refuses a mix): the replay then holds its base in the air too."""
        return bool(self.segments) and all(s.suspended for s in self.segments)


def read_bags(paths: Sequence[str | Path], profile: RobotProfile) -> Dataset:
    if not paths:
        raise BagError("(no bag)", "no bag given", "pass one or more rosbag2 directories recorded by 'sim2real sysid record'")
    segments = [read_bag(p, profile) for p in paths]
    hanging = [s.source for s in segments if s.suspended]
    if hanging and profile.fixed_base:
        raise BagError(hanging[0], f"its metadata says the robot hung on a stand (suspended), but {profile.name!r} "
                                   "has a fixed base", "record it again without --suspended")
    if hanging and len(hanging) < len(segments):
        standing = [s.source for s in segments if not s.suspended]
        raise BagError(standing[0], f"recorded standing, while {hanging[0]} was recorded on a stand (suspended)",
                       "fit the bags recorded on the stand and those recorded standing separately")
    return Dataset(profile.joint_names, segments)


def read_bag(path: str | Path, profile: RobotProfile) -> Segment:
    from rosbags.highlevel import AnyReader
    from rosbags.rosbag2 import ReaderError

    path = Path(path)
    if not path.exists():
        raise BagError(path, "no such file or directory", "pass the rosbag2 directory (the one holding metadata.yaml)")
    if path.is_dir() and not (path / "metadata.yaml").is_file():
        raise BagError(path, "no metadata.yaml in this directory (not a rosbag2 bag, or recording never finished)",
                       "pass a finished rosbag2 directory; a recorder killed mid-way leaves none "
                       "(try 'ros2 bag reindex' on it)")
    try:
        reader = AnyReader([path])
        reader.open()
    except (ReaderError, Exception) as exc:  # rosbags raises several types for damaged storage
        raise BagError(path, f"cannot be opened ({type(exc).__name__}: {exc})",
                       "the bag is damaged or truncated: record it again") from None
    try:
        topics = {c.topic: c.msgtype for c in reader.connections}
        missing = [t for t in REQUIRED if t not in topics]
        if missing:
            raise BagError(path, f"missing required topics {missing} (it has {sorted(topics)})",
                           "record with 'sim2real sysid record' (or record /joint_states and /joint_commands)")
        for topic in REQUIRED:
            if topics[topic] != JOINT_STATE_TYPE:
                raise BagError(path, f"{topic} has type {topics[topic]}, expected {JOINT_STATE_TYPE}",
                               "record the standard hardware topics")
        streams: dict[str, list] = {STATES: [], COMMANDS: []}
        wanted = [c for c in reader.connections if c.topic in streams]
        try:
            for connection, _, raw in reader.messages(connections=wanted):
                msg = reader.deserialize(raw, connection.msgtype)
                streams[connection.topic].append(msg)
        except Exception as exc:
            raise BagError(path, f"reading messages failed ({type(exc).__name__}: {exc})",
                           "the bag is truncated or damaged: record it again") from None
        metadata = _custom_data(reader)
    finally:
        reader.close()
    states = _arrays(path, STATES, streams[STATES], profile, need_velocity=True)
    commands = _arrays(path, COMMANDS, streams[COMMANDS], profile, need_velocity=False)
    if len(states[0]) < MIN_STATES:
        raise BagError(path, f"only {len(states[0])} /joint_states messages",
                       f"record at least {MIN_STATES} (a whole excitation, tens of seconds)")
    if len(commands[0]) == 0:
        raise BagError(path, "no /joint_commands messages", "record while the safety supervisor commands the robot")
    if commands[0][-1] < states[0][0] or commands[0][0] > states[0][-1]:
        # Every state would then look like "no command yet" and the fit would replay the default pose.
        raise BagError(path, f"the /joint_commands stamps ({commands[0][0]:.3f} to {commands[0][-1]:.3f} s) and the "
                             f"/joint_states stamps ({states[0][0]:.3f} to {states[0][-1]:.3f} s) do not overlap: "
                             "the driver and the computer running the supervisor stamp with different clocks",
                       "synchronise the two clocks (chrony, PTP) or stamp the states on receipt, then record again")
    t0 = states[0][0]
    segment = Segment(str(path), states[0] - t0, states[1], states[2], states[3],
                      commands[0] - t0, commands[1], commands[2], commands[3], metadata)
    expected = profile.name
    recorded = metadata.get("robot")
    if recorded and recorded != expected:
        raise BagError(path, f"recorded on robot {recorded!r}, fitting robot {expected!r}", f"use --robot {recorded}")
    if metadata.get("completed") is False:
        # After an abort the supervisor held or damped the joints: fitted as excitation, that
        # would identify the supervisor's stop, not the robot.
        raise BagError(path, f"the excitation was aborted ({metadata.get('aborted') or 'no reason recorded'}); "
                             "the bag is marked completed: false",
                       "record it again once what tripped is fixed (sim2real sysid record)")
    return segment


def _custom_data(reader) -> dict[str, Any]:
    """custom_data of the bag's metadata.yaml, with YAML/JSON values parsed."""
    custom = {}
    for sub in getattr(reader, "readers", []):
        meta = getattr(getattr(sub, "storage", None), "metadata", None)
        custom.update(getattr(meta, "custom", None) or {})
    parsed = {}
    for key, value in custom.items():
        try:
            parsed[key] = json.loads(value)
        except (TypeError, ValueError):
            try:
                parsed[key] = yaml.safe_load(value)
            except yaml.YAMLError:
                parsed[key] = value
    return parsed


def _arrays(path: Path, topic: str, messages: list, profile: RobotProfile, need_velocity: bool):
    names = profile.joint_names
    n = len(names)
    if not messages:
        return np.zeros(0), np.zeros((0, n)), np.zeros((0, n)), np.zeros((0, n))
    first = list(messages[0].name)
    missing = [j for j in names if j not in first]
    if missing:
        raise BagError(path, f"{topic} names {first} lack the profile's joints {missing}",
                       "fit with the robot profile the bag was recorded on (--robot), or check the driver's joint names")
    index = [first.index(j) for j in names]
    t, q, dq, eff = [], [], [], []
    for i, msg in enumerate(messages):
        if list(msg.name) != first:
            raise BagError(path, f"{topic} message {i} changes the joint names/order", "record from one driver only")
        position = np.asarray(msg.position, dtype=float)
        if position.size != len(first):
            raise BagError(path, f"{topic} message {i} has {position.size} positions for {len(first)} names",
                           "the driver publishes malformed JointState messages")
        velocity = np.asarray(msg.velocity, dtype=float)
        effort = np.asarray(msg.effort, dtype=float)
        if need_velocity and velocity.size != len(first):
            raise BagError(path, f"{topic} message {i} has no velocities", "the driver must publish joint velocities")
        t.append(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)
        q.append(position[index])
        dq.append(velocity[index] if velocity.size == len(first) else np.zeros(n))
        eff.append(effort[index] if effort.size == len(first) else np.zeros(n))
    t = np.asarray(t)
    # Effort may be NaN for joints without that interface (ros2_control): absent, like an empty array.
    eff = np.nan_to_num(np.asarray(eff, dtype=float), nan=0.0, posinf=0.0, neginf=0.0)
    finite = np.isfinite(t) & np.all(np.isfinite(q), axis=1) & np.all(np.isfinite(dq), axis=1)
    if np.count_nonzero(~finite) > 0.05 * len(t):
        raise BagError(path, f"{np.count_nonzero(~finite)} of {len(t)} {topic} messages hold NaN or infinite values",
                       "check the driver's encoders and velocity estimate, then record again")
    # A few glitched samples (an encoder read error) are left out, not fitted: one NaN made
    # every simulated trajectory's error NaN and the fit end in a traceback.
    t, q, dq, eff = t[finite], np.asarray(q)[finite], np.asarray(dq)[finite], np.asarray(eff)[finite]
    order = np.argsort(t, kind="stable")
    t = t[order]
    keep = np.concatenate([[True], np.diff(t) > 0])  # duplicates (republished states) carry no information
    if len(t) >= MIN_STATES and np.count_nonzero(keep) < 0.5 * len(t):
        raise BagError(path, f"{len(t)} {topic} messages carry only {np.count_nonzero(keep)} distinct header stamps",
                       "the driver must stamp each message with its measurement time (header.stamp)")
    arrays = [np.asarray(a)[order][keep] for a in (q, dq, eff)]
    return (t[keep], *arrays)


def excitation_description(segment: Segment) -> dict[str, Any] | None:
    value = segment.metadata.get("excitation")
    return value if isinstance(value, dict) else None
