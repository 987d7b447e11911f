"""Between the hardware contract and the Go2's LowState/LowCmd: joints by name, IMU reordered.

ROS-free: :mod:`sim2real.nodes.unitree_bridge` moves the messages, this decides their content.
"""

from __future__ import annotations

import operator
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
        at_cmd = flat_indices(LowCmd_)
        self._cmd_at = {
            f: [at_cmd[f"motor_cmd.{f}"][slot] for slot in self.slots] for f in ("q", "dq", "tau", "kp", "kd")
        }
        self._template = self._frame_values()
        # What read_values takes from a LowState's flat values, decided here once: the joints'
        # motor fields (their slots in profile order), the IMU (the quaternion already in ROS's
        # x, y, z, w) and the battery, picked in one call into one array, then cut into fields.
        at = flat_indices(LowState_)
        w, x, y, z = at["imu_state.quaternion"]
        picked = {
            **{f: [at[f"motor_state.{f}"][slot] for slot in self.slots] for f in ("q", "dq", "tau_est", "temperature")},
            "orientation": [x, y, z, w],
            "gyroscope": at["imu_state.gyroscope"],
            "accelerometer": at["imu_state.accelerometer"],
            "power_v": at["power_v"],
        }
        order = [i for indices in picked.values() for i in indices]
        self._pick = operator.itemgetter(*order)
        ends = np.cumsum([len(indices) for indices in picked.values()])
        self._field = {name: slice(end - len(picked[name]), end) for name, end in zip(picked, ends)}
        self._tick, self._crc, self._remote = at["tick"][0], at["crc"][0], at["wireless_remote"][0]

    def read(self, msg: LowState_) -> LowStateReading:
        return self.read_values(lowstate_flat(msg))

    def read_values(self, values: tuple) -> LowStateReading:
        """A LowState from its flat field values (:func:`~sim2real.core.unitree.frames.lowstate_values`)."""
        number = np.array(self._pick(values), dtype=float)  # each field fits a double exactly
        field = self._field
        return LowStateReading(
            tick=int(values[self._tick]),
            crc_ok=lowstate_values_crc(values) == values[self._crc],
            position=number[field["q"]],
            velocity=number[field["dq"]],
            effort=number[field["tau_est"]],
            orientation=number[field["orientation"]],
            angular_velocity=number[field["gyroscope"]],
            linear_acceleration=number[field["accelerometer"]],
            battery_voltage=float(number[field["power_v"]][0]),
            motor_temperature=number[field["temperature"]],
            remote=decode_remote(values[self._remote : self._remote + REMOTE_BYTES]),
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
