"""The Go2's low-level DDS message types, ``unitree_go::msg::dds_::*_``, for cyclonedds.

Written from the field list of Unitree's SDK IDL (unitree_sdk2, ``unitree_go/msg/dds_``:
LowCmd_, LowState_, MotorCmd_, MotorState_, IMUState_, BmsCmd_, BmsState_): field names,
types, order and array sizes must match it exactly, since DDS matches a reader to a writer by
type name and layout. 20 motor slots; a Go2 uses the first 12.
"""

from dataclasses import dataclass, field

import cyclonedds.idl as idl
import cyclonedds.idl.annotations as annotate
import cyclonedds.idl.types as types

from sim2real.core.unitree.motor_map import MOTOR_SLOTS

REMOTE_BYTES = 40


def _zeros(n: int):
    return field(default_factory=lambda: [0] * n)


def _floats(n: int):
    return field(default_factory=lambda: [0.0] * n)


@dataclass
@annotate.final
@annotate.autoid("sequential")
class MotorCmd_(idl.IdlStruct, typename="unitree_go.msg.dds_.MotorCmd_"):
    mode: types.uint8 = 0  # 0x01: servo (FOC), 0x00: off
    q: types.float32 = 0.0  # rad, position target
    dq: types.float32 = 0.0  # rad/s, velocity target
    tau: types.float32 = 0.0  # N*m, feed-forward
    kp: types.float32 = 0.0  # N*m/rad
    kd: types.float32 = 0.0  # N*m*s/rad
    reserve: types.array[types.uint32, 3] = _zeros(3)


@dataclass
@annotate.final
@annotate.autoid("sequential")
class BmsCmd_(idl.IdlStruct, typename="unitree_go.msg.dds_.BmsCmd_"):
    off: types.uint8 = 0
    reserve: types.array[types.uint8, 3] = _zeros(3)


@dataclass
@annotate.final
@annotate.autoid("sequential")
class LowCmd_(idl.IdlStruct, typename="unitree_go.msg.dds_.LowCmd_"):
    head: types.array[types.uint8, 2] = _zeros(2)
    level_flag: types.uint8 = 0
    frame_reserve: types.uint8 = 0
    sn: types.array[types.uint32, 2] = _zeros(2)
    version: types.array[types.uint32, 2] = _zeros(2)
    bandwidth: types.uint16 = 0
    motor_cmd: types.array[MotorCmd_, MOTOR_SLOTS] = field(
        default_factory=lambda: [MotorCmd_() for _ in range(MOTOR_SLOTS)]
    )
    bms_cmd: BmsCmd_ = field(default_factory=BmsCmd_)
    wireless_remote: types.array[types.uint8, REMOTE_BYTES] = _zeros(REMOTE_BYTES)
    led: types.array[types.uint8, 12] = _zeros(12)
    fan: types.array[types.uint8, 2] = _zeros(2)
    gpio: types.uint8 = 0
    reserve: types.uint32 = 0
    crc: types.uint32 = 0


@dataclass
@annotate.final
@annotate.autoid("sequential")
class IMUState_(idl.IdlStruct, typename="unitree_go.msg.dds_.IMUState_"):
    quaternion: types.array[types.float32, 4] = field(default_factory=lambda: [1.0, 0.0, 0.0, 0.0])  # w, x, y, z
    gyroscope: types.array[types.float32, 3] = _floats(3)  # rad/s, body frame
    accelerometer: types.array[types.float32, 3] = _floats(3)  # m/s^2, body frame
    rpy: types.array[types.float32, 3] = _floats(3)  # rad
    temperature: types.uint8 = 0


@dataclass
@annotate.final
@annotate.autoid("sequential")
class MotorState_(idl.IdlStruct, typename="unitree_go.msg.dds_.MotorState_"):
    mode: types.uint8 = 0
    q: types.float32 = 0.0  # rad
    dq: types.float32 = 0.0  # rad/s
    ddq: types.float32 = 0.0  # rad/s^2
    tau_est: types.float32 = 0.0  # N*m, estimated from the motor current
    q_raw: types.float32 = 0.0
    dq_raw: types.float32 = 0.0
    ddq_raw: types.float32 = 0.0
    temperature: types.uint8 = 0  # deg C
    lost: types.uint32 = 0
    reserve: types.array[types.uint32, 2] = _zeros(2)


@dataclass
@annotate.final
@annotate.autoid("sequential")
class BmsState_(idl.IdlStruct, typename="unitree_go.msg.dds_.BmsState_"):
    version_high: types.uint8 = 0
    version_low: types.uint8 = 0
    status: types.uint8 = 0
    soc: types.uint8 = 0  # %, state of charge
    current: types.int32 = 0  # mA
    cycle: types.uint16 = 0
    bq_ntc: types.array[types.uint8, 2] = _zeros(2)
    mcu_ntc: types.array[types.uint8, 2] = _zeros(2)
    cell_vol: types.array[types.uint16, 15] = _zeros(15)


@dataclass
@annotate.final
@annotate.autoid("sequential")
class LowState_(idl.IdlStruct, typename="unitree_go.msg.dds_.LowState_"):
    head: types.array[types.uint8, 2] = _zeros(2)
    level_flag: types.uint8 = 0
    frame_reserve: types.uint8 = 0
    sn: types.array[types.uint32, 2] = _zeros(2)
    version: types.array[types.uint32, 2] = _zeros(2)
    bandwidth: types.uint16 = 0
    imu_state: IMUState_ = field(default_factory=IMUState_)
    motor_state: types.array[MotorState_, MOTOR_SLOTS] = field(
        default_factory=lambda: [MotorState_() for _ in range(MOTOR_SLOTS)]
    )
    bms_state: BmsState_ = field(default_factory=BmsState_)
    foot_force: types.array[types.int16, 4] = _zeros(4)
    foot_force_est: types.array[types.int16, 4] = _zeros(4)
    tick: types.uint32 = 0  # ms, advances with every state the robot sends
    wireless_remote: types.array[types.uint8, REMOTE_BYTES] = _zeros(REMOTE_BYTES)
    bit_flag: types.uint8 = 0
    adc_reel: types.float32 = 0.0
    temperature_ntc1: types.uint8 = 0
    temperature_ntc2: types.uint8 = 0
    power_v: types.float32 = 0.0  # V, battery
    power_a: types.float32 = 0.0  # A
    fan_frequency: types.array[types.uint16, 4] = _zeros(4)
    reserve: types.uint32 = 0
    crc: types.uint32 = 0


# LowCmd_ and LowState_ are serialized by sim2real.core.unitree.frames with ``struct``: the same
# bytes as cyclonedds' serializer, which is pure Python and too slow for 500 Hz. Set on the
# classes (not inherited: cyclonedds would read a base class as IDL inheritance); any other
# representation falls back to cyclonedds.
def _serialize(self, buffer=None, endianness=None, use_version_2=None) -> bytes:
    if buffer is None and endianness is None and not use_version_2:
        from sim2real.core.unitree.frames import to_cdr

        return to_cdr(self)
    return self.__idl__.serialize(self, buffer=buffer, endianness=endianness, use_version_2=use_version_2)


def _deserialize(cls, data, has_header: bool = True, use_version_2=None):
    if has_header and not use_version_2 and bytes(data[:4]) == b"\x00\x01\x00\x00":
        from sim2real.core.unitree.frames import from_cdr

        return from_cdr(cls, data)
    return cls.__idl__.deserialize(data, has_header=has_header, use_version_2=use_version_2)


for _message in (LowCmd_, LowState_):
    _message.serialize = _serialize
    _message.deserialize = classmethod(_deserialize)
