"""unitree_bridge: a Unitree Go2 as the hardware contract (``hardware:=unitree``).

Between our topics and the robot's own low-level DDS interface (not ROS: cyclonedds with
Unitree's types, :mod:`sim2real.core.unitree`):

- ``rt/lowstate`` (500 Hz) -> ``/joint_states`` (position, velocity, tau_est, matched to joints
  by name through the profile's motor table), ``/imu/data`` (the quaternion reordered to ROS's
  x, y, z, w), ``/joy`` (the remote's buttons, as the safety config's ``remote:`` maps them),
  ``/cmd_vel`` (the sticks, while one is off centre),
  ``/diagnostics`` (battery, motor temperatures, CRC and preflight state). A sample with a bad
  CRC or a tick that did not advance is dropped: the supervisor sees the stream go stale.
- ``/joint_commands`` (the supervisor's only) -> ``rt/lowcmd``: q, dq, tau and the profile's
  kp/kd per motor, sealed with the CRC the robot checks. The newest frame is sent again with
  every LowState received, so the robot's motors always have a fresh one.
- When it may command and what it sends is :class:`sim2real.core.unitree.gate.BridgeGate`'s:
  nothing on rt/lowcmd and no state published until preflight passes (the robot's sport mode
  may still drive the motors); then commands, and the damping frame (kp 0, kd = the profile's
  damping_kd) before the first one and on a command timeout; latched on damping, states no
  longer published, when another rt/lowcmd writer appears or the bridge stops.

Preflight (:mod:`sim2real.core.unitree.preflight`) runs over each second of LowState until it
passes. ``sim2real preflight`` runs the same checks from a terminal.

    ros2 run sim2real unitree_bridge --ros-args -p robot:=go2 -p network_interface:=eth0
"""

from __future__ import annotations

import threading
import time
from typing import NoReturn

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import Twist
from rclpy.node import Node
from sensor_msgs.msg import Imu, JointState, Joy

from sim2real.core.joint_command import CommandRefused, JointCommandMapper
from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import load_safety_config
from sim2real.core.unitree.dds import UnitreeDds
from sim2real.core.unitree.gate import ARMED, LATCHED, WAITING, BridgeGate
from sim2real.core.unitree.low_level import Go2LowLevel, LowStateReading
from sim2real.core.unitree.remote import DEFAULT_MAX_VELOCITY, joy_buttons, max_velocity_from, remote_velocity
from sim2real.nodes import lifecycle, qos
from sim2real.nodes.command_source import CommandSource
from sim2real.nodes.diagnostics import publish_status
from sim2real.nodes.params import declare

DIAGNOSTICS_PERIOD_S = 1.0
WRITER_CHECK_PERIOD_S = 0.25
JOY_PERIOD_S = 0.02  # /joy while the remote's buttons do not change
WARN_THROTTLE_S = 2.0


class UnitreeBridgeNode(Node):
    def __init__(self, **kwargs):
        super().__init__("unitree_bridge", **kwargs)
        robot = declare(self, "robot", "go2", "Robot profile with a unitree: section (motor table, head bytes)")
        interface = declare(
            self,
            "network_interface",
            "",
            "Network interface on the robot's subnet (e.g. eth0); '' = cyclonedds' own choice",
        )
        domain = declare(self, "unitree_domain", 0, "DDS domain of the robot's rt/lowstate and rt/lowcmd (the Go2: 0)")
        safety = declare(
            self,
            "safety_config",
            "",
            "Safety config whose remote: and joystick: map the remote's buttons onto /joy; '' = the robot's name",
        )
        max_velocity = declare(
            self,
            "remote_max_velocity",
            list(DEFAULT_MAX_VELOCITY),
            "Base velocity (vx m/s, vy m/s, yaw rad/s) at full stick: the remote's sticks publish "
            "/cmd_vel while one is off centre (the policy runtime clamps it to its trained ranges)",
        )
        self.max_velocity = max_velocity_from(max_velocity, "parameter remote_max_velocity")
        self.profile = load_profile(robot)
        self.low_level = Go2LowLevel(self.profile)  # refuses a profile without a unitree: section
        config = load_safety_config(safety or self.profile.name)
        self.remote_map, self.joystick = config.remote, config.buttons
        self.mapper = JointCommandMapper(self.profile.joint_names, None)
        self.dds = UnitreeDds(domain, interface)
        self.gate = BridgeGate(self.low_level, self.profile.command_timeout, time.monotonic(), self.dds.write_frame)
        self._reported_state = ""
        self._latest: LowStateReading | None = None
        self._joy_buttons: list[int] = []
        self._joy_at = -float("inf")
        self._stop = threading.Event()
        self._timeouts_said = 0
        self.fault: lifecycle.NodeFault | None = None

        self._joint_pub = self.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)
        self._imu_pub = self.create_publisher(Imu, "/imu/data", qos.SENSOR_PUBLISH)
        self._joy_pub = self.create_publisher(Joy, "/joy", qos.SENSOR_PUBLISH)
        self._cmd_vel_pub = self.create_publisher(Twist, "/cmd_vel", 10)
        self._sticks_moved = False
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._source = CommandSource.declared(self, "/joint_commands")
        self.create_subscription(JointState, "/joint_commands", self._on_command, qos.COMMAND)
        self.create_timer(DIAGNOSTICS_PERIOD_S, self._publish_diagnostics)
        self.create_timer(WRITER_CHECK_PERIOD_S, self._check_writers)
        self._joint_msg = JointState(name=list(self.profile.joint_names))
        # The Go2 reports no covariances: all zeros is "unknown" (sensor_msgs/Imu; -1 would say
        # the element itself is missing). Built once; each LowState fills its fields.
        self._imu_msg = Imu()
        self._imu_msg.header.frame_id = self.profile.imu_link
        self._thread = threading.Thread(target=self._state_loop, name="unitree_lowstate", daemon=True)
        self.get_logger().info(
            f"{self.profile.name}: rt/lowstate -> /joint_states, /imu/data, /joy; /joint_commands "
            f"-> rt/lowcmd (DDS domain {domain}, interface {interface or 'default'}); nothing is "
            "written or published until preflight passes"
        )

    # -- rt/lowstate -----------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        # Latched first (damping frames now, the reader thread sends only damping from here on);
        # a robot the bridge never armed for gets nothing.
        self.gate.shutdown(pause=lambda: time.sleep(0.002))
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        self.dds.close()

    def _state_loop(self) -> None:
        try:
            while not self._stop.is_set():
                # The command timeout is checked here, not on a timer of the executor's: the gate
                # checks it with every LowState, and this loop between them when none comes.
                batch = self.dds.take_state_values(timeout=self.profile.command_timeout / 4)
                for values in batch:
                    self._on_state(values, time.monotonic())
                if not batch:
                    self.gate.timed_out(time.monotonic())
                self._say_timeouts()
        except Exception as exc:  # noqa: BLE001 - the process must end, with the reason
            self.fault = lifecycle.NodeFault("the rt/lowstate loop", exc)

    def _on_state(self, values: tuple, received: float) -> None:
        reading = self.low_level.read_values(values)
        if self.gate.lowstate(reading, received):  # the gate writes the frame due
            self._publish_state(reading, received)
        self._report_state()

    def _publish_state(self, reading: LowStateReading, received: float) -> None:
        self._latest = reading
        stamp = self.get_clock().now().to_msg()
        msg = self._joint_msg
        msg.header.stamp = stamp
        msg.position, msg.velocity, msg.effort = (
            reading.position.tolist(),
            reading.velocity.tolist(),
            reading.effort.tolist(),
        )
        self._joint_pub.publish(msg)
        imu = self._imu_msg
        imu.header.stamp = stamp
        o, w, a = reading.orientation, reading.angular_velocity, reading.linear_acceleration
        imu.orientation.x, imu.orientation.y, imu.orientation.z, imu.orientation.w = map(float, o)
        imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z = map(float, w)
        imu.linear_acceleration.x, imu.linear_acceleration.y, imu.linear_acceleration.z = map(float, a)
        self._imu_pub.publish(imu)
        buttons = joy_buttons(reading.remote, self.remote_map, self.joystick)
        if buttons != self._joy_buttons or received - self._joy_at >= JOY_PERIOD_S:
            # A press at once (an e-stop reaches the supervisor with this LowState); the rest at
            # a joystick's usual rate, not 500 Hz.
            self._joy_buttons, self._joy_at = buttons, received
            remote = reading.remote
            joy = Joy(
                buttons=buttons,
                axes=[remote.lx, remote.ly, remote.rx, remote.ry, remote.l2] if remote.sticks_finite() else [0.0] * 5,
            )
            joy.header.stamp = stamp
            self._joy_pub.publish(joy)
            self._publish_velocity(remote)

    def _publish_velocity(self, remote) -> None:
        """/cmd_vel from the sticks while one is off centre, and one zero when they come back: a
        remote at rest leaves /cmd_vel to other sources (teleop, a demo script)."""
        velocity = remote_velocity(remote, self.max_velocity, moving=self._sticks_moved)
        if velocity is None and not self._sticks_moved:
            return
        self._sticks_moved = velocity is not None
        twist = Twist()
        twist.linear.x, twist.linear.y, twist.angular.z = velocity or (0.0, 0.0, 0.0)
        self._cmd_vel_pub.publish(twist)

    def _report_state(self) -> None:
        """One log line each time the gate changes state or the preflight failures change."""
        report = f"{self.gate.state}: {'; '.join(self.gate.failures)}"
        if report == self._reported_state:
            return
        self._reported_state = report
        if self.gate.state == ARMED:
            self.get_logger().info("preflight passed: forwarding /joint_commands to rt/lowcmd")
        elif self.gate.state == LATCHED:
            self.get_logger().error(f"latched on damping, /joint_states stopped: {self.gate.failures[0]}")
        elif self.gate.state == WAITING:
            for line in self.gate.failures:
                self.get_logger().error(f"preflight: {line}")

    def _check_writers(self) -> None:
        # Latches (and damps) on another rt/lowcmd writer or a second rt/lowstate writer.
        command_writers, state_writers = self.dds.rivals()
        self.gate.writers(command_writers, time.monotonic(), state_writers)

    # -- /joint_commands -------------------------------------------------------------------
    def _on_command(self, msg: JointState, info: dict) -> None:
        if not self._source.accepts(info):
            self.get_logger().error(self._source.refusal(), throttle_duration_sec=WARN_THROTTLE_S)
            return
        try:
            targets = self.mapper.apply(msg.name, msg.position, msg.velocity, msg.effort)
        except CommandRefused as exc:
            self.get_logger().warning(
                f"refused /joint_commands: {exc}; the last frame stays", throttle_duration_sec=WARN_THROTTLE_S
            )
            return
        why = self.gate.command(targets, time.monotonic())
        if why:
            self.get_logger().warning(f"command not forwarded: {why}", throttle_duration_sec=WARN_THROTTLE_S)

    def _say_timeouts(self) -> None:
        """Say each command timeout once, whichever path found it (a LowState, or none coming)."""
        timeouts = self.gate.counts["timeouts"]
        if timeouts != self._timeouts_said:
            self._timeouts_said = timeouts
            self.get_logger().warning(f"no /joint_commands for {self.profile.command_timeout:g} s: damping")

    def _publish_diagnostics(self) -> None:
        latest = self._latest
        values = {
            **{k: str(v) for k, v in dict(self.gate.counts).items()},
            "state": self.gate.state,
            "failures": "; ".join(self.gate.failures) if self.gate.state != ARMED else "",
            "refused_writers": str(self._source.refused),
        }
        if latest is not None:
            values["battery_voltage"] = f"{latest.battery_voltage:.2f}"
            values.update(
                {
                    f"temperature {name}": f"{t:.0f}"
                    for name, t in zip(self.profile.joint_names, latest.motor_temperature)
                }
            )
        armed, forwarding = self.gate.state == ARMED, self.gate.forwarding
        level = DiagnosticStatus.OK if forwarding else DiagnosticStatus.WARN if armed else DiagnosticStatus.ERROR
        message = (
            "forwarding"
            if forwarding
            else "armed, damping: waiting for a command near the measured joints"
            if armed
            else f"{self.gate.state}: " + "; ".join(self.gate.failures)
        )
        publish_status(self, self._diag_pub, level, "Go2 low-level bridge", message, values, self.profile.name)


def main(args=None) -> NoReturn:
    lifecycle.exit_process(lifecycle.run("unitree_bridge", UnitreeBridgeNode, args))


if __name__ == "__main__":
    main()
