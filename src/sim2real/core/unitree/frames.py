"""The Go2's messages as the C structs the robot computes its CRC over.

The CRC (:mod:`.crc`) covers the message's bytes as laid out in memory by a C compiler
(little-endian, every field at its natural alignment, padding zero), not the DDS wire bytes.
The layouts below follow from the field list in :mod:`.messages` by C's alignment rules:
LowCmd_ is 812 bytes (203 words), LowState_ 1180 (295 words); tests check them against
ctypes' own layout of the same structs.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from sim2real.core.unitree.crc import frame_crc
from sim2real.core.unitree.motor_map import MOTOR_SLOTS

if TYPE_CHECKING:  # packing reads fields only: no cyclonedds needed here
    from sim2real.core.unitree.messages import LowCmd_, LowState_

_HEADER = "4B4IH2x"  # head[2], level_flag, frame_reserve, sn[2], version[2], bandwidth (+2 to align)
_MOTOR_CMD = "B3x5f3I"  # mode, q, dq, tau, kp, kd, reserve[3]
_MOTOR_STATE = "B3x7fB3x3I"  # mode, q, dq, ddq, tau_est, q_raw, dq_raw, ddq_raw, temperature, lost, reserve[2]
LOWCMD = struct.Struct("<" + _HEADER + _MOTOR_CMD * MOTOR_SLOTS
                       + "4B"      # bms_cmd: off, reserve[3]
                       + "55Bx"    # wireless_remote[40], led[12], fan[2], gpio (+1 to align)
                       + "2I")     # reserve, crc
LOWSTATE = struct.Struct("<" + _HEADER
                         + "13fB3x"  # imu_state: quaternion[4], gyroscope[3], accelerometer[3], rpy[3], temperature
                         + _MOTOR_STATE * MOTOR_SLOTS
                         + "4BiH4B15H"  # bms_state: version_high/low, status, soc, current, cycle, bq_ntc[2], mcu_ntc[2], cell_vol[15]
                         + "8hI"     # foot_force[4], foot_force_est[4], tick
                         + "40BB3xf"  # wireless_remote[40], bit_flag, adc_reel
                         + "2B2x2f"  # temperature_ntc1/2, power_v, power_a
                         + "4H2I")   # fan_frequency[4], reserve, crc


def _header(msg) -> list:
    return [*msg.head, msg.level_flag, msg.frame_reserve, *msg.sn, *msg.version, msg.bandwidth]


def pack_lowcmd(msg: LowCmd_) -> bytes:
    values = _header(msg)
    for m in msg.motor_cmd:
        values += [m.mode, m.q, m.dq, m.tau, m.kp, m.kd, *m.reserve]
    values += [msg.bms_cmd.off, *msg.bms_cmd.reserve, *msg.wireless_remote, *msg.led, *msg.fan, msg.gpio,
               msg.reserve, msg.crc]
    return LOWCMD.pack(*values)


def pack_lowstate(msg: LowState_) -> bytes:
    imu, bms = msg.imu_state, msg.bms_state
    values = _header(msg)
    values += [*imu.quaternion, *imu.gyroscope, *imu.accelerometer, *imu.rpy, imu.temperature]
    for m in msg.motor_state:
        values += [m.mode, m.q, m.dq, m.ddq, m.tau_est, m.q_raw, m.dq_raw, m.ddq_raw, m.temperature, m.lost,
                   *m.reserve]
    values += [bms.version_high, bms.version_low, bms.status, bms.soc, bms.current, bms.cycle, *bms.bq_ntc,
               *bms.mcu_ntc, *bms.cell_vol, *msg.foot_force, *msg.foot_force_est, msg.tick, *msg.wireless_remote,
               msg.bit_flag, msg.adc_reel, msg.temperature_ntc1, msg.temperature_ntc2, msg.power_v, msg.power_a,
               *msg.fan_frequency, msg.reserve, msg.crc]
    return LOWSTATE.pack(*values)


def lowcmd_crc(msg: LowCmd_) -> int:
    """The crc a Go2 expects in ``msg`` (its own crc field is not covered)."""
    return frame_crc(pack_lowcmd(msg))


def lowstate_crc(msg: LowState_) -> int:
    return frame_crc(pack_lowstate(msg))


def seal(msg: LowCmd_) -> LowCmd_:
    """Set ``msg.crc`` to its CRC (the last thing before it is written); returns ``msg``."""
    msg.crc = lowcmd_crc(msg)
    return msg
