"""An /imu/data sample as the control chain's nodes read it, from a message or from its bytes.

In real time the chain polls /imu/data raw (:mod:`sim2real.nodes.polled`): the state estimator
takes every 500 Hz sample, and rclpy's conversion of each into a Python ``Imu`` (a header, a
quaternion, two vectors, three covariance arrays, each an object) is 2-3 % of a core on its
own, for fields read once. The raw bytes are read in place instead
(:func:`sim2real.core.bags.imu_fields`: 2.9 us a sample against 39 us, timed here); a message in another
encoding goes through rclpy. In lockstep the callbacks still get ``Imu`` messages; both give
the same :class:`ImuReading`.
"""

from __future__ import annotations

from typing import NamedTuple, Union

from rclpy.serialization import deserialize_message
from sensor_msgs.msg import Imu

from sim2real.core.bags import imu_fields
from sim2real.nodes import stamps


class ImuReading(NamedTuple):
    stamp_ns: int
    orientation: tuple[float, ...]  # x, y, z, w
    orientation_covariance: tuple[float, ...]  # 9, row-major
    angular_velocity: tuple[float, ...]  # rad/s, body frame
    angular_velocity_covariance: tuple[float, ...]
    linear_acceleration: tuple[float, ...]  # m/s^2, body frame


def imu_reading(msg: Union[Imu, bytes]) -> ImuReading:
    """The fields of an Imu message or of its serialized bytes (what a raw subscription takes).
    ValueError for bytes that are no Imu."""
    if isinstance(msg, (bytes, bytearray, memoryview)):
        fields = imu_fields(msg)
        if fields is not None:
            stamp_ns, f = fields
            return ImuReading(stamp_ns, f[0:4], f[4:13], f[13:16], f[16:25], f[25:28])
        try:  # another CDR encoding: rclpy reads it
            msg = deserialize_message(bytes(msg), Imu)
        except Exception as exc:
            raise ValueError(f"an /imu/data message that is no sensor_msgs/Imu ({len(msg)} bytes: {exc})") from None
    o, w, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
    return ImuReading(
        stamps.to_ns(msg.header.stamp),
        (o.x, o.y, o.z, o.w),
        tuple(msg.orientation_covariance),
        (w.x, w.y, w.z),
        tuple(msg.angular_velocity_covariance),
        (a.x, a.y, a.z),
    )
