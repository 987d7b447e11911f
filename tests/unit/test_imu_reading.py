"""An /imu/data sample reads the same from its message (lockstep callbacks) and from its bytes
(the chain's raw polled subscriptions), in any CDR encoding."""

from __future__ import annotations

import math

import pytest
from rclpy.serialization import serialize_message
from sensor_msgs.msg import Imu

from sim2real.core.bags import IMU_FLOATS, imu_fields, typestore
from sim2real.nodes.imu_reading import ImuReading, imu_reading


def imu_message(frame_id: str) -> Imu:
    msg = Imu()
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_700_000_000, 123_456_789
    msg.header.frame_id = frame_id
    q = (0.1, -0.2, 0.3, math.sqrt(1 - 0.14))
    msg.orientation.x, msg.orientation.y, msg.orientation.z, msg.orientation.w = q
    msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z = 0.5, -0.25, 1.5
    msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z = 0.1, 0.2, 9.81
    msg.orientation_covariance = [0.01 * (k + 1) for k in range(9)]
    msg.angular_velocity_covariance = [0.001 * (k + 1) for k in range(9)]
    msg.linear_acceleration_covariance = [-1.0] + [0.0] * 8
    return msg


EXPECTED = ImuReading(
    1_700_000_000_123_456_789,
    (0.1, -0.2, 0.3, math.sqrt(1 - 0.14)),
    tuple(0.01 * (k + 1) for k in range(9)),
    (0.5, -0.25, 1.5),
    tuple(0.001 * (k + 1) for k in range(9)),
    (0.1, 0.2, 9.81),
)


@pytest.mark.parametrize("frame_id", ["", "imu", "base_imu_link", "a" * 13])
def test_a_message_and_its_bytes_read_the_same(frame_id):
    msg = imu_message(frame_id)
    data = serialize_message(msg)
    assert imu_reading(msg) == EXPECTED
    assert imu_reading(data) == EXPECTED
    stamp_ns, floats = imu_fields(data)
    assert stamp_ns == EXPECTED.stamp_ns and len(floats) == IMU_FLOATS and floats[-9] == -1.0


def test_big_endian_bytes_are_read_through_rclpy():
    store = typestore()
    big_endian = bytes(
        store.serialize_cdr(
            store.deserialize_cdr(serialize_message(imu_message("imu")), "sensor_msgs/msg/Imu"),
            "sensor_msgs/msg/Imu",
            little_endian=False,
        )
    )
    assert (big_endian[0], big_endian[1]) == (0x00, 0x00)
    assert imu_fields(big_endian) is None
    assert imu_reading(big_endian) == EXPECTED


def test_bytes_that_are_no_imu_are_refused_by_name():
    data = serialize_message(imu_message("imu"))
    assert imu_fields(data[:-8]) is None  # truncated
    with pytest.raises(ValueError, match=r"/imu/data message that is no sensor_msgs/Imu"):
        imu_reading(data[:40])
