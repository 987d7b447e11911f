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
