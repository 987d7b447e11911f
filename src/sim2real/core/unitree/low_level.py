"""Between the hardware contract and the Go2's LowState/LowCmd: joints by name, IMU reordered.

ROS-free: :mod:`sim2real.nodes.unitree_bridge` moves the messages, this decides their content.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim2real.core.joint_command import JointTargets
from sim2real.core.robot_profile import RobotProfile
from sim2real.core.unitree.frames import (
    LowCmdFrame,
    flat_indices,
    lowcmd_flat,
    lowcmd_frame,
    lowstate_flat,
    lowstate_values_crc,
)
from sim2real.core.unitree.messages import REMOTE_BYTES, LowCmd_, LowState_
from sim2real.core.unitree.remote import RemoteState, decode_remote

# What a motor slot that no joint uses is sent: the SDK's "stop" values, which turn the motor's
# position and velocity loops off (kp and kd are 0 too).
POS_STOP = 2.146e9
VEL_STOP = 16000.0


@dataclass(frozen=True)
class LowStateReading:
    """One LowState in the hardware contract's terms (profile joint order, SI units)."""

    tick: int
    crc_ok: bool
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray  # tau_est, N*m
    orientation: np.ndarray  # x, y, z, w (ROS order; the robot sends w first)
    angular_velocity: np.ndarray  # rad/s, body frame
    linear_acceleration: np.ndarray  # m/s^2, body frame
    battery_voltage: float
    motor_temperature: np.ndarray  # deg C, profile joint order
    remote: RemoteState


class Go2LowLevel:
    """Reads LowState and writes LowCmd for ``profile`` (which needs a ``unitree:`` section)."""

    def __init__(self, profile: RobotProfile):
        if profile.unitree is None:
            raise ValueError(
                f"robot profile {profile.name!r} has no unitree: section (motor indices, head bytes): "
                "hardware:=unitree drives a Unitree robot; see config/robots/go2.yaml"
            )
        self.profile = profile
        self.interface = profile.unitree
        self.slots = profile.unitree.slots(profile.joint_names)
        self.kp = profile.kp
        self.kd = profile.kd
        # Where read_values finds each field in a LowState's flat values: per motor, the joints'
        # slots in profile order.
        index = flat_indices(LowState_)
        motor = {f: np.asarray(index[f"motor_state.{f}"])[self.slots] for f in ("q", "dq", "tau_est", "temperature")}
        at_cmd = flat_indices(LowCmd_)
        self._cmd_at = {
            f: [at_cmd[f"motor_cmd.{f}"][slot] for slot in self.slots] for f in ("q", "dq", "tau", "kp", "kd")
        }
        self._template = self._frame_values()
        self._at = {
            **motor,
            "quaternion": np.asarray(index["imu_state.quaternion"]),
            "gyroscope": np.asarray(index["imu_state.gyroscope"]),
            "accelerometer": np.asarray(index["imu_state.accelerometer"]),
            "tick": index["tick"][0],
            "crc": index["crc"][0],
            "power_v": index["power_v"][0],
            "remote_start": index["wireless_remote"][0],
        }

    def read(self, msg: LowState_) -> LowStateReading:
        return self.read_values(lowstate_flat(msg))

    def read_values(self, values: tuple) -> LowStateReading:
        """A LowState from its flat field values (:func:`~sim2real.core.unitree.frames.lowstate_values`)."""
        at = self._at
        number = np.asarray(values, dtype=float)  # every field fits a double exactly (uint32 at most)
        w, x, y, z = number[at["quaternion"]]
        return LowStateReading(
            tick=int(values[at["tick"]]),
            crc_ok=lowstate_values_crc(values) == values[at["crc"]],
            position=number[at["q"]],
            velocity=number[at["dq"]],
            effort=number[at["tau_est"]],
            orientation=np.array([x, y, z, w]),
            angular_velocity=number[at["gyroscope"]],
            linear_acceleration=number[at["accelerometer"]],
            battery_voltage=float(number[at["power_v"]]),
            motor_temperature=number[at["temperature"]],
            remote=decode_remote(values[at["remote_start"] : at["remote_start"] + REMOTE_BYTES]),
        )

    def _frame_values(self) -> list:
        """A LowCmd's flat values before any command: the profile's head and level flag, every
        motor at the SDK's stop values, the joints' motors in the profile's motor mode."""
        cmd = LowCmd_(head=list(self.interface.head), level_flag=self.interface.level_flag)
        for motor in cmd.motor_cmd:
            motor.q, motor.dq = POS_STOP, VEL_STOP
        for slot in self.slots:
            cmd.motor_cmd[slot].mode = self.interface.motor_mode
        return list(lowcmd_flat(cmd))

    def command_frame(self, targets: JointTargets) -> LowCmdFrame:
        """The sealed frame for ``targets``: each joint's motor gets its targets and the profile's PD
        gains. Filled into flat values by index (no LowCmd_ of 20 motor objects a command)."""
        values = self._template.copy()
        at = self._cmd_at
        for field, column in (
            ("q", targets.position),
            ("dq", targets.velocity),
            ("tau", targets.effort),
            ("kp", self.kp),
            ("kd", self.kd),
        ):
            for index, value in zip(at[field], np.asarray(column, dtype=float).tolist(), strict=True):
                values[index] = value
        return lowcmd_frame(values)

    def damping_frame(self) -> LowCmdFrame:
        """The sealed frame that only damps every joint (kp 0, kd = the profile's damping_kd), as
        the supervisor's DAMPING does: before the first command, on a command timeout and at
        shutdown."""
        values = self._template.copy()
        for i in range(len(self.slots)):
            for field, value in (("q", POS_STOP), ("dq", 0.0), ("tau", 0.0), ("kp", 0.0)):
                values[self._cmd_at[field][i]] = value
            values[self._cmd_at["kd"][i]] = float(self.profile.damping_kd)
        return lowcmd_frame(values)

    def command(self, targets: JointTargets) -> LowCmd_:
        """:meth:`command_frame` as a LowCmd_ (a robot double, a test)."""
        return self.command_frame(targets).message()

    def damping(self) -> LowCmd_:
        return self.damping_frame().message()

    def joint_targets(self, cmd: LowCmd_) -> tuple[np.ndarray, ...]:
        """q, dq, tau, kp, kd per joint (profile order) of a LowCmd: what a robot applies."""
        motors = [cmd.motor_cmd[slot] for slot in self.slots]
        return tuple(np.array([getattr(m, f) for m in motors], dtype=float) for f in ("q", "dq", "tau", "kp", "kd"))
