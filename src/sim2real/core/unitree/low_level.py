"""Between the hardware contract and the Go2's LowState/LowCmd: joints by name, IMU reordered.

ROS-free: :mod:`sim2real.nodes.unitree_bridge` moves the messages, this decides their content.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim2real.core.joint_command import JointTargets
from sim2real.core.robot_profile import RobotProfile
from sim2real.core.unitree.frames import lowstate_crc, seal
from sim2real.core.unitree.messages import LowCmd_, LowState_
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

    def read(self, msg: LowState_) -> LowStateReading:
        motors = [msg.motor_state[slot] for slot in self.slots]
        imu = msg.imu_state
        w, x, y, z = imu.quaternion
        return LowStateReading(
            tick=int(msg.tick),
            crc_ok=lowstate_crc(msg) == msg.crc,
            position=np.array([m.q for m in motors], dtype=float),
            velocity=np.array([m.dq for m in motors], dtype=float),
            effort=np.array([m.tau_est for m in motors], dtype=float),
            orientation=np.array([x, y, z, w], dtype=float),
            angular_velocity=np.array(imu.gyroscope, dtype=float),
            linear_acceleration=np.array(imu.accelerometer, dtype=float),
            battery_voltage=float(msg.power_v),
            motor_temperature=np.array([m.temperature for m in motors], dtype=float),
            remote=decode_remote(msg.wireless_remote),
        )

    def _frame(self) -> LowCmd_:
        cmd = LowCmd_(head=list(self.interface.head), level_flag=self.interface.level_flag)
        for motor in cmd.motor_cmd:
            motor.q, motor.dq = POS_STOP, VEL_STOP
        return cmd

    def command(self, targets: JointTargets) -> LowCmd_:
        """A sealed LowCmd: each joint's motor gets its targets and the profile's PD gains."""
        cmd = self._frame()
        for i, slot in enumerate(self.slots):
            motor = cmd.motor_cmd[slot]
            motor.mode = self.interface.motor_mode
            motor.q, motor.dq, motor.tau = (
                float(targets.position[i]),
                float(targets.velocity[i]),
                float(targets.effort[i]),
            )
            motor.kp, motor.kd = float(self.kp[i]), float(self.kd[i])
        return seal(cmd)

    def damping(self) -> LowCmd_:
        """A sealed LowCmd that only damps every joint (kp 0, kd = the profile's damping_kd), as the
        supervisor's DAMPING does: before the first command, on a command timeout and at shutdown."""
        cmd = self._frame()
        for slot in self.slots:
            motor = cmd.motor_cmd[slot]
            motor.mode = self.interface.motor_mode
            motor.q, motor.dq, motor.tau, motor.kp, motor.kd = POS_STOP, 0.0, 0.0, 0.0, self.profile.damping_kd
        return seal(cmd)

    def joint_targets(self, cmd: LowCmd_) -> tuple[np.ndarray, ...]:
        """q, dq, tau, kp, kd per joint (profile order) of a LowCmd: what a robot applies."""
        motors = [cmd.motor_cmd[slot] for slot in self.slots]
        return tuple(np.array([getattr(m, f) for m in motors], dtype=float) for f in ("q", "dq", "tau", "kp", "kd"))
