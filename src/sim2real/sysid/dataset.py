"""Sysid bags -> time-aligned arrays in profile joint order.

A sysid bag is a rosbag2 directory (or a bare ``.mcap``) holding ``/joint_states``
(measured q, dq, effort) and ``/joint_commands`` (what the safety supervisor sent: target
q, dq, feed-forward effort), optionally ``/imu/data``. Times come from the messages'
``header.stamp`` (the time the robot measured / the supervisor commanded), not from the
recording time, so transport delays in the recorder do not enter the fit.

Bags from other recorders name their topics and command types by :class:`BagTopics`:
``--states TOPIC``, ``--commands TOPIC:TYPE`` with TYPE one of JointState,
Float64MultiArray (a ros2_control forward controller: values in ``command_joints`` order,
timed by receipt: the message has no stamp) or JointTrajectory (its first point, at its
header stamp plus ``time_from_start``); ``stamps: receive`` times every message by its
receipt for drivers that leave ``header.stamp`` zero.

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

from sim2real.core.errors import InputError
from sim2real.core.robot_profile import RobotProfile
from sim2real.sysid.metadata import SUSPENDED

STATES = "/joint_states"
COMMANDS = "/joint_commands"
IMU = "/imu/data"
JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
MIN_STATES = 50
COMMAND_TYPES = {
    "JointState": JOINT_STATE_TYPE,
    "Float64MultiArray": "std_msgs/msg/Float64MultiArray",
    "JointTrajectory": "trajectory_msgs/msg/JointTrajectory",
}
STAMP_SOURCES = ("header", "receive")
# A bag whose commanded positions move less than this (rad, on every joint) holds no
# excitation: a robot standing still identifies nothing, whatever the fit reports.
MIN_EXCITATION_RAD = 0.01


class BagError(InputError):
    """A bag that cannot be used for identification; the message names the bag, the problem and the fix."""

    def __init__(self, bag: str | Path, problem: str, fix: str):
        super().__init__(f"{bag}: {problem}; {fix}")
        self.bag = str(bag)


@dataclass(frozen=True)
class BagTopics:
    """Which topics of a bag hold the states and the commands, and how they are timed."""

    states: str = STATES
    commands: str = COMMANDS
    command_type: str = "JointState"  # a key of COMMAND_TYPES
    command_joints: tuple[str, ...] = ()  # Float64MultiArray: the joint of each value ('': the profile's order)
    stamps: str = "header"  # header | receive

    def __post_init__(self):
        if self.command_type not in COMMAND_TYPES:
            raise BagError(
                self.commands,
                f"command type {self.command_type!r} is not one the fit reads",
                f"use one of {sorted(COMMAND_TYPES)}",
            )
        if self.stamps not in STAMP_SOURCES:
            raise BagError(self.states, f"stamps {self.stamps!r} is unknown", f"use one of {list(STAMP_SOURCES)}")

    @classmethod
    def parse_commands(cls, spec: str) -> tuple[str, str]:
        """``/forward_position_controller/commands:Float64MultiArray`` -> (topic, type)."""
        topic, _, kind = spec.partition(":")
        return topic, kind or "JointState"


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


def read_bags(paths: Sequence[str | Path], profile: RobotProfile, topics: BagTopics = BagTopics()) -> Dataset:
    if not paths:
        raise BagError(
            "(no bag)", "no bag given", "pass one or more rosbag2 directories recorded by 'sim2real sysid record'"
        )
    segments = [read_bag(p, profile, topics) for p in paths]
    hanging = [s.source for s in segments if s.suspended]
    if hanging and profile.fixed_base:
        raise BagError(
            hanging[0],
            f"its metadata says the robot hung on a stand (suspended), but {profile.name!r} has a fixed base",
            "record it again without --suspended",
        )
    if hanging and len(hanging) < len(segments):
        standing = [s.source for s in segments if not s.suspended]
        raise BagError(
            standing[0],
            f"recorded standing, while {hanging[0]} was recorded on a stand (suspended)",
            "fit the bags recorded on the stand and those recorded standing separately",
        )
    return Dataset(profile.joint_names, segments)


def _bag_path(path: str | Path) -> Path:
    """``path`` as a bag's path, or BagError when nothing there is a bag."""
    path = Path(path)
    if not path.exists():
        raise BagError(path, "no such file or directory", "pass the rosbag2 directory (the one holding metadata.yaml)")
    if path.is_dir() and not (path / "metadata.yaml").is_file() and not any(path.glob("*.mcap")):
        raise BagError(
            path,
            "no metadata.yaml and no .mcap file in this directory (not a rosbag2 bag)",
            "pass the rosbag2 directory the recorder wrote",
        )
    return path


def _check_robot(path: Path, metadata: dict[str, Any], profile: RobotProfile) -> None:
    recorded = metadata.get("robot")
    if recorded and recorded != profile.name:
        raise BagError(
            path, f"recorded on robot {recorded!r}, read as robot {profile.name!r}", f"use --robot {recorded}"
        )


def read_bag(path: str | Path, profile: RobotProfile, topics: BagTopics = BagTopics()) -> Segment:
    path = _bag_path(path)
    found, streams, metadata = _read_streams(path, (topics.states, topics.commands))
    options = "--states TOPIC and --commands TOPIC:TYPE name the bag's own topics"
    for topic, expected in ((topics.states, JOINT_STATE_TYPE), (topics.commands, COMMAND_TYPES[topics.command_type])):
        if topic not in found:
            raise BagError(
                path, f"no topic {topic} (it has {sorted(found)})", f"record with 'sim2real sysid record', or {options}"
            )
        if found[topic] != expected:
            kinds = {v: k for k, v in COMMAND_TYPES.items()}
            hint = (
                f"--commands {topic}:{kinds[found[topic]]}"
                if topic == topics.commands and found[topic] in kinds
                else options
            )
            raise BagError(path, f"{topic} has type {found[topic]}, expected {expected}", f"use {hint}")
    states = _arrays(
        path,
        topics.states,
        _joint_state_rows(path, topics.states, streams[topics.states], topics.stamps),
        profile,
        need_velocity=True,
    )
    commands = _arrays(
        path,
        topics.commands,
        _command_rows(path, topics, streams[topics.commands], profile),
        profile,
        need_velocity=False,
    )
    if len(states[0]) < MIN_STATES:
        raise BagError(
            path,
            f"only {len(states[0])} {topics.states} messages",
            f"record at least {MIN_STATES} (a whole excitation, tens of seconds)",
        )
    if len(commands[0]) == 0:
        raise BagError(path, f"no {topics.commands} messages", "record while the safety supervisor commands the robot")
    if commands[0][-1] < states[0][0] or commands[0][0] > states[0][-1]:
        # Every state would then look like "no command yet" and the fit would replay the default pose.
        raise BagError(
            path,
            f"the {topics.commands} stamps ({commands[0][0]:.3f} to {commands[0][-1]:.3f} s) and the "
            f"{topics.states} stamps ({states[0][0]:.3f} to {states[0][-1]:.3f} s) do not overlap: "
            "the driver and the computer running the supervisor stamp with different clocks",
            "synchronise the two clocks (chrony, PTP) or stamp the states on receipt, then record again",
        )
    t0 = states[0][0]
    segment = Segment(
        str(path),
        states[0] - t0,
        states[1],
        states[2],
        states[3],
        commands[0] - t0,
        commands[1],
        commands[2],
        commands[3],
        metadata,
    )
    _check_robot(path, metadata, profile)
    if metadata.get("completed") is False:
        # After an abort the supervisor held or damped the joints: fitted as excitation, that
        # would identify the supervisor's stop, not the robot.
        raise BagError(
            path,
            f"the excitation was aborted ({metadata.get('aborted') or 'no reason recorded'}); "
            "the bag is marked completed: false",
            "record it again once what tripped is fixed (sim2real sysid record)",
        )
    moved = float(np.ptp(commands[1], axis=0).max())
    if moved < MIN_EXCITATION_RAD:
        raise BagError(
            path,
            f"the commanded positions never move (largest range {moved:.4f} rad): the bag holds no "
            "excitation, and a robot standing still identifies nothing",
            "record one with 'sim2real sysid record' (or any recording where the commanded joints move)",
        )
    return segment


def read_states(path: str | Path, profile: RobotProfile, topics: BagTopics = BagTopics()) -> Segment:
    """A bag's joint states alone (no commands, excitation or completion needed: a robot standing
    still is what ``sysid weigh`` reads); the command arrays of the segment are empty."""
    path = _bag_path(path)
    found, streams, metadata = _read_streams(path, (topics.states,))
    if found.get(topics.states) != JOINT_STATE_TYPE:
        raise BagError(
            path,
            f"no {JOINT_STATE_TYPE} topic {topics.states} (it has {sorted(found)})",
            "--states TOPIC names the bag's own joint states",
        )
    t, q, dq, effort = _arrays(
        path,
        topics.states,
        _joint_state_rows(path, topics.states, streams[topics.states], topics.stamps),
        profile,
        need_velocity=True,
    )
    _check_robot(path, metadata, profile)
    empty = np.zeros((0, len(profile.joint_names)))
    return Segment(str(path), t - (t[0] if len(t) else 0.0), q, dq, effort, np.zeros(0), empty, empty, empty, metadata)


def _read_streams(path: Path, wanted: Sequence[str]) -> tuple[dict[str, str], dict[str, list], dict[str, Any]]:
    """(topic -> type of every topic, the ``wanted`` topics' (receive time ns, decoded message)
    in time order, the parsed custom_data). A truncated or damaged bag is read in part, with a warning that
    counts what was lost (:func:`sim2real.core.bags.salvage_or_raise`)."""
    from rosbags.highlevel import AnyReader

    from sim2real.core.bags import TYPESTORE, BagReadError, bag_information, salvage_or_raise

    streams: dict[str, list] = {topic: [] for topic in wanted}
    try:
        reader = AnyReader([path])
        reader.open()
    except Exception as exc:  # rosbags raises several types for damaged storage
        information = bag_information(path)
        if not information:
            # A recorder writes metadata.yaml as it closes the bag: without it the excitation,
            # the robot and whether it hung on a stand are unknown, and an aborted recording
            # could not be told from a complete one.
            raise BagError(
                path,
                f"cannot be opened ({type(exc).__name__}: {exc}) and has no metadata.yaml (its "
                "recorder never finished): the robot, the excitation and whether it completed are "
                "unknown",
                "record it again",
            ) from None
        try:
            salvage = salvage_or_raise(path, set(wanted), exc)
        except BagReadError as error:
            raise BagError(
                path, f"cannot be opened, and nothing could be recovered from it ({error})", "record it again"
            ) from None
        topics = {topic: msgtype for topic, msgtype, _, _ in salvage.messages}
        for topic, msgtype, stamp_ns, data in salvage.messages:
            if topic in streams:
                streams[topic].append((stamp_ns, TYPESTORE.deserialize_cdr(data, msgtype)))
        return topics, streams, _parse_custom(dict(information.get("custom_data") or {}))
    try:
        topics = {c.topic: c.msgtype for c in reader.connections}
        selected = [c for c in reader.connections if c.topic in streams]
        try:
            for connection, stamp_ns, raw in reader.messages(connections=selected):
                streams[connection.topic].append((stamp_ns, reader.deserialize(raw, connection.msgtype)))
        except Exception as exc:
            raise BagError(
                path,
                f"reading messages failed ({type(exc).__name__}: {exc})",
                "the bag is truncated or damaged: record it again",
            ) from None
        custom: dict[str, str] = {}
        for sub in getattr(reader, "readers", []):
            meta = getattr(getattr(sub, "storage", None), "metadata", None)
            custom.update(getattr(meta, "custom", None) or {})
    finally:
        reader.close()
    return topics, streams, _parse_custom(custom)


def _parse_custom(custom: dict[str, str]) -> dict[str, Any]:
    """custom_data values, parsed from YAML/JSON."""
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


def _stamp(msg, receive_ns: int, stamps: str) -> float:
    return receive_ns * 1e-9 if stamps == "receive" else msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


def _check_stamps(path: Path, topic: str, messages: list, stamps: str) -> None:
    """Header stamps the driver never set (zero) would make every sample one instant. One zero
    is a lockstep sim's first instant; most of them zero is a driver that does not stamp."""
    if stamps != "header" or not messages:
        return
    zero = sum(1 for _, msg in messages if msg.header.stamp.sec == 0 and msg.header.stamp.nanosec == 0)
    if zero > 1 and zero > 0.5 * len(messages):
        raise BagError(
            path,
            f"{zero} of {len(messages)} {topic} messages carry a zero header.stamp (the driver does not stamp them)",
            "fit with --stamps receive (the recorder's receive times, transport jitter included), or "
            "make the driver stamp its measurement time",
        )


def _joint_state_rows(path: Path, topic: str, messages: list, stamps: str):
    _check_stamps(path, topic, messages, stamps)
    return [(_stamp(msg, t, stamps), list(msg.name), msg.position, msg.velocity, msg.effort) for t, msg in messages]


def _command_rows(path: Path, topics: BagTopics, messages: list, profile: RobotProfile):
    """Commands of any accepted type as (time s, joint names, positions, velocities, efforts)."""
    if topics.command_type == "JointState":
        return _joint_state_rows(path, topics.commands, messages, topics.stamps)
    if topics.command_type == "Float64MultiArray":
        joints = list(topics.command_joints or profile.joint_names)
        # No header: timed by receipt, whatever --stamps says.
        return [(t * 1e-9, joints, msg.data, (), ()) for t, msg in messages]
    rows = []
    stamped = [(t, msg) for t, msg in messages if msg.points]
    for t, msg in stamped:
        point = msg.points[0]
        start = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        if topics.stamps == "receive" or start == 0.0:  # a zero stamp means "start on receipt"
            start = t * 1e-9
        offset = point.time_from_start.sec + point.time_from_start.nanosec * 1e-9
        rows.append((start + offset, list(msg.joint_names), point.positions, point.velocities, point.effort))
    return rows


def _arrays(path: Path, topic: str, rows: list, profile: RobotProfile, need_velocity: bool):
    names = profile.joint_names
    n = len(names)
    if not rows:
        return np.zeros(0), np.zeros((0, n)), np.zeros((0, n)), np.zeros((0, n))
    first = list(rows[0][1])
    missing = [j for j in names if j not in first]
    if missing:
        raise BagError(
            path,
            f"{topic} names {first} lack the profile's joints {missing}",
            "fit with the robot profile the bag was recorded on (--robot), or check the driver's joint "
            "names (--command-joints for a Float64MultiArray)",
        )
    index = [first.index(j) for j in names]
    t, q, dq, eff = [], [], [], []
    for i, (stamp, row_names, positions, velocities, efforts) in enumerate(rows):
        if list(row_names) != first:
            raise BagError(path, f"{topic} message {i} changes the joint names/order", "record from one driver only")
        position = np.asarray(positions, dtype=float)
        if position.size != len(first):
            raise BagError(
                path,
                f"{topic} message {i} has {position.size} positions for {len(first)} joints",
                "the driver publishes malformed messages (or --command-joints names another count)",
            )
        velocity = np.asarray(velocities, dtype=float)
        effort = np.asarray(efforts, dtype=float)
        if need_velocity and velocity.size != len(first):
            raise BagError(path, f"{topic} message {i} has no velocities", "the driver must publish joint velocities")
        t.append(stamp)
        q.append(position[index])
        dq.append(velocity[index] if velocity.size == len(first) else np.zeros(n))
        eff.append(effort[index] if effort.size == len(first) else np.zeros(n))
    t = np.asarray(t)
    # Effort may be NaN for joints without that interface (ros2_control): absent, like an empty array.
    eff = np.nan_to_num(np.asarray(eff, dtype=float), nan=0.0, posinf=0.0, neginf=0.0)
    finite = np.isfinite(t) & np.all(np.isfinite(q), axis=1) & np.all(np.isfinite(dq), axis=1)
    if np.count_nonzero(~finite) > 0.05 * len(t):
        raise BagError(
            path,
            f"{np.count_nonzero(~finite)} of {len(t)} {topic} messages hold NaN or infinite values",
            "check the driver's encoders and velocity estimate, then record again",
        )
    # A few glitched samples (an encoder read error) are left out, not fitted: one NaN made
    # every simulated trajectory's error NaN and the fit end in a traceback.
    t, q, dq, eff = t[finite], np.asarray(q)[finite], np.asarray(dq)[finite], np.asarray(eff)[finite]
    order = np.argsort(t, kind="stable")
    t = t[order]
    keep = np.concatenate([[True], np.diff(t) > 0])  # duplicates (republished states) carry no information
    if len(t) >= MIN_STATES and np.count_nonzero(keep) < 0.5 * len(t):
        raise BagError(
            path,
            f"{len(t)} {topic} messages carry only {np.count_nonzero(keep)} distinct header stamps",
            "the driver must stamp each message with its measurement time (header.stamp)",
        )
    arrays = [np.asarray(a)[order][keep] for a in (q, dq, eff)]
    return (t[keep], *arrays)


def excitation_description(segment: Segment) -> dict[str, Any] | None:
    value = segment.metadata.get("excitation")
    return value if isinstance(value, dict) else None
