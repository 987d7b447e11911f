"""rosbag2 bags (metadata.yaml + MCAP) written and read through ``rosbags``, without a ROS install.

The one place the project touches the bag format: failure bundles write here, and a
sysid logger can too. Messages go in as serialized CDR bytes (what a raw rclpy
subscription hands over), so writing never deserializes. The message definitions come
from rosbags' bundled ROS 2 type store, so MCAP files carry their schemas and open in
``ros2 bag``, Foxglove and the ``mcap`` library.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

# Humble's definitions: every message the project records (sensor_msgs, nav_msgs,
# diagnostic_msgs, geometry_msgs) is unchanged since, so newer distros read them too.
_STORE = "ROS2_HUMBLE"
_typestore = None


def typestore():
    global _typestore
    if _typestore is None:
        from rosbags.typesys import Stores, get_typestore

        _typestore = get_typestore(getattr(Stores, _STORE))
    return _typestore


def write_bag(path: str | Path, connections: Mapping[str, str],
              messages: Iterable[tuple[str, int, bytes]]) -> Path:
    """Write a new rosbag2 directory at ``path`` (it must not exist): ``connections`` maps
    topic -> message type (``sensor_msgs/msg/JointState``); ``messages`` are
    (topic, receive time in ns, serialized CDR) in any order of topics, time-ordered per topic."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    store = typestore()
    path = Path(path)
    with Writer(path, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        handles = {topic: writer.add_connection(topic, msgtype, typestore=store)
                   for topic, msgtype in connections.items()}
        for topic, stamp_ns, data in messages:
            writer.write(handles[topic], int(stamp_ns), data)
    return path


def read_bag(path: str | Path, topics: Iterable[str] | None = None) -> Iterator[tuple[str, int, Any]]:
    """(topic, receive time ns, decoded message) in time order; ``topics`` narrows them."""
    from rosbags.rosbag2 import Reader

    store = typestore()
    wanted = None if topics is None else set(topics)
    with Reader(Path(path)) as reader:
        selected = [c for c in reader.connections if wanted is None or c.topic in wanted]
        for connection, stamp_ns, data in reader.messages(connections=selected):
            yield connection.topic, stamp_ns, store.deserialize_cdr(data, connection.msgtype)


def bag_topics(path: str | Path) -> dict[str, tuple[str, int]]:
    """topic -> (message type, message count), from the bag's metadata."""
    from rosbags.rosbag2 import Reader

    with Reader(Path(path)) as reader:
        return {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}


_CDR_LE = (0x00, 0x01)  # encapsulation header: plain CDR, little endian


def imu_orientation(data: bytes) -> tuple[float, float, float, float] | None:
    """The orientation (x, y, z, w) of a serialized sensor_msgs/Imu, read in place.

    Deserializing a whole Imu builds three covariance arrays and cost ~150 us a message; the
    orientation sits right after the header: 4-byte encapsulation, stamp (8), frame_id (uint32
    length with its NUL, then the characters), padding to 8, four float64. None for an
    encoding other than little-endian CDR (the caller then deserializes the message)."""
    if len(data) < 12 or (data[0], data[1]) != _CDR_LE:
        return None
    (length,) = struct.unpack_from("<I", data, 12)
    offset = 8 + 4 + length             # stamp, length, characters: from the data start
    offset = (offset + 7) & ~7          # float64 alignment, relative to the data start
    if 4 + offset + 32 > len(data):
        return None
    return struct.unpack_from("<4d", data, 4 + offset)


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
    return data[pos + 4:end - 1 if length else end].decode(), end


def _first_sequence(data: bytes) -> tuple[int, int]:
    """Length and data offset of the sequence right after a message's std_msgs/Header."""
    if len(data) < 16 or (data[0], data[1]) != _CDR_LE:
        raise ValueError("not little-endian CDR")
    pos = _aligned(_string(data, 4 + 8)[1], 4)      # stamp (8), then frame_id
    return struct.unpack_from("<I", data, pos)[0], pos + 4


def diagnostic_statuses(data: bytes) -> list[tuple[str, str, dict[str, str]]] | None:
    """(name, message, values) of each status in a serialized diagnostic_msgs/DiagnosticArray,
    read in place; None for an encoding other than little-endian CDR or a malformed message
    (the caller then deserializes it)."""
    try:
        count, pos = _first_sequence(data)
        statuses = []
        for _ in range(count):
            pos += 1                                       # level (byte)
            name, pos = _string(data, pos)
            message, pos = _string(data, pos)
            pos = _string(data, pos)[1]                    # hardware_id
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
