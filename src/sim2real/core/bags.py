"""rosbag2 bags (metadata.yaml + one MCAP file) written and read through ``rosbags``, ROS-free.

The one place the project touches the bag format: sysid recordings and failure bundles
both write here, so every bag has the same layout: rosbag2 format version 8 with the MCAP
storage plugin, CDR messages, message definitions embedded (so ``ros2 bag``, Foxglove,
``rosbags`` and the ``mcap`` readers all open it without our code), and free-form
``custom_data`` strings in metadata.yaml. Messages go in as serialized CDR bytes (what a
raw rclpy subscription hands over), so recording never deserializes, or as ``rosbags``
message objects, serialized here.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Final, Iterable, Iterator, Mapping

from rosbags.rosbag2 import Reader, StoragePlugin, Writer, WriterError
from rosbags.typesys import Stores, get_typestore

from sim2real.core.errors import InputError, Sim2RealError

# Version 8 rather than the newest 9: the rosbag2 of Humble reads up to 8 (rosbags writes both).
BAG_VERSION: Final = 8
# Humble's definitions of the standard messages; they are identical in later distros for
# every type this project records.
TYPESTORE = get_typestore(Stores.ROS2_HUMBLE)


class BagWriteError(Sim2RealError, RuntimeError):
    """A bag that cannot be written; the message names the path and what to do."""


class BagWriter:
    """A new rosbag2 directory. Use as a context manager; the bag is complete on exit.

    >>> with BagWriter("runs/sysid_1", {"robot": "panda"}) as bag:
    ...     bag.add_topic("/joint_states", "sensor_msgs/msg/JointState")
    ...     bag.write_raw("/joint_states", stamp_ns, cdr_bytes)
    """

    def __init__(self, path: str | Path, custom_data: Mapping[str, str] | None = None):
        self.path = Path(path)
        if self.path.exists():
            raise BagWriteError(
                f"{self.path} exists already; a bag is never overwritten: "
                "choose a new output directory or delete the old one"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = Writer(self.path, version=BAG_VERSION, storage_plugin=StoragePlugin.MCAP)
        for key, value in (custom_data or {}).items():
            self.set_custom_data(key, value)
        self._connections: dict[str, Any] = {}
        self._types: dict[str, str] = {}
        self._open = False

    def set_custom_data(self, key: str, value: str) -> None:
        """A string stored under ``custom_data`` in metadata.yaml (settable until close)."""
        if not isinstance(value, str):
            raise BagWriteError(f"custom_data {key!r}: values must be strings (serialize to YAML/JSON first)")
        self._writer.set_custom_data(key, value)

    def open(self) -> "BagWriter":
        self._writer.open()
        self._open = True
        return self

    def add_topic(self, topic: str, msgtype: str) -> None:
        """Register a topic before writing to it; ``msgtype`` like ``sensor_msgs/msg/JointState``."""
        if not self._open:
            self.open()
        if msgtype not in TYPESTORE.types:
            raise BagWriteError(
                f"topic {topic}: message type {msgtype!r} is unknown to the bag writer; "
                "record standard ROS 2 message types only"
            )
        self._connections[topic] = self._writer.add_connection(topic, msgtype, typestore=TYPESTORE)
        self._types[topic] = msgtype

    @property
    def topics(self) -> dict[str, str]:
        return dict(self._types)

    def write_raw(self, topic: str, stamp_ns: int, data: bytes | memoryview) -> None:
        """CDR-serialized message (as rclpy delivers with ``raw=True``) received at ``stamp_ns``."""
        connection = self._connections.get(topic)
        if connection is None:
            raise BagWriteError(f"topic {topic} was not added to the bag; call add_topic first")
        self._writer.write(connection, int(stamp_ns), bytes(data))

    def write(self, topic: str, stamp_ns: int, message: Any) -> None:
        """A ``rosbags`` message object (``TYPESTORE.types[msgtype](...)``)."""
        self.write_raw(topic, stamp_ns, TYPESTORE.serialize_cdr(message, self._types[topic]))

    def close(self) -> None:
        if self._open:
            self._open = False
            try:
                self._writer.close()
            except WriterError as exc:
                raise BagWriteError(f"{self.path}: could not finish the bag ({exc})") from exc

    def __enter__(self) -> "BagWriter":
        if not self._open:
            self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def typestore():
    """The message definitions bags are written with (rosbags' Humble store)."""
    return TYPESTORE


def write_bag(path: str | Path, connections: Mapping[str, str], messages: Iterable[tuple[str, int, bytes]]) -> Path:
    """Write a new rosbag2 directory at ``path`` (it must not exist): ``connections`` maps
    topic -> message type (``sensor_msgs/msg/JointState``); ``messages`` are
    (topic, receive time in ns, serialized CDR) in any order of topics, time-ordered per topic."""
    with BagWriter(path) as bag:
        for topic, msgtype in connections.items():
            bag.add_topic(topic, msgtype)
        for topic, stamp_ns, data in messages:
            bag.write_raw(topic, stamp_ns, data)
    return Path(path)


class BagReadError(InputError):
    """A bag that cannot be read (truncated, damaged, not a bag); the message names it and the fix."""

    def __init__(self, path: str | Path, exc: BaseException):
        super().__init__(
            f"{path}: cannot be read ({type(exc).__name__}: {exc}). A recorder killed mid-write or a "
            "full disk leaves a bag like this. Fix: record it again, or delete it"
        )


def bag_information(path: str | Path) -> dict[str, Any]:
    """The ``rosbag2_bagfile_information`` of a bag's metadata.yaml (``path``: the bag directory
    or a file in it), read as plain YAML so a bag whose storage is damaged still answers;
    {} when there is none or it cannot be read."""
    import yaml

    path = Path(path)
    metadata = path / "metadata.yaml" if path.is_dir() else path.parent / "metadata.yaml"
    try:
        info = yaml.safe_load(metadata.read_text())["rosbag2_bagfile_information"]
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return {}
    return info if isinstance(info, dict) else {}


class BagSalvagedWarning(UserWarning):
    """A damaged bag was read in part; the message says how much was lost."""


def read_bag(path: str | Path, topics: Iterable[str] | None = None) -> Iterator[tuple[str, int, Any]]:
    """(topic, receive time ns, decoded message) in time order; ``topics`` narrows them.

    A truncated or damaged MCAP bag that the indexed reader refuses is read in part (every
    message still whole, :mod:`sim2real.core.bag_salvage`) with a :class:`BagSalvagedWarning`
    that counts what was lost. BagReadError for a bag with nothing readable."""
    store = TYPESTORE
    wanted = None if topics is None else set(topics)
    try:
        reader = Reader(Path(path))
        reader.open()
    except Exception as exc:  # rosbags raises several types for damaged storage
        salvage = salvage_or_raise(path, wanted, exc)
        for topic, msgtype, stamp_ns, data in salvage.messages:
            yield topic, stamp_ns, store.deserialize_cdr(data, msgtype)
        return
    try:
        selected = [c for c in reader.connections if wanted is None or c.topic in wanted]
        for connection, stamp_ns, data in reader.messages(connections=selected):
            yield connection.topic, stamp_ns, store.deserialize_cdr(data, connection.msgtype)
    except Exception as exc:
        raise BagReadError(path, exc) from None
    finally:
        reader.close()


def salvage_or_raise(path: str | Path, wanted: set[str] | None, exc: BaseException):
    """The whole messages of a bag the indexed reader refused (warning with the loss), or
    BagReadError naming the first failure when nothing can be read."""
    import warnings

    from sim2real.core.bag_salvage import salvage_bag

    try:
        salvage = salvage_bag(path, wanted)
    except (OSError, ValueError) as why:
        raise BagReadError(path, ValueError(f"{exc}; nothing to recover either: {why}")) from None
    if not salvage.messages:
        where = f" ({salvage.damage})" if salvage.damage else ""
        raise BagReadError(path, ValueError(f"{exc}; no whole message could be recovered{where}"))
    for msgtype in {m[1] for m in salvage.messages}:
        if msgtype not in TYPESTORE.types:
            raise BagReadError(path, ValueError(f"damaged, and its message type {msgtype!r} is not a standard one"))
    warnings.warn(BagSalvagedWarning(salvage.summary()), stacklevel=3)
    return salvage


def bag_topics(path: str | Path) -> dict[str, tuple[str, int]]:
    """topic -> (message type, message count), from the bag's metadata."""
    try:
        with Reader(Path(path)) as reader:
            return {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
    except Exception as exc:
        raise BagReadError(path, exc) from None


_CDR_LE = (0x00, 0x01)  # encapsulation header: plain CDR, little endian


def _imu_floats_at(data: bytes) -> int | None:
    """Where a serialized sensor_msgs/Imu's float64 fields start: after the 4-byte encapsulation,
    the stamp (8), frame_id (uint32 length with its NUL, then the characters) and the padding to
    8. None for an encoding other than little-endian CDR."""
    if len(data) < 16 or (data[0], data[1]) != _CDR_LE:
        return None
    (length,) = struct.unpack_from("<I", data, 12)
    offset = 8 + 4 + length  # stamp, length, characters: from the data start
    return 4 + ((offset + 7) & ~7)  # float64 alignment, relative to the data start


def imu_orientation(data: bytes) -> tuple[float, float, float, float] | None:
    """The orientation (x, y, z, w) of a serialized sensor_msgs/Imu, read in place.

    Deserializing a whole Imu builds three covariance arrays (39 us a message timed on this
    project's 2-core machines, more on a loaded one); the orientation is the first of its
    float64 fields. None for an encoding other than
    little-endian CDR or a message too short (the caller then deserializes the message)."""
    pos = _imu_floats_at(data)
    if pos is None or pos + 32 > len(data):
        return None
    return struct.unpack_from("<4d", data, pos)


IMU_FLOATS: Final = 37  # orientation (4), covariance (9), angular velocity (3), covariance (9), acceleration (3), (9)


def imu_fields(data: bytes) -> tuple[int, tuple[float, ...]] | None:
    """(stamp in ns, the :data:`IMU_FLOATS` float64 fields in message order) of a serialized
    sensor_msgs/Imu, read in place: what a node fusing a 500 Hz IMU takes of each sample, for
    a few microseconds instead of the tens rclpy spends building the message's objects. None
    as for :func:`imu_orientation`."""
    pos = _imu_floats_at(data)
    if pos is None or pos + 8 * IMU_FLOATS > len(data):
        return None
    sec, nanosec = struct.unpack_from("<iI", data, 4)
    return sec * 1_000_000_000 + nanosec, struct.unpack_from(f"<{IMU_FLOATS}d", data, pos)


# The collector's triggers decode /safety/status and /policy/joint_commands at 50 Hz each:
# rclpy's deserialize_message builds Python message objects at ~0.3-0.5 ms a message (a few
# % of a core on its own); these read the few fields a trigger needs in place. Offsets are
# from the data start (after the 4-byte encapsulation header), where CDR aligns.


def _aligned(pos: int, size: int) -> int:
    return 4 + ((pos - 4 + size - 1) & ~(size - 1))


def _string(data: bytes, pos: int) -> tuple[str, int]:
    pos = _aligned(pos, 4)
    (length,) = struct.unpack_from("<I", data, pos)
    end = pos + 4 + length
    if end > len(data):
        raise ValueError("string past the end")
    return data[pos + 4 : end - 1 if length else end].decode(), end


def _first_sequence(data: bytes) -> tuple[int, int]:
    """Length and data offset of the sequence right after a message's std_msgs/Header."""
    if len(data) < 16 or (data[0], data[1]) != _CDR_LE:
        raise ValueError("not little-endian CDR")
    pos = _aligned(_string(data, 4 + 8)[1], 4)  # stamp (8), then frame_id
    return struct.unpack_from("<I", data, pos)[0], pos + 4


def diagnostic_statuses(data: bytes) -> list[tuple[str, str, dict[str, str]]] | None:
    """(name, message, values) of each status in a serialized diagnostic_msgs/DiagnosticArray,
    read in place; None for an encoding other than little-endian CDR or a malformed message
    (the caller then deserializes it)."""
    try:
        count, pos = _first_sequence(data)
        statuses = []
        for _ in range(count):
            pos += 1  # level (byte)
            name, pos = _string(data, pos)
            message, pos = _string(data, pos)
            pos = _string(data, pos)[1]  # hardware_id
            pos = _aligned(pos, 4)
            (n_values,) = struct.unpack_from("<I", data, pos)
            pos += 4
            values = {}
            for _ in range(n_values):
                key, pos = _string(data, pos)
                values[key], pos = _string(data, pos)
            statuses.append((name, message, values))
        return statuses
    except (struct.error, ValueError):
        return None


def joint_state_positions(data: bytes) -> tuple[list[str], tuple[float, ...]] | None:
    """(name, position) of a serialized sensor_msgs/JointState, read in place; None as for
    :func:`diagnostic_statuses`."""
    try:
        count, pos = _first_sequence(data)
        names = []
        for _ in range(count):
            name, pos = _string(data, pos)
            names.append(name)
        pos = _aligned(pos, 4)
        (n_positions,) = struct.unpack_from("<I", data, pos)
        pos = _aligned(pos + 4, 8)
        return names, struct.unpack_from(f"<{n_positions}d", data, pos)
    except (struct.error, ValueError):
        return None
